"""Canned measurements of the rows issue 36 named, from a reproduction's
results: for each claim, the numbers its verdict is read from (the paired
values, or the groups, with the statistic, unit and tie; a measurement
without pairs as it is; a composite row's parts, each so) and its
study's family size, written to
tests/data/verdict-rows.json for tests/unit/test_verdict_rows.py.

    .venv/bin/python scripts/verdict_rows.py RESULTS --grid powered,reduced

Read-only on RESULTS except the studies' capture cache (in the user's
cache, not the results folder)."""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path

from tortoiselab.studies import registry as R
from tortoiselab.studies.data import current_points, load_runs, study_folder

ROWS = ("coalescing.gain", "initcwnd.ten-round-trips", "tortoise.india-desktop-cdt", "tortoise.china-desktop-cdt", "tortoise.china-desktop-cdt-rich",
        "tortoise.china-mobile-plt-users", "tortoise.all-three-improve", "tortoise.all-three-improve-users",
        "tortoise.hybla-best", "tortoise.screen-top3", "tortoise.screen-top3-rich", "coalescing.gain-india",
        "coalescing.gain-us", "coalescing.gain-germany", "coalescing.gain-india-users", "coalescing.reuse-ratio",
        "coalescing.gain-india-chromium", "coalescing.gain-us-chromium", "coalescing.gain-germany-chromium",
        "coalescing.reuse-ratio-chromium", "coalescing.cache-shrinks-gain-chromium",
        "cubic_plus.plt-high-loss-better", "cubic_plus.larger-objects-gain-more", "cubic_plus.delay-large-cubic-wins",
        "reno_beta.high-loss-hard-cut-slower", "reno_beta.low-loss-similar")
FIELDS = ("value", "low", "high", "p_value", "n", "unit", "statistic", "tie", "exact_repeats", "min_p", "n_control",
          "n_arm", "n_what")
OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "verdict-rows.json"


def _num(x):
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x


def measured(study_id: str, results: Path, grid: str) -> tuple[dict, int]:
    """Each claim's raw measurement (at 0.05) and the study's family size,
    as evaluate computes them."""
    s = R.study(study_id)
    files = R.experiment_files(s)
    ms, frames = [], {}
    for c in s.claims:
        best = None
        for g in R.claim_grids(c, grid):
            key = (c.experiment, g)
            if key not in frames:
                pts = current_points(files[c.experiment], g)
                frames[key] = load_runs(study_folder(c.experiment, g, results), set(pts), pts)
            try:
                m = R.measure_claim(c, frames[key], study_folder(c.experiment, g, results))
            except R.NoData:
                continue
            if best is None or m.n > best.n:
                best = m
        ms.append(best)
    family = max(1, sum(R.in_family(c, m) for c, m in zip(s.claims, ms)))
    return {c.id: m for c, m in zip(s.claims, ms)}, family


def row(m) -> dict:
    """A measurement as the canned file keeps it: FIELDS, its pairs (or
    groups) and, for a composite row, its parts (each a row) and what they
    are."""
    out = {k: _num(getattr(m, k)) for k in FIELDS}
    if m.parts:  # the pairs are the parts' (the row shows one of them: registry.deciding)
        out["composite"] = m.composite
        out["parts"] = {name: row(part) for name, part in m.parts}
    else:
        out["control"], out["arm"] = list(m.control), list(m.arm)
    return out


def compact(text: str) -> str:
    """JSON with each list of numbers on one line."""
    return re.sub(r"\[\s+([^][{}]*?)\s+\]", lambda g: "[" + " ".join(g.group(1).split()) + "]", text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--grid", default="powered,reduced")
    a = ap.parse_args()
    out = {"source": f"tortoise report --reproduction --grid {a.grid} on {a.results.name}/ (issue 36)",
           "families": {}, "rows": {}}
    for sid in sorted({r.split(".")[0] for r in ROWS}):
        ms, family = measured(sid, a.results, a.grid)
        out["families"][sid] = family
        for cid, m in ms.items():
            if cid not in ROWS or m is None:
                continue
            out["rows"][cid] = row(m)
    OUT.write_text(compact(json.dumps(out, indent=1)) + "\n")
    print(f"{len(out['rows'])} rows of {len(ROWS)} -> {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
