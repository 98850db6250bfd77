"""Paired tests for what a rank test does not fit: the exact sign-flip
permutation test for a few pairs (whose p can never be below 2/2^n, so a
handful of pairs never gives p = 0) and the paired permutation test of a
quantile difference (a p90 is a quantile, not a location). Pure functions
of arrays, seeded; analysis.stats re-exports them, and the studies' claims
use them (studies/measure.py)."""

from __future__ import annotations

import math

import numpy as np
import scipy.stats

CHUNK_ELEMENTS = 4_000_000  # bootstrap resamples are drawn in blocks of about this many values


def sign_flip_test(d) -> dict:
    """Exact two-sided sign-flip permutation test of paired differences d
    (e.g. per-pair log ratios): under "no change" every pair's sign is a
    fair coin, so the p-value is the share of the 2^n sign patterns whose
    |sum| is at least the observed one. With n pairs the smallest p is
    2/2^n (the data and its mirror image), so it can never be 0; all
    differences 0 gives p = 1. For the few pairs where a Wilcoxon test is
    not used (n up to 20: 2^20 patterns)."""
    x = np.asarray(d, dtype=float).ravel()
    x = x[np.isfinite(x)]
    n = x.size
    if n == 0:
        return {"test": "sign-flip", "statistic": math.nan, "p_value": math.nan, "min_p": math.nan}
    if n > 20:
        raise ValueError(f"sign_flip_test: {n} pairs; the exact test enumerates 2^n patterns (n <= 20)")
    if n == 1:  # the data and its mirror image: p = 1 (scipy takes two values or more)
        p = 1.0
    else:  # scipy's exact test over all 2^n sign patterns; its two-sided p (twice the smaller tail) is the
        # share of |sum| >= |observed| for this symmetric null (checked equal on 560 samples, ties and zeros)
        p = float(scipy.stats.permutation_test((x,), lambda a, axis: np.sum(a, axis=axis), vectorized=True,
                                               permutation_type="samples", n_resamples=np.inf,
                                               alternative="two-sided").pvalue)
    return {"test": "sign-flip", "statistic": float(x.sum()), "p_value": p, "min_p": min(1.0, 2.0 / 2 ** n)}


EXACT_MAX_PAIRS = 12  # up to here every one of the 2^n swap patterns; beyond, random ones


def _swap_masks(n: int, n_resamples: int, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
    """Which pairs to swap: every pattern for n <= EXACT_MAX_PAIRS (exact),
    else n_resamples random ones."""
    if n <= EXACT_MAX_PAIRS:
        return ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1).astype(bool), True
    return rng.integers(0, 2, size=(n_resamples, n)).astype(bool), False


def quantile_diff_pvalues(control: np.ndarray, arm: np.ndarray, q: float = 0.9, n_resamples: int = 2000,
                          seed: int | np.random.Generator | None = 0, normal_tail: bool = False) -> np.ndarray:
    """Paired permutation test of a quantile difference, for many samples
    at once (control and arm of shape (samples, n)): under "no change" the
    two runs of a pair are exchangeable, so swapping any of them leaves the
    distribution of quantile(arm) - quantile(control) unchanged. p = the
    share of swap patterns whose |difference| is at least the observed one:
    exact over all 2^n patterns up to EXACT_MAX_PAIRS pairs (smallest p
    2/2^n, never 0), else (k + 1) / (n_resamples + 1) over random patterns.
    Its size is exact at any n, where a percentile bootstrap of a p90 from
    6 pairs rejects a true "no change" about 3 times too often.

    normal_tail (random patterns only): p from a normal null whose spread
    is the random patterns' root mean square difference, for an alpha
    below what n_resamples can resolve (power at Holm's alpha / m with few
    resamples per simulated sample: counted p can never be below
    1 / (n_resamples + 1), and would give power 0 by construction)."""
    c, a = np.atleast_2d(np.asarray(control, float)), np.atleast_2d(np.asarray(arm, float))
    s, n = c.shape
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    masks, exact = _swap_masks(n, n_resamples, rng)
    obs = np.abs(np.quantile(a, q, axis=1) - np.quantile(c, q, axis=1))
    hits, rms = np.zeros(s), np.zeros(s)
    rows = max(1, CHUNK_ELEMENTS // max(n * len(masks), 1))
    for start in range(0, s, rows):
        cc, aa = c[start:start + rows, None, :], a[start:start + rows, None, :]
        diff = np.quantile(np.where(masks, cc, aa), q, axis=2) - np.quantile(np.where(masks, aa, cc), q, axis=2)
        hits[start:start + rows] = (np.abs(diff) >= (obs[start:start + rows, None] * (1 - 1e-12))).sum(axis=1)
        rms[start:start + rows] = np.sqrt(np.mean(diff ** 2, axis=1))
    if exact:
        return hits / len(masks)
    if normal_tail:
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(rms > 0, obs / rms, np.where(obs > 0, np.inf, 0.0))
        return np.asarray([math.erfc(v / math.sqrt(2)) for v in z])
    return (hits + 1) / (len(masks) + 1)


def quantile_diff_test(control, arm, q: float = 0.9, n_resamples: int = 4000,
                       seed: int | np.random.Generator | None = 0) -> dict:
    """Two-sided paired permutation test of quantile(arm) -
    quantile(control) (quantile_diff_pvalues for one sample): a test made
    for a quantile, where a rank test would test the location of the whole
    distribution."""
    c, a = np.asarray(control, dtype=float).ravel(), np.asarray(arm, dtype=float).ravel()
    keep = np.isfinite(c) & np.isfinite(a)
    c, a = c[keep], a[keep]
    if c.size < 2:
        return {"test": "permutation", "statistic": math.nan, "p_value": math.nan, "min_p": math.nan}
    p = float(quantile_diff_pvalues(c[None, :], a[None, :], q, n_resamples, seed)[0])
    exact = c.size <= EXACT_MAX_PAIRS
    return {"test": "permutation", "statistic": float(np.quantile(a, q) - np.quantile(c, q)), "p_value": p,
            "min_p": min(1.0, 2.0 / 2 ** c.size) if exact else 1 / (n_resamples + 1), "exact": exact}
