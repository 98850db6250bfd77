"""Which arm is better, and how sure we are: quantiles with bootstrap
confidence intervals, percent differences of p90 and of the median between
two arms, rank tests and effect sizes, Holm's correction; the exact
sign-flip test for few pairs and the paired permutation test of a quantile
difference come from analysis.pairtests.

Pure functions of arrays and DataFrames (numpy, scipy.stats, pandas); the
bootstrap intervals are scipy.stats.bootstrap's percentile intervals (the
numbers the hand-written resampling before it gave, to the last digit, on
every sample compared: issue 40); every random draw comes from a seeded
generator, so the same data and seed give the same numbers.

Paired or not is always explicit. Runs are *paired* when the two arms share
their random draws per repetition (an experiment with ``paired: true`` gives
every arm the same seed for a repetition): then the run of arm A and the run of
arm B with the same seed saw the same loss pattern, and the test works on
their differences (Wilcoxon signed-rank; bootstrap resamples pairs). Otherwise
the arms are independent samples (Mann-Whitney U; bootstrap resamples each
arm on its own).

Conventions: ``diff_pct = 100 * (stat(arm) - stat(control)) / stat(control)``,
so a negative p90 difference of page-load times means the arm is faster.
Effect sizes are signed the same way: positive when the arm's values tend to
be larger than the control's.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats as st

from tortoiselab.analysis.pairtests import CHUNK_ELEMENTS, quantile_diff_pvalues, quantile_diff_test, sign_flip_test

DEFAULT_RESAMPLES = 10_000
DEFAULT_CONFIDENCE = 0.95


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its percentile-bootstrap confidence interval."""

    value: float
    low: float
    high: float
    n: int
    confidence: float = DEFAULT_CONFIDENCE

    def covers(self, x: float) -> bool:
        return self.low <= x <= self.high

    def as_dict(self) -> dict:
        return asdict(self)


def _clean(x: Sequence[float] | np.ndarray | pd.Series) -> np.ndarray:
    a = np.asarray(x, dtype=float).ravel()
    return a[np.isfinite(a)]


def _rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _interval(boot: np.ndarray, confidence: float) -> tuple[float, float]:
    boot = boot[np.isfinite(boot)]
    if boot.size == 0:
        return math.nan, math.nan
    a = (1 - confidence) / 2
    lo, hi = np.quantile(boot, [a, 1 - a])
    return float(lo), float(hi)


