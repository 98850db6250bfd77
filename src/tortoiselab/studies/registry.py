"""The studies, and every claim of one judged on its results: STUDIES,
evaluate and verdict_frame, as the notebooks, `tortoise report
--reproduction` and the labs use them (labs/README.md lists the studies
with their labs and notebooks)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from tortoiselab.studies.claims import coalescing, cubic_plus, initcwnd, reno, tortoise
from tortoiselab.studies.data import current_run_ids, experiment_name, load_runs, of_loader, study_folder
from tortoiselab.studies.model import SEEDS, Claim, Measurement, NoData, Study, Verdict

STUDIES: dict[str, Study] = {
    "tortoise": Study("tortoise", "The TCP Tortoise: congestion control for emerging markets (LinkedIn 2017)",
                      (SEEDS["000"], SEEDS["004"]), ("experiments/tortoise.yaml", "experiments/tortoise-screen.yaml"),
                      tortoise.CLAIMS, "notebooks/01_tortoise.ipynb", "labs/01-tortoise.md"),
    "coalescing": Study("coalescing", "HTTP/2 connection coalescing (LinkedIn)", (SEEDS["001"],),
                        ("experiments/coalescing.yaml",), coalescing.CLAIMS, "notebooks/02_coalescing.ipynb",
                        "labs/02-coalescing.md"),
    "cubic_plus": Study("cubic_plus", "CUBIC+ for HTTP/2 (Stony Brook)", (SEEDS["002"],),
                        ("experiments/cubic_plus.yaml",), cubic_plus.CLAIMS, "notebooks/03_cubic_plus.ipynb",
                        "labs/03-cubic-plus.md"),
    "reno_beta": Study("reno_beta", "Reno's reduction factor 0.5-0.9 (Stony Brook)", (SEEDS["002"],),
                       ("experiments/reno_beta.yaml",), reno.CLAIMS, "notebooks/03_cubic_plus.ipynb",
                       "labs/03-cubic-plus.md"),
    "initcwnd": Study("initcwnd", "Fitting in the initial slow-start window (Napkin Problem 15)", (SEEDS["003"],),
                      ("experiments/initcwnd.yaml",), initcwnd.CLAIMS, "notebooks/04_initcwnd.ipynb",
                      "labs/04-initcwnd.md"),
}


def study(study_id: str) -> Study:
    """STUDIES[study_id], or a KeyError that names the studies there are."""
    if study_id not in STUDIES:
        raise KeyError(f"study: unknown study {study_id!r}; the studies are {', '.join(STUDIES)}")
    return STUDIES[study_id]


def experiment_files(s: Study) -> dict[str, str]:
    """experiment name -> file, for a study."""
    return {experiment_name(f): f for f in s.experiments}


def _clean(x) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


def verdict_of(c: Claim, df: pd.DataFrame, folder: Path) -> Verdict:
    """One claim on its experiment's runs (df, read from folder; only those
    of the claim's loader count); missing runs give verdict "no data",
    never an exception."""
    try:
        if df.empty:
            raise NoData(f"no runs in {folder}")
        df = of_loader(df, c.loader)
        if df.empty:
            raise NoData(f"no runs of client.loader {c.loader} in {folder}")
        m = c.measure(df)
        if m.value is None or not math.isfinite(float(m.value)):
            raise NoData("the measurement gave no value")
        verdict, why = c.judge(m)
    except NoData as exc:
        m, verdict, why = Measurement(math.nan, detail=str(exc)), "no data", str(exc)
    return Verdict(c.study, c.id, c.seed_file, c.text, c.experiment, c.metric,
                   _clean(m.value), _clean(m.low), _clean(m.high), _clean(m.p_value), m.n, m.unit,
                   m.text(), verdict, why, c.rule, m.detail)


def claim_grid(c: Claim, grid: str | None) -> str | None:
    """The grid a claim reads when the report reads `grid`: its own, if it
    names one (e.g. the browser arm's), else the report's."""
    return c.grid or grid


def evaluate(study_id: str, results: str | Path = "results", grid: str | None = "reduced") -> list[Verdict]:
    """Every claim of the study against the results of its experiments on
    `grid` (None: the full sweep, results/<name>; a claim that names a grid
    of its own reads that one), in the study's order."""
    s = study(study_id)
    files = experiment_files(s)
    frames: dict[tuple[str, str | None], pd.DataFrame] = {}
    out = []
    for c in s.claims:
        g = claim_grid(c, grid)
        folder = study_folder(c.experiment, g, results)
        if (c.experiment, g) not in frames:
            frames[c.experiment, g] = load_runs(folder, current_run_ids(files[c.experiment], g))
        out.append(verdict_of(c, frames[c.experiment, g], folder))
    return out


def verdict_frame(verdicts: list[Verdict]) -> pd.DataFrame:
    """One row per claim: the Verdict's fields as columns."""
    return pd.DataFrame([v.as_dict() for v in verdicts])
