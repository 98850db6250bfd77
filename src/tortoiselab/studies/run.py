"""Running what a study still lacks: its experiments on a grid through the
resumable runner (tortoiselab.host.runner), for the tests and the notebooks
(notebooks/README.md; docs/running.md)."""

from __future__ import annotations

from pathlib import Path

from tortoiselab.host.runner import run_experiment
from tortoiselab.project import REPO_DIR as REPO
from tortoiselab.spec import cols
from tortoiselab.studies.registry import study


def ensure_results(study_id: str, grid: str | None = "ci", results: str | Path = "results", jobs: int = 1,
                   backend: str = "auto", clock: str = "auto") -> list[Path]:
    """Run whatever the study's experiments still lack on `grid` (the runner
    keeps completed runs and does only the pending ones) and return the
    results folders. Raises RuntimeError if a run fails."""
    out = []
    for f in study(study_id).experiments:
        res = run_experiment(REPO / f, Path(results), jobs=jobs, backend=backend, clock=clock, grid=grid)
        if res["failed_now"]:
            errors = [r["error"] for r in res["records"] if not r[cols.OK]]
            raise RuntimeError(f"{f} --grid {grid}: {res['failed_now']} runs failed: {errors[0]}")
        out.append(Path(res["dir"]))
    return out
