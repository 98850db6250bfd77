"""How a claim's number is measured and judged: runs filtered to the ones
that count, arms paired on the same condition and seed, the arm's change
against the control with a bootstrap CI and a paired test (Wilcoxon for a
median change, a paired permutation test for a p90 difference, an exact
sign-flip test below 6 pairs), and the four judges that turn a number into
a verdict of model.VERDICTS: significance by the Holm-adjusted p, and a
result that is not significant is "inconclusive" unless the test had the
power (studies.power) to see the claimed effect. The rules in words are
printed under each study in REPRODUCTION.md (README.md, "Analysis, report,
the VM"; the labs' questions: labs/README.md)."""

from __future__ import annotations

import json
import math
from typing import Iterable

import numpy as np
import pandas as pd
from scipy import stats as st

from tortoiselab.analysis import stats
from tortoiselab.studies.model import ALPHA, POWER_TARGET, Judge, Measurement, NoData, fmt
from tortoiselab.studies.power import Effect

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
    test); with fewer, where Wilcoxon cannot reach p < 0.05 whatever the data,
    the exact sign-flip permutation test on the log ratios, whose smallest p
    is 2/2^n (said so): a few pairs can never give p = 0."""
    c, a = np.asarray(c, float), np.asarray(a, float)
    if len(c) < 2:
        return None, "one pair: no test"
    lr = np.log(a) - np.log(c)
    if np.all(lr == 0):
        return 1.0, "all pairs equal"
    if len(c) >= 6:
        return stats.wilcoxon_signed_rank(np.log(c), np.log(a))["p_value"], "Wilcoxon signed-rank"
    r = stats.sign_flip_test(lr)
    return r["p_value"], (f"exact sign-flip test on log ratios (n = {len(c)} < 6 for Wilcoxon; smallest "
                          f"possible p = 2/2^{len(c)} = {r['min_p']:.3g})")


def tie_reason(c: np.ndarray, a: np.ndarray) -> str:
    """Non-empty when every pair is identical (arm = control in each): the
    arms cannot differ on these runs, whatever the claim."""
    if len(c) and np.array_equal(np.asarray(c, float), np.asarray(a, float)):
        return (f"every one of the {len(c)} pairs gave the arm exactly the control's value: a tie by "
                "construction (e.g. a loss-free load that runs the same slow start in both arms), not a finding")
    return ""


def change(df: pd.DataFrame, metric: str, arm_col: str, control, arm, statistic: str = "ratio",
           seed: int = 0, **where) -> Measurement:
    """The arm against the control, in %: statistic "p90" = paired p90
    difference (the seed's statistic, for one condition; tested with a
    paired permutation test of the p90 difference, stats.quantile_diff_test),
    "ratio" = median of per-pair changes 100*(arm/control - 1) (pooled over
    conditions, where p90s of different scales must not be mixed; tested
    with paired_test); 95 % bootstrap CI over pairs. The pairs ride along
    (control, arm, statistic) for power, and tie says when all are equal."""
    p = pairs(df, metric, arm_col, control, arm, **where)
    if p.empty:
        raise NoData(f"no paired runs of {arm} and {control} for {metric}")
    c, a = p["control"].to_numpy(float), p["arm"].to_numpy(float)
    if statistic == "p90":
        e = stats.percent_diff(c, a, 0.9, paired=True, n_resamples=4000, seed=seed)
        label = "paired p90 difference"
        t = stats.quantile_diff_test(c, a, 0.9, n_resamples=4000, seed=seed)
        pv = None if not math.isfinite(t["p_value"]) else t["p_value"]
        test = ("all pairs equal" if np.array_equal(c, a) else "one pair: no test" if pv is None else
                "paired permutation test of the p90 difference (" + (
                    f"exact; smallest possible p = 2/2^{len(c)} = {t['min_p']:.3g})" if t.get("exact") else
                    "4000 random swaps)"))
    else:
        e = stats.bootstrap_ci(100 * (a / c - 1), "median", n_resamples=4000, seed=seed)
        label = "median per-pair change"
        pv, test = paired_test(c, a)
    lo, hi = (e.low, e.high) if len(p) > 1 else (math.nan, math.nan)
    names = (f"{arm_col} {arm} vs {control}" if isinstance(arm, (bool, np.bool_, int, float))
             else f"{arm} vs {control}")
    return Measurement(e.value, lo, hi, pv, len(p), "%",
                       f"{label} of {metric}, {names}; {test}; "
                       f"control p90 {np.quantile(c, 0.9):.0f}, arm p90 {np.quantile(a, 0.9):.0f}",
                       n_control=len(p), n_arm=len(p), control=tuple(c.tolist()), arm=tuple(a.tolist()),
                       statistic="p90" if statistic == "p90" else "ratio", tie=tie_reason(c, a))


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
# Every judge carries the effect it claims (judge.effect, a power.Effect), for the power that
# evaluate computes before judging; significance is read from m.p (Holm-adjusted when evaluate
# adjusted it). A claim whose pairs are all tied never reaches its judge (registry.verdict_of).

DIRECTION_EFFECT = 5.0  # % : a direction claim's smallest effect of interest, unless it names one


def _interval(m: Measurement) -> tuple[float, float]:
    """The CI, or the value twice where there is none."""
    return (m.low, m.high) if math.isfinite(m.low) else (m.value, m.value)


def p_text(m: Measurement) -> str:
    """"p = 0.031" or "p = 0.031, Holm 0.19"."""
    if m.p_value is None:
        return "no test"
    s = f"p = {m.p_value:.2g}"
    return s + (f", Holm {m.p_holm:.2g}" if m.p_holm is not None and m.p_holm != m.p_value else "")


def not_significant(m: Measurement, effect: Effect | None) -> tuple[str, str]:
    """A result that is not significant: "inconclusive" unless the test had
    POWER_TARGET power to see the claimed effect at this n (at the level it
    is judged by, ALPHA / family), then "disagree"."""
    if m.p_value is None:
        return "inconclusive", f"no test applies (n = {m.n})"
    head = f"not significant ({p_text(m)}, n = {m.n})"
    target = effect.text() if effect else "the claimed effect"
    if m.family > 1:
        target += f" at Holm's alpha / {m.family}"
    if m.power is None:
        return "inconclusive", f"{head}; the power to see {target} is unknown (no pairs to simulate from)"
    if m.power < POWER_TARGET:
        return "inconclusive", f"{head}, with power {m.power:.2f} < {POWER_TARGET:g} to see {target}: underpowered"
    return "disagree", f"{head}, although the test had power {m.power:.2f} to see {target}"


def _nearer_bound(lo: float, hi: float) -> Effect:
    """The claimed range's bound nearer to 0, or its midpoint when that bound is 0."""
    near = lo if abs(lo) <= abs(hi) else hi
    if near == 0:
        return Effect("shift", (lo + hi) / 2, source="the claimed range's midpoint")
    return Effect("shift", near, source="the claimed range's bound nearer 0")


