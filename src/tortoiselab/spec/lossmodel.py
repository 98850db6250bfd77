"""Loss models of an emulated link: netem's Gilbert-Elliott model and the
friendly way to ask for it (a mean loss rate and a mean burst length).

netem has two ways to lose packets (tc-netem(8), net/sched/sch_netem.c):

- ``loss random P``: every packet lost with probability P, independently
  (Bernoulli). The lab's default; a path without a burst length uses it,
  with the very same tc command and netlink message as before.
- ``loss gemodel p r 1-h 1-k``: a two-state Markov chain, Good and Bad.
  Per packet the kernel (``loss_gilb_ell``) first draws the transition
  (Good -> Bad with probability p, Bad -> Good with r), then draws the
  packet's fate with the loss probability of the state it was in *before*
  that transition: 1-k in Good, 1-h in Bad. The chain starts in Good
  whenever the model is (re)configured.

Special cases (tc-netem(8); Hasslinger and Hohlfeld, "The Gilbert-Elliott
model for packet loss in real time services on the Internet", MMB 2008):
Gilbert-Elliott (all four), Gilbert (k = 1: no loss in Good), Simple
Gilbert (k = 1 and h = 0: every packet in Bad is lost, none in Good) and
Bernoulli (p + r = 1).

The lab's friendly form is the Simple Gilbert model given by what users
know of a path: its mean loss rate and its mean loss-burst length. A loss
burst is then exactly a stay in Bad, whose length is geometric:

    mean burst  B = 1 / r                          (packets)
    loss rate   L = p / (p + r)                    (stationary P(Bad))
    so          r = 1 / B,   p = r * L / (1 - L)

p <= 1 needs L <= B / (1 + B), i.e. B >= L / (1 - L): a mean burst of one
packet allows at most 50 % loss. B = 1 / (1 - L) gives p + r = 1, the
Bernoulli process's own burst statistics. The same two figures, the loss
rate and the mean burst length, are the burst metrics RFC 3611 (section
4.7.2, "burst" and "gap" densities and durations) and RFC 6958 report for
a Gilbert-Elliott view of loss.

For the general model the stationary loss rate and the mean length of a
run of consecutive losses follow from the chain (``GilbertElliott``):

    P(Bad) = p / (p + r)
    L      = (1 - P(Bad)) (1 - k) + P(Bad) (1 - h)
    mean run = L / P(packet n lost, packet n+1 not lost)
"""

from __future__ import annotations

import math

from pydantic import ConfigDict, Field, field_validator, model_validator
from tortoiselab.spec.strictnum import NumbersModel


