"""One effect, one test, one interval: each function here returns a
claim's effect on the natural-log scale (log of an arm/control ratio), the
two-sided p of "no change" from its test, and the interval that inverts
that same test: the hull of the effects d whose test of "the effect is d"
gives p(d) >= alpha. So the interval excludes 0 exactly when p < alpha,
and at alpha = 0.05 / m (Bonferroni over a study's m primary claims) the
intervals are simultaneous (docs/statistics.md).

The tests: paired_location, the Wilcoxon signed-rank test of the per-pair
log ratios with the Hodges-Lehmann estimate (6 or more pairs), or the
exact sign-flip test of their sum below 6; paired_quantile, the paired
permutation test of the p90 ratio; between_groups_quantile, its
two-group form. Pure functions of arrays (numpy, scipy), seeded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import Callable

import numpy as np
from scipy import special
from scipy import stats as st

from tortoiselab.analysis.pairtests import CHUNK_ELEMENTS, EXACT_MAX_PAIRS

WILCOXON_MIN_PAIRS = 6  # below: the exact sign-flip test (Wilcoxon's smallest p 2/2^5 > 0.05)
EXACT_MAX_SPLITS = 5000  # two groups: every split of the pooled values up to this many, else random shuffles
SEARCH_LOG = 10.0  # a quantile test's bounds are searched out to |d| = this beyond the estimate (e^10 ~ 22000x)
GRID_START_LOG = 1e-3  # the first step of that search; each next step 1.5 times the last
TOL_LOG = 1e-7  # a bound found by bisection is within this of where p crosses alpha (on the inside)
MARGIN_LOG = 1e-9  # how far a bound is moved past 0 when it must lie on 0's other side
T_TOL = 1e-10  # |T*| >= |T| - T_TOL counts as "at least as extreme" (the rounding of logs)
RANK_DECIMALS = 10  # log ratios rounded to 1e-10 before ranking: ties in exact arithmetic stay ties


@dataclass(frozen=True)
class Inference:
    """An effect with its test and the interval that inverts that test.
    estimate, low, high: natural-log scale (log of arm/control), low/high
    -inf/+inf where the test cannot bound the effect; p_value: the test's
    two-sided p of effect 0; alpha: the interval's level (the hull of the
    d with p(d) >= alpha); min_p: the smallest p the test can give with n
    (2/2^n exact, 1/(B+1) with B random resamples); test: in words."""

    estimate: float
    low: float
    high: float
    p_value: float
    alpha: float
    min_p: float
    n: int
    test: str
    exact: bool

    def pct(self) -> tuple[float, float, float]:
        """estimate, low, high as % changes 100*(exp(x) - 1): -inf is -100 %."""
        return tuple(float(100 * math.expm1(v)) for v in (self.estimate, self.low, self.high))

    def significant(self) -> bool:
        """The interval excludes 0 (the functions here make this p_value < alpha)."""
        return not (self.low <= 0.0 <= self.high)


def _consistent(estimate: float, low: float, high: float, p: float, alpha: float) -> tuple[float, float, float]:
    """(estimate, low, high) made to agree with the test's p at 0: the
    estimate inside; 0 inside when p >= alpha; when p < alpha and the
    search put 0 inside (a bound within the search tolerance of 0, or a p
    that is not unimodal in d), the bound on 0's far side from the
    estimate moved just past 0."""
    low, high = min(low, estimate), max(high, estimate)
    if not math.isfinite(p):
        return estimate, low, high
    if p >= alpha:
        return estimate, min(low, 0.0), max(high, 0.0)
    if low <= 0.0 <= high:
        above = estimate > 0 or (estimate == 0 and high >= -low)  # estimate 0 has p 1 in these tests
        if above:
            low = min(MARGIN_LOG, estimate) if estimate > 0 else MARGIN_LOG
            estimate, high = max(estimate, low), max(high, low)
        else:
            high = max(-MARGIN_LOG, estimate) if estimate < 0 else -MARGIN_LOG
            estimate, low = min(estimate, high), min(low, high)
    return estimate, low, high


def _no_test(n: int, alpha: float, why: str, estimate: float = math.nan) -> Inference:
    return Inference(estimate, -math.inf, math.inf, math.nan, alpha, math.nan, n, why, False)


def _positive_groups(control, arm) -> tuple[np.ndarray, np.ndarray]:
    """Two independent groups' finite values; ValueError on a value <= 0."""
    c, a = np.asarray(control, float).ravel(), np.asarray(arm, float).ravel()
    c, a = c[np.isfinite(c)], a[np.isfinite(a)]
    if np.any(c <= 0) or np.any(a <= 0):
        raise ValueError("log ratios need positive values")
    return c, a


