"""How a claim's number is measured and judged: runs filtered to the ones
that count, arms paired on the same condition and seed, the arm's change
against the control from one test with the interval that inverts it
(Wilcoxon signed-rank with the Hodges-Lehmann estimate for a median
change, the paired permutation test of a p90 ratio, the exact sign-flip
test below 6 pairs; analysis.inference), recomputed at the study family's
level (at_level), and the judges that read a verdict of model.VERDICTS off
that interval alone (read_interval). The rules in words are printed under
each study in REPRODUCTION.md; the tests and the rule: docs/statistics.md
(the labs' questions: labs/README.md)."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd
from scipy import stats as st

from tortoiselab.analysis import inference, quantiletests, rankci, stats
from tortoiselab.spec import cols
from tortoiselab.studies.model import ALPHA, Judge, Measurement, NoData, fmt
from tortoiselab.studies.power import Effect

# --- the runs that count, paired ------------------------------------------------------


# a claim's filter: column (spec/cols.py's names) -> a value, a list of values, or a function of the column
Where = Mapping[str, Any]


def select(df: pd.DataFrame, where: Where | None = None) -> pd.DataFrame:
    """The runs filtered by where (column -> value, a list of values, or a
    function of the column), failed ones included; KeyError naming a key
    that is no column of df (cols.where_column)."""
    d = df
    for col, val in (where or {}).items():
        col = cols.where_column(col, d.columns)
        if isinstance(val, (list, tuple, set)):
            d = d[d[col].isin(list(val))]
        elif callable(val):
            d = d[val(d[col])]
        else:
            d = d[d[col] == val]
    return d


def ok_rows(df: pd.DataFrame, metric: str, where: Where | None = None) -> pd.DataFrame:
    """The ok runs with a value of metric, filtered by where (select)."""
    d = select(df[df[cols.OK].astype(bool)], where)
    return d[d[metric].notna()]


def failed_runs(df: pd.DataFrame, metric: str, arm_col: str, arms: tuple, where: Where | None = None) -> int:
    """The runs of the arms (values of arm_col) in the selection that
    failed or gave no value of metric: they are in no pair, and a claim
    says how many."""
    d = select(df[df[arm_col].isin(list(arms))], where)
    return int((~d[cols.OK].astype(bool) | d[metric].isna()).sum())


# the sweep fields that make up each arm column (left out of the pairing key)
ARM_FIELDS = {"arm": (cols.CC, cols.MODULE_PARAMS), "beta": (cols.MODULE_PARAMS,)}


def pair_key(cond: str, arm_col: str) -> str:
    """A run's sweep point (cond, JSON) without the fields of its arm."""
    fields = ARM_FIELDS.get(arm_col, (arm_col,))
    point = json.loads(cond)
    return json.dumps({k: v for k, v in point.items() if not set(k.split("+")) & set(fields)}, sort_keys=True)


def pairs(df: pd.DataFrame, metric: str, arm_col: str, control, arm, where: Where | None = None) -> pd.DataFrame:
    """control and arm values of `metric` in the runs where selects,
    matched on (the sweep point without the arm's own fields, repetition):
    the same condition and, experiments here being paired, the same seed.
    Column cond is that key."""
    d = ok_rows(df, metric, where).copy()
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


# a measurement's statistic -> what it is; the first three are changes in % (log ratios), the last two
# are in the measurement's own unit
STATISTICS = {"ratio": "the median per-pair change", "p90": "the paired p90 ratio",
              "p90-groups": "the p90 ratio of two groups", "shift-groups": "the shift between two groups",
              "ratio-groups": "the ratio of two groups' median per-pair changes",
              "spearman": "Spearman's rho", "location": "the centre of the arm's values",
              "p90-ratio-groups": "the ratio of two sets' paired p90 ratios"}
IN_PERCENT = ("ratio", "p90", "p90-groups", "ratio-groups", "p90-ratio-groups")
BOOT = 4000  # bootstrap resamples of the p90-ratio-groups reading


