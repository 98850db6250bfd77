"""What the results folder holds: experiments, their progress, and a
run found by (a prefix of) its id. Reads records through the store and
claims through the locks; never starts a lab."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tortoiselab.host import readfiles, safefs, slurm, store
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
                    "in_progress": len(stale_work(d)), "notes": (notes := []),
                    "running": _running(d, notes), "slurm": slurm.status(d), "unknown": why})
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


def _running(exp_dir: Path, notes: list[str]) -> int:
    """Runs under way: work folders whose claim a live runner holds. A claim
    that cannot be looked at (a link, a FIFO) is named in notes, and the
    listing goes on."""
    n = 0
    for tmp in stale_work(exp_dir):
        m = RUN_TMP.match(tmp.name)
        if m:
            try:
                with probe_claim(exp_dir, m.group(1)) as (free, _):
                    n += not free
            except safefs.REFUSED as exc:
                notes.append(str(exc))
    return n


RUN_PREFIX = re.compile(r"^[0-9a-f]{1,12}$")  # a run id (spec/experiment.py: 12 hex digits) or its start


def find_run(results: Path, run_id: str) -> Path:
    """The completed run whose id starts with run_id, in an experiment
    folder of `results` (never a link, never outside it): the id is checked
    as hex digits first, so `..`, `/` or a glob cannot reach elsewhere."""
    if not RUN_PREFIX.match(run_id):
        raise RunnerError(f"run {run_id[:80]!r}: not a run id; give a run's id or its first hex digits (1 to 12 "
                          "of 0-9a-f, as `tortoise ls` and the run folders show them), with --results for the "
                          "results folder that holds it")
    hits = [Path(results, e, n) for e in readfiles.names(results)
            if not e.startswith(".") and os.path.isdir(Path(results, e)) and not safefs.is_link(Path(results, e))
            for n in readfiles.names(Path(results, e))
            if n.startswith(run_id) and readfiles.RUN_ID.match(n) and store.completed(Path(results, e), n)]
    if not hits:
        raise RunnerError(f"run {run_id!r}: no completed run with that id under {results}")
    if len(hits) > 1:
        raise RunnerError(f"run {run_id!r}: ambiguous, matches {', '.join(p.name for p in hits)}")
    return hits[0]