class GilbertElliott(NumbersModel):
    """netem's ``loss gemodel p r 1-h 1-k`` in percent, as tc takes it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    p_pct: float = Field(ge=0, le=100, description="Good -> Bad transition probability per packet, percent")
    r_pct: float = Field(ge=0, le=100, description="Bad -> Good transition probability per packet, percent")
    loss_bad_pct: float = Field(100.0, ge=0, le=100, description="loss probability in Bad (netem's 1-h), percent")
    loss_good_pct: float = Field(0.0, ge=0, le=100, description="loss probability in Good (netem's 1-k), percent")

    @field_validator("p_pct", "r_pct", "loss_bad_pct", "loss_good_pct")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("must be a finite number")
        return v

    @model_validator(mode="after")
    def _not_absorbing(self) -> GilbertElliott:
        if self.r_pct == 0 and self.p_pct > 0:
            raise ValueError("r_pct: 0 makes Bad absorbing (once in it the link never recovers); "
                             "give r_pct > 0, e.g. r_pct: 25 for bursts of 4 packets on average")
        return self

    # --- what the chain does -------------------------------------------

    @property
    def _probs(self) -> tuple[float, float, float, float]:
        """p, r, loss in Good, loss in Bad as probabilities."""
        return self.p_pct / 100, self.r_pct / 100, self.loss_good_pct / 100, self.loss_bad_pct / 100

    def bad_fraction(self) -> float:
        """Stationary probability of Bad: p / (p + r) (0 when p = r = 0)."""
        p, r, _, _ = self._probs
        return p / (p + r) if p + r > 0 else 0.0

    def loss_rate(self) -> float:
        """Stationary fraction of packets lost (0..1)."""
        _, _, lg, lb = self._probs
        pb = self.bad_fraction()
        return (1 - pb) * lg + pb * lb

    def mean_burst_pkts(self) -> float:
        """Mean length of a run of consecutive lost packets, stationary
        (inf if every packet is lost, nan if none is)."""
        p, r, lg, lb = self._probs
        pb = self.bad_fraction()
        lost = self.loss_rate()
        if lost == 0:
            return math.nan
        # P(lost now, kept next): the packet's state s, its fate, the next state t
        trans = {("G", "G"): 1 - p, ("G", "B"): p, ("B", "G"): r, ("B", "B"): 1 - r}
        prob = {"G": 1 - pb, "B": pb}
        loss = {"G": lg, "B": lb}
        end = sum(prob[s] * loss[s] * trans[(s, t)] * (1 - loss[t]) for s in "GB" for t in "GB")
        return lost / end if end > 0 else math.inf

    def tc_args(self) -> list[str]:
        """The loss part of tc's netem options."""
        return ["loss", "gemodel", *(f"{_num(v)}%" for v in self.percents())]

    def percents(self) -> tuple[float, float, float, float]:
        """p, r, 1-h, 1-k in percent, in tc's order."""
        return self.p_pct, self.r_pct, self.loss_bad_pct, self.loss_good_pct


def _num(x: float) -> str:
    """A percentage for tc without float noise (six decimals at most)."""
    s = f"{x:.6f}".rstrip("0").rstrip(".")
    return s if s else "0"


def min_burst_pkts(loss_pct: float) -> float:
    """The shortest mean burst (packets) with which the Simple Gilbert model
    makes `loss_pct`: L / (1 - L), and never less than one packet."""
    lf = loss_pct / 100
    return math.inf if lf >= 1 else max(1.0, lf / (1 - lf))


def max_loss_pct(burst_pkts: float) -> float:
    """The highest mean loss rate (percent) a mean burst of `burst_pkts` allows: B / (1 + B)."""
    return 100 * burst_pkts / (1 + burst_pkts)


def feasibility_problem(loss_pct: float, burst_pkts: float, loss_field: str = "loss_pct") -> str | None:
    """Why the Simple Gilbert model cannot make this loss rate with this mean
    burst, with the fix; None if it can."""
    if loss_pct <= 0:
        return None
    lf = loss_pct / 100
    if lf >= 1:
        return (f"{loss_field} {loss_pct:g} % with bursts is every packet lost; give {loss_field} below 100, "
                "or leave the burst length out")
    if burst_pkts * (1 - lf) < lf - 1e-12:  # p = r L / (1 - L) > 1
        return (f"a mean loss of {loss_pct:g} % needs a mean burst of at least {min_burst_pkts(loss_pct):.4g} "
                f"packets (bursts of {burst_pkts:g} allow at most {max_loss_pct(burst_pkts):.4g} % loss); "
                f"raise the burst length or lower {loss_field}")
    return None


def gilbert(loss_pct: float, burst_pkts: float) -> GilbertElliott:
    """The Simple Gilbert model with mean loss `loss_pct` (percent) and mean
    loss-burst length `burst_pkts` (packets): r = 1/B, p = r L / (1 - L)."""
    if not burst_pkts >= 1:
        raise ValueError(f"a mean burst length is at least 1 packet (got {burst_pkts!r})")
    problem = feasibility_problem(loss_pct, burst_pkts)
    if problem:
        raise ValueError(problem)
    lf = loss_pct / 100
    r = 1 / burst_pkts
    p = min(1.0, r * lf / (1 - lf))
    return GilbertElliott(p_pct=round(100 * p, 6), r_pct=round(100 * r, 6))
