"""The lab's measured spreads for bench/stats_check.py: every claim measured
on a results folder (as the report measures it, tortoiselab.studies), its
test, claimed effect and a small summary of its pilot's spread, written as
JSON (bench/stats_spreads.json, committed, so the check runs on a fresh
clone without results):

    .venv/bin/python bench/stats_pilots.py --results /work/repro2/results --grid reduced [--out FILE]

A claim's spread summary, by its measurement's statistic (studies.measure.STATISTICS):

- "ratio", "p90", "p90-groups" (pairs of times): level_sd, the robust sd
  (1.4826 x MAD) of the control's log values (between repetitions and
  conditions); pair_sd, the robust sd of the per-pair log ratios; stall,
  the share of pairs whose log ratio lies beyond STALL_SDS robust sds of
  their median, and stall_log, the median size of those departures;
- "ratio-groups" (two groups of per-pair ratios): pair_sd and stall of
  their logs, each group about its own median;
- "shift-groups", "location" (values in the claim's unit): sd, the robust
  sd of each group about its own median, pooled;
- "spearman": n only (a rank correlation has no scale).

A composite row ("every part ...") gives its parts' pairs pooled. Pure
reading: nothing under the results folder is written."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

MAD_SD = 1.4826  # a normal's sd over its median absolute deviation
STALL_SDS = 4.0  # a pair this many robust sds from the median log ratio counts as a stall
OUT = Path(__file__).resolve().parent / "stats_spreads.json"


def robust_sd(x) -> float:
    """1.4826 x the median absolute deviation of x (0 for fewer than 2 values)."""
    x = np.asarray(x, float)
    return float(MAD_SD * np.median(np.abs(x - np.median(x)))) if x.size > 1 else 0.0


def log_spread(c, a) -> dict:
    """The spread of pairs of positive times (control c, arm a), as the module docstring defines it."""
    c, a = np.asarray(c, float), np.asarray(a, float)
    lr = np.log(a) - np.log(c)
    sd = robust_sd(lr)
    dev = np.abs(lr - np.median(lr))
    out = dev > STALL_SDS * sd if sd > 0 else np.zeros(lr.size, bool)
    return {"level_sd": robust_sd(np.log(c)), "pair_sd": sd, "stall": float(out.mean()),
            "stall_log": float(np.median(dev[out])) if out.any() else 0.0}


def group_log_spread(c, a) -> dict:
    """Two groups of positive per-pair ratios: pair_sd and stall of their logs, each about its own median."""
    x = np.concatenate([np.log(c) - np.median(np.log(c)), np.log(a) - np.median(np.log(a))])
    sd = robust_sd(x)
    out = np.abs(x) > STALL_SDS * sd if sd > 0 else np.zeros(x.size, bool)
    return {"pair_sd": sd, "stall": float(out.mean()),
            "stall_log": float(np.median(np.abs(x[out]))) if out.any() else 0.0}


def group_sd(c, a) -> dict:
    """Two groups in their unit: sd, the robust sds about each group's median, pooled."""
    sds = [robust_sd(g) for g in (c, a) if len(g) > 1]
    return {"sd": float(np.sqrt(np.mean(np.square(sds)))) if sds else 0.0}


def spread_of(statistic: str, c, a) -> dict:
    """The spread summary of a measurement's values by its statistic."""
    if statistic in ("ratio", "p90", "p90-groups"):
        return log_spread(c, a)
    if statistic == "ratio-groups":
        return group_log_spread(c, a)
    if statistic == "shift-groups":
        return group_sd(c, a)
    if statistic == "location":
        return {"sd": robust_sd(a)}
    return {}


def pooled_pairs(m) -> tuple[list, list, str]:
    """(control, arm, statistic) of a measurement, a composite's parts pooled."""
    if m.parts:
        parts = [p for _, p in m.parts if p.control]
        return ([v for p in parts for v in p.control], [v for p in parts for v in p.arm],
                parts[0].statistic if parts else "")
    return list(m.control), list(m.arm), m.statistic


def claim_row(c, m, kw_note: str) -> dict:
    """One claim's entry: its ids, measured statistic, n, tie, and spread."""
    from tortoiselab.studies.registry import tie_of  # heavy: only when reading results
    control, arm, stat = pooled_pairs(m)
    row = {"study": c.study, "claim": c.id, "primary": c.primary, "statistic": stat, "n": int(m.n),
           "n_control": int(m.n_control or m.n), "n_arm": int(m.n_arm or m.n), "unit": m.unit,
           "tie": bool(tie_of(m)), "exact_repeats": bool(m.exact_repeats), "untestable": bool(c.untestable)}
    if "Kruskal-Wallis" in m.detail:
        row["statistic"] = "kruskal"
        row["note"] = kw_note
    usable = stat in ("ratio", "p90", "p90-groups", "ratio-groups") and control and min(control + arm) > 0
    if usable or stat in ("shift-groups", "location"):
        row["spread"] = spread_of(stat, control, arm)
    return row


def screen_spread(df) -> dict:
    """The screen's runs: robust sd of log content download time within each algorithm, pooled; runs per algorithm."""
    from tortoiselab.spec import cols
    d = df[df["ok"].astype(bool)]
    sds = [robust_sd(np.log(g[cols.CDT].dropna().to_numpy(float))) for _, g in d.groupby(cols.CC)]
    return {"level_sd": float(np.sqrt(np.mean(np.square(sds)))) if sds else 0.0,
            "groups": int(d[cols.CC].nunique()), "per_group": int(d.groupby(cols.CC).size().median())}


def read_claims(results: str, grid: str) -> list[dict]:
    """Every claim measured on results at grid (each claim's grids as the
    report reads them, the one with the most pairs): claim_row per claim
    with data, {"claim", "no_data"} for the rest."""
    from stats_resample import claim_measurements  # bench/, beside this script
    rows = []
    for c, found in claim_measurements(results, grid):
        best, extra = None, {}
        for m, frame in found:
            if best is None or m.n > best.n:
                best = m
                if "Kruskal-Wallis" in m.detail:
                    extra = screen_spread(frame)
        if best is None:
            rows.append({"study": c.study, "claim": c.id, "primary": c.primary, "no_data": True})
            continue
        row = claim_row(c, best, "runs per algorithm and their spread: see spread")
        if extra:
            row["spread"] = extra
        rows.append(row)
        print(f"{c.study}.{c.id}: {row.get('statistic')} n = {row['n']}", file=sys.stderr)
    return rows


def rounded(x):
    """x with every float rounded to 4 significant digits (a small, stable file)."""
    if isinstance(x, float):
        return float(f"{x:.4g}")
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [rounded(v) for v in x]
    return x


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", required=True, help="a results folder (read only)")
    ap.add_argument("--grid", default="reduced", help="the grid(s) to read, as the report takes them")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    rows = read_claims(args.results, args.grid)
    Path(args.out).write_text(json.dumps({"source": f"bench/stats_pilots.py --results {args.results} --grid "
                                                    f"{args.grid}", "claims": rounded(rows)}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