def _positive_pairs(control, arm) -> tuple[np.ndarray, np.ndarray]:
    """The pairs with both values finite; ValueError on unequal lengths or a value <= 0."""
    c, a = np.asarray(control, float).ravel(), np.asarray(arm, float).ravel()
    if c.shape != a.shape:
        raise ValueError(f"paired: one value per pair on each side ({c.size} vs {a.size})")
    keep = np.isfinite(c) & np.isfinite(a)
    c, a = c[keep], a[keep]
    if np.any(c <= 0) or np.any(a <= 0):
        raise ValueError("log ratios need positive values")
    return c, a


def _level(alpha: float) -> str:
    return f"alpha {alpha:.3g}"


# --- paired location: Wilcoxon signed-rank / sign-flip on log ratios -----------------------


def _signed_rank_exact_p(rows: np.ndarray) -> np.ndarray:
    """Two-sided p of the signed-rank statistic (the sum of the average
    ranks of |x| over the positive x; zeros ranked, Pratt) over all 2^n
    sign patterns: 2 * min(P(T <= t), P(T >= t)), at most 1. What scipy's
    wilcoxon computes by permutation for 13 or fewer values with zeros or
    ties, here for many rows at once."""
    ranks = st.rankdata(np.abs(rows), axis=1)
    ranks[rows == 0] = 0.0
    t = np.sum(ranks * (rows > 0), axis=1)
    null = ranks @ ((_sign_patterns(rows.shape[1]).T + 1) // 2)  # (rows, patterns): the positive ranks' sums
    low = np.mean(null <= (t + 1e-9)[:, None], axis=1)
    high = np.mean(null >= (t - 1e-9)[:, None], axis=1)
    return np.minimum(1.0, 2 * np.minimum(low, high))


def _wilcoxon_p(rows: np.ndarray) -> np.ndarray:
    """Two-sided Wilcoxon signed-rank p of each row, as
    stats.wilcoxon_signed_rank gives it one row at a time (scipy: exact
    without zeros or ties up to 50 values; with them, the exact
    permutation p up to 13 values, Pratt's normal approximation beyond;
    p = 1 when all are zero), on values rounded to RANK_DECIMALS places
    (pairs with the same ratio, or x - d at d = x_i, must tie however
    the logs round; 1e-10 in log is 1e-8 %). Rows of each kind are tested together, since
    scipy picks one method for a whole batch."""
    rows = np.round(np.atleast_2d(rows), RANK_DECIMALS)
    out = np.ones(rows.shape[0])
    s = np.sort(np.abs(rows), axis=1)
    odd = np.any(rows == 0, axis=1) | np.any(np.diff(s, axis=1) == 0, axis=1)
    live = ~np.all(rows == 0, axis=1)
    if np.any(live & ~odd):
        out[live & ~odd] = st.wilcoxon(rows[live & ~odd], axis=1).pvalue
    sel = live & odd
    if sel.any() and rows.shape[1] <= 13:
        out[sel] = _signed_rank_exact_p(rows[sel])
    elif sel.any():
        out[sel] = st.wilcoxon(rows[sel], axis=1, zero_method="pratt", method="asymptotic").pvalue
    return out


def _sign_patterns(n: int) -> np.ndarray:
    return 1 - 2 * ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1)


