"""Statistics of a measured loss pattern under a Gilbert model: the loss
rate and the mean loss-burst length, each with a 95 % interval that holds
for correlated (bursty) losses.

The input is what the lab's one-way probe records (tools/udpprobe.py): how
many numbered probes were sent and which sequence numbers were lost. As a
0/1 sequence x_0 .. x_{n-1} (1 = lost) it is, under netem's Simple Gilbert
model (spec/lossmodel.py), a two-state Markov chain itself: a packet is lost
exactly when the chain is in Bad, so p = P(x_{i+1}=1 | x_i=0) and
r = P(x_{i+1}=0 | x_i=1), and a loss burst (a maximal run of losses) is
one stay in Bad, of geometric length with mean 1/r.

Loss rate: the Wilson score interval on an effective sample size. The
losses of a two-state chain are correlated with lag-one autocorrelation
rho = 1 - p - r (and rho^k at lag k), so the variance of the measured rate
is the binomial one times (1 + rho) / (1 - rho); Wilson's interval is taken
with n_eff = n (1 - rho) / (1 + rho) trials, rho estimated from the
sequence's own transitions and never below 0 (independent losses, p + r = 1,
give rho = 0 and the plain Wilson interval). A binomial interval on n
would be too narrow by sqrt((1 + rho) / (1 - rho)): 2.2 x for 5 % loss in
bursts of 3.

Mean burst length: an exact interval from the geometric distribution.
Given K complete bursts of total length S, the S - K packets that stayed in
Bad before the K exits are negative binomial in r, so (as Clopper-Pearson
does for the binomial) r lies in
[Beta(a/2; K, S-K+1), Beta(1-a/2; K, S-K)] and the mean burst 1/r in the
reciprocal interval. A run that reaches the last probe may not be over and
is left out of the bursts (its losses still count for the rate).

Both intervals are checked for their coverage on simulated netem chains in
tests/unit/test_burstloss.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class LossPattern:
    """A measured loss sequence, summarised."""

    sent: int
    lost: int
    bursts: list[int]  # lengths of the complete loss runs, in order
    censored: int  # losses in a run that reaches the last probe (0 or its length)
    n00: int
    n01: int
    n10: int
    n11: int

    @property
    def rate(self) -> float:
        return self.lost / self.sent if self.sent else math.nan

    @property
    def mean_burst(self) -> float:
        return sum(self.bursts) / len(self.bursts) if self.bursts else math.nan

    def rho(self) -> float:
        """Lag-one autocorrelation 1 - p - r from the transition counts
        (0 when a state was never left or never entered)."""
        from_good, from_bad = self.n00 + self.n01, self.n10 + self.n11
        if not from_good or not from_bad:
            return 0.0
        return 1 - self.n01 / from_good - self.n10 / from_bad


def pattern(sent: int, lost_seqs: list[int]) -> LossPattern:
    """Summarise probes 0 .. sent-1 of which `lost_seqs` were lost."""
    lost = set(s for s in lost_seqs if 0 <= s < sent)
    x = [1 if i in lost else 0 for i in range(sent)]
    counts = {(a, b): 0 for a in (0, 1) for b in (0, 1)}
    for a, b in zip(x, x[1:]):
        counts[(a, b)] += 1
    runs, cur = [], 0
    for v in x:
        if v:
            cur += 1
        elif cur:
            runs.append(cur)
            cur = 0
    return LossPattern(sent=sent, lost=len(lost), bursts=runs, censored=cur,
                       n00=counts[(0, 0)], n01=counts[(0, 1)], n10=counts[(1, 0)], n11=counts[(1, 1)])


def wilson(successes: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a proportion (n may be fractional: an
    effective sample size)."""
    from scipy.stats import norm  # here: ~0.8 s to import, kept off `tortoise run`'s path (docs/speed.md)

    if n <= 0:
        return 0.0, 1.0
    z = float(norm.ppf(0.5 + confidence / 2))
    ph = successes / n
    den = 1 + z * z / n
    mid = (ph + z * z / (2 * n)) / den
    half = z * math.sqrt(ph * (1 - ph) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def rate_interval(pat: LossPattern, confidence: float = 0.95) -> tuple[float, float, float]:
    """(low, high, n_eff) of the loss rate: Wilson on the effective sample size."""
    rho = max(0.0, pat.rho())
    n_eff = pat.sent * (1 - rho) / (1 + rho)
    lo, hi = wilson(pat.rate * n_eff, n_eff, confidence)
    return lo, hi, n_eff


def burst_interval(bursts: list[int], confidence: float = 0.95) -> tuple[float, float]:
    """Exact interval of the mean of geometric burst lengths (support 1, 2, ...)
    from complete bursts; (nan, nan) without any."""
    from scipy.stats import beta  # here: ~0.8 s to import, kept off `tortoise run`'s path (docs/speed.md)

    k = len(bursts)
    if k == 0:
        return math.nan, math.nan
    stays = sum(bursts) - k
    a = 1 - confidence
    r_low = float(beta.ppf(a / 2, k, stays + 1))
    r_high = 1.0 if stays == 0 else float(beta.ppf(1 - a / 2, k, stays))
    return 1 / r_high, (math.inf if r_low <= 0 else 1 / r_low)