def bootstrap_ci(x, statistic: str | float = "median", n_resamples: int = DEFAULT_RESAMPLES,
                 confidence: float = DEFAULT_CONFIDENCE, seed: int | np.random.Generator | None = 0) -> Estimate:
    """A statistic of one sample with its percentile-bootstrap CI.

    statistic: "mean", "median", "p50", "p90", ... or a quantile in (0, 1).
    NaNs are dropped first; an empty sample gives NaNs, a single value a
    zero-width interval."""
    a = _clean(x)
    q = _as_quantile(statistic)
    if a.size == 0:
        return Estimate(math.nan, math.nan, math.nan, 0, confidence)
    value = float(a.mean()) if q is None else float(np.quantile(a, q))
    if a.size == 1:
        return Estimate(value, value, value, 1, confidence)
    if np.all(a == a[0]):  # every resample is the one value (scipy's bootstrap refuses a degenerate sample)
        return Estimate(value, value, value, int(a.size), confidence)

    def stat(sample: np.ndarray, axis: int) -> np.ndarray:
        return sample.mean(axis=axis) if q is None else np.quantile(sample, q, axis=axis)

    # scipy's percentile bootstrap, in batches of about CHUNK_ELEMENTS values (memory bound for large samples)
    res = st.bootstrap((a,), stat, n_resamples=n_resamples, confidence_level=confidence,
                                method="percentile", vectorized=True, random_state=_rng(seed),
                                batch=max(1, CHUNK_ELEMENTS // a.size))
    return Estimate(value, float(res.confidence_interval.low), float(res.confidence_interval.high), int(a.size),
                    confidence)


def _as_quantile(statistic: str | float) -> float | None:
    """None for the mean, else the quantile in [0, 1]."""
    if isinstance(statistic, (int, float)) and not isinstance(statistic, bool):
        if not 0 <= statistic <= 1:
            raise ValueError(f"quantile {statistic}: give a value in [0, 1]")
        return float(statistic)
    s = str(statistic).lower()
    if s == "mean":
        return None
    if s == "median":
        return 0.5
    if s.startswith("p") and s[1:].replace(".", "", 1).isdigit():
        v = float(s[1:]) / 100
        if 0 <= v <= 1:
            return v
    raise ValueError(f"statistic {statistic!r}: write mean, median, p50, p90, ... or a quantile in [0, 1]")


def summarize(df: pd.DataFrame, metric: str, by: str | Sequence[str] | None = None,
              n_resamples: int = DEFAULT_RESAMPLES, confidence: float = DEFAULT_CONFIDENCE,
              seed: int = 0) -> pd.DataFrame:
    """Per group: n, and p50, p90 and mean each with a bootstrap CI
    (columns p50, p50_low, p50_high, p90, ..., mean_high). NaN values of
    the metric are not counted. Groups keep their order of appearance."""
    keys = [by] if isinstance(by, str) else list(by or [])
    groups = df.groupby(keys, sort=False, dropna=False) if keys else [((), df)]
    rows = []
    for i, (key, g) in enumerate(groups):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(keys, key))
        vals = _clean(g[metric])
        row["n"] = int(vals.size)
        for j, name in enumerate(("p50", "p90", "mean")):
            # a separate, fixed stream per group and statistic: adding a group
            # does not change the others' intervals
            e = bootstrap_ci(vals, name, n_resamples, confidence, np.random.default_rng([seed, i, j]))
            row.update({name: e.value, f"{name}_low": e.low, f"{name}_high": e.high})
        rows.append(row)
    cols = [*keys, "n", *(f"{s}{x}" for s in ("p50", "p90", "mean") for x in ("", "_low", "_high"))]
    return pd.DataFrame(rows, columns=cols)


def percent_diff(control, arm, statistic: str | float = "p90", paired: bool = False,
                 n_resamples: int = DEFAULT_RESAMPLES, confidence: float = DEFAULT_CONFIDENCE,
                 seed: int | np.random.Generator | None = 0) -> Estimate:
    """100 * (stat(arm) - stat(control)) / stat(control) with a bootstrap CI.

    Unpaired: each arm is resampled on its own. Paired: control[i] and arm[i]
    are a pair; pairs are resampled together (both arrays must be the same
    length; a pair with a NaN on either side is dropped). n of the result is
    the number of pairs, or the smaller of the two arms' sizes unpaired."""
    q = _as_quantile(statistic)

    def stat_axis(sample: np.ndarray, axis: int) -> np.ndarray:
        return sample.mean(axis=axis) if q is None else np.quantile(sample, q, axis=axis)

    def stat(rows: np.ndarray) -> np.ndarray:
        return stat_axis(rows, 1)

    if paired:
        c, a = np.asarray(control, dtype=float).ravel(), np.asarray(arm, dtype=float).ravel()
        if c.size != a.size:
            raise ValueError(f"paired: the arms must have one value per pair ({c.size} vs {a.size})")
        keep = np.isfinite(c) & np.isfinite(a)
        c, a = c[keep], a[keep]
    else:
        c, a = _clean(control), _clean(arm)
    n = int(min(c.size, a.size))
    if c.size == 0 or a.size == 0:
        return Estimate(math.nan, math.nan, math.nan, n, confidence)

    def pct(sc: np.ndarray, sa: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return 100.0 * (sa - sc) / sc

    value = float(pct(stat(c[None, :]), stat(a[None, :]))[0])
    if min(c.size, a.size) < 2 or (np.all(c == c[0]) and np.all(a == a[0])):  # nothing to resample
        return Estimate(value if math.isfinite(value) else math.nan, value, value, n, confidence)
    # scipy's bootstrap (pairs resampled together, or each arm on its own); the interval from its
    # distribution without the resamples whose control statistic is 0 (no percentage: _interval)
    with np.errstate(invalid="ignore"):  # its standard error of a distribution holding inf
        res = st.bootstrap((c, a), lambda sc, sa, axis: pct(stat_axis(sc, axis), stat_axis(sa, axis)),
                           paired=paired, vectorized=True, n_resamples=n_resamples, method="percentile",
                           random_state=_rng(seed), batch=max(1, CHUNK_ELEMENTS // max(c.size, a.size)))
    lo, hi = _interval(np.asarray(res.bootstrap_distribution), confidence)
    return Estimate(value if math.isfinite(value) else math.nan, lo, hi, n, confidence)


# --- pairing -----------------------------------------------------------------


@dataclass
class Pairing:
    """Two arms' values matched by a key (e.g. the seed, shared by the arms
    of a paired experiment per repetition)."""

    key: str
    keys: list = field(default_factory=list)
    control: np.ndarray = field(default_factory=lambda: np.empty(0))
    arm: np.ndarray = field(default_factory=lambda: np.empty(0))
    dropped_control: int = 0  # control rows without a partner (or with NaN, or a repeated key)
    dropped_arm: int = 0

    @property
    def n_pairs(self) -> int:
        return len(self.keys)

    def describe(self) -> str:
        s = f"{self.n_pairs} pairs by {self.key}"
        if self.dropped_control or self.dropped_arm:
            s += f"; dropped {self.dropped_control} control and {self.dropped_arm} arm rows without a partner"
        return s


def pair_rows(df: pd.DataFrame, metric: str, arm_col: str, control, arm, key: str) -> Pairing:
    """Match the rows of arm `control` and of arm `arm` that share `key`.

    Rows whose metric is NaN cannot be paired; a key that appears more than
    once in one arm is ambiguous and its rows are dropped too. Both counts are
    reported, so nothing disappears silently. Pairs are in key order."""
    def side(value) -> tuple[pd.Series, int]:
        g = df.loc[df[arm_col] == value, [key, metric]]
        total = len(g)
        g = g[np.isfinite(pd.to_numeric(g[metric], errors="coerce").astype(float))]
        dup = g[key].duplicated(keep=False)
        g = g[~dup]
        return pd.Series(g[metric].astype(float).values, index=g[key].values), total

    c, nc = side(control)
    a, na = side(arm)
    common = sorted(set(c.index) & set(a.index), key=lambda k: (str(type(k)), k))
    return Pairing(key=key, keys=list(common), control=c.loc[common].to_numpy(dtype=float),
                   arm=a.loc[common].to_numpy(dtype=float),
                   dropped_control=nc - len(common), dropped_arm=na - len(common))


# --- tests and effect sizes --------------------------------------------------


def mann_whitney(control, arm) -> dict:
    """Two-sided Mann-Whitney U of two independent samples (scipy picks the
    exact distribution for small samples without ties)."""
    c, a = _clean(control), _clean(arm)
    if c.size == 0 or a.size == 0:
        return {"test": "mann-whitney", "statistic": math.nan, "p_value": math.nan}
    r = st.mannwhitneyu(a, c, alternative="two-sided")
    return {"test": "mann-whitney", "statistic": float(r.statistic), "p_value": float(r.pvalue)}


def wilcoxon_signed_rank(control, arm) -> dict:
    """Two-sided Wilcoxon signed-rank of the pairs' differences arm - control.
    Pairs with zero difference carry no sign (Pratt's handling keeps them in
    the ranking); all differences zero gives p = 1."""
    c, a = np.asarray(control, dtype=float).ravel(), np.asarray(arm, dtype=float).ravel()
    if c.size != a.size:
        raise ValueError(f"paired: one value per pair on each side ({c.size} vs {a.size})")
    keep = np.isfinite(c) & np.isfinite(a)
    d = a[keep] - c[keep]
    if d.size == 0:
        return {"test": "wilcoxon", "statistic": math.nan, "p_value": math.nan}
    if np.all(d == 0):
        return {"test": "wilcoxon", "statistic": 0.0, "p_value": 1.0}
    r = st.wilcoxon(d, zero_method="pratt" if np.any(d == 0) else "wilcox", alternative="two-sided")
    return {"test": "wilcoxon", "statistic": float(r.statistic), "p_value": float(r.pvalue)}


def cliffs_delta(control, arm) -> float:
    """Cliff's delta = P(arm > control) - P(arm < control) over all
    cross-pairs; in [-1, 1], 0 when neither arm tends to be larger."""
    c, a = _clean(control), _clean(arm)
    if c.size == 0 or a.size == 0:
        return math.nan
    # rank-based and O((n+m) log(n+m)): delta = 2U/(nm) - 1
    u = st.mannwhitneyu(a, c, alternative="two-sided", method="asymptotic").statistic
    return float(2 * u / (a.size * c.size) - 1)


def rank_biserial_paired(control, arm) -> float:
    """Matched-pairs rank-biserial correlation of the differences
    d = arm - control: (sum of ranks of |d| with d > 0 minus those with
    d < 0) / sum of all ranks, zero differences left out. In [-1, 1]; +1
    when every arm value exceeds its partner."""
    c, a = np.asarray(control, dtype=float).ravel(), np.asarray(arm, dtype=float).ravel()
    keep = np.isfinite(c) & np.isfinite(a)
    d = a[keep] - c[keep]
    d = d[d != 0]
    if d.size == 0:
        return 0.0 if keep.any() else math.nan
    r = st.rankdata(np.abs(d))
    return float((r[d > 0].sum() - r[d < 0].sum()) / r.sum())


def magnitude(delta: float) -> str:
    """Romano et al.'s (2006) labels for |Cliff's delta| (used for the
    rank-biserial r too): negligible < 0.147 <= small < 0.33 <= medium < 0.474 <= large."""
    if delta is None or not math.isfinite(delta):
        return ""
    d = abs(delta)
    return "negligible" if d < 0.147 else "small" if d < 0.33 else "medium" if d < 0.474 else "large"


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (same order as given). Reject the
    hypotheses whose adjusted p is below alpha: this controls the
    family-wise error rate at alpha. NaNs stay NaN and are not counted."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, math.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = ok.size
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    adj = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out[order] = np.minimum(adj, 1.0)
    return out


def holm_note(m: int, alpha: float = 0.05) -> str:
    if m <= 1:
        return "one comparison: no multiple-comparison correction needed"
    return (f"{m} comparisons: p_holm is Holm-adjusted over all of them (family-wise error rate {alpha:g}); "
            f"judge significance by p_holm, not p_value")


def min_p_value(n_control: int, n_arm: int, paired: bool) -> float:
    """The smallest two-sided p the exact test can give at these sizes: with
    tiny samples no difference can be significant, however large."""
    if paired:
        n = min(n_control, n_arm)
        return min(1.0, 2.0 / 2 ** n) if n else math.nan
    if n_control == 0 or n_arm == 0:
        return math.nan
    return min(1.0, 2.0 / math.comb(n_control + n_arm, n_control))


def unpaired_quantile_p(control, arm, q: float = 0.9, n_resamples: int = DEFAULT_RESAMPLES,
                        seed: int | np.random.Generator | None = 0) -> float:
    """Two-sided permutation test of quantile(arm) - quantile(control) for
    independent samples: the arm labels shuffled n_resamples times, p =
    (k + 1) / (n_resamples + 1) with k the shuffles whose |difference| is
    at least the observed one."""
    c, a = _clean(control), _clean(arm)
    if c.size < 2 or a.size < 2:
        return math.nan
    rng = _rng(seed)
    both = np.concatenate([c, a])
    perm = rng.permuted(np.broadcast_to(both, (n_resamples, both.size)), axis=1)
    diff = np.quantile(perm[:, c.size:], q, axis=1) - np.quantile(perm[:, :c.size], q, axis=1)
    obs = abs(np.quantile(a, q) - np.quantile(c, q))
    return float((np.sum(np.abs(diff) >= obs * (1 - 1e-12)) + 1) / (n_resamples + 1))


# --- the comparison table ----------------------------------------------------

COMPARE_COLUMNS = [
    "metric", "arm_col", "control", "arm", "paired", "pair_key", "n_control", "n_arm", "n_pairs", "dropped",
    "p50_control", "p50_arm", "p90_control", "p90_arm",
    "median_diff_pct", "median_diff_low", "median_diff_high", "p90_diff_pct", "p90_diff_low", "p90_diff_high",
    "test", "statistic", "p_value", "p_holm", "significant", "effect", "effect_size", "effect_magnitude",
    "min_p", "p90_test", "p90_p_value", "p90_p_holm", "note",
]


def compare(df: pd.DataFrame, metric: str, arm_col: str, control, paired_key: str | None = None,
            n_resamples: int = DEFAULT_RESAMPLES, confidence: float = DEFAULT_CONFIDENCE, seed: int = 0,
            alpha: float = 0.05, arms: Sequence | None = None) -> pd.DataFrame:
    """One row per arm (every other value of arm_col, in order of
    appearance, or `arms`) against `control`.

    paired_key None: unpaired (Mann-Whitney U, Cliff's delta, each arm
    bootstrapped on its own). paired_key given (e.g. "seed" or
    "repetition"): the arms' rows are matched on it (pair_rows), and the
    test is Wilcoxon signed-rank with the matched-pairs rank-biserial r,
    bootstrapping pairs. Column `paired` says which; `n_pairs` and `dropped`
    say how many pairs were found and how many rows had no partner.

    The p90 difference has a test of its own, made for a quantile (p90_p_value:
    a permutation test of the p90 difference, arm and control swapped within
    pairs when paired, labels shuffled when not: quantile_diff_test /
    unpaired_quantile_p; p_value's rank test is for the
    median's and the whole distribution's shift). p_holm and p90_p_holm are
    Holm-adjusted over the rows of this table; `significant` is p_holm <
    alpha; out.attrs["multiple_comparisons"] says so in words. `note`
    explains what limits a row (pairing, few runs)."""
    if metric not in df.columns or arm_col not in df.columns:
        raise KeyError(f"compare: columns {metric!r} and {arm_col!r} must be in the table")
    values = list(dict.fromkeys(df[arm_col].tolist()))
    if control not in values:
        raise ValueError(f"compare: control {control!r} is not a value of {arm_col} ({values})")
    arms = [a for a in (arms if arms is not None else values) if a != control]
    ctrl_vals = _clean(pd.to_numeric(df.loc[df[arm_col] == control, metric], errors="coerce"))
    rows = []
    for i, arm in enumerate(arms):
        rng = np.random.default_rng([seed, i])
        arm_vals = _clean(pd.to_numeric(df.loc[df[arm_col] == arm, metric], errors="coerce"))
        row = {"metric": metric, "arm_col": arm_col, "control": control, "arm": arm,
               "paired": paired_key is not None, "pair_key": paired_key, "n_control": int(ctrl_vals.size),
               "n_arm": int(arm_vals.size)}
        notes = []
        if paired_key is not None:
            pr = pair_rows(df, metric, arm_col, control, arm, paired_key)
            c, a = pr.control, pr.arm
            row["n_pairs"], row["dropped"] = pr.n_pairs, pr.dropped_control + pr.dropped_arm
            notes.append(pr.describe())
            test = wilcoxon_signed_rank(c, a)
            row["effect"], row["effect_size"] = "rank-biserial (paired)", rank_biserial_paired(c, a)
        else:
            c, a = ctrl_vals, arm_vals
            row["n_pairs"], row["dropped"] = None, 0
            notes.append("unpaired: arms are independent samples")
            test = mann_whitney(c, a)
            row["effect"], row["effect_size"] = "Cliff's delta", cliffs_delta(c, a)
        row["effect_magnitude"] = magnitude(row["effect_size"])
        row["p50_control"] = float(np.median(c)) if len(c) else math.nan
        row["p50_arm"] = float(np.median(a)) if len(a) else math.nan
        row["p90_control"] = float(np.quantile(c, 0.9)) if len(c) else math.nan
        row["p90_arm"] = float(np.quantile(a, 0.9)) if len(a) else math.nan
        for name, q in (("median", 0.5), ("p90", 0.9)):
            e = percent_diff(c, a, q, paired=paired_key is not None, n_resamples=n_resamples,
                             confidence=confidence, seed=rng)
            row.update({f"{name}_diff_pct": e.value, f"{name}_diff_low": e.low, f"{name}_diff_high": e.high})
        row.update(test)
        if paired_key is not None:
            row["p90_test"], row["p90_p_value"] = "paired permutation", quantile_diff_test(c, a, 0.9, n_resamples,
                                                                                         rng)["p_value"]
        else:
            row["p90_test"], row["p90_p_value"] = "permutation", unpaired_quantile_p(c, a, 0.9, n_resamples, rng)
        nc, na = len(c), len(a)
        row["min_p"] = min_p_value(nc, na, paired_key is not None)
        if math.isfinite(row["min_p"]) and row["min_p"] >= alpha:
            notes.append(f"too few runs for significance at {alpha:g}: the smallest possible p is {row['min_p']:.3g}")
        if min(nc, na) < 10:
            notes.append("bootstrap CIs from fewer than 10 values per arm are rough")
        row["note"] = "; ".join(notes)
        rows.append(row)
    out = pd.DataFrame(rows, columns=COMPARE_COLUMNS)
    if len(out):
        out["p_holm"] = holm(out["p_value"].to_numpy(dtype=float))
        out["p90_p_holm"] = holm(out["p90_p_value"].to_numpy(dtype=float))
        out["significant"] = out["p_holm"] < alpha
    out.attrs["multiple_comparisons"] = holm_note(len(out), alpha)
    return out