def _sign_flip_p(rows: np.ndarray) -> np.ndarray:
    """Exact two-sided sign-flip p of each row's sum (as pairtests.sign_flip_test)."""
    rows = np.atleast_2d(rows)
    obs = np.abs(rows.sum(axis=1))
    null = np.abs(rows @ _sign_patterns(rows.shape[1]).T)
    return np.mean(null >= (obs - 1e-12 * np.maximum(1.0, obs))[:, None], axis=1)


def _walsh(x: np.ndarray) -> np.ndarray:
    i, j = np.triu_indices(x.size)
    return (x[i] + x[j]) / 2


def _subset_means(x: np.ndarray) -> np.ndarray:
    masks = ((np.arange(1, 2 ** x.size)[:, None] >> np.arange(x.size)) & 1).astype(float)
    return masks @ x / masks.sum(axis=1)


def _hull_at_breakpoints(x: np.ndarray, breaks: np.ndarray, pfun: Callable, alpha: float) -> tuple[float, float]:
    """The hull of {d : p(x - d) >= alpha} for a test whose statistic
    changes only at the breakpoints: p at each breakpoint, between each
    two neighbours (covering the closed segment between them, as the
    classical Hodges-Lehmann interval, Hollander & Wolfe 1999 sec. 3.3)
    and beyond both ends (unbounded there)."""
    w = np.unique(breaks)
    mids = (w[1:] + w[:-1]) / 2
    reach = max(1.0, float(w[-1] - w[0]))
    d = np.concatenate([w, mids, [w[0] - reach, w[-1] + reach]])
    ok = pfun(x[None, :] - d[:, None]) >= alpha
    starts = np.concatenate([w, w[:-1], [-math.inf, w[-1]]])
    ends = np.concatenate([w, w[1:], [w[0], math.inf]])
    if not ok.any():
        return math.inf, -math.inf  # empty: _consistent puts the estimate in
    return float(starts[ok].min()), float(ends[ok].max())


def paired_location(control, arm, alpha: float = 0.05) -> Inference:
    """The change of a paired location on the per-pair log ratios x = log
    arm - log control. 6 or more pairs: the Wilcoxon signed-rank test, the
    Hodges-Lehmann estimate (the median of the Walsh averages (x_i + x_j) / 2,
    i <= j) and the interval that inverts the test (its p for x - d changes
    only at Walsh averages; Hollander & Wolfe 1999, sec. 3.2-3.3). 2 to 5
    pairs: the exact sign-flip test of the sum, the mean log ratio, inverted
    likewise (breakpoints at the means of subsets); its smallest p is 2/2^n,
    so with 2/2^n >= alpha the interval is -inf..+inf (said in `test`)."""
    c, a = _positive_pairs(control, arm)
    x = np.log(a) - np.log(c)
    n = x.size
    if n < 2:
        return _no_test(n, alpha, "one pair: no test", float(x[0]) if n else math.nan)
    if n >= WILCOXON_MIN_PAIRS:
        pfun, estimate, breaks = _wilcoxon_p, float(np.median(_walsh(x))), _walsh(x)
        min_p = float(_wilcoxon_p(np.arange(1.0, n + 1))[0])
        exact = n <= 50  # scipy's exact null distribution (at 0 without zeros or ties)
        test = (f"Wilcoxon signed-rank test on log ratios, Hodges-Lehmann estimate, interval by inverting the "
                f"test at {_level(alpha)} (n = {n})")
    else:
        pfun, estimate, breaks = _sign_flip_p, float(x.mean()), _subset_means(x)
        min_p, exact = min(1.0, 2.0 / 2 ** n), True
        test = (f"exact sign-flip test of the summed log ratios (n = {n} < {WILCOXON_MIN_PAIRS} for Wilcoxon), mean "
                f"log ratio, interval by inverting the test at {_level(alpha)}; smallest possible p = 2/2^{n} = "
                f"{min_p:.3g}" + (f" >= alpha: the interval is unbounded" if min_p >= alpha else ""))
    p = float(pfun(x[None, :])[0])
    if np.all(x == 0):
        estimate, p = 0.0, 1.0
    low, high = _hull_at_breakpoints(x, breaks, pfun, alpha)
    estimate, low, high = _consistent(estimate, low, high, p, alpha)
    return Inference(estimate, low, high, p, alpha, min_p, n, test, exact)


