"""`tortoise map EXPERIMENT`: each map's cost, then its runs (an ordinary
sweep: host/runner.py into results/<name>@map-<map>, resumable), then its
cells (studies/maps.py) written beside the runs as map.json and the figure
map.png / map.svg (analysis/mapfigure.py), as `tortoise report` writes
report.html there (docs/maps.md)."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from tortoiselab.analysis.mapfigure import draw_map
from tortoiselab.host.store import files
from tortoiselab.host.runner import run_experiment
from tortoiselab.spec.bounds import RUNS_PER_HOUR
from tortoiselab.spec import cols
from tortoiselab.spec.maps import grid_name, map_name
from tortoiselab.studies import maps as M
from tortoiselab.studies.data import study_folder
from tortoiselab.studies.plan import experiment_file, seconds_per_run

MAP_JSON, MAP_FIGURE = "map.json", "map"  # in the map's results folder: map.json, map.png, map.svg


def _seconds_per_run(folder: Path, jobs: int) -> float:
    """Wall seconds per run: the stored runs' own (with `jobs` side by
    side), else the machine's rate spec/bounds.py assumes."""
    sec = seconds_per_run(folder) if folder.is_dir() else None
    return sec / max(jobs, 1) if sec else 3600 / RUNS_PER_HOUR


def _arm_names(m: M.MapCfg) -> dict[str, str]:
    """Panel titles: "arm vs control" per arm key (a value that is no name carries its field)."""
    def text(v: Any) -> str:
        return M.short(v) if isinstance(v, (str, dict, list)) else f"{m.compare.split('.')[-1]} {M.short(v)}"
    return {M._key(a): f"{text(a)} vs {text(m.control)}" for a in m.arms}


def plan_text(experiment: str, grid: str, results: Path, jobs: int) -> str:
    """`tortoise plan FILE --grid map-<name>`: the map's cost (format_cost)."""
    f = experiment_file(experiment)
    name = map_name(grid)
    M.check_metric(M.map_of(f, name), name)
    folder = study_folder(f, grid, results)
    return M.format_cost(M.cost(f, name, _seconds_per_run(folder, jobs), 1))


def write_outputs(f: Path, name: str, results: Path) -> tuple[Path, list[str]]:
    """The map's cells and figure into its results folder (map.json,
    map.png, map.svg; each written to a temporary name and renamed, never
    through a link); returns the PNG and the cells as text."""
    m, cs = M.read_map(f, name, results)
    folder = study_folder(f, grid_name(name), results)
    doing = f"writing map {name} into {folder}"
    title = f"{folder.name}: {m.description or m.compare}"
    doc = {"map": name, "experiment": str(f), "compare": m.compare, "control": m.control, "arms": m.arms,
           "metric": m.metric, "better": m.better, "claimed_pct": m.claimed_pct, "title": title,
           "markers": M.markers(m),
           "cells": json.loads(cs.to_json(orient="records"))}
    with tempfile.TemporaryDirectory(prefix="tortoise-map-") as tmp:
        paths = draw_map(cs, doc["markers"], Path(tmp) / MAP_FIGURE, title, m.metric, _arm_names(m))
        for p in paths:  # drawn in a temporary folder, then written by the store (host/store/files.py)
            files.write_file(folder, folder / p.name, p.read_bytes(), doing)
    files.write_file(folder, folder / MAP_JSON, json.dumps(doc, indent=1, allow_nan=True), doing)
    return folder / f"{MAP_FIGURE}.png", M.summary_lines(m, cs)


def run_maps(experiment: str, names: list[str] | None, results: Path, jobs: int | None, backend: str,
             clock: str, plan_only: bool = False, say: Callable[[str], None] = print) -> int:
    """Each map (all the file's, or `names`): its cost, and unless
    plan_only its runs, cells and figure; 0 when every map was drawn."""
    f = experiment_file(experiment)
    names = names or M.maps_of(f)
    if not names:
        raise M.MapError(f"experiment: {f.name} has no maps: section; add one (docs/maps.md)")
    cfgs = {n: M.map_of(f, n) for n in names}
    for n, m in cfgs.items():  # every map checked before anything runs
        M.check_metric(m, n)
    for n in names:
        folder = study_folder(f, grid_name(n), results)
        say(M.format_cost(M.cost(f, n, _seconds_per_run(folder, jobs or 1), 1)))
    if plan_only:
        return 0
    for n in names:
        t0 = time.monotonic()
        res = run_experiment(f, results, jobs=jobs, backend=backend, clock=clock, grid=grid_name(n))
        wall = time.monotonic() - t0
        failed = sum(1 for r in res["records"] if not r.get(cols.OK))
        say(f"map {n}: {res['done_now']} runs now ({failed} failed) in {wall:.0f} s wall; "
            f"{res['total']} in the map")
        png, lines = write_outputs(f, n, results)
        say("\n".join(lines))
        say(f"figure: {png}")
    return 0

