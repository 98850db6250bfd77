"""What the notebooks (notebooks/*.ipynb) import: one call from an
experiment's name to its tidy table, so that a notebook stays thin and the
test suite can point it at a small dataset.

    from tortoiselab import notebook
    runs = notebook.load("quick")          # results/quick, one row per run

The results folder is, in order: the `results` argument, the environment
variable TORTOISE_RESULTS, then ./results (or ../results when a notebook
runs from notebooks/).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pandas as pd

from tortoiselab import report
from tortoiselab.project import REPO_DIR
from tortoiselab.spec import cols

RESULTS_ENV = "TORTOISE_RESULTS"


def results_dir(results: str | Path | None = None) -> Path:
    """Where the experiments' result folders are (see the module's docstring)."""
    if results is not None:
        return Path(results)
    if os.environ.get(RESULTS_ENV):
        return Path(os.environ[RESULTS_ENV])
    here = Path("results")
    return here if here.is_dir() or not Path("../results").is_dir() else Path("../results")


def context(experiment: str, results: str | Path | None = None) -> report.Context:
    """Everything the report knows about an experiment's runs (tortoiselab.report.Context:
    the table, the swept axes, the arm and control it compares, run records).
    "name@powered,reduced": the first grid of the list that
    experiments/<name>.yaml defines for the whole study (not one whose
    `claims:` limits it to some claims), as `tortoise report
    --reproduction` reads a grid list; TORTOISE_GRID may hold one."""
    name, _, grid = experiment.partition("@")
    if "," in grid:
        from tortoiselab.studies.data import report_grids  # the studies import the report; not at import time
        experiment = f"{name}@{report_grids(REPO_DIR / 'experiments' / f'{name}.yaml', grid, claim='')[0]}"
    exp_dir = results_dir(results) / experiment
    if not exp_dir.is_dir():
        raise FileNotFoundError(f"{exp_dir}: no results for experiment {experiment!r}; run "
                                f"`tortoise run experiments/{experiment}.yaml` first, or set {RESULTS_ENV} "
                                f"to the folder that holds {experiment}/")
    return report.load_context(exp_dir)


def load(experiment: str, results: str | Path | None = None, ok_only: bool = False) -> pd.DataFrame:
    """The experiment's runs table (runs.parquet's columns, the swept axes,
    object class, floor and measured / floor), one row per completed run in
    the sweep's order; ok_only keeps the runs whose load succeeded."""
    df = context(experiment, results).df
    return df[df[cols.OK].astype(bool)].reset_index(drop=True) if ok_only else df


def maps(experiment: str, results: str | Path | None = None) -> list[dict]:
    """The sensitivity maps experiments/<experiment>.yaml defines (docs/maps.md),
    each {"map", "png" (the drawn figure, None when not drawn), "cells" (its
    cells as a DataFrame, None when not drawn), "how" (the command that runs
    and draws it, with its cost)}, from <results>/<experiment>@map-<map>."""
    from tortoiselab.report.maps import CELL_COLUMNS, cell_rows  # the report's table of a map's cells
    from tortoiselab.studies import maps as M  # the studies import the report; not at import time

    f = REPO_DIR / "experiments" / f"{experiment}.yaml"
    out = []
    for name in M.maps_of(f):
        folder = results_dir(results) / f"{experiment}@map-{name}"
        drawn = (folder / "map.json").is_file() and (folder / "map.png").is_file()
        cells = (pd.DataFrame(cell_rows(json.loads((folder / "map.json").read_text(encoding="utf-8"))),
                              columns=CELL_COLUMNS) if drawn else None)
        c = M.cost(f, name, 0.0, 1)  # runs and cells only
        out.append({"map": name, "png": folder / "map.png" if drawn else None, "cells": cells,
                    "how": f"no map {name} in {folder}: `tortoise map experiments/{experiment}.yaml --map {name}` "
                           f"runs and draws it ({c['runs']} runs, {c['cells']} cells)"})
    return out


def strip(path: str | Path) -> bool:
    """Remove a notebook's outputs and execution counts in place, written as
    nbformat writes it; True when the file changed. (Plain JSON: stripping
    must not need Jupyter installed.)"""
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    nb = json.loads(text)
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
        cell.get("metadata", {}).pop("execution", None)
    nb.get("metadata", {}).pop("widgets", None)
    out = json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    if out != text:
        p.write_text(out, encoding="utf-8")
    return out != text


def main(argv: list[str] | None = None) -> int:
    """python -m tortoiselab.notebook --strip NOTEBOOK...: strip outputs."""
    ap = argparse.ArgumentParser(prog="python -m tortoiselab.notebook", description=main.__doc__)
    ap.add_argument("--strip", nargs="+", metavar="NOTEBOOK", required=True)
    for nb in ap.parse_args(argv).strip:
        print(f"{nb}: {'stripped' if strip(nb) else 'already stripped'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