def paired_location_pvalues(x) -> tuple[np.ndarray, np.ndarray]:
    """paired_location's p and estimate for each row of log ratios x
    (samples, n >= 2): Wilcoxon signed-rank and the Hodges-Lehmann
    estimate with 6 or more pairs, the exact sign-flip test and the mean
    below. A significant row's interval lies on its estimate's side of 0."""
    x = np.atleast_2d(np.asarray(x, float))
    n = x.shape[1]
    if n >= WILCOXON_MIN_PAIRS:
        i, j = np.triu_indices(n)
        return _wilcoxon_p(x), np.median((x[:, i] + x[:, j]) / 2, axis=1)
    return _sign_flip_p(x), x.mean(axis=1)


# --- quantile ratios: permutation tests ----------------------------------------------------


def _log_q_ratio(arm_side: np.ndarray, control_side: np.ndarray, q: float) -> np.ndarray:
    return np.log(np.quantile(arm_side, q, axis=-1)) - np.log(np.quantile(control_side, q, axis=-1))


def swap_masks(n: int, n_resamples: int, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
    """Which pairs to swap (True = swapped), and whether that is every
    pattern: all 2^n of them up to EXACT_MAX_PAIRS pairs, else n_resamples
    random ones."""
    if n <= EXACT_MAX_PAIRS:
        return ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1).astype(bool), True
    return rng.integers(0, 2, size=(n_resamples, n)).astype(bool), False


def _counted_p(obs: np.ndarray, null: np.ndarray, exact: bool, normal_tail: bool) -> np.ndarray:
    """p of |obs| (samples,) against the resampled |null| (samples, B):
    the share at least as extreme (exact: every resample, identity among
    them), (k + 1) / (B + 1) (random), or a normal null's tail of the
    resamples' root mean square (normal_tail, random only)."""
    obs = np.abs(obs)
    if normal_tail and not exact:
        rms = np.sqrt(np.mean(null ** 2, axis=1))
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(rms > 0, obs / rms, np.where(obs > 0, np.inf, 0.0))
        return special.erfc(z / math.sqrt(2))
    hits = np.sum(np.abs(null) >= (obs - T_TOL)[:, None], axis=1)
    return hits / null.shape[1] if exact else (hits + 1) / (null.shape[1] + 1)


