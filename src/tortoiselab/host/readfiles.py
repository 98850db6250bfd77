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

from tortoiselab.host import safefs

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
        return bool(RUN_ID.match(name))
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




def read_parquet(f: Path) -> pd.DataFrame:
    """A runs.parquet (<exp>/runs.parquet) as it is, read only from a regular
    file that is no link; a reader that needs the runs uses store.read_table,
    which never trusts it over the records."""
    return pd.read_parquet(io.BytesIO(safefs.read_bytes_regular(f, Path(f).parent, doing=f"reading {f}")))


def names(folder: Path) -> list[str]:
    """The names in a folder, sorted ([] when it is none), links not followed."""
    try:
        with os.scandir(folder) as it:
            return sorted(e.name for e in it)
    except (FileNotFoundError, NotADirectoryError):
        return []
