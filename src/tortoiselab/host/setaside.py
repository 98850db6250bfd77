"""A resume's first step: the runs it must do again moved aside, kept, never
deleted: damaged ones (a record or manifest that fails: host/verify.py) into
<exp>/.damaged/, and failed ones whose lab was killed from outside
(host/stopping.killed_from_outside) into <exp>/.killed/, each under its
claim (host/runner.run_experiment; docs/faults.md)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from tortoiselab.host import store
from tortoiselab.host.locks import claim
from tortoiselab.host.stopping import killed_from_outside
from tortoiselab.host.store import files
from tortoiselab.host.verify import verify_folder


def plan_resume(ids: list[str], completed: set[str], damaged: set[str]) -> tuple[list[str], list[str]]:
    """(pending, to move aside): of a sweep's run ids in order, those to run
    and the damaged ones whose folders go aside first (then run). Pure."""
    aside = [r for r in ids if r in damaged]
    return [r for r in ids if r not in completed or r in damaged], aside


def move_aside(exp_dir: Path, run_id: str, now: datetime | None = None) -> Path:
    """Rename <exp>/<run_id> to <exp>/.damaged/<run_id>-<utc>/ (kept, never
    deleted), by file descriptors that follow no link: a .damaged that is a
    link is refused."""
    return files.move_aside(exp_dir, run_id, store.DAMAGED, now)


def move_damaged_aside(exp_dir: Path, ids: list[str], sliced: bool) -> list[str]:
    """Damaged runs (a record or manifest that fails) moved
    aside into <exp>/.damaged/, each under its claim, so that they are done
    again; of a slice only its own runs, else every run folder (a damaged
    record would stop runs.parquet's rebuild). Returns "<run_id> -> folder"."""
    check = verify_folder(exp_dir, set(ids) if sliced else None, table=False)
    done = {r for r in ids if store.completed(exp_dir, r)}
    extra = sorted(set(check.damaged) - set(ids))
    moved = []
    for rid in plan_resume(ids, done, set(check.damaged))[1] + extra:
        with claim(exp_dir, rid):
            if rid in verify_folder(exp_dir, {rid}, table=False).damaged:
                moved.append(f"{rid} -> {move_aside(exp_dir, rid)}")
    return moved


def move_killed_aside(exp_dir: Path, ids: list[str]) -> list[str]:
    """Failed runs whose lab was ended by a signal from outside the runner
    (host/stopping.killed_from_outside: a kill, the OOM killer, a shutdown;
    not a fault of the run) moved aside into <exp>/.killed/ (kept), each
    under its claim, so that they are done again. Returns
    "<run_id> (<signal>) -> folder"."""
    moved = []
    for st in store.read_records(exp_dir, set(ids), strict=False):
        rid = st.run_dir.name
        if st.record is None or st.record.ok or not killed_from_outside(st.record.error):
            continue
        with claim(exp_dir, rid):  # another runner may have redone it meanwhile
            again = store.read_records(exp_dir, {rid}, strict=False)
            sig = killed_from_outside(again[0].record.error) if again and again[0].record is not None else None
            if sig is not None and not again[0].record.ok:
                moved.append(f"{rid} ({sig}) -> {files.move_aside(exp_dir, rid, store.KILLED)}")
    return moved