def _paired_p(c: np.ndarray, a: np.ndarray, masks: np.ndarray, exact: bool, q: float,
              normal_tail: bool = False) -> np.ndarray:
    """The paired permutation p of log(Q_q(arm) / Q_q(control)) for each
    row of c, a (samples, n), with the given swap patterns."""
    s, n = c.shape
    out = np.empty(s)
    rows = max(1, CHUNK_ELEMENTS // max(n * len(masks), 1))
    for i in range(0, s, rows):
        cc, aa = c[i:i + rows, None, :], a[i:i + rows, None, :]
        null = _log_q_ratio(np.where(masks, cc, aa), np.where(masks, aa, cc), q)
        obs = _log_q_ratio(a[i:i + rows], c[i:i + rows], q)
        out[i:i + rows] = _counted_p(obs, null, exact, normal_tail)
    return out


def paired_quantile_pvalues(control, arm, q: float = 0.9, n_resamples: int = 4000,
                            rng: np.random.Generator | int | None = 0, normal_tail: bool = False) -> np.ndarray:
    """paired_quantile's p for many samples at once (control, arm of shape
    (samples, n), positive): the paired permutation test of log(Q_q(arm) /
    Q_q(control)), exact over every swap pattern up to EXACT_MAX_PAIRS
    pairs, else n_resamples random patterns shared by all samples.
    normal_tail (random patterns only): p from a normal null with the
    patterns' root mean square statistic, for an alpha below what
    n_resamples can resolve (counted, p >= 1 / (n_resamples + 1))."""
    c, a = np.atleast_2d(np.asarray(control, float)), np.atleast_2d(np.asarray(arm, float))
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    masks, exact = swap_masks(c.shape[1], n_resamples, rng)
    return _paired_p(c, a, masks, exact, q, normal_tail)


def _grid_bound(pfun: Callable[[float], float], estimate: float, sign: int, alpha: float) -> float:
    """The outermost d on one side of the estimate (sign +1 above, -1
    below) with p(d) >= alpha: a scan of steps growing 1.5-fold from
    GRID_START_LOG out past SEARCH_LOG, then bisection between the
    outermost accepted step and the next to TOL_LOG (inside); +-inf when
    the last step is accepted. Taking the outermost, not the first
    rejection, gives the hull where p is not unimodal in d."""
    steps = [0.0]
    while steps[-1] <= SEARCH_LOG:
        steps.append(GRID_START_LOG * 1.5 ** (len(steps) - 1))
    ok = [pfun(estimate + sign * s) >= alpha for s in steps]
    last = max(i for i, v in enumerate(ok) if v) if any(ok) else 0
    if last == len(steps) - 1:
        return sign * math.inf
    inside, outside = steps[last], steps[last + 1]
    while outside - inside > TOL_LOG:
        mid = (inside + outside) / 2
        inside, outside = (mid, outside) if pfun(estimate + sign * mid) >= alpha else (inside, mid)
    return estimate + sign * inside


def _inverted(pfun: Callable[[float], float], estimate: float, alpha: float) -> tuple[float, float, float, float]:
    """(estimate, low, high, p at 0) of a test of "the effect is d" given as p(d)."""
    p0 = float(pfun(0.0))
    low, high = _grid_bound(pfun, estimate, -1, alpha), _grid_bound(pfun, estimate, +1, alpha)
    estimate, low, high = _consistent(estimate, low, high, p0, alpha)
    return estimate, low, high, p0


def _resamples_text(exact: bool, count: int, what: str) -> str:
    return f"exact over all {count} {what}" if exact else f"{count} random {what}"


def paired_quantile(control, arm, q: float = 0.9, alpha: float = 0.05, n_resamples: int = 4000,
                    seed: int = 0) -> Inference:
    """The change of the q-quantile, log(Q_q(arm) / Q_q(control)) (numpy's
    default quantile), by the paired permutation test that swaps the two
    runs of any pair (exchangeable under "no change"; Good 2005, ch. 3):
    every one of the 2^n patterns up to EXACT_MAX_PAIRS pairs (p = the
    share at least as extreme, identity included; smallest 2/2^n), else
    n_resamples random ones drawn once (p = (k + 1) / (B + 1)). Interval:
    d is in it iff the same test with the same patterns on (control, arm *
    exp(-d)) gives p >= alpha (a quantile is scale-equivariant, so that is
    the test of "the quantile ratio is exp(d)")."""
    c, a = _positive_pairs(control, arm)
    n = c.size
    if n < 2:
        return _no_test(n, alpha, "one pair: no test")
    masks, exact = swap_masks(n, n_resamples, np.random.default_rng(seed))
    estimate = float(_log_q_ratio(a, c, q))

    def pfun(d: float) -> float:
        return float(_paired_p(c[None, :], a[None, :] * math.exp(-d), masks, exact, q)[0])
    estimate, low, high, p = _inverted(pfun, estimate, alpha)
    min_p = min(1.0, 2.0 / 2 ** n) if exact else 1 / (n_resamples + 1)
    test = (f"paired permutation test of the p{100 * q:g} ratio ({_resamples_text(exact, len(masks), 'swap patterns')}; "
            f"smallest possible p = {min_p:.3g}), interval by inverting the test at {_level(alpha)} (n = {n})")
    return Inference(estimate, low, high, p, alpha, min_p, n, test, exact)


def _splits(n_control: int, n_arm: int, n_resamples: int, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
    """Index rows (B, n_control + n_arm) of the pooled values, the first
    n_control of a row being its control group: every split when there are
    at most EXACT_MAX_SPLITS, else n_resamples random shuffles."""
    total = n_control + n_arm
    if math.comb(total, n_control) <= EXACT_MAX_SPLITS:
        full = np.arange(total)
        rows = [np.concatenate([idx, np.setdiff1d(full, idx)]) for idx in map(list, combinations(full, n_control))]
        return np.asarray(rows, dtype=int), True
    return rng.permuted(np.broadcast_to(np.arange(total), (n_resamples, total)), axis=1), False


def _between_p(c: np.ndarray, a: np.ndarray, splits: np.ndarray, exact: bool, q: float) -> np.ndarray:
    """The two-group permutation p of log(Q_q(arm) / Q_q(control)) for
    each row of c (samples, n_control), a (samples, n_arm), with the given splits."""
    s, k = c.shape[0], c.shape[1]
    out = np.empty(s)
    rows = max(1, CHUNK_ELEMENTS // max(splits.size, 1))
    for i in range(0, s, rows):
        pooled = np.concatenate([c[i:i + rows], a[i:i + rows]], axis=1)
        mixed = np.take_along_axis(pooled[:, None, :], splits[None, :, :], axis=2)
        null = _log_q_ratio(mixed[:, :, k:], mixed[:, :, :k], q)
        out[i:i + rows] = _counted_p(_log_q_ratio(a[i:i + rows], c[i:i + rows], q), null, exact, False)
    return out


def between_groups_quantile_pvalues(control, arm, q: float = 0.9, n_resamples: int = 4000,
                                    rng: np.random.Generator | int | None = 0) -> np.ndarray:
    """between_groups_quantile's p for many samples at once (control
    (samples, n_control), arm (samples, n_arm), positive), the same splits
    for every sample."""
    c, a = np.atleast_2d(np.asarray(control, float)), np.atleast_2d(np.asarray(arm, float))
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    splits, exact = _splits(c.shape[1], a.shape[1], n_resamples, rng)
    return _between_p(c, a, splits, exact, q)


def between_groups_quantile(control, arm, q: float = 0.9, alpha: float = 0.05, n_resamples: int = 4000,
                            seed: int = 0) -> Inference:
    """The change of the q-quantile between two independent groups (sizes
    may differ): the permutation test that reassigns the pooled values to
    the groups (Ernst 2004, sec. 3), every split when there are at most
    EXACT_MAX_SPLITS, else n_resamples random shuffles drawn once; inverted
    as paired_quantile (arm * exp(-d) against the control, same splits)."""
    c, a = _positive_groups(control, arm)
    if c.size < 2 or a.size < 2:
        return _no_test(min(c.size, a.size), alpha, "fewer than 2 values in a group: no test")
    splits, exact = _splits(c.size, a.size, n_resamples, np.random.default_rng(seed))
    estimate = float(_log_q_ratio(a, c, q))

    def pfun(d: float) -> float:
        return float(_between_p(c[None, :], a[None, :] * math.exp(-d), splits, exact, q)[0])
    estimate, low, high, p = _inverted(pfun, estimate, alpha)
    k = (2 if c.size == a.size else 1) / len(splits)
    min_p = k if exact else 1 / (n_resamples + 1)
    test = (f"permutation test of the p{100 * q:g} ratio between two groups "
            f"({_resamples_text(exact, len(splits), 'splits')}; smallest possible p = {min_p:.3g}), interval by "
            f"inverting the test at {_level(alpha)} (n = {c.size} + {a.size})")
    return Inference(estimate, low, high, p, alpha, min_p, c.size + a.size, test, exact)
