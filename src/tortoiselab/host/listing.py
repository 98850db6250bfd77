"""What the results folder holds: experiments, their progress, and a
run found by (a prefix of) its id. Reads records through the store and
claims through the locks; never starts a lab."""

from __future__ import annotations

import os
from pathlib import Path

from tortoiselab.host import safefs, slurm, store
from tortoiselab.host.errors import RunnerError
from tortoiselab.host.locks import RUN_TMP, probe_claim, stale_work
from tortoiselab.host.versions import folder_runs


def list_experiments(results: Path) -> list[dict]:
    out = []
    for d in sorted(p for p in results.glob("*") if p.is_dir() and not p.name.startswith(".")):
        if safefs.is_link(d):  # named, never entered (host/safefs.py)
            out.append({"experiment": f"{d.name} (a link to {safefs.target(d)}: not followed; list it where it "
                        "points)", "total": None, "done": 0, "damaged": 0, "failed": 0, "in_progress": 0,
                        "running": 0, "slurm": {}})
            continue
        ids, why = _sweep(d)
        recs = store.read_records(d, strict=False)
        # an unreadable record is a damaged run, not a run, and a run not of the folder's sweep was copied in:
        # neither is counted (tortoise verify names them and the fix)
        foreign = [r for r in recs if ids is not None and r.run_dir.name not in ids]
        mine = [r for r in recs if ids is None or r.run_dir.name in ids]
        out.append({"experiment": d.name, "total": len(ids) if ids is not None else None,
                    "done": sum(1 for r in mine if r.record is not None),
                    "damaged": sum(1 for r in mine if r.record is None), "foreign": len(foreign),
                    "failed": sum(1 for r in mine if r.record is not None and not r.record.ok),
                    "in_progress": len(stale_work(d)),
                    "running": _running(d), "slurm": slurm.status(d), "unknown": why})
    return out


def _sweep(exp_dir: Path) -> tuple[frozenset[str] | None, str]:
    """(the run ids of the folder's experiment (host/versions.folder_runs),
    "") or (None, why not): a listing must not fail on one bad file (a
    damaged experiment.yaml is named, and the other folders listed)."""
    exp_file = exp_dir / "experiment.yaml"
    if not os.path.lexists(exp_file):
        return None, ""
    try:
        safefs.check_regular(exp_file, f"listing {exp_dir}")  # a FIFO would hang the listing
    except (OSError, *safefs.REFUSED) as exc:
        return None, str(exc)
    return folder_runs(exp_dir)


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
