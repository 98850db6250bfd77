"""What the results folder holds: experiments, their progress, and a
run found by (a prefix of) its id. Reads records through the store and
claims through the locks; never starts a lab."""

from __future__ import annotations

import os
from pathlib import Path

from tortoiselab.host import safefs, slurm, store
from tortoiselab.host.errors import RunnerError
from tortoiselab.host.locks import RUN_TMP, probe_claim, stale_work
from tortoiselab.spec.experiment import expand, load


def list_experiments(results: Path) -> list[dict]:
    out = []
    for d in sorted(p for p in results.glob("*") if p.is_dir() and not p.name.startswith(".")):
        if safefs.is_link(d):  # named, never entered (host/safefs.py)
            out.append({"experiment": f"{d.name} (a link to {safefs.target(d)}: not followed; list it where it "
                        "points)", "total": None, "done": 0, "damaged": 0, "failed": 0, "in_progress": 0,
                        "running": 0, "slurm": {}})
            continue
        exp_file = d / "experiment.yaml"
        total = None
        if os.path.lexists(exp_file):
            try:
                safefs.check_regular(exp_file, f"listing {d}")  # a FIFO would hang the listing
                total = len(expand(load(exp_file, grid=d.name.partition("@")[2] or None)))
            except (ValueError, OSError, *safefs.REFUSED):  # a listing must not fail on one bad file
                total = None
        recs = store.read_records(d, strict=False)
        # an unreadable record is a damaged run, not a run (tortoise verify names it and the fix)
        out.append({"experiment": d.name, "total": total, "done": sum(1 for r in recs if r.record is not None),
                    "damaged": sum(1 for r in recs if r.record is None),
                    "failed": sum(1 for r in recs if r.record is not None and not r.record.ok),
                    "in_progress": len(stale_work(d)),
                    "running": _running(d), "slurm": slurm.status(d)})
    return out


def _running(exp_dir: Path) -> int:
    """Runs under way: work folders whose claim a live runner holds."""
    n = 0
    for tmp in stale_work(exp_dir):
        m = RUN_TMP.match(tmp.name)
        if m:
            with probe_claim(exp_dir, m.group(1)) as (free, _):
                n += not free
    return n


def find_run(results: Path, run_id: str) -> Path:
    hits = [p for p in results.glob(f"*/{run_id}*")  # not inside a linked experiment folder
            if not safefs.is_link(p.parent) and store.completed(p.parent, p.name)]
    if not hits:
        raise RunnerError(f"run {run_id!r}: no completed run with that id under {results}")
    if len(hits) > 1:
        raise RunnerError(f"run {run_id!r}: ambiguous, matches {', '.join(p.name for p in hits)}")
    return hits[0]
