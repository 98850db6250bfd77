"""Two more tests with the interval that inverts them, for claims that
compare two groups of per-pair figures or read an association
(docs/statistics.md): the Wilcoxon signed-rank test of one sample's centre,
the Mann-Whitney test of a shift between two
independent groups with the Hodges-Lehmann two-sample estimate, and
Spearman's rho with the Fisher z interval of Bonett and Wright. Each
returns an analysis.inference.Inference whose interval excludes 0 exactly
when its p is below alpha. Pure functions of arrays.

References: Hollander, Wolfe and Chicken, Nonparametric Statistical Methods
(3rd ed., 2014), sections 4.2-4.3 (the two-sample Hodges-Lehmann estimate
and the interval from the Mann-Whitney test); Bonett and Wright,
"Sample size requirements for estimating Pearson, Kendall and Spearman
correlations", Psychometrika 65 (2000): var(z) = (1 + rho^2 / 2) / (n - 3)."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as st

from tortoiselab.analysis.inference import Inference


def _mw_p(x: np.ndarray, y: np.ndarray, d: float) -> float:
    """Two-sided Mann-Whitney p of "y - d and x have the same location"."""
    return float(st.mannwhitneyu(y - d, x, alternative="two-sided").pvalue)


def shift_between_groups(x, y, alpha: float = 0.05) -> Inference:
    """The shift of group y against group x (y - x, in their unit): the
    Hodges-Lehmann estimate (the median of every difference y_j - x_i)
    and the set of shifts d the Mann-Whitney test of (x, y - d) does not
    reject at alpha (its p changes only at those differences, so they and
    the midpoints between them are searched); p at d = 0 is the test's p.
    Intervals are not bounded (inf) where no shift is rejected on a side."""
    x = np.asarray(x, float)[np.isfinite(np.asarray(x, float))]
    y = np.asarray(y, float)[np.isfinite(np.asarray(y, float))]
    if x.size < 2 or y.size < 2:
        raise ValueError(f"shift_between_groups: {x.size} and {y.size} values; each group needs 2 or more")
    diffs = np.unique(np.subtract.outer(y, x).ravel())
    est = float(np.median(np.subtract.outer(y, x)))
    p0 = _mw_p(x, y, 0.0)
    cand = np.concatenate([diffs, (diffs[1:] + diffs[:-1]) / 2, [est]])
    kept = np.sort(np.asarray([d for d in cand if _mw_p(x, y, d) >= alpha]))
    spread = max(float(diffs[-1] - diffs[0]), 1e-9)
    low = float(kept[0]) if kept.size else est
    high = float(kept[-1]) if kept.size else est
    if kept.size and _mw_p(x, y, diffs[0] - spread) >= alpha:
        low = -math.inf
    if kept.size and _mw_p(x, y, diffs[-1] + spread) >= alpha:
        high = math.inf
    low, high = _consistent(low, high, p0, alpha)
    n = min(x.size, y.size)
    min_p = float(st.mannwhitneyu(np.arange(n), np.arange(n) + n, alternative="two-sided").pvalue)
    return Inference(est, min(low, est), max(high, est), p0, alpha, min_p, n,
                     f"Mann-Whitney test of the shift between the groups ({x.size} and {y.size} values), "
                     "Hodges-Lehmann estimate with the interval that inverts it", False)


def _wilcoxon_p(x: np.ndarray, d: float) -> float:
    """Two-sided Wilcoxon signed-rank p of "x is centred on d" (1 when every
    value is d)."""
    z = x - d
    if not np.any(z != 0):
        return 1.0
    return float(st.wilcoxon(z).pvalue)


def location(x, alpha: float = 0.05) -> Inference:
    """The centre of one sample x in its unit (e.g. per-pair ratios): the
    Hodges-Lehmann estimate (the median of the Walsh averages) and the set
    of centres d the Wilcoxon signed-rank test of x - d does not reject at
    alpha (its p changes only at Walsh averages: they and the midpoints
    between them are searched); p at d = 0 ("no effect")."""
    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    if x.size < 2:
        raise ValueError(f"location: {x.size} values; needs 2 or more")
    i, j = np.triu_indices(x.size)
    walsh = np.unique((x[i] + x[j]) / 2)
    est = float(np.median((x[i] + x[j]) / 2))
    cand = np.concatenate([walsh, (walsh[1:] + walsh[:-1]) / 2, [est]])
    kept = np.sort(np.asarray([d for d in cand if _wilcoxon_p(x, d) >= alpha]))
    spread = max(float(walsh[-1] - walsh[0]), 1e-9)
    low = float(kept[0]) if kept.size else est
    high = float(kept[-1]) if kept.size else est
    if kept.size and _wilcoxon_p(x, walsh[0] - spread) >= alpha:
        low = -math.inf
    if kept.size and _wilcoxon_p(x, walsh[-1] + spread) >= alpha:
        high = math.inf
    p0 = _wilcoxon_p(x, 0.0)
    low, high = _consistent(low, high, p0, alpha)
    return Inference(est, min(low, est), max(high, est), p0, alpha, float(2.0 / 2 ** x.size), x.size,
                     "Wilcoxon signed-rank test, Hodges-Lehmann estimate with the interval that inverts it", False)


def _consistent(low: float, high: float, p0: float, alpha: float) -> tuple[float, float]:
    """The interval moved, where a search step left it on the wrong side of
    0, so that it excludes 0 exactly when p0 < alpha."""
    holds = low <= 0 <= high
    if p0 < alpha and holds:
        return (low, -1e-12) if abs(low) > abs(high) else (1e-12, high)
    if p0 >= alpha and not holds:
        return (min(low, 0.0), max(high, 0.0))
    return low, high


def spearman(x, y, alpha: float = 0.05) -> Inference:
    """Spearman's rho of x and y with the Fisher z interval of Bonett and
    Wright (z = atanh(rho), standard error sqrt((1 + rho^2 / 2) / (n - 3)))
    and the p of the same normal z test, so that the interval excludes 0
    exactly when p < alpha (the interval and p are on rho's scale; the
    estimate field holds rho, not a log ratio: Inference.pct does not
    apply)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    n = x.size
    if n < 5:
        raise ValueError(f"spearman: {n} pairs; the Fisher z interval needs 5 or more")
    rho = float(st.spearmanr(x, y).statistic)
    if not math.isfinite(rho):
        return Inference(0.0, -1.0, 1.0, 1.0, alpha, 0.0, n, "Spearman's rho: a constant variable, no test", False)
    rho = max(-0.999999, min(0.999999, rho))
    se = math.sqrt((1 + rho ** 2 / 2) / (n - 3))
    z = math.atanh(rho)
    p = float(2 * st.norm.sf(abs(z) / se))
    q = float(st.norm.isf(alpha / 2))
    low, high = math.tanh(z - q * se), math.tanh(z + q * se)
    low, high = _consistent(low, high, p, alpha)
    return Inference(rho, low, high, p, alpha, 0.0, n,
                     "Spearman's rho, Fisher z interval and test (Bonett and Wright 2000)", False)