def p90_ratio_of_sets(c: np.ndarray, a: np.ndarray, alpha: float = ALPHA, seed: int = 0) -> inference.Inference:
    """Two sets of pairs, each flattened (its controls, then its arms): log
    of set a's paired p90 ratio over set c's; a percentile bootstrap over
    each set's pairs (BOOT resamples): interval = the alpha / 2, 1 - alpha
    / 2 quantiles, p = 2 min(share <= 0, share >= 0), the count deciding."""
    rng = np.random.default_rng(seed)

    (c0, c1), (a0, a1) = (np.split(np.asarray(x, float), 2) for x in (c, a))

    def log_ratio(off, on, idx):
        return np.log(np.quantile(on[idx], 0.9, axis=-1) / np.quantile(off[idx], 0.9, axis=-1))
    est = float(log_ratio(a0, a1, slice(None)) - log_ratio(c0, c1, slice(None)))
    ic, ia = rng.integers(0, len(c0), (BOOT, len(c0))), rng.integers(0, len(a0), (BOOT, len(a0)))
    boot = log_ratio(a0, a1, ia) - log_ratio(c0, c1, ic)
    p = float(min(1.0, 2 * min(np.mean(boot <= 0), np.mean(boot >= 0))))
    p = max(p, 1 / (BOOT + 1))
    low, high = (float(x) for x in np.quantile(boot, [alpha / 2, 1 - alpha / 2]))
    if (p < alpha) == (low <= 0 <= high):  # the quantiles' interpolation against the count: the count decides
        low, high = (min(low, 0.0), max(high, 0.0)) if p >= alpha else (
            (max(low, 1e-12), high) if est > 0 else (low, min(high, -1e-12)))
    return inference.Inference(est, low, high, p, alpha, 1 / (BOOT + 1), min(len(c0), len(a0)),
                               f"percentile bootstrap of the pairs of each set ({BOOT} resamples), "
                               f"interval at alpha {alpha:.3g}", False)


def infer(c: np.ndarray, a: np.ndarray, statistic: str, alpha: float = ALPHA, seed: int = 0):
    """The test of `statistic` on control c and arm a, with its estimate
    and the interval that inverts it at alpha (analysis.inference,
    analysis.rankci): "ratio" = Wilcoxon signed-rank on log ratios with the
    Hodges-Lehmann estimate (the exact sign-flip test below 6 pairs), "p90"
    = the studentized paired permutation test of the p90 ratio
    (analysis.quantiletests), "p90-groups" = the studentized permutation
    test of the p90 ratio of two independent groups,
    "ratio-groups" = the same test of the ratio of their medians (c and a
    per-pair ratios of two sets of pairs: change_of_change),
    "shift-groups" = the Mann-Whitney shift of a against c (two groups),
    "spearman" = Spearman's rho of c and a, "location" = the Wilcoxon
    centre of a alone (c unused), "p90-ratio-groups" = the ratio of two
    sets' paired p90 ratios (c and a each a set's controls then its arms:
    p90_ratio_of_sets) (docs/statistics.md)."""
    if statistic == "p90":
        return quantiletests.paired_quantile(c, a, 0.9, alpha, n_resamples=4000, seed=seed)
    if statistic == "p90-groups":
        return quantiletests.between_groups_quantile(c, a, 0.9, alpha, n_resamples=4000, seed=seed)
    if statistic == "ratio-groups":
        return quantiletests.between_groups_quantile(c, a, 0.5, alpha, n_resamples=4000, seed=seed)
    if statistic == "shift-groups":
        return rankci.shift_between_groups(c, a, alpha)
    if statistic == "spearman":
        return rankci.spearman(c, a, alpha)
    if statistic == "location":
        return rankci.location(a, alpha)
    if statistic == "p90-ratio-groups":
        return p90_ratio_of_sets(c, a, alpha, seed)
    return inference.paired_location(c, a, alpha)


def at_level(m: Measurement, alpha: float, seed: int = 0) -> Measurement:
    """m's value, interval and p recomputed by its own test at alpha (the
    study family's level), for a measurement that carries its pairs (or
    groups); any other is returned with only its level set."""
    if m.statistic not in STATISTICS or len(m.control) < 2 or len(m.arm) < 2:
        return dataclasses.replace(m, level=alpha)
    r = infer(np.asarray(m.control, float), np.asarray(m.arm, float), m.statistic, alpha, seed)
    value, low, high = r.pct() if m.statistic in IN_PERCENT else (r.estimate, r.low, r.high)
    return dataclasses.replace(m, value=value, low=low, high=high, p_value=r.p_value, level=alpha,
                               min_p=r.min_p)


