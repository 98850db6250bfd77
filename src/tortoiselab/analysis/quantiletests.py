"""The tests of a quantile ratio that every p90 claim is judged by: the
studentized permutation tests (Chung & Romano 2013). The statistic is the
log quantile ratio T = log(Q_q(arm) / Q_q(control)) (numpy's default
quantile, the claims' registered p90) divided by a consistent standard
error of it, recomputed in every permutation:

- paired (`paired_quantile`): the swaps of a pair's two runs (sign flips
  of the pair), every one of the 2^n patterns up to EXACT_MAX_PAIRS pairs,
  else random ones (the argument of Chung & Romano 2013 for the group of
  sign changes);
- two groups (`between_groups_quantile`): the pooled values' splits
  (Chung & Romano 2013, sec. 3, whose example is the median).

Why studentized: where the two runs of a pair are exchangeable (the arm
is the control, scaled) any statistic's permutation test is exact; where
the arms differ in shape but not in their q-quantile, the unstudentized
statistic's permutation distribution has another spread than its
sampling distribution, and the test rejects far more often than alpha
(docs/statistics.md, "On the pilot pairs"). Divided by its standard error
in the data and in every permutation, both distributions tend to N(0, 1),
so the test keeps its size asymptotically, and stays exact when the pairs
are exchangeable.

The standard error, on the log scale (the quantile's influence function,
Serfling 1980 sec. 2.5; Koenker 2005 sec. 3.4): var(T) = [p(1-p)/f_A^2 +
p(1-p)/f_C^2 - 2 (F_AC(q_A, q_C) - p^2) / (f_A f_C)] / n for pairs (the
last term 0 for two independent groups, each over its own n), with p, F_AC
the sample shares below the quantiles (with half a pseudo-pair on each
side, so that pairs all on one side in both arms do not give a variance
of 0), and each density f at its quantile by a Gaussian kernel estimate
on the log values (bandwidth 0.9 sd n^(-1/5), Silverman 1986). A kernel,
not Siddiqui's difference quotient of order statistics: at the p90 of 20
pairs that quotient reaches the sample's maximum (a stall) and put the
se at 1.8 times the statistic's sd on a shape-differing null, whose size
was then 9-11 % at 0.05 (the kernel: 6-7 %). It needs no resampling, so
every permutation gets its own in one vectorised pass. Inverted by scaling, as
analysis.inference's tests: d is in the interval iff the same test on
(control, arm e^-d) gives p >= alpha. Pure functions of arrays, seeded.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from scipy import special

from tortoiselab.analysis.inference import (SEARCH_LOG, T_TOL, Inference, _consistent, _grid_bound, _level, _no_test,
                                            _positive_groups, _positive_pairs, _resamples_text, _splits, swap_masks)
from tortoiselab.analysis.pairtests import CHUNK_ELEMENTS

# the kernel's bandwidth, Silverman's (1986, eq. 3.31) 0.9 sd n^(-1/5) on the log values; not his min(sd, IQR / 1.34):
# where a few stalls sit beyond a tight cluster the IQR's bandwidth puts no density in the gap at the p90 (an se of
# 10^180, china-desktop-cdt's 20 pairs), the sd's spans it
SILVERMAN = 0.9
PSEUDO = 0.5  # the pseudo-pairs' weight on each side (paired_statistic)
TOL_LOG = 1e-6  # a bound is within this of where p crosses alpha, or (TOL_SE) a hundredth of the se if more
TOL_SE = 1e-2  # (the Monte Carlo error of a bound from 4000 random swaps is about 0.07 se at alpha 0.05 / 8)
MAX_STEPS = 60  # bisection steps at most (it takes about 7)
REL_TOL = 1e-5  # single precision keeps about 7 digits: statistics equal in exact arithmetic may differ in the 6th


def _side(x: np.ndarray, q: float):
    """For rows of log values x (..., n): (the log of numpy's q-quantile of
    exp(x), 1 / the density of x there, the indicator x <= that quantile).
    The density: a Gaussian kernel estimate at the quantile with
    bandwidth SILVERMAN sd n^(-1/5); 1 / density is 0 where the row's
    values are all equal (no spread to estimate)."""
    n = x.shape[-1]
    h = q * (n - 1)
    j = int(math.floor(h))
    s = np.sort(x, axis=-1)
    g, top = h - j, s[..., min(j + 1, n - 1)]
    # log((1 - g) e^s_j + g e^s_j+1), from the larger term: no overflow however far apart the two are
    ql = s[..., j] if g == 0 else top + np.log(g + (1 - g) * np.exp(s[..., j] - top))
    sd = s.std(axis=-1)
    bw = SILVERMAN * sd * n ** -0.2
    safe = np.where(bw > 0, bw, 1.0)
    z = (s - ql[..., None]) / safe[..., None]
    with np.errstate(divide="ignore", over="ignore"):
        inv = safe * math.sqrt(2 * math.pi) / np.mean(np.exp(-0.5 * z * z), axis=-1)
    return ql, np.where(bw > 0, inv, 0.0), x <= ql[..., None]


def _studentized(t: np.ndarray, se: np.ndarray) -> np.ndarray:
    """t / se, with 0 / 0 = 0 and t / 0 = +-inf (ties: a spread of 0)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.where(se > 0, t / np.where(se > 0, se, 1.0), np.where(t == 0, 0.0, np.sign(t) * np.inf))


