"""How a claim's number is measured and judged: runs filtered to the ones
that count, arms paired on the same condition and seed, the arm's change
against the control with a bootstrap CI and a paired test, and the four
judges that turn a number into agree / partly / disagree. The rules in
words are printed under each study in REPRODUCTION.md (README.md,
"Analysis, report, the VM"; the labs' questions: labs/README.md)."""

from __future__ import annotations

import json
import math
from typing import Iterable

import numpy as np
import pandas as pd
from scipy import stats as st

from tortoiselab.analysis import stats
from tortoiselab.studies.model import ALPHA, Judge, Measurement, NoData, fmt

# --- the runs that count, paired ------------------------------------------------------


def ok_rows(df: pd.DataFrame, metric: str, **where) -> pd.DataFrame:
    """The ok runs with a value of metric, filtered by where: column=value,
    a list of values, or a function of the column (a__b is column a.b)."""
    d = df[df["ok"].astype(bool)]
    for col, val in where.items():
        col = col.replace("__", ".")
        if isinstance(val, (list, tuple, set)):
            d = d[d[col].isin(list(val))]
        elif callable(val):
            d = d[val(d[col])]
        else:
            d = d[d[col] == val]
    return d[d[metric].notna()]


# the sweep fields that make up each arm column (left out of the pairing key)
ARM_FIELDS = {"arm": ("server.cc", "server.module_params"), "beta": ("server.module_params",)}


def pair_key(cond: str, arm_col: str) -> str:
    """A run's sweep point (cond, JSON) without the fields of its arm."""
    fields = ARM_FIELDS.get(arm_col, (arm_col,))
    point = json.loads(cond)
    return json.dumps({k: v for k, v in point.items() if not set(k.split("+")) & set(fields)}, sort_keys=True)


def pairs(df: pd.DataFrame, metric: str, arm_col: str, control, arm, **where) -> pd.DataFrame:
    """control and arm values of `metric` matched on (the sweep point without
    the arm's own fields, repetition): the same condition and, experiments
    here being paired, the same seed. Column cond is that key."""
    d = ok_rows(df, metric, **where).copy()
    d["cond"] = [pair_key(c, arm_col) for c in d["cond"]]
    key = ["cond", "repetition"]
    c = d[d[arm_col] == control][key + [metric]].rename(columns={metric: "control"})
    a = d[d[arm_col] == arm][key + [metric]].rename(columns={metric: "arm"})
    return c.merge(a, on=key)


def paired_test(c: np.ndarray, a: np.ndarray) -> tuple[float | None, str]:
    """Wilcoxon signed-rank on log ratios with 6 or more pairs (the seed's
    test); with fewer, where Wilcoxon cannot reach p < 0.05 whatever the data
    (smallest p = 2/2^n), a paired t-test on the log ratios, said so."""
    c, a = np.asarray(c, float), np.asarray(a, float)
    if len(c) < 2:
        return None, "one pair: no test"
    lr = np.log(a) - np.log(c)
    if np.all(lr == 0):
        return 1.0, "all pairs equal"
    if len(c) >= 6:
        return stats.wilcoxon_signed_rank(np.log(c), np.log(a))["p_value"], "Wilcoxon signed-rank"
    if np.std(lr) == 0:
        return 0.0, f"paired t-test on log ratios (n = {len(c)} < 6; all pairs changed by the same factor)"
    return float(st.ttest_1samp(lr, 0.0).pvalue), f"paired t-test on log ratios (n = {len(c)} < 6 for Wilcoxon)"


def change(df: pd.DataFrame, metric: str, arm_col: str, control, arm, statistic: str = "ratio",
           seed: int = 0, **where) -> Measurement:
    """The arm against the control, in %: statistic "p90" = paired p90
    difference (the seed's statistic, for one condition), "ratio" = median of
    per-pair changes 100*(arm/control - 1) (pooled over conditions, where
    p90s of different scales must not be mixed); 95 % bootstrap CI over pairs,
    p from paired_test."""
    p = pairs(df, metric, arm_col, control, arm, **where)
    if p.empty:
        raise NoData(f"no paired runs of {arm} and {control} for {metric}")
    c, a = p["control"].to_numpy(float), p["arm"].to_numpy(float)
    if statistic == "p90":
        e = stats.percent_diff(c, a, 0.9, paired=True, n_resamples=4000, seed=seed)
        label = "paired p90 difference"
    else:
        e = stats.bootstrap_ci(100 * (a / c - 1), "median", n_resamples=4000, seed=seed)
        label = "median per-pair change"
    pv, test = paired_test(c, a)
    lo, hi = (e.low, e.high) if len(p) > 1 else (math.nan, math.nan)
    names = (f"{arm_col} {arm} vs {control}" if isinstance(arm, (bool, np.bool_, int, float))
             else f"{arm} vs {control}")
    return Measurement(e.value, lo, hi, pv, len(p), "%",
                       f"{label} of {metric}, {names}; {test}; "
                       f"control p90 {np.quantile(c, 0.9):.0f}, arm p90 {np.quantile(a, 0.9):.0f}")


