"""Reno's reduction factor 0.5-0.9 (Stony Brook, seed 002): the page load
for each beta against 0.5 at low loss, and at high loss the paper's two
sentences, each read with the paper's own meaning of "reduction factor"
(how hard the window is cut: its mechanism sentence says the larger one
"reduces the congestion window aggressively"), which in our module's terms
(ssthresh = beta * cwnd) is a smaller beta (labs/03-cubic-plus.md)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from tortoiselab.analysis.rankci import shift_between_groups, spearman
from tortoiselab.studies.measure import change, direction, equivalent, ok_rows, pair_key, pairs
from tortoiselab.studies.model import SEEDS, Measurement, NoData, claim

S002 = SEEDS["002"]


HIGH_LOSS = [6, 8, 10]
HARD, GENTLE = 0.5, 0.9  # the hardest and the gentlest cut of the sweep (ssthresh = beta * cwnd)
# the smallest effects of interest of the direction claims: a growth of the penalty of 1 s (the paper's
# Figure 12 shows differences of seconds on the >1 MB page); a correlation of 0.1 (Cohen's "small")
PENALTY_GROWTH_S, SMALL_RHO = 1.0, 0.1


def _reno_low_loss(df: pd.DataFrame) -> Measurement:
    """Each beta against 0.5 at 2 % loss (at 0 % the back-off never acts:
    the runs are the same in every beta, a tie by construction)."""
    ms = {b: change(df, "plt_ms", "beta", 0.5, b, "ratio", path__loss_pct=2)
          for b in sorted(set(df["beta"].dropna()) - {0.5})}
    if not ms:
        raise NoData("no reno_beta runs beyond beta 0.5")
    w = max(ms, key=lambda b: abs(ms[b].value))
    m = ms[w]
    return replace(m, detail=f"shown: beta {w:g} vs 0.5; " + "; ".join(f"beta {b:g}: {ms[b].text()}" for b in ms))


def _penalty(df: pd.DataFrame, loss) -> np.ndarray:
    """Per pair: the hardest cut's PLT minus the gentlest's, in seconds."""
    p = pairs(df, "plt_ms", "beta", GENTLE, HARD, path__loss_pct=loss)
    return ((p["arm"] - p["control"]) / 1000).to_numpy(float)


def _penalty_grows(df: pd.DataFrame) -> Measurement:
    """"as the loss percentage increased, larger reduction factor consumed
    longer": the hardest cut's (beta 0.5) PLT penalty over the gentlest
    (beta 0.9), in seconds as the paper's Figure 12 plots time: its shift
    from 2 % loss to 6-10 % (Mann-Whitney between the two groups of
    per-pair penalties, Hodges-Lehmann estimate and its interval)."""
    low, high = _penalty(df, 2), _penalty(df, HIGH_LOSS)
    if len(low) < 2 or len(high) < 2:
        raise NoData("needs two or more pairs of beta 0.5 and 0.9 runs at 2 % and at 6-10 % loss")
    r = shift_between_groups(low, high)
    return Measurement(r.estimate, r.low, r.high, r.p_value, min(len(low), len(high)), "s",
                       f"beta 0.5's PLT minus beta 0.9's: median {np.median(low):+.1f} s at 2 % loss, "
                       f"{np.median(high):+.1f} s at 6-10 %; {r.test}", level=0.05, min_p=r.min_p,
                       control=tuple(low.tolist()), arm=tuple(high.tolist()), statistic="shift-groups")


def _gentler_faster(df: pd.DataFrame) -> Measurement:
    """"smaller reduction factor ... reduces the congestion window less
    aggressively and hence performs better": Spearman's rho of the cut's
    depth (1 - beta) against PLT at high loss, each PLT divided by its
    condition's median (loss levels differ in scale); positive = the
    gentler cut is faster. Fisher z interval and test (analysis.rankci)."""
    d = ok_rows(df, "plt_ms", path__loss_pct=HIGH_LOSS)
    if len(d) < 5 or d["beta"].nunique() < 2:
        raise NoData("needs 5 or more high-loss runs over several betas (the Fisher z interval of rho)")
    cond = [pair_key(c, "beta") for c in d["cond"]]
    rel = (d["plt_ms"] / d.groupby(cond)["plt_ms"].transform("median")).to_numpy(float)
    depth = (1 - d["beta"]).to_numpy(float)
    r = spearman(depth, rel)
    med = d.groupby("beta")["plt_ms"].median()
    return Measurement(r.estimate, r.low, r.high, r.p_value, len(d), "rho",
                       f"{r.test}, of the cut's depth 1 - beta vs PLT (relative to its loss level's median); "
                       "median PLT by beta: " + ", ".join(f"{b:g}: {v:.0f} ms" for b, v in med.items()),
                       level=0.05, control=tuple(depth.tolist()), arm=tuple(rel.tolist()), statistic="spearman")


CLAIMS = (
    claim("reno_beta", "low-loss-similar", S002,
          "for different congestion window reduction factors, modified variant performed similar at a lower loss "
          "percentage", "reno_beta", "PLT of the >1 MB page, loss 2 %, each beta vs 0.5 (largest shown)",
          _reno_low_loss, equivalent(5)),
    claim("reno_beta", "high-loss-hard-cut-slower", S002,
          "as the loss percentage increased, larger reduction factor [the harder cut, in the paper's own words "
          "'reduces the congestion window aggressively'] consumed longer duration for complete page load",
          "reno_beta", "beta 0.5's PLT penalty over beta 0.9 in seconds (the paper's Figure 12 plots time), its "
          "growth from loss 2 % to 6/10 %, >1 MB page", _penalty_grows,
          direction("higher", "the penalty's growth", PENALTY_GROWTH_S, "s")),
    claim("reno_beta", "high-loss-gentler-wins", S002,
          "Surprisingly, smaller reduction factor performed better on high loss ... smaller reduction factor "
          "reduces the congestion window less aggressively and hence performs better", "reno_beta",
          "Spearman rho of the cut's depth (1 - beta) vs PLT, loss 6/10 %, >1 MB page", _gentler_faster,
          direction("higher", "rho (a gentler cut, a shorter PLT)", SMALL_RHO, "rho")),
)
