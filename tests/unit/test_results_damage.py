"""A property of `tortoise verify` (host/verify.py): whatever damage is done
to copies of a stored results folder (real runs, tests/data/runs, stored
again with manifests), verify names every damaged run and no other, fails
exactly when something is damaged, and changes nothing, inside the folder
or beside it; the runs table a reader gets never disagrees with the
records.

Each kind of damage is a function registered in DAMAGES: it damages the
experiment folder, drawing what it needs from Hypothesis, and says what it
damaged (Damage). More kinds (links, stale work folders naming live
foreign pids) are added by registering more functions."""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.results_copy import stored_copy, tree
from tortoiselab.host import store, verify
from tortoiselab.host.tablediff import table_differences

NAME = "tortoise-screen@ci"  # three runs, each run.json, cwnd.json and server.pcap


@dataclass
class Damage:
    runs: set[str] = field(default_factory=set)  # runs verify must name
    table: bool | None = None  # runs.parquet replaced: True unreadable, False readable; None: untouched


DAMAGES: dict[str, Callable[[Path, st.DataObject], Damage]] = {}


def damage(name: str):
    def register(f):
        DAMAGES[name] = f
        return f
    return register


def _runs(exp: Path) -> list[Path]:
    return [d for d in verify.run_folders(exp) if d.is_dir() and not d.is_symlink()]


def _files(run: Path) -> list[Path]:
    return sorted(p for p in run.rglob("*") if p.is_file() and not p.is_symlink())


@damage("truncate a file")
def truncate(exp: Path, data: st.DataObject) -> Damage:
    files = [f for d in _runs(exp) for f in _files(d) if f.stat().st_size > 0]
    if not files:
        return Damage()
    f = data.draw(st.sampled_from(files), label="truncated")
    f.write_bytes(f.read_bytes()[:data.draw(st.integers(0, f.stat().st_size - 1), label="to bytes")])
    return Damage({f.parent.name})


def _number_paths(x, path=()) -> list[tuple]:
    if isinstance(x, dict):
        return [p for k, v in x.items() for p in _number_paths(v, (*path, k))]
    if isinstance(x, list):
        return [p for i, v in enumerate(x) for p in _number_paths(v, (*path, i))]
    ok = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
    return [path] if ok else []


@damage("edit a number in run.json")
def edit_number(exp: Path, data: st.DataObject) -> Damage:
    readable = []
    for d in _runs(exp):
        try:
            readable.append((d, json.loads((d / store.RECORD).read_text())))
        except (OSError, ValueError):
            continue
    readable = [(d, raw) for d, raw in readable if _number_paths(raw)]
    if not readable:
        return Damage()
    d, raw = data.draw(st.sampled_from(readable), label="run")
    path = data.draw(st.sampled_from(_number_paths(raw)), label="number")
    parent = raw
    for k in path[:-1]:
        parent = parent[k]
    old = parent[path[-1]]
    parent[path[-1]] = old + 1 if abs(old) < 1e15 else old * 2
    (d / store.RECORD).write_text(json.dumps(raw, indent=1, sort_keys=True))
    return Damage({d.name})


@damage("add a stray file")
def stray_file(exp: Path, data: st.DataObject) -> Damage:
    d = data.draw(st.sampled_from(_runs(exp)), label="run")
    name = "stray-" + data.draw(st.text("abcdefgh0123456789.", min_size=1, max_size=8), label="name")
    (d / name).write_bytes(data.draw(st.binary(max_size=64), label="bytes"))
    return Damage({d.name})


@damage("delete a file")
def delete_file(exp: Path, data: st.DataObject) -> Damage:
    # a file of the run as stored (deleting a stray file added before would undo that damage)
    files = [f for d in _runs(exp) for f in _files(d) if not f.name.startswith("stray-")]
    if not files:
        return Damage()
    f = data.draw(st.sampled_from(files), label="deleted")
    f.unlink()
    return Damage({f.parent.name})


@damage("replace runs.parquet")
def replace_table(exp: Path, data: st.DataObject) -> Damage:
    """Garbage, or the table with one number of one run changed, with a row
    of a run that does not exist, or with a run's row twice."""
    f = exp / store.TABLE
    how = data.draw(st.sampled_from(["garbage", "cell", "row", "twice"]), label="how")
    try:
        df = pd.read_parquet(f)
    except (OSError, ValueError):
        how = "garbage"
    if how == "garbage":
        f.write_bytes(data.draw(st.binary(max_size=200), label="garbage"))
        return Damage(table=True)
    if how in ("row", "twice"):
        i = data.draw(st.integers(0, len(df) - 1), label="row")
        extra = df.iloc[[i]].copy()
        if how == "row":
            extra["run_id"] = "ffffffffffff"
        pd.concat([df, extra], ignore_index=True).to_parquet(f, index=False)
        return Damage({extra["run_id"].iloc[0]}, table=False)
    cells = [(i, c) for i in range(len(df)) for c in df.columns
             if isinstance(df.at[i, c], float) and math.isfinite(df.at[i, c])]
    i, c = data.draw(st.sampled_from(cells), label="cell")
    df.at[i, c] = df.at[i, c] + 1 if abs(df.at[i, c]) < 1e15 else df.at[i, c] * 2
    df.to_parquet(f, index=False)
    return Damage({df.at[i, "run_id"]}, table=False)


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return stored_copy(NAME, tmp_path_factory.mktemp("stored") / "results").parent


def _readable_records(exp: Path) -> list[store.RunRecord]:
    return [st.record for st in store.read_records(exp, strict=False) if st.record is not None]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_verify_names_every_damaged_run_and_no_other(base, data):
    kinds = data.draw(st.lists(st.sampled_from(sorted(DAMAGES)), max_size=4), label="damages")
    with tempfile.TemporaryDirectory() as t:
        root = Path(t) / "results"
        shutil.copytree(base, root)
        (Path(t) / "beside").write_text("not the results folder's")
        exp = root / NAME
        in_folders, in_table, garbage = set(), set(), False
        for kind in kinds:
            d = DAMAGES[kind](exp, data)
            if d.table is None:
                in_folders |= d.runs
            elif d.table:  # unreadable: what earlier edits of the table did is gone, and no row names a run
                in_table, garbage = set(), True
            else:
                in_table |= d.runs
        damaged = in_folders | in_table
        before = tree(Path(t))
        check = verify.verify_folder(exp)
        named = {p.run for p in check.problems if p.run}
        assert named == damaged, (kinds, check.problems)
        assert check.ok == (not damaged and not garbage)
        assert tree(Path(t)) == before  # verify reads only
        try:
            df, _ = store.read_table(exp)
        except store.StoreError:  # a damaged record: the reader names it
            assert any(p.file.name == store.RECORD for p in check.problems)
        else:
            assert table_differences(df, store.table_of(_readable_records(exp))) == []