def span(values: Iterable[float], unit: str, detail: str) -> Measurement:
    """Deterministic runs: the mean, with the range of the runs as its
    interval (no test)."""
    v = np.asarray(list(values), float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        raise NoData("no runs with this measurement")
    return Measurement(float(v.mean()), float(v.min()), float(v.max()), None, int(v.size), unit,
                       detail + " (interval: the runs' range; loss-free virtual-clock runs are exact)")


# --- judges: each returns (judge, its rule in words) -----------------------------------


def _interval(m: Measurement) -> tuple[float, float]:
    """The CI, or the value twice where there is none."""
    return (m.low, m.high) if math.isfinite(m.low) else (m.value, m.value)


def improvement(lo: float, hi: float, better: str = "lower") -> tuple[Judge, str]:
    """The seed claims a change in [lo, hi] % (lo <= hi; negative = faster for
    times). agree: significant (p < 0.05) in the claimed direction and the CI
    overlaps the claimed range; partly: only one of the two; disagree:
    neither, or significant the other way."""
    sign = -1 if better == "lower" else 1
    rule = (f"agree if p < {ALPHA} in the claimed direction and the 95 % CI overlaps the claimed "
            f"[{lo:g}, {hi:g}] %; partly if only one holds, or if the estimate is in the claimed direction; "
            "disagree otherwise")

    def judge(m: Measurement) -> tuple[str, str]:
        low, high = _interval(m)
        overlap = low <= hi and high >= lo
        right_way = sign * m.value > 0
        sig = m.p_value is not None and m.p_value < ALPHA
        few = " (too few runs)" if m.n < 6 else ""
        if sig and not right_way:
            return "disagree", f"significant change the other way ({fmt(m.value, '%')})"
        if sig and overlap:
            return "agree", f"significant, and the CI overlaps the claimed {lo:g}..{hi:g} %"
        if overlap:
            return "partly", "the CI overlaps the claimed range but the change is not significant" + few
        size = 'smaller' if abs(m.value) < min(abs(lo), abs(hi)) else 'larger'
        if sig:
            return "partly", f"significant in the claimed direction, but {fmt(m.value, '%')} is {size} than claimed"
        if right_way:
            return "partly", (f"in the claimed direction but {size} than claimed ({fmt(m.value, '%')}) and "
                              "not significant" + few)
        return "disagree", "no change in the claimed direction, and the CI excludes the claimed range"
    return judge, rule


def direction(better: str = "lower", what: str = "the arm") -> tuple[Judge, str]:
    """A claim of direction only (better / worse, no size)."""
    sign = -1 if better == "lower" else 1
    rule = f"agree if p < {ALPHA} and {what} is {better}; partly if {better} but not significant; disagree otherwise"

    def judge(m: Measurement) -> tuple[str, str]:
        sig = m.p_value is not None and m.p_value < ALPHA
        if sign * m.value > 0:
            return ("agree", "significant, in the claimed direction") if sig else \
                ("partly", "in the claimed direction, not significant" + (" (too few runs)" if m.n < 6 else ""))
        if sig:
            return "disagree", "significant, the other way"
        return "disagree", "not in the claimed direction"
    return judge, rule


def equivalent(margin: float) -> tuple[Judge, str]:
    """A claim of "about the same": within +-margin %."""
    rule = (f"agree if the 95 % CI lies within +-{margin:g} %; partly if the estimate does but the CI does not; "
            "disagree otherwise")

    def judge(m: Measurement) -> tuple[str, str]:
        low, high = _interval(m)
        if -margin <= low and high <= margin:
            return "agree", f"the whole CI is within +-{margin:g} %"
        if abs(m.value) <= margin:
            return "partly", f"estimate within +-{margin:g} %, the CI reaches beyond"
        return "disagree", f"{fmt(m.value, '%')} is outside +-{margin:g} %"
    return judge, rule


def exact(target: float, tol: float, unit: str) -> tuple[Judge, str]:
    """A count or size the seed states: equal (within tol) on every run."""
    rule = (f"agree if every run gives {target:g} {unit} (within {tol:g}); partly if the runs' mean is within "
            f"2x that; disagree otherwise")

    def judge(m: Measurement) -> tuple[str, str]:
        low, high = _interval(m)
        if abs(low - target) <= tol and abs(high - target) <= tol:
            return "agree", f"{fmt(m.value, unit)} against the seed's {target:g} {unit}"
        if abs(m.value - target) <= 2 * tol:
            return "partly", f"{fmt(m.value, unit)}, close to the seed's {target:g} {unit}"
        return "disagree", f"{fmt(m.value, unit)} against the seed's {target:g} {unit}"
    return judge, rule

