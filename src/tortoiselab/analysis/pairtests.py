"""Paired tests for what a rank test does not fit: the exact sign-flip
permutation test for a few pairs (whose p can never be below 2/2^n, so a
handful of pairs never gives p = 0) and the paired bootstrap test of a
quantile difference (a p90 is a quantile, not a location). Pure functions
of arrays, seeded; analysis.stats re-exports them, and the studies' claims
use them (studies/measure.py)."""

from __future__ import annotations

import math

import numpy as np

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
    signs = 1 - 2 * ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1)
    obs = abs(x.sum())
    null = np.abs(signs @ x)
    p = float(np.mean(null >= obs - 1e-12 * max(1.0, obs)))
    return {"test": "sign-flip", "statistic": float(x.sum()), "p_value": p, "min_p": min(1.0, 2.0 / 2 ** n)}


def quantile_diff_pvalues(control: np.ndarray, arm: np.ndarray, q: float = 0.9, n_resamples: int = 2000,
                          seed: int | np.random.Generator | None = 0) -> np.ndarray:
    """Paired bootstrap test of a quantile difference, for many samples at
    once: control and arm of shape (samples, n), pairs resampled together
    within each sample. p = twice the share of resamples on the smaller side
    of 0 (two-sided: 2 * min(P(diff <= 0), P(diff >= 0)), at most 1), floored at 2/2^n: n pairs cannot say more than the exact
    sign-flip test of their signs can (and a bootstrap never gives 0)."""
    c, a = np.atleast_2d(np.asarray(control, float)), np.atleast_2d(np.asarray(arm, float))
    s, n = c.shape
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    below, above = np.zeros(s), np.zeros(s)
    rows = max(1, CHUNK_ELEMENTS // max(n * s, 1))
    for start in range(0, n_resamples, rows):
        k = min(rows, n_resamples - start)
        idx = rng.integers(0, n, size=(k, n))
        diff = np.quantile(a[:, idx], q, axis=2) - np.quantile(c[:, idx], q, axis=2)  # (samples, k)
        below += (diff <= 0).sum(axis=1)
        above += (diff >= 0).sum(axis=1)
    p = np.minimum(1.0, 2 * np.minimum(below, above) / n_resamples)
    return np.maximum(p, min(1.0, 2.0 / 2 ** n))


def quantile_diff_test(control, arm, q: float = 0.9, n_resamples: int = 4000,
                       seed: int | np.random.Generator | None = 0) -> dict:
    """Two-sided paired bootstrap test of quantile(arm) - quantile(control)
    (quantile_diff_pvalues for one sample): a test made for a quantile,
    where a rank test would test the location of the whole distribution."""
    c, a = np.asarray(control, dtype=float).ravel(), np.asarray(arm, dtype=float).ravel()
    keep = np.isfinite(c) & np.isfinite(a)
    c, a = c[keep], a[keep]
    if c.size < 2:
        return {"test": "bootstrap", "statistic": math.nan, "p_value": math.nan, "min_p": math.nan}
    p = float(quantile_diff_pvalues(c[None, :], a[None, :], q, n_resamples, seed)[0])
    return {"test": "bootstrap", "statistic": float(np.quantile(a, q) - np.quantile(c, q)), "p_value": p,
            "min_p": min(1.0, 2.0 / 2 ** c.size)}