def improvement(lo: float, hi: float, better: str = "lower") -> tuple[Judge, str]:
    """The seed claims a change in [lo, hi] % (lo <= hi; negative = faster for
    times). agree: significant in the claimed direction and the CI overlaps
    the claimed range; partly: significant in the claimed direction, of
    another size; disagree: significant the other way, or not significant
    although powered for the claimed effect; inconclusive: not significant
    and underpowered."""
    sign = -1 if better == "lower" else 1
    effect = _nearer_bound(lo, hi)
    rule = (f"agree if p (Holm) < {ALPHA} in the claimed direction and the 95 % CI overlaps the claimed "
            f"[{lo:g}, {hi:g}] %; partly if significant in the claimed direction but of another size; disagree if "
            f"significant the other way, or not significant although the test had power >= {POWER_TARGET:g} for "
            f"{effect.text()}; inconclusive if not significant with less power")

    def judge(m: Measurement) -> tuple[str, str]:
        low, high = _interval(m)
        overlap = low <= hi and high >= lo
        right_way = sign * m.value > 0
        if m.significant() and not right_way:
            return "disagree", f"significant change the other way ({fmt(m.value, '%')}, {p_text(m)})"
        if m.significant() and overlap:
            return "agree", f"significant ({p_text(m)}), and the CI overlaps the claimed {lo:g}..{hi:g} %"
        if m.significant():
            size = 'smaller' if abs(m.value) < min(abs(lo), abs(hi)) else 'larger'
            return "partly", f"significant in the claimed direction, but {fmt(m.value, '%')} is {size} than claimed"
        return not_significant(m, effect)
    judge.effect = effect
    return judge, rule


def direction(better: str = "lower", what: str = "the arm", effect: float | None = None) -> tuple[Judge, str]:
    """A claim of direction only (better / worse, no size); its power is for
    `effect` % in the claimed direction (DIRECTION_EFFECT unless given)."""
    sign = -1 if better == "lower" else 1
    size = DIRECTION_EFFECT if effect is None else abs(effect)
    eff = Effect("shift", sign * size, source="the smallest effect of interest for a direction claim")
    rule = (f"agree if p (Holm) < {ALPHA} and {what} is {better}; disagree if significant the other way, or not "
            f"significant although the test had power >= {POWER_TARGET:g} for a {size:g} % change; "
            "inconclusive if not significant with less power")

    def judge(m: Measurement) -> tuple[str, str]:
        if m.significant():
            if sign * m.value > 0:
                return "agree", f"significant ({p_text(m)}), in the claimed direction"
            return "disagree", f"significant ({p_text(m)}), the other way"
        return not_significant(m, eff)
    judge.effect = eff
    return judge, rule


def equivalent(margin: float) -> tuple[Judge, str]:
    """A claim of "about the same": within +-margin %. Power: that of the CI
    landing within the margin when there is no change."""
    eff = Effect("equivalence", 0.0, margin, "no change")
    rule = (f"agree if the 95 % CI lies within +-{margin:g} %; disagree if it lies wholly outside, or if the estimate "
            f"does although the test had power >= {POWER_TARGET:g} to show equivalence; partly if the estimate is "
            "within but the CI reaches beyond with that power; inconclusive if the CI reaches beyond with less power")

    def judge(m: Measurement) -> tuple[str, str]:
        low, high = _interval(m)
        if -margin <= low and high <= margin:
            return "agree", f"the whole CI is within +-{margin:g} %"
        if low > margin or high < -margin:
            return "disagree", f"the whole CI is beyond +-{margin:g} % ({fmt(m.value, '%')})"
        if m.power is None or m.power < POWER_TARGET:
            pw = "unknown (no pairs to simulate from)" if m.power is None else f"{m.power:.2f}"
            return "inconclusive", (f"{fmt(m.value, '%')}, the CI reaches beyond +-{margin:g} %; power to show "
                                    f"equivalence with n = {m.n}: {pw}")
        if abs(m.value) <= margin:
            return "partly", f"estimate within +-{margin:g} %, the CI reaches beyond (power {m.power:.2f})"
        return "disagree", f"{fmt(m.value, '%')} is outside +-{margin:g} % (power {m.power:.2f})"
    judge.effect = eff
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

