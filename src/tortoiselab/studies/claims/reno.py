"""Reno's reduction factor 0.5-0.9 (Stony Brook, seed 002), under both
readings of the factor. The paper varies a "congestion window reduction
factor" from 0.5 ("the default") to 0.9 and does not say which number it
is; our module sets ssthresh = max(beta * cwnd, 2) (kernel/modules/README.md):

- the cut's depth, 1 - beta (the primary reading: the paper's mechanism
  sentence says the larger factor "reduces the congestion window
  aggressively"): factor 0.5-0.9 is beta 0.5 -> 0.1;
- beta itself (the factor multiplies the window; then its "surprisingly,
  smaller reduction factor performed better" is the harder cut winning):
  factor 0.5-0.9 is beta 0.5 -> 0.9.

Every sentence is stated in the paper's factor, so one measurement per
sentence serves both readings, each reading mapping factors to betas.
Each primary claim judges the depth reading; a variant beside it (`-as-beta`)
judges the other, and each one's detail carries the other reading's number.
experiments/reno_beta.yaml sweeps the union, beta 0.1-0.9 (labs/03-cubic-plus.md)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import pandas as pd

from tortoiselab.analysis.rankci import shift_between_groups, spearman
from tortoiselab.spec import cols
from tortoiselab.studies.measure import change, direction, equivalent, ok_rows, pair_key, pairs
from tortoiselab.studies.model import SEEDS, Claim, Measurement, NoData, claim

S002 = SEEDS["002"]

HIGH_LOSS = [6, 8, 10]
FACTORS = (0.5, 0.6, 0.7, 0.8, 0.9)  # the paper's range of its reduction factor
DEFAULT, LARGEST = 0.5, 0.9  # "0.5 is the default reduction factor"; the range's other end
# the smallest effects of interest of the direction claims: a growth of the penalty of 1 s (the paper's
# Figure 12 shows differences of seconds on the >1 MB page); a correlation of 0.1 (Cohen's "small")
PENALTY_GROWTH_S, SMALL_RHO = 1.0, 0.1


@dataclass(frozen=True)
class Reading:
    """One meaning of the paper's reduction factor: key ("depth", "beta"),
    its name in words, and depth: True when the factor is the cut's depth
    1 - beta, False when it is beta."""

    key: str
    words: str
    depth: bool

    def beta(self, factor: float) -> float:
        """Our module's beta for a factor of the paper (3 decimals, as the
        module takes it)."""
        return round(1 - factor, 3) if self.depth else round(factor, 3)

    def factor(self, beta: float) -> float:
        """The paper's factor for our beta (the inverse of `beta`)."""
        return round(1 - beta, 3) if self.depth else round(beta, 3)

    def betas(self) -> list[float]:
        """The betas of the paper's range under this reading, factor 0.5 first."""
        return [self.beta(f) for f in FACTORS]

    def scope(self) -> str:
        """"factor = 1 - beta: beta 0.5 -> 0.1" (the range in our terms)."""
        lo, hi = self.beta(DEFAULT), self.beta(LARGEST)
        return f"{'factor = 1 - beta' if self.depth else 'factor = beta'}: beta {lo:g} -> {hi:g}"


DEPTH = Reading("depth", "read as the cut's depth 1 - beta", True)
BETA = Reading("beta", "read as beta itself", False)
READINGS = (DEPTH, BETA)  # the primary reading first


def _betas_present(df: pd.DataFrame, reading: Reading) -> list[float]:
    """The reading's betas (factor 0.5 first) that have runs in df."""
    have = {round(float(b), 3) for b in df["beta"].dropna()}
    return [b for b in reading.betas() if b in have]


def _low_loss(df: pd.DataFrame, reading: Reading) -> Measurement:
    """Each factor against 0.5 at 2 % loss (at 0 % the back-off never
    acts: the runs are the same in every beta, a tie by construction); the
    largest change shown, every one in the detail."""
    ms = {}
    for b in _betas_present(df, reading)[1:]:
        ms[b] = change(df, cols.PLT, "beta", reading.beta(DEFAULT), b, "ratio", where={cols.LOSS: 2})
    if not ms:
        raise NoData(f"no runs of beta {', '.join(f'{b:g}' for b in reading.betas()[1:])} ({reading.scope()})")
    w = max(ms, key=lambda b: abs(ms[b].value))
    each = "; ".join(f"factor {reading.factor(b):g} (beta {b:g}): {ms[b].text()}" for b in ms)
    return replace(ms[w], detail=f"shown: factor {reading.factor(w):g} (beta {w:g}) vs 0.5; {each}")


def _penalty(df: pd.DataFrame, reading: Reading, loss) -> np.ndarray:
    """Per pair: the largest factor's PLT minus the default's (0.5), in s."""
    p = pairs(df, cols.PLT, "beta", reading.beta(DEFAULT), reading.beta(LARGEST), {cols.LOSS: loss})
    return ((p["arm"] - p["control"]) / 1000).to_numpy(float)