def change(df: pd.DataFrame, metric: str, arm_col: str, control, arm, statistic: str = "ratio",
           seed: int = 0, where: Where | None = None) -> Measurement:
    """The arm against the control, in %, over the runs where selects,
    paired on condition and seed: statistic "p90" = the paired p90 ratio (the seed's statistic,
    for one condition), "ratio" = the Hodges-Lehmann median of per-pair
    changes (pooled over conditions, where p90s of different scales must
    not be mixed). Value, interval and p from one test (infer), at ALPHA
    until the study's family sets its level (at_level). The pairs ride
    along (control, arm, statistic) for power, and tie says when all are
    equal."""
    p = pairs(df, metric, arm_col, control, arm, where)
    failed = failed_runs(df, metric, arm_col, (control, arm), where)
    if p.empty:
        raise NoData(f"no paired runs of {arm} and {control} for {metric}"
                     + (f" ({failed} of their runs failed)" if failed else ""))
    c, a = p["control"].to_numpy(float), p["arm"].to_numpy(float)
    statistic = "p90" if statistic == "p90" else "ratio"
    names = (f"{arm_col} {arm} vs {control}" if isinstance(arm, (bool, np.bool_, int, float))
             else f"{arm} vs {control}")
    if len(p) < 2:
        value = 100 * (float(np.quantile(a, 0.9) / np.quantile(c, 0.9)) - 1)
        return Measurement(value, math.nan, math.nan, None, 1, "%", f"{STATISTICS[statistic]} of {metric}, "
                           f"{names}; one pair: no test", n_control=1, n_arm=1, control=tuple(c.tolist()),
                           arm=tuple(a.tolist()), statistic=statistic, tie=tie_reason(c, a), failed=failed)
    r = infer(c, a, statistic, ALPHA, seed)
    value, low, high = r.pct()
    return Measurement(value, low, high, r.p_value, len(p), "%",
                       f"{STATISTICS[statistic]} of {metric}, {names}; {r.test}; "
                       f"control p90 {np.quantile(c, 0.9):.0f}, arm p90 {np.quantile(a, 0.9):.0f}",
                       n_control=len(p), n_arm=len(p), control=tuple(c.tolist()), arm=tuple(a.tolist()),
                       statistic=statistic, tie=tie_reason(c, a), level=ALPHA, min_p=r.min_p, failed=failed)


def change_of_change(df: pd.DataFrame, metric: str, arm_col: str, control, arm, base: Where, other: Where,
                     seed: int = 0) -> Measurement:
    """How much smaller the arm's gain is in the runs `other` selects than
    in those `base` selects, in %: each set's per-pair ratios arm / control
    (pairs as change makes them) taken as two independent groups, and the
    ratio of their medians, median(other) / median(base) - 1, tested by the
    two-group permutation test inverted for its interval ("ratio-groups").
    Positive = a smaller gain (or a larger loss) in `other`. Per-pair ratios
    because the sets hold paths of different scales, whose p90s must not be
    pooled; each path's own p90 change is in the detail."""
    sets = {name: pairs(df, metric, arm_col, control, arm, where) for name, where in (("base", base),
                                                                                     ("other", other))}
    empty = [name for name, p in sets.items() if p.empty]
    if empty:
        raise NoData(f"no paired runs of {arm} and {control} for {metric} in the {' and '.join(empty)} set")
    c, a = ((sets[n]["arm"] / sets[n]["control"]).to_numpy(float) for n in ("base", "other"))
    both = pd.concat(sets.values())
    r = infer(c, a, "ratio-groups", ALPHA, seed)
    value, low, high = r.pct()
    return Measurement(value, low, high, r.p_value, len(a), "%",
                       f"{STATISTICS['ratio-groups']} of {metric}, {arm} vs {control}: median per-pair change "
                       f"{100 * (np.median(a) - 1):+.1f} % (other) against {100 * (np.median(c) - 1):+.1f} % (base); "
                       f"{r.test}", n_control=len(c), n_arm=len(a), control=tuple(c.tolist()),
                       arm=tuple(a.tolist()), statistic="ratio-groups", level=ALPHA, min_p=r.min_p,
                       n_what="pairs in the smaller set",
                       tie=tie_reason(both["control"].to_numpy(float), both["arm"].to_numpy(float)))