def paired_statistic(u: np.ndarray, v: np.ndarray, q: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
    """(T, se) for rows of log control u and log arm v (..., n), the pairs
    in the same places: T = log Q_q(arm) - log Q_q(control), se its
    standard error from the influence function of the two dependent
    quantiles (the module's formula in sample shares: the variance over
    the pairs of I_i / f_A - J_i / f_C, I and J the indicators below the
    quantiles, over n)."""
    n = u.shape[-1]
    qu, gu, bu = _side(u, q)
    qv, gv, bv = _side(v, q)
    # shares below the quantiles with half a pseudo-pair on each side of each (PSEUDO): never a variance of 0
    # where every pair falls on the same side in both arms, an O(1/n^2) change that leaves the estimate consistent
    w = n + 2 * PSEUDO
    mi, mj = (bv.sum(axis=-1) + PSEUDO) / w, (bu.sum(axis=-1) + PSEUDO) / w
    mij = (bu & bv).sum(axis=-1) / w
    with np.errstate(invalid="ignore", over="ignore"):
        var = mi * gv ** 2 + mj * gu ** 2 - 2 * mij * gv * gu - (mi * gv - mj * gu) ** 2
    # a density of 0 in floating point (a quantile in a gap of a far-shifted permutation): an infinite se
    var = np.where(np.isfinite(gu) & np.isfinite(gv), np.maximum(var, 0.0), np.inf)
    return qv - qu, np.sqrt(var / n)


def groups_statistic(u: np.ndarray, v: np.ndarray, q: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
    """(T, se) for rows of log control u (..., n_c) and log arm v (..., n_a),
    two independent groups: var = sum over the groups of p(1 - p) / (f^2 n)."""
    out_t, var = None, 0.0
    for x in (u, v):
        n = x.shape[-1]
        qx, gx, bx = _side(x, q)
        p = (bx.sum(axis=-1) + PSEUDO) / (n + 2 * PSEUDO)
        with np.errstate(over="ignore"):
            var = var + p * (1 - p) * gx ** 2 / n
        out_t = -qx if out_t is None else out_t + qx
    return out_t, np.sqrt(var)


# --- the permutation nulls ---------------------------------------------------------------------


def _working(u: np.ndarray, v: np.ndarray, exact: bool) -> tuple[np.ndarray, np.ndarray]:
    """u, v moved by their rows' mean log control (T and se do not move)
    and, for random resamples, in single precision: a permutation null
    needs no more than its 6 digits and is computed twice as fast; the
    observed statistic is computed from the same arrays (a double-precision
    one beside single-precision resamples counted none of them as at
    least as extreme where the pairs were nearly identical: p = 1 / (B +
    1) for exchangeable pairs), and a resample counts as at least as
    extreme within REL_TOL of it (_hits). An exact enumeration keeps
    double precision, so that a pattern's mirror (every pair swapped:
    T* = -T, the same se) ties with it exactly."""
    centre = u.mean(axis=-1, keepdims=True)
    dtype = np.float64 if exact else np.float32
    return (u - centre).astype(dtype), (v - centre).astype(dtype)


def _hits(null: np.ndarray, obs, exact: bool) -> np.ndarray:
    """The resamples at least as extreme as obs (per row): |S*| >= |S|
    less T_TOL (double precision), or less REL_TOL |S| (single)."""
    obs = np.asarray(obs, float)
    tol = T_TOL if exact else REL_TOL * np.maximum(1.0, obs)
    return np.sum(null >= (obs - tol)[..., None], axis=-1)


def _paired_null(u: np.ndarray, v: np.ndarray, masks: np.ndarray, q: float,
                 exact: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(|S| per row, |S*| per row and pattern) for rows of log pairs u, v
    (samples, n) and swap patterns (B, n)."""
    s, n = u.shape
    u, v = _working(u, v, exact)
    obs = np.abs(_studentized(*paired_statistic(u, v, q)))
    null = np.empty((s, len(masks)))
    rows = max(1, CHUNK_ELEMENTS // max(n * len(masks), 1))
    for i in range(0, s, rows):
        uu, vv = u[i:i + rows, None, :], v[i:i + rows, None, :]
        null[i:i + rows] = np.abs(_studentized(*paired_statistic(np.where(masks, vv, uu), np.where(masks, uu, vv), q)))
    return obs, null


def _groups_null(u: np.ndarray, v: np.ndarray, splits: np.ndarray, q: float,
                 exact: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(|S|, |S*|) for rows of log groups u (samples, n_c), v (samples, n_a) and splits (B, n_c + n_a)."""
    s, k = u.shape[0], u.shape[1]
    u, v = _working(u, v, exact)
    obs = np.abs(_studentized(*groups_statistic(u, v, q)))
    null = np.empty((s, len(splits)))
    rows = max(1, CHUNK_ELEMENTS // max(splits.size, 1))
    for i in range(0, s, rows):
        pooled = np.concatenate([u[i:i + rows], v[i:i + rows]], axis=1)
        mixed = np.take_along_axis(pooled[:, None, :], splits[None, :, :], axis=2)
        null[i:i + rows] = np.abs(_studentized(*groups_statistic(mixed[:, :, :k], mixed[:, :, k:], q)))
    return obs, null


def _p(obs: np.ndarray, null: np.ndarray, exact: bool, normal_tail: bool = False) -> np.ndarray:
    """The share of resamples at least as extreme (exact: the identity
    among them), (k + 1) / (B + 1) (random), or the normal tail of |S|
    over the resamples' root mean square (normal_tail, random only: for an
    alpha below what B resamples resolve)."""
    if normal_tail and not exact:
        rms = np.sqrt(np.mean(np.where(np.isfinite(null), null, 0.0) ** 2, axis=1))
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(rms > 0, obs / rms, np.where(obs > 0, np.inf, 0.0))
        return special.erfc(z / math.sqrt(2))
    hits = _hits(null, obs, exact)
    return hits / null.shape[1] if exact else (hits + 1) / (null.shape[1] + 1)


def paired_quantile_pvalues(control, arm, q: float = 0.9, n_resamples: int = 4000,
                            rng: np.random.Generator | int | None = 0, normal_tail: bool = False) -> np.ndarray:
    """paired_quantile's p for many samples at once (control, arm of shape
    (samples, n), positive), the same swap patterns for every sample."""
    c, a = np.atleast_2d(np.asarray(control, float)), np.atleast_2d(np.asarray(arm, float))
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    masks, exact = swap_masks(c.shape[1], n_resamples, rng)
    return _p(*_paired_null(np.log(c), np.log(a), masks, q, exact), exact, normal_tail)


def between_groups_quantile_pvalues(control, arm, q: float = 0.9, n_resamples: int = 4000,
                                    rng: np.random.Generator | int | None = 0) -> np.ndarray:
    """between_groups_quantile's p for many samples at once (control
    (samples, n_control), arm (samples, n_arm), positive), the same splits for every sample."""
    c, a = np.atleast_2d(np.asarray(control, float)), np.atleast_2d(np.asarray(arm, float))
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    splits, exact = _splits(c.shape[1], a.shape[1], n_resamples, rng)
    return _p(*_groups_null(np.log(c), np.log(a), splits, q, exact), exact)


# --- inversion -------------------------------------------------------------------------------------


def _needed(alpha: float, count: int, exact: bool) -> int:
    """The hits among the resamples (the identity not counted) that p >= alpha needs."""
    if exact:  # p = (1 + hits) / count
        return math.ceil(alpha * count - 1 - 1e-9)
    return math.ceil(alpha * (count + 1) - 1 - 1e-9)  # p = (hits + 1) / (count + 1)


def _bound(accepts: Callable[[float], bool], estimate: float, se: float, sign: int, pfun: Callable[[float], float],
           alpha: float, z: float) -> float:
    """The bound on one side (sign) of the estimate: the outermost d the
    test accepts before it first rejects, going out from the estimate. A
    bracket about the normal guess estimate +- z se (z the normal
    quantile of alpha: the studentized null is about N(0, 1)), grown or
    shrunk 1.25-fold, then bisection to TOL_LOG or TOL_SE se: about ten
    evaluations, where the scan below takes fifty. Where the test still
    accepts at twice the bound's distance (p not unimodal in d) or se is
    0, the scan and bisection of analysis.inference._grid_bound (the hull)."""
    if not (se > 0 and math.isfinite(se)):
        return _grid_bound(pfun, estimate, sign, alpha)
    at = lambda x: accepts(estimate + sign * x)  # noqa: E731 (x: the distance from the estimate)
    b = z * se
    if at(b):
        a, b = b, 1.25 * b
        while at(b):
            if b > SEARCH_LOG:
                return sign * math.inf
            a, b = b, 1.25 * b
    else:
        a = b / 1.25
        while not at(a):
            b, a = a, a / 1.25
            if a < TOL_LOG:
                return _grid_bound(pfun, estimate, sign, alpha)
    if a > SEARCH_LOG:
        return sign * math.inf
    tol = max(TOL_LOG, TOL_SE * se)
    for _ in range(MAX_STEPS):
        if b - a <= tol:
            break
        mid = (a + b) / 2
        a, b = (mid, b) if at(mid) else (a, mid)
    if at(2 * b):
        return _grid_bound(pfun, estimate, sign, alpha)
    return estimate + sign * a


def _invert(null_at: Callable[[float], tuple[float, np.ndarray]], exact: bool, count: int, estimate: float,
            se: float, alpha: float) -> tuple[float, float, float, float]:
    """(estimate, low, high, p at 0) of a studentized permutation test
    given as null_at(d) -> (|S(d)|, |S*(d)| over the resamples, the
    identity left out when exact; count: the resamples with it)."""
    need = _needed(alpha, count, exact)

    def pfun(d: float) -> float:
        obs, null = null_at(d)
        hits = int(_hits(null, obs, exact))
        return (1 + hits) / count if exact else (hits + 1) / (count + 1)

    def accepts(d: float) -> bool:
        obs, null = null_at(d)
        return need <= 0 or (need <= null.size and int(_hits(null, obs, exact)) >= need)
    if need <= 0:
        low, high = -math.inf, math.inf
    else:
        z = float(special.ndtri(1 - alpha / 2))
        low = _bound(accepts, estimate, se, -1, pfun, alpha, z)
        high = _bound(accepts, estimate, se, +1, pfun, alpha, z)
    p0 = pfun(0.0)
    estimate, low, high = _consistent(estimate, low, high, p0, alpha)
    return estimate, low, high, p0


def paired_quantile(control, arm, q: float = 0.9, alpha: float = 0.05, n_resamples: int = 4000,
                    seed: int = 0) -> Inference:
    """The change of the q-quantile, log(Q_q(arm) / Q_q(control)), by the
    studentized paired permutation test (the module's): the swaps of a
    pair's two runs, every one of the 2^n patterns up to EXACT_MAX_PAIRS
    pairs (p = the share at least as extreme, identity included; smallest
    2/2^n), else n_resamples random ones drawn once (p = (k + 1) / (B +
    1)). Interval: d is in it iff the same test with the same patterns on
    (control, arm e^-d) gives p >= alpha."""
    c, a = _positive_pairs(control, arm)
    n = c.size
    if n < 2:
        return _no_test(n, alpha, "one pair: no test")
    masks, exact = swap_masks(n, n_resamples, np.random.default_rng(seed))
    u, v = np.log(c)[None, :], np.log(a)[None, :]
    t, se = paired_statistic(u, v, q)
    estimate = float(np.log(np.quantile(a, q) / np.quantile(c, q)))
    others = masks[1:] if exact else masks  # exact: row 0 is the identity (no pair swapped)

    def null_at(d: float) -> tuple[float, np.ndarray]:
        obs, null = _paired_null(u, v - d, others, q, exact)
        return float(obs[0]), null[0]
    estimate, low, high, p = _invert(null_at, exact, len(masks), estimate, float(se[0]), alpha)
    min_p = min(1.0, 2.0 / 2 ** n) if exact else 1 / (n_resamples + 1)
    test = (f"studentized paired permutation test of the p{100 * q:g} ratio "
            f"({_resamples_text(exact, len(masks), 'swap patterns')}; smallest possible p = {min_p:.3g}), interval "
            f"by inverting the test at {_level(alpha)} (n = {n})")
    return Inference(estimate, low, high, p, alpha, min_p, n, test, exact)


def between_groups_quantile(control, arm, q: float = 0.9, alpha: float = 0.05, n_resamples: int = 4000,
                            seed: int = 0) -> Inference:
    """The change of the q-quantile between two independent groups (sizes
    may differ) by the studentized two-sample permutation test (Chung &
    Romano 2013): the pooled values' splits, every one when there are at
    most inference.EXACT_MAX_SPLITS, else n_resamples random shuffles drawn
    once; inverted as paired_quantile (arm e^-d against the control, the same splits)."""
    c, a = _positive_groups(control, arm)
    if c.size < 2 or a.size < 2:
        return _no_test(min(c.size, a.size), alpha, "fewer than 2 values in a group: no test")
    splits, exact = _splits(c.size, a.size, n_resamples, np.random.default_rng(seed))
    u, v = np.log(c)[None, :], np.log(a)[None, :]
    t, se = groups_statistic(u, v, q)
    estimate = float(np.log(np.quantile(a, q) / np.quantile(c, q)))
    others = splits[1:] if exact else splits  # exact: row 0 is the identity split (combinations start there)

    def null_at(d: float) -> tuple[float, np.ndarray]:
        obs, null = _groups_null(u, v - d, others, q, exact)
        return float(obs[0]), null[0]
    estimate, low, high, p = _invert(null_at, exact, len(splits), estimate, float(se[0]), alpha)
    k = (2 if c.size == a.size else 1) / len(splits)
    min_p = k if exact else 1 / (n_resamples + 1)
    test = (f"studentized permutation test of the p{100 * q:g} ratio between two groups "
            f"({_resamples_text(exact, len(splits), 'splits')}; smallest possible p = {min_p:.3g}), interval by "
            f"inverting the test at {_level(alpha)} (n = {c.size} + {a.size})")
    return Inference(estimate, low, high, p, alpha, min_p, c.size + a.size, test, exact)
