"""The files of a results folder as its readers open them: never through a
link, only regular files (a FIFO named run.json would hang `tortoise ls`),
each refusal naming the file and the fix (host/safefs.py; docs/faults.md).
host/store/ reads records and the table through here; host/verify.py,
host/determinism.py and the report, grade and studies the rest.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from tortoiselab.host import safefs
from tortoiselab.spec import bounds

RECORD = "run.json"
RUN_ID = re.compile(r"^[0-9a-f]{12}$")  # spec/experiment.py's run ids


def is_run(exp_dir: Path, name: str) -> bool:
    """A completed run's folder, looked at without following a link: a
    folder holding a record, or a link named like a run, which every
    reader names as a damaged run (read_record refuses it) and never enters."""
    try:
        st = os.lstat(Path(exp_dir) / name)
    except OSError:
        return False
    if stat.S_ISLNK(st.st_mode):
        return bool(RUN_ID.fullmatch(name))
    return stat.S_ISDIR(st.st_mode) and os.path.lexists(Path(exp_dir) / name / RECORD)


LAB_JSON = {"site": ("site", "manifest.json"), "pki": ("pki", "pki.json")}


def lab_json(exp_dir: Path | None, which: str) -> dict:
    """<exp>/.lab/site/manifest.json ("site") or .lab/pki/pki.json ("pki"),
    read with no link followed below exp_dir and only from a regular file
    (LinkRefused, NotRegular, OSError, ValueError otherwise)."""
    if exp_dir is None:
        raise FileNotFoundError("no experiment folder")
    f = Path(exp_dir, ".lab", *LAB_JSON[which])
    doc = json.loads(safefs.read_bytes_regular(f, exp_dir, doing=f"reading {f}"))
    if not isinstance(doc, dict):
        raise ValueError(f"{f}: a JSON {type(doc).__name__}, not an object")
    return doc


def record_bytes(run_dir: Path) -> bytes:
    """run_dir/run.json's bytes: the run folder and the record are never
    links, and the record is a regular file (a FIFO would hang every
    reader); LinkRefused or NotRegular name it and the fix (host/safefs.py)."""
    return safefs.read_bytes_regular(Path(run_dir) / RECORD, Path(run_dir).parent,
                                     doing=f"reading run {Path(run_dir).name}")




def table_footer_problem(meta: pq.FileMetaData, max_rows: int) -> str | None:
    """Why a runs.parquet's footer (its FileMetaData, read before any value
    is decoded) stands for more than a reader decodes: more rows than
    max_rows (in the file's count, the row groups' or any column's values:
    a column of one constant, run-length or dictionary encoded, holds 300
    million rows in 2.5 MB), more columns than TABLE_MAX_COLUMNS, or more
    uncompressed bytes than TABLE_MAX_UNCOMPRESSED; None if none."""
    groups = [meta.row_group(i) for i in range(meta.num_row_groups)]
    rows = max([meta.num_rows, sum(g.num_rows for g in groups),
                *(g.column(c).num_values for g in groups for c in range(g.num_columns))])
    if rows > max_rows:
        return f"its footer says {rows:,} rows, more than the {max_rows:,} a reader decodes"
    if meta.num_columns > bounds.TABLE_MAX_COLUMNS:
        return f"its footer says {meta.num_columns:,} columns, more than {bounds.TABLE_MAX_COLUMNS:,}"
    unpacked = sum(g.column(c).total_uncompressed_size for g in groups for c in range(g.num_columns))
    if unpacked > bounds.TABLE_MAX_UNCOMPRESSED:
        return (f"its footer says {bounds.size_words(unpacked)} uncompressed, more than "
                f"{bounds.size_words(bounds.TABLE_MAX_UNCOMPRESSED)}")
    return None


def read_parquet(f: Path, runs: int = bounds.MAX_RUNS) -> pd.DataFrame:
    """A runs.parquet (<exp>/runs.parquet) as it is, read only from a regular
    file that is no link and within its bound (spec/bounds.READ_BOUNDS), and
    decoded only if its footer holds at most a row per run folder (`runs`)
    and spec/bounds.TABLE_EXTRA_ROWS more, and its sizes are within
    spec/bounds's (table_footer_problem; safefs.TooLarge otherwise). A reader
    that needs the runs uses store.read_table, which never trusts it over
    the records."""
    f = Path(f)
    data = safefs.read_bytes_regular(f, f.parent, doing=f"reading {f}")
    max_rows = min(runs, bounds.MAX_RUNS) + bounds.TABLE_EXTRA_ROWS
    problem = table_footer_problem(pq.ParquetFile(io.BytesIO(data)).metadata, max_rows)
    if problem:
        what = f"{problem}: not decoded (docs/inputs.md, \"Files a reader reads\")"
        raise safefs.TooLarge(f"{f}: {what}", what)
    return pd.read_parquet(io.BytesIO(data))


def names(folder: Path) -> list[str]:
    """The names in a folder, sorted ([] when it is none), links not followed."""
    try:
        with os.scandir(folder) as it:
            return sorted(e.name for e in it)
    except (FileNotFoundError, NotADirectoryError):
        return []