def span(values: Iterable[float], unit: str, detail: str, n_what: str = "runs") -> Measurement:
    """Deterministic runs: the mean, with the range of the runs as its
    interval (no test; exact_repeats: the judges read the range as the
    runs' exact values, read_exact)."""
    v = np.asarray(list(values), float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        raise NoData("no runs with this measurement")
    return Measurement(float(v.mean()), float(v.min()), float(v.max()), None, int(v.size), unit,
                       detail + " (interval: the runs' range; loss-free virtual-clock runs are exact)",
                       exact_repeats=True, n_what=n_what)


def exact_change(p: pd.DataFrame, detail: str) -> Measurement:
    """Loss-free runs on the virtual clock, one pair per condition (copies
    of a repetition counted once): each condition's change is exact, so the
    number is the median of the conditions' changes (in %) and its
    interval their range, with no test (read_exact reads it); the pairs
    ride along for tie_reason."""
    c, a = p["control"].to_numpy(float), p["arm"].to_numpy(float)
    pct = 100 * (a / c - 1)
    each = ", ".join(f"{x:+.2f} %" for x in pct)
    return Measurement(float(np.median(pct)), float(pct.min()), float(pct.max()), None, len(p), "%",
                       detail + "; exact runs (loss-free, virtual clock): the median of the conditions' changes, "
                       f"in brackets their range (no sampling error, no test); per condition: {each}", n_control=len(p), n_arm=len(p),
                       control=tuple(c.tolist()), arm=tuple(a.tolist()), tie=tie_reason(c, a), exact_repeats=True,
                       n_what="conditions")


# --- the verdict rule: each judge returns (judge, its rule in words) ---------------------
# One rule for every claim with a claimed effect, read off the measurement's interval alone (its
# test's inversion at the study family's level: significance and interval cannot disagree). Every
# judge carries the effect it claims (judge.effect, a power.Effect) for the power shown beside the
# label, which decides nothing. Ties and untestable claims never reach a judge (registry.judge_claim).
# Exact runs (loss-free, virtual clock: exact_repeats) are read one way in every study (read_exact):
# their range is the runs' exact values, not an estimate, so it has no "inconclusive".

# % : the effect `tortoise plan` and the power column size a direction claim for (the seed names no size);
# it decides no label: a direction claim is a significant change in the claimed direction (docs/statistics.md)
DIRECTION_EFFECT = 5.0


def interval_of(m: Measurement) -> tuple[float, float]:
    """The interval the label is read from: m's (its test's inversion, or
    the range of exact runs); none (NaN): -inf..inf, for a number without
    an interval shows nothing (e.g. one pair), unless its runs repeat
    exactly (m.exact_repeats: the value itself)."""
    if not (math.isnan(m.low) and math.isnan(m.high)):
        return m.low, m.high
    return (m.value, m.value) if m.exact_repeats else (-math.inf, math.inf)


def _ci(low: float, high: float, unit: str = "%") -> str:
    """"[-9.1, -2.0] %", with -inf / +inf for an unbounded side."""
    def b(x: float) -> str:
        return fmt(x, "") if math.isfinite(x) else ("-inf" if x < 0 else "+inf")
    return f"[{b(low)}, {b(high)}] {unit}"


def read_interval(low: float, high: float, sign: int, claimed: tuple[float, float] | None,
                  interest: float, unit: str = "%") -> tuple[str, str]:
    """The label of an interval [low, high] (% change) for a claim of a
    change on side `sign` (-1: lower, +1: higher) of size `claimed` (lo, hi
    in %, lo <= hi; None: direction only) whose smallest effect of interest
    is `interest` (signed %; 0 for a direction claim, which names no size:
    then an interval that holds 0 is never "disagree"): agree = wholly on
    the claimed side and overlapping the claimed range (any size, for a
    direction claim); larger / smaller than claimed = wholly on the claimed
    side, beyond / short of the range; disagree = wholly on the other side,
    or holding 0 while excluding every claimed effect; inconclusive =
    holding 0 and a claimed effect. unit: the interval's, for the words."""
    ci = _ci(low, high, unit)
    claimed_side = high < 0 if sign < 0 else low > 0
    other_side = low > 0 if sign < 0 else high < 0
    lo, hi = claimed if claimed else ((-math.inf, interest) if sign < 0 else (interest, math.inf))
    overlap = low <= hi and high >= lo
    if claimed_side:
        if claimed is None or overlap:
            return "agree", f"the interval {ci} excludes 0 on the claimed side" + (
                f" and overlaps the claimed {lo:g}..{hi:g} {unit}" if claimed else "")
        beyond = high < lo if sign < 0 else low > hi
        return ("larger than claimed" if beyond else "smaller than claimed",
                f"the interval {ci} excludes 0 on the claimed side but lies "
                f"{'beyond' if beyond else 'short of'} the claimed {lo:g}..{hi:g} {unit}")
    if other_side:
        return "disagree", f"the interval {ci} excludes 0 on the other side: a significant change the other way"
    if overlap:
        if claimed is None and interest == 0:
            return "inconclusive", (f"the interval {ci} holds 0: no significant change on the claimed side (a "
                                    "direction claim names no size to reject)")
        return "inconclusive", f"the interval {ci} holds both 0 and the claimed effect"
    what = f"the claimed {lo:g}..{hi:g} {unit}" if claimed else f"any effect of {interest:+g} {unit} or more"
    return "disagree", f"the interval {ci} holds 0 and excludes {what}: the data reject the claimed size"


EXACT_WHY = "exact runs (loss-free, on the virtual clock: no sampling error, no test)"


def read_exact(low: float, high: float, sign: int, claimed: tuple[float, float] | None,
               unit: str = "%") -> tuple[str, str]:
    """The label of exact runs' range [low, high] (the changes of the
    conditions, each exact) for a claimed change on side `sign` of size
    `claimed` (None: direction only): agree = every condition on the
    claimed side and the range overlapping the claimed range; larger /
    smaller than claimed = every condition on the claimed side, the range
    beside the claimed one; disagree = any condition not on the claimed
    side (no "inconclusive": nothing here is uncertain)."""
    rng = _ci(low, high, unit)
    if (high < 0) if sign < 0 else (low > 0):
        label, why = read_interval(low, high, sign, claimed, 0.0, unit)
        return label, f"{EXACT_WHY}: the range {rng} of the conditions' changes" + why.split(f"{rng}", 1)[1]
    side = "lower" if sign < 0 else "higher"
    return "disagree", (f"{EXACT_WHY}: the range {rng} of the conditions' changes is not wholly {side}: in at "
                        "least one condition the arm is not " + side + " than the control")


def _nearer_bound(lo: float, hi: float) -> Effect:
    """The claimed range's bound nearer to 0, or its midpoint when that bound is 0."""
    near = lo if abs(lo) <= abs(hi) else hi
    if near == 0:
        return Effect("shift", (lo + hi) / 2, source="the claimed range's midpoint")
    return Effect("shift", near, source="the claimed range's bound nearer 0")


def _level_text() -> str:
    return "the interval of the claim's own test at the study's level (ALPHA / m, m = its primary claims with a test)"


def improvement(lo: float, hi: float, better: str = "lower") -> tuple[Judge, str]:
    """The seed claims a change in [lo, hi] % (lo <= hi; negative = faster
    for times), on the side `better` says: read_interval."""
    sign = -1 if better == "lower" else 1
    effect = _nearer_bound(lo, hi)
    rule = (f"read off {_level_text()}: agree if it excludes 0 on the claimed side and overlaps the claimed "
            f"[{lo:g}, {hi:g}] %; larger / smaller than claimed if it excludes 0 on that side beside the range; "
            "disagree if it excludes 0 on the other side, or holds 0 and excludes the claimed range; inconclusive "
            "if it holds both")

    def judge(m: Measurement) -> tuple[str, str]:
        if m.exact_repeats:
            return read_exact(*interval_of(m), sign, (lo, hi), m.unit)
        return read_interval(*interval_of(m), sign, (lo, hi), effect.pct, m.unit)
    judge.effect = effect
    return judge, rule + "; exact runs: their range read as exact values (no inconclusive)"


def direction(better: str = "lower", what: str = "the arm", effect: float | None = None,
              unit: str = "%") -> tuple[Judge, str]:
    """A claim of direction only (better / worse, no size): a significant
    change in the claimed direction. agree = the interval wholly on the
    claimed side; disagree = wholly on the other side; inconclusive = it
    holds 0 (the seed names no size, so no threshold can reject one).
    `effect` (in `unit`, DIRECTION_EFFECT % unless given) is only what the
    power column and `tortoise plan` size the claim for (a change in %;
    other units have no power simulation): it decides no label."""
    sign = -1 if better == "lower" else 1
    size = DIRECTION_EFFECT if effect is None else abs(effect)
    eff = Effect("shift", sign * size, source="the effect the planner sizes a direction claim for")
    rule = (f"read off {_level_text()}: agree if it excludes 0 on the side where {what} is {better}; disagree if "
            "it excludes 0 on the other side; inconclusive if it holds 0 (a direction claim names no size; "
            f"{sign * size:+g} {unit} is only what the power is shown for); exact runs: agree if every condition "
            f"is {better}, disagree otherwise")

    def judge(m: Measurement) -> tuple[str, str]:
        if m.exact_repeats:
            return read_exact(*interval_of(m), sign, None, m.unit)
        return read_interval(*interval_of(m), sign, None, 0.0, m.unit)
    judge.interest = (sign * size, unit)  # the effect sized for, in its unit (bench/stats_check.py reads it)
    if unit == "%":
        judge.effect = eff
    return judge, rule


def equivalent(margin: float) -> tuple[Judge, str]:
    """A claim of "about the same": within +-margin %. agree = the interval
    within the margin; disagree = the interval wholly beyond it;
    inconclusive = reaching beyond. Power: that of the interval landing
    within the margin when there is no change."""
    eff = Effect("equivalence", 0.0, margin, "no change")
    rule = (f"read off {_level_text()}: agree if it lies within +-{margin:g} %; disagree if it lies wholly beyond; "
            "inconclusive if it reaches beyond")

    def judge(m: Measurement) -> tuple[str, str]:
        low, high = interval_of(m)
        ci = _ci(low, high, m.unit)
        if -margin <= low and high <= margin:
            return "agree", f"the interval {ci} is within +-{margin:g} %"
        if low > margin or high < -margin:
            return "disagree", f"the interval {ci} lies wholly beyond +-{margin:g} %"
        if m.exact_repeats:
            return "disagree", f"{EXACT_WHY}: the range {ci} of the conditions' changes reaches beyond +-{margin:g} %"
        return "inconclusive", f"the interval {ci} reaches beyond +-{margin:g} %"
    judge.effect = eff
    return judge, rule


def exact(target: float, tol: float, unit: str) -> tuple[Judge, str]:
    """A count or size the seed states, on exact runs: agree if every run
    gives it (within tol); disagree otherwise, with the reason: a count has
    no 0 side to be "smaller" or "larger than claimed" against (those
    labels are for a claimed change beside its range), and exact runs have
    no sampling error to be inconclusive about."""
    rule = (f"agree if every run gives {target:g} {unit} (within {tol:g}); disagree if any run gives another count "
            "(exact runs: no sampling error; a count has no 0 side, so no larger / smaller than claimed)")

    def judge(m: Measurement) -> tuple[str, str]:
        low, high = interval_of(m)
        rng = f"range {fmt(low, '')}..{fmt(high, '')} {unit}"
        if abs(low - target) <= tol and abs(high - target) <= tol:
            return "agree", f"{fmt(m.value, unit)} ({rng}) against the seed's {target:g} +- {tol:g} {unit}"
        return "disagree", (f"{fmt(m.value, unit)} ({rng} over {m.n} {m.n_what}) against the seed's {target:g} +- "
                            f"{tol:g} {unit}: {EXACT_WHY}, so a count outside the claimed range refutes it")
    return judge, rule


def per_part(judges: Mapping[str, tuple[Judge, str]], what: str, figures: str) -> tuple[Judge, str]:
    """The judge of one seed sentence that names several figures (e.g.
    "8 % in India, 4 % in U.S, and 5 % in Germany"), read as one composite
    row whose parts are named as the keys of `judges`: each part judged by
    its own figure's judge (registry.part_judge), the row decided by its
    parts (registry.deciding); figures: each part's figure, in words. Its
    effect, for a caller that asks the row rather than a part, is the
    first part's."""
    def judge(m: Measurement) -> tuple[str, str]:
        if m.part not in judges:
            raise KeyError(f"per_part: no judge for part {m.part!r} of {what}; the parts are {', '.join(judges)}")
        return judges[m.part][0](m)
    judge.parts = {name: j for name, (j, _) in judges.items()}
    first = next(iter(judges.values()))[0]
    if getattr(first, "effect", None) is not None:
        judge.effect = first.effect
    rule = (f"{what}: every part must hold, each read by the rule below against its own figure ({figures}); the "
            "row takes the first label a part has of disagree, not testable here, inconclusive, smaller than "
            "claimed, agree, larger than claimed; each part: " + next(iter(judges.values()))[1])
    return judge, rule