def _penalty_grows(df: pd.DataFrame, reading: Reading) -> Measurement:
    """"as the loss percentage increased, larger reduction factor consumed
    longer": the largest factor's (0.9) PLT penalty over the default's
    (0.5), in seconds as the paper's Figure 12 plots time: its shift from
    2 % loss to 6-10 % (Mann-Whitney between the two groups of per-pair
    penalties, Hodges-Lehmann estimate and its interval)."""
    low, high = _penalty(df, reading, 2), _penalty(df, reading, HIGH_LOSS)
    big = reading.beta(LARGEST)
    if len(low) < 2 or len(high) < 2:
        raise NoData(f"needs two or more pairs of beta 0.5 and {big:g} runs at 2 % and at 6-10 % loss "
                     f"({reading.scope()})")
    r = shift_between_groups(low, high)
    return Measurement(r.estimate, r.low, r.high, r.p_value, min(len(low), len(high)), "s",
                       f"factor 0.9 (beta {big:g}) PLT minus factor 0.5's: median {np.median(low):+.1f} s at 2 % "
                       f"loss, {np.median(high):+.1f} s at 6-10 %; {r.test}", level=0.05, min_p=r.min_p,
                       control=tuple(low.tolist()), arm=tuple(high.tolist()), statistic="shift-groups",
                       n_what="pairs in the smaller group")


def _smaller_better(df: pd.DataFrame, reading: Reading) -> Measurement:
    """"smaller reduction factor performed better on high loss": Spearman's
    rho of the factor against PLT at high loss over the reading's betas,
    each PLT divided by its condition's median (loss levels differ in
    scale); positive = the smaller factor is faster. Fisher z interval and
    test (analysis.rankci)."""
    d = ok_rows(df, cols.PLT, {cols.LOSS: HIGH_LOSS})
    d = d[pd.to_numeric(d["beta"], errors="coerce").round(3).isin(reading.betas())]
    if len(d) < 5 or d["beta"].nunique() < 2:
        raise NoData(f"needs 5 or more high-loss runs over several of beta "
                     f"{', '.join(f'{b:g}' for b in reading.betas())} ({reading.scope()})")
    cond = [pair_key(c, "beta") for c in d["cond"]]
    rel = (d[cols.PLT] / d.groupby(cond)[cols.PLT].transform("median")).to_numpy(float)
    factor = np.array([reading.factor(float(b)) for b in d["beta"]])
    r = spearman(factor, rel)
    med = d.groupby("beta")[cols.PLT].median()
    return Measurement(r.estimate, r.low, r.high, r.p_value, len(d), "rho",
                       f"{r.test}, of the factor vs PLT (relative to its loss level's median); median PLT by "
                       "factor: " + ", ".join(f"{reading.factor(float(b)):g} (beta {b:g}): {v:.0f} ms"
                                              for b, v in med.items()),
                       level=0.05, control=tuple(factor.tolist()), arm=tuple(rel.tolist()), statistic="spearman",
                       n_what="runs")


def read_as(measure: Callable[[pd.DataFrame, Reading], Measurement], reading: Reading,
            other: Reading) -> Callable[[pd.DataFrame], Measurement]:
    """The claim's measurement under `reading`, its detail naming the
    reading and ending with the other reading's number at 0.05 (the row's
    own interval is recomputed at the study family's level; "no data" and
    why, when its runs are not there); no runs of this reading: NoData
    that still gives the other's number. Named "<measure>[<reading>]" (the
    registration hashes measures by name)."""
    def other_text(df: pd.DataFrame) -> str:
        try:
            return (f"beside it, {other.words} ({other.scope()}): {measure(df, other).text()} (its interval at "
                    "0.05; its own row's at the family's level)")
        except NoData as exc:
            return f"beside it, {other.words}: no data ({exc})"

    def measured(df: pd.DataFrame) -> Measurement:
        try:
            m = measure(df, reading)
        except NoData as exc:
            raise NoData(f"{reading.words}: {exc}; {other_text(df)}") from None
        return replace(m, detail=f"{reading.words} ({reading.scope()}): {m.detail}; {other_text(df)}")
    measured.__qualname__ = measured.__name__ = f"{measure.__name__}[{reading.key}]"
    return measured


# each sentence: (id, the seed's words, what is measured in the paper's factor, the measure, the judge)
SENTENCES = (
    ("low-loss-similar",
     "for different congestion window reduction factors, modified variant performed similar at a lower loss "
     "percentage", "PLT of the >1 MB page, loss 2 %, each factor vs 0.5 (largest shown)", _low_loss, equivalent(5)),
    ("high-loss-hard-cut-slower",
     "as the loss percentage increased, larger reduction factor consumed longer duration for complete page load",
     "the PLT penalty of factor 0.9 over 0.5 in seconds (the paper's Figure 12 plots time), its growth from loss "
     "2 % to 6/10 %, >1 MB page", _penalty_grows, direction("higher", "the penalty's growth", PENALTY_GROWTH_S, "s")),
    ("high-loss-gentler-wins",
     "Surprisingly, smaller reduction factor performed better on high loss ... smaller reduction factor "
     "reduces the congestion window less aggressively and hence performs better",
     "Spearman rho of the factor vs PLT, loss 6/10 %, >1 MB page", _smaller_better,
     direction("higher", "rho (a smaller factor, a shorter PLT)", SMALL_RHO, "rho")),
)


def _claims() -> tuple[Claim, ...]:
    """Per sentence: the primary claim under the depth reading, then its
    variant `<id>-as-beta` under the other."""
    out = []
    for cid, text, metric, measure, judge in SENTENCES:
        out.append(claim("reno_beta", cid, S002, text, "reno_beta",
                         f"{DEPTH.words} ({DEPTH.scope()}): {metric}", read_as(measure, DEPTH, BETA), judge))
        out.append(claim("reno_beta", f"{cid}-as-beta", S002, text, "reno_beta",
                         f"{BETA.words} ({BETA.scope()}): {metric}", read_as(measure, BETA, DEPTH), judge,
                         sentence=cid, variant=f"the factor {BETA.words} ({BETA.scope()})"))
    return tuple(out)


CLAIMS = _claims()
