"""Statistics over users (docs/population.md): the p50 and p90 of a
population's page loads with bootstrap intervals over users, the paired
change of a quantile between two arms that loaded the page for the same
users, and the RTT classes Hybla's behaviour turns on.

The seeds' percentiles are over real users (RUM), so the unit of
resampling here is the user: a bootstrap draws users with replacement
and, for a paired change, keeps each user's two loads together. Pure
functions of arrays; every draw comes from a seeded generator.

Convention (as analysis/stats.py): change_pct = 100 * (Q(arm) - Q(control))
/ Q(control); negative = the arm is faster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tortoiselab.analysis import stats

HYBLA_RTT0_MS = 25.0  # Hybla's reference RTT: rho = RTT / RTT0 (Caini and Firrincieli 2004; Linux tcp_hybla.c)
# rho classes: below 2 Hybla grows as Reno does or little faster; the seed's paths spread across these
RHO_EDGES = (0.0, 2.0, 3.0, 6.0, math.inf)
DEFAULT_RESAMPLES = 4000
# below this many users a p90 is one of the largest two values and a bootstrap
# of it has too few distinct resamples to be a test: an interval, no p-value
MIN_USERS_FOR_TEST = 10


def rho_class(rtt_ms: float) -> str:
    """The Hybla class of a user's RTT: "rho<2", "2<=rho<3", "3<=rho<6", "rho>=6"."""
    rho = rtt_ms / HYBLA_RTT0_MS
    for lo, hi in zip(RHO_EDGES, RHO_EDGES[1:]):
        if lo <= rho < hi:
            if lo == 0:
                return f"rho<{hi:g}"
            return f"rho>={lo:g}" if math.isinf(hi) else f"{lo:g}<=rho<{hi:g}"
    return "no rtt"


@dataclass(frozen=True)
class PairedChange:
    """A quantile's change over paired users with its bootstrap interval and
    the bootstrap's two-sided p-value for "no change"."""

    value: float
    low: float
    high: float
    p_value: float
    n: int
    control_q: float
    arm_q: float


def paired_quantile_change(control, arm, q: float = 0.9, n_resamples: int = DEFAULT_RESAMPLES,
                           seed: int = 0, confidence: float = 0.95) -> PairedChange:
    """100 * (Q_q(arm) / Q_q(control) - 1) over users, control[i] and
    arm[i] being user i's two loads. Users are resampled with both loads
    (the paired bootstrap over users); the interval is the percentile
    interval, and p = 2 * min(share of resamples <= 0, share >= 0), at
    least 1 / n_resamples: the smallest level at which the percentile
    interval excludes no change (a test of the quantile difference itself,
    not of a location shift), NaN with fewer than MIN_USERS_FOR_TEST users.
    Users with a NaN on either side are dropped."""
    c, a = np.asarray(control, dtype=float).ravel(), np.asarray(arm, dtype=float).ravel()
    if c.size != a.size:
        raise ValueError(f"paired: one value per user in each arm ({c.size} vs {a.size})")
    keep = np.isfinite(c) & np.isfinite(a)
    c, a = c[keep], a[keep]
    n = int(c.size)
    if n == 0:
        return PairedChange(math.nan, math.nan, math.nan, math.nan, 0, math.nan, math.nan)
    cq, aq = float(np.quantile(c, q)), float(np.quantile(a, q))
    value = 100.0 * (aq / cq - 1.0)
    if n == 1:
        return PairedChange(value, math.nan, math.nan, math.nan, 1, cq, aq)
    rng = np.random.default_rng(seed)
    boot = np.empty(n_resamples)
    rows = max(1, 2_000_000 // n)
    for start in range(0, n_resamples, rows):
        k = min(rows, n_resamples - start)
        idx = rng.integers(0, n, size=(k, n))
        boot[start:start + k] = 100.0 * (np.quantile(a[idx], q, axis=1) / np.quantile(c[idx], q, axis=1) - 1.0)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(boot, [alpha, 1 - alpha])
    p = min(1.0, max(2 * min(np.mean(boot <= 0), np.mean(boot >= 0)), 1.0 / n_resamples))
    if n < MIN_USERS_FOR_TEST:
        p = math.nan
    return PairedChange(value, float(lo), float(hi), float(p), n, cq, aq)


def quantiles_over_users(values, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> dict[str, stats.Estimate]:
    """p50 and p90 of one arm's loads, one per user, each with its
    bootstrap interval over users."""
    return {name: stats.bootstrap_ci(values, name, n_resamples, seed=np.random.default_rng([seed, j]))
            for j, name in enumerate(("p50", "p90"))}
