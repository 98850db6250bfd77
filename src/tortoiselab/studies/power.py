"""Power: how likely the project's own test is to see a claim's effect,
given the spread the runs measured, and how many pairs it takes to see it
with 80 % power. By simulation, since no closed form fits a Wilcoxon test
on resampled data or a permutation test of a p90: the per-pair log ratios
of the measurement (log arm - log control) are centred so the pilot is
"no change" for its test (on their Hodges-Lehmann pseudo-median; for a
p90, on the log of its p90 ratio), resampled with replacement to n pairs, shifted by the claimed effect
(log(1 + effect / 100)), and the same test the measurement ran is run on
each simulated sample (analysis.inference: Wilcoxon signed-rank with 6 or
more pairs, the exact sign-flip test below, as paired_location; the
studentized paired permutation test of the p90 ratio for p90 claims, as
analysis.quantiletests.paired_quantile).
Power = the share of samples significant at ALPHA in the claimed
direction: p < alpha with the interval that inverts the test on the
claimed side of 0 (docs/statistics.md). An equivalence claim's power
is the share of samples without a change whose interval from the same
test at alpha (the family's level) falls within the margin.

The claimed effect of a judge (measure.improvement, direction,
equivalent): the claimed range's bound nearer to 0 (the smallest effect the
seed claims: a test with the power for it has at least that power for the
rest of the range), the midpoint when that bound is 0 (e.g. "minor gains",
0 to 2 %); a direction claim's smallest effect of interest (5 % unless the
claim sets one). REPRODUCTION.md shows it per claim; `tortoise plan` uses
required_n (docs/analysis.md, "Users, maps, plans")."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as st

from tortoiselab.analysis import inference, quantiletests
from tortoiselab.studies.model import ALPHA, POWER_TARGET, Measurement

SIMS = 400  # simulated samples per power value in the report (standard error <= 2.5 points)
PLAN_SIMS = 1000  # in `tortoise plan` (standard error <= 1.6 points)
INNER = 400  # resamples inside each simulated sample (random swaps of the p90 test, equivalence CI)
RESOLVED = 20  # counted permutation p-values serve an alpha with alpha * INNER null hits expected at least this
N_MAX = 400  # required_n searches up to this many pairs
STATISTICS = ("ratio", "p90")


@dataclass(frozen=True)
class Effect:
    """What a judge claims: kind "shift" (a change of pct %, signed) or
    "equivalence" (no change beyond +-margin %; its power is planned at the
    pilot's measured change, not at 0), and where the number comes from
    (source, in words)."""

    kind: str
    pct: float = 0.0
    margin: float = math.nan
    source: str = ""

    def text(self) -> str:
        if self.kind == "equivalence":
            return f"a CI within +-{self.margin:g} % at the pilot's measured change"
        return f"{self.pct:+g} % ({self.source})" if self.source else f"{self.pct:+g} %"


def min_pairs(alpha: float) -> int:
    """The fewest pairs whose paired test can give p < alpha at all: its
    smallest p over the 2^n swap or sign patterns is 2/2^n (the data and
    its mirror image), so n > log2(2 / alpha): 6 at 0.05, 9 at 0.05 / 8.
    No reading is planned below it (docs/statistics.md)."""
    return int(math.floor(math.log2(2.0 / alpha))) + 1


def effect_of(judge) -> Effect | None:
    """The effect a judge (of studies.measure) claims; None for judges
    without one (exact counts, the studies' own rules)."""
    e = getattr(judge, "effect", None)
    return e if isinstance(e, Effect) else None


def log_ratios(m: Measurement) -> np.ndarray | None:
    """The measurement's per-pair log ratios, None when it carries no pairs
    (or values that are not positive)."""
    if m.statistic not in STATISTICS or len(m.control) < 2:
        return None
    c, a = np.asarray(m.control, float), np.asarray(m.arm, float)
    if c.shape != a.shape or not (np.all(c > 0) and np.all(a > 0)):
        return None
    return np.log(a) - np.log(c)


def _jitter(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Ties of a resample broken at 1e-9 of the values' scale, so the exact
    Wilcoxon distribution applies to every simulated sample (a tie-corrected
    one would take seconds per thousand samples); it moves no rank that
    differs in the data."""
    return x + rng.normal(0.0, 1e-9 * max(float(np.abs(x).max()), 1e-6), size=x.shape)


def ratio_pvalues(x: np.ndarray) -> np.ndarray:
    """The paired test of analysis.inference.paired_location on each row of
    log ratios x (samples, n, without ties): Wilcoxon signed-rank with n >= 6,
    else the exact sign-flip test."""
    n = x.shape[1]
    if n >= 6:
        return np.asarray(st.wilcoxon(x, axis=1).pvalue, float)
    signs = 1 - 2 * ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1)
    obs = np.abs(x.sum(axis=1))
    null = np.abs(x @ signs.T)
    return np.mean(null >= (obs - 1e-12 * np.maximum(1.0, obs))[:, None], axis=1)


def ratio_side(x: np.ndarray) -> np.ndarray:
    """The side of 0 (+1, -1) where a significant result's interval lies,
    for each row of log ratios x (samples, n, without ties): the sign of
    the signed-rank sum about its null centre n(n+1)/4 with n >= 6 (the
    inverted Wilcoxon interval and its Hodges-Lehmann estimate lie on that
    side when the test rejects), of the sum below 6."""
    n = x.shape[1]
    if n < 6:
        return np.sign(x.sum(axis=1))
    ranks = st.rankdata(np.abs(x), axis=1)
    return np.sign(np.sum(ranks * (x > 0), axis=1) - n * (n + 1) / 4)


def _centre(m: Measurement, lr: np.ndarray) -> float:
    """The log ratio that makes the pilot "no change" for its test: the
    Hodges-Lehmann pseudo-median of the log ratios (the median of their
    pairwise means: what the Wilcoxon signed-rank test tests; the median
    would leave a skewed pilot off its null), or log(p90(arm) / p90(control))
    for statistic "p90" (a quantile scales with its sample, so the arm
    divided by it has the control's p90)."""
    if m.statistic == "p90":
        c, a = np.asarray(m.control, float), np.asarray(m.arm, float)
        return float(np.log(np.quantile(a, 0.9) / np.quantile(c, 0.9)))
    i, j = np.triu_indices(lr.size)
    return float(np.median((lr[i] + lr[j]) / 2))


def _samples(m: Measurement, lr: np.ndarray, n: int, shift: float, sims: int, rng: np.random.Generator):
    """sims samples of n pairs: (control, log ratio) resampled together,
    the log ratios centred (_centre) and shifted. For a p90 the centring is
    corrected by the samples' own mean p90 log ratio: a resample's p90 is
    biased against the pilot's (by 3 % of the log ratio on 60 lognormal
    pairs), so the samples' p90 ratio would not be the claimed one."""
    idx = rng.integers(0, lr.size, size=(sims, n))
    c = np.asarray(m.control, float)[idx]
    x = lr[idx] - _centre(m, lr)
    if m.statistic == "p90":
        x -= float(np.mean(np.log(np.quantile(c * np.exp(x), 0.9, axis=1) / np.quantile(c, 0.9, axis=1))))
    return c, x + shift


def power(m: Measurement, effect: Effect, n: int | None = None, sims: int = SIMS, alpha: float = ALPHA,
          seed: int = 0) -> float | None:
    """The power of the measurement's test to see `effect` with n pairs
    (default: the measurement's) at alpha, given its pairs' spread; None
    when the measurement carries no pairs to simulate from."""
    lr = log_ratios(m)
    if lr is None:
        return None
    n = lr.size if n is None else int(n)
    if n < 2:
        return 0.0
    rng = np.random.default_rng([seed, n])
    if effect.kind == "equivalence":
        return _equivalence_power(m, lr, n, effect.margin, sims, alpha, rng)
    shift = math.log1p(effect.pct / 100)
    c, x = _samples(m, lr, n, shift, sims, rng)
    if m.statistic == "p90":
        a = c * np.exp(x)
        # below what INNER random swaps resolve, the permutation null's normal tail
        p = quantiletests.paired_quantile_pvalues(c, a, 0.9, INNER, rng, normal_tail=alpha * INNER < RESOLVED)
        sign = np.sign(np.quantile(a, 0.9, axis=1) - np.quantile(c, 0.9, axis=1))
    else:
        x = _jitter(x, rng)
        p, sign = ratio_pvalues(x), ratio_side(x)
    return float(np.mean((p < alpha) & (sign == np.sign(shift))))


def _equivalence_power(m: Measurement, lr: np.ndarray, n: int, margin: float, sims: int, alpha: float,
                       rng: np.random.Generator) -> float:
    """The share of samples whose interval, the inversion of the
    measurement's own test at alpha (the family's level, as the label is
    read), lies within +-margin %, the samples' true change being the
    pilot's own estimate (its Hodges-Lehmann pseudo-median, or its p90
    ratio: _centre), not 0: a pilot that measured a change of 3 % cannot
    plan to show "within 5 %" as if it had measured none. The test rejects both
    margins at alpha with the estimate between them (two one-sided
    readings of the same two-sided test; its p falls away from the
    estimate on either side, so the interval ends inside the margins
    exactly then). 0 when the test's smallest attainable p, 2/2^n for its
    sign-flip, signed-rank and exact swap nulls, is not below alpha: the
    interval is then unbounded whatever the pairs (5 pairs: 0.0625)."""
    if 2.0 / 2 ** n >= alpha:
        return 0.0
    c, x = _samples(m, lr, n, _centre(m, lr), sims, rng)
    bounds = (math.log1p(-margin / 100), math.log1p(margin / 100))
    if m.statistic == "p90":
        a = c * np.exp(x)
        tail = alpha * INNER < RESOLVED
        p_at = [quantiletests.paired_quantile_pvalues(c, a * math.exp(-d), 0.9, INNER, rng, normal_tail=tail)
                for d in bounds]
        est = np.log(np.quantile(a, 0.9, axis=1) / np.quantile(c, 0.9, axis=1))
    else:
        x = _jitter(x, rng)
        p_at = [inference.paired_location_pvalues(x - d)[0] for d in bounds]
        est = inference.paired_location_pvalues(x)[1]
    inside = (est > bounds[0]) & (est < bounds[1])
    return float(np.mean(inside & (p_at[0] < alpha) & (p_at[1] < alpha)))


def required_n(m: Measurement, effect: Effect, target: float = POWER_TARGET, alpha: float = ALPHA,
               sims: int = PLAN_SIMS, n_max: int = N_MAX, seed: int = 0) -> int | None:
    """The fewest pairs with power >= target for `effect`, given the
    measurement's spread (power() at each n, the same seed for every n),
    never fewer than min_pairs(alpha);
    None when even n_max pairs do not reach it (or there are no pairs). No
    closed form fits the permutation test of a p90: a normal approximation
    with the pilot's bootstrap standard error asked for 245 pairs where the
    simulation reaches 0.8 near 70, one with the permutation null's for 21."""
    if log_ratios(m) is None:
        return None

    def ok(n: int) -> bool:
        return (power(m, effect, n, sims, alpha, seed) or 0.0) >= target
    floor = min_pairs(alpha)  # below it the test cannot reach alpha: never planned there
    hi = max(6, floor)
    while not ok(hi):
        if hi >= n_max:
            return None
        hi = min(2 * hi, n_max)
    lo = max(floor, hi // 2)  # lo fails (or is the smallest n), hi passes
    if lo == hi or ok(lo):
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def normal_n(sigma: float, delta: float, alpha: float = ALPHA, target: float = POWER_TARGET) -> float:
    """The closed form for a paired z-test of a normal shift delta with
    known sigma: n = ((z_{1-alpha/2} + z_{target}) sigma / delta)^2. A
    Wilcoxon test needs about pi/3 times as many (its asymptotic relative
    efficiency against the t-test under normality is 3/pi)."""
    z = st.norm.ppf(1 - alpha / 2) + st.norm.ppf(target)
    return (z * sigma / delta) ** 2
