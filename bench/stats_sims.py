"""The simulated samples and the tests of bench/stats_check.py, vectorised
over samples: each `sim_*` function draws `sims` samples of one truth
(an effect, at a spread) with n per arm or group, runs a test of
tortoiselab.analysis (the verdicts' own code) or an alternative for the
same hypothesis, and returns decide(alpha) -> a bool per sample: the
reading that counts at alpha (significant on the claimed side, or an
interval within a margin). Spreads are dicts as bench/stats_pilots.py
writes them: level_sd, pair_sd, stall, stall_log (log scale); sd (a
claim's own unit)."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from scipy import special
from scipy import stats as st

from tortoiselab.analysis import inference as inf
from tortoiselab.analysis import quantiletests as qt

Q = 0.9
Decide = Callable[[float], np.ndarray]


def _side(est: np.ndarray, effect: float) -> np.ndarray:
    """Samples on the claimed side (every sample for a zero effect: a size counts either side)."""
    return np.ones(est.shape, bool) if effect == 0 else np.sign(est) == np.sign(effect)


def _stalls(shape, sp: dict, rng: np.random.Generator, share: float) -> np.ndarray:
    """Log multipliers: stall_log with probability `share`, else 0."""
    return np.where(rng.random(shape) < share, sp.get("stall_log", 0.0), 0.0)


def paired_runs(n: int, effect_pct: float, sims: int, sp: dict, rng: np.random.Generator):
    """(control, arm), each (sims, 2n) times: a repetition's level lognormal
    (level_sd), each run's own noise such that a pair's log ratio has sd
    pair_sd, a stall (x e^stall_log) in each run with probability stall / 2
    (a pilot's stall share counts pairs), the arm scaled by 1 + effect."""
    level = rng.normal(math.log(1000), sp["level_sd"], (sims, 2 * n))
    own = sp["pair_sd"] / math.sqrt(2)
    q = sp.get("stall", 0.0) / 2
    c = np.exp(level + rng.normal(0, own, level.shape) + _stalls(level.shape, sp, rng, q))
    a = np.exp(level + rng.normal(0, own, level.shape) + _stalls(level.shape, sp, rng, q))
    return c, a * (1 + effect_pct / 100)


def hd_weights(n: int, q: float = Q) -> np.ndarray:
    """Harrell & Davis (1982) weights of the sorted sample: the Beta((n+1)q,
    (n+1)(1-q)) mass on ((i-1)/n, i/n]."""
    edges = special.betainc((n + 1) * q, (n + 1) * (1 - q), np.arange(n + 1) / n)
    return np.diff(edges)


def hd_paired_pvalues(c: np.ndarray, a: np.ndarray, swaps: int, rng: np.random.Generator) -> np.ndarray:
    """The paired permutation p of log(HD_p90(arm) / HD_p90(control)), the
    swap patterns of inference.swap_masks (every one up to 12 pairs)."""
    n = c.shape[1]
    w = hd_weights(n)
    masks, exact = inf.swap_masks(n, swaps, rng)
    out = np.empty(c.shape[0])
    rows = max(1, 4_000_000 // (n * len(masks)))
    for i in range(0, c.shape[0], rows):
        cc, aa = c[i:i + rows, None, :], a[i:i + rows, None, :]
        hd_a, hd_c = np.sort(np.where(masks, cc, aa), axis=2) @ w, np.sort(np.where(masks, aa, cc), axis=2) @ w
        null = np.abs(np.log(hd_a) - np.log(hd_c))
        obs = np.abs(np.log(np.sort(a[i:i + rows], axis=1) @ w) - np.log(np.sort(c[i:i + rows], axis=1) @ w))
        hits = np.sum(null >= (obs - 1e-10)[:, None], axis=1)
        out[i:i + rows] = hits / len(masks) if exact else (hits + 1) / (len(masks) + 1)
    return out


def _significant(p: np.ndarray, est: np.ndarray, effect: float) -> Decide:
    side = _side(est, effect)
    return lambda alpha: (p < alpha) & side


def sim_paired(test: str, n: int, effect: float, sims: int, sp: dict, swaps: int,
               rng: np.random.Generator) -> Decide:
    """A paired test of a change in % (effect, signed): "Wilcoxon HL" /
    "sign-flip" (inference.paired_location_pvalues: Wilcoxon from 6 pairs,
    the exact sign-flip below), "p90 paired" (the studentized
    quantiletests.paired_quantile_pvalues), "HD p90 paired", "p90 between"
    (quantiletests.between_groups_quantile_pvalues, the first n controls
    against the last n arms: other repetitions), and "unstudentized p90
    paired" / "between" (inference's tests, the ones the claims used before
    issue 51)."""
    c, a = paired_runs(n, effect, sims, sp, rng)
    cp, ap = c[:, :n], a[:, :n]
    if test in ("Wilcoxon HL", "sign-flip"):
        return _significant(*inf.paired_location_pvalues(np.log(ap) - np.log(cp)), effect)
    if test in ("p90 between", "unstudentized p90 between"):
        ab = a[:, n:]
        fn = qt.between_groups_quantile_pvalues if test == "p90 between" else inf.between_groups_quantile_pvalues
        return _significant(fn(cp, ab, Q, swaps, rng),
                            np.log(np.quantile(ab, Q, axis=1) / np.quantile(cp, Q, axis=1)), effect)
    if test in ("p90 paired", "unstudentized p90 paired"):
        fn = qt.paired_quantile_pvalues if test == "p90 paired" else inf.paired_quantile_pvalues
        return _significant(fn(cp, ap, Q, swaps, rng),
                            np.log(np.quantile(ap, Q, axis=1) / np.quantile(cp, Q, axis=1)), effect)
    if test == "HD p90 paired":
        w = hd_weights(n)
        return _significant(hd_paired_pvalues(cp, ap, swaps, rng),
                            np.log((np.sort(ap, axis=1) @ w) / (np.sort(cp, axis=1) @ w)), effect)
    raise ValueError(f"sim_paired: unknown test {test!r}")


def sim_equivalence(n: int, truth_pct: float, margin_pct: float, sims: int, sp: dict,
                    rng: np.random.Generator) -> Decide:
    """paired_location's interval (Wilcoxon from 6 pairs, sign-flip below)
    within +-margin %, for pairs whose true change is truth_pct: it is
    within exactly when the test rejects both margins with the estimate
    between them (as studies.power's equivalence power)."""
    c, a = paired_runs(n, truth_pct, sims, sp, rng)
    x = np.log(a[:, :n]) - np.log(c[:, :n])
    lo, hi = math.log1p(-margin_pct / 100), math.log1p(margin_pct / 100)
    p_lo, p_hi = inf.paired_location_pvalues(x - lo)[0], inf.paired_location_pvalues(x - hi)[0]
    est = inf.paired_location_pvalues(x)[1]
    inside = (est > lo) & (est < hi)
    return lambda alpha: inside & (p_lo < alpha) & (p_hi < alpha)


def _log_groups(n: int, effect_pct: float, sims: int, sp: dict, rng: np.random.Generator):
    """Two groups (base, other) of n log per-pair ratios: normal (pair_sd),
    a stall of +-stall_log with the pilot's share, other shifted by log(1 + effect)."""
    def one():
        x = rng.normal(0, sp["pair_sd"], (sims, n))
        return x + _stalls(x.shape, sp, rng, sp.get("stall", 0.0)) * rng.choice((-1.0, 1.0), x.shape)
    return one(), one() + math.log1p(effect_pct / 100)


def _mw(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided Mann-Whitney p of y against x per row, and the side (U of y minus its null mean)."""
    r = st.mannwhitneyu(y, x, axis=1, alternative="two-sided")
    return r.pvalue, r.statistic - x.shape[1] * y.shape[1] / 2


def sim_groups_ratio(test: str, n: int, effect: float, sims: int, sp: dict, swaps: int,
                     rng: np.random.Generator) -> Decide:
    """Two groups of per-pair ratios: "median ratio between" (the two-group
    permutation test of the ratio of their medians, measure.infer
    "ratio-groups"), or "Mann-Whitney on log ratios" (an alternative: the
    shift of the log ratios)."""
    xb, xo = _log_groups(n, effect, sims, sp, rng)
    if test == "median ratio between":
        p = qt.between_groups_quantile_pvalues(np.exp(xb), np.exp(xo), 0.5, swaps, rng)
        return _significant(p, np.median(xo, axis=1) - np.median(xb, axis=1), effect)
    if test == "Mann-Whitney on log ratios":
        return _significant(*_mw(xb, xo), effect)
    raise ValueError(f"sim_groups_ratio: unknown test {test!r}")


def sim_shift(n: int, effect: float, sims: int, sp: dict, rng: np.random.Generator) -> Decide:
    """Mann-Whitney between two groups of n values (rankci.shift_between_groups'
    p), normal with the claim's sd, the arm group shifted by effect (its unit)."""
    sd = sp.get("sd", 1.0)
    x, y = rng.normal(0, sd, (sims, n)), rng.normal(effect, sd, (sims, n))
    return _significant(*_mw(x, y), effect)


FACTORS = np.array([0.5, 0.6, 0.7, 0.8, 0.9])  # Spearman's x: the factors of the claim (reno.FACTORS)


def _spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    rx, ry = st.rankdata(x, axis=1), st.rankdata(y, axis=1)
    rx, ry = rx - rx.mean(axis=1, keepdims=True), ry - ry.mean(axis=1, keepdims=True)
    return np.sum(rx * ry, axis=1) / np.sqrt(np.sum(rx ** 2, axis=1) * np.sum(ry ** 2, axis=1))


def slope_for_rho(rho: float, factors: np.ndarray = FACTORS, draws: int = 200_000, seed: int = 0) -> float:
    """The slope b of y = b z(x) + N(0, 1) (x the factors, cycled; z standardised)
    whose Spearman rho over `draws` values is rho (bisection)."""
    rng = np.random.default_rng(seed)
    x = np.resize(factors, draws)
    z, e = (x - x.mean()) / x.std(), rng.normal(0, 1, draws)
    lo, hi = 0.0, 5.0
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if st.spearmanr(x, mid * z + e).statistic < abs(rho) else (lo, mid)
    return math.copysign((lo + hi) / 2, rho)


def sim_spearman(n: int, rho: float, sims: int, rng: np.random.Generator, slope: float | None = None) -> Decide:
    """Spearman's rho of the factor (cycled over FACTORS, ties as in the
    claim) and y = b z(x) + noise with population rho; p and side as
    rankci.spearman (Fisher z with Bonett-Wright's standard error at the
    sample's rho)."""
    b = slope_for_rho(rho) if slope is None else slope
    x = np.broadcast_to(np.resize(FACTORS, n), (sims, n))
    z = (x - FACTORS.mean()) / FACTORS.std()
    r = np.clip(_spearman_rows(x, b * z + rng.normal(0, 1, (sims, n))), -0.999999, 0.999999)
    se = np.sqrt((1 + r ** 2 / 2) / (n - 3))
    p = 2 * st.norm.sf(np.abs(np.arctanh(r)) / se)
    return _significant(p, r, rho)


def sim_location(n: int, centre: float, margin: float | None, sims: int, sp: dict,
                 rng: np.random.Generator) -> Decide:
    """One sample of n values centred on `centre` (normal, the claim's sd):
    margin None, the Wilcoxon signed-rank test of centre 0 (rankci.location's
    p, either side); else its interval within 1 +- margin (it rejects both
    ends with the estimate between them)."""
    x = rng.normal(centre, sp.get("sd", 1.0), (sims, n))
    if margin is None:
        p, est = inf.paired_location_pvalues(x)
        return _significant(p, est, 0.0)
    lo, hi = 1 - margin, 1 + margin
    p_lo, p_hi = inf.paired_location_pvalues(x - lo)[0], inf.paired_location_pvalues(x - hi)[0]
    est = inf.paired_location_pvalues(x)[1]
    inside = (est > lo) & (est < hi)
    return lambda alpha: inside & (p_lo < alpha) & (p_hi < alpha)


def sim_kruskal(n: int, effect_pct: float, sims: int, sp: dict, rng: np.random.Generator,
                groups: int = 11, faster: int = 3) -> Decide:
    """Kruskal-Wallis across `groups` algorithms of n runs each (lognormal,
    level_sd), `faster` of them scaled by 1 + effect (the screen's three)."""
    x = rng.normal(0, sp["level_sd"], (sims, groups, n))
    x[:, :faster, :] += math.log1p(effect_pct / 100)
    p = st.kruskal(*[x[:, g, :] for g in range(groups)], axis=1).pvalue
    return lambda alpha: p < alpha
