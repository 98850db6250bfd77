"""Reno's reduction factor 0.5-0.9 (Stony Brook, seed 002): the page load
for each beta against 0.5 at low loss, and at high loss the paper's two
sentences, each read with the paper's own meaning of "reduction factor"
(how hard the window is cut: its mechanism sentence says the larger one
"reduces the congestion window aggressively"), which in our module's terms
(ssthresh = beta * cwnd) is a smaller beta (labs/03-cubic-plus.md)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
from scipy import stats as st

from tortoiselab.analysis import stats
from tortoiselab.studies.measure import change, direction, equivalent, ok_rows, pair_key, pairs
from tortoiselab.studies.model import SEEDS, Measurement, NoData, claim

S002 = SEEDS["002"]


HIGH_LOSS = [6, 8, 10]
HARD, GENTLE = 0.5, 0.9  # the hardest and the gentlest cut of the sweep (ssthresh = beta * cwnd)


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


def _penalty(df: pd.DataFrame, loss) -> tuple[np.ndarray, float]:
    """Per pair: the hardest cut's PLT over the gentlest's, in %; and the
    median difference in ms."""
    p = pairs(df, "plt_ms", "beta", GENTLE, HARD, path__loss_pct=loss)
    return (100 * (p["arm"] / p["control"] - 1)).to_numpy(float), float((p["arm"] - p["control"]).median())


def _penalty_grows(df: pd.DataFrame) -> Measurement:
    """"as the loss percentage increased, larger reduction factor consumed
    longer": the hardest cut's (beta 0.5) PLT penalty over the gentlest
    (beta 0.9), at high loss minus at 2 %, in percentage points;
    Mann-Whitney between the per-pair penalties."""
    (low, low_ms), (high, high_ms) = _penalty(df, 2), _penalty(df, HIGH_LOSS)
    if not len(low) or not len(high):
        raise NoData("needs beta 0.5 and 0.9 runs at 2 % and at 6-10 % loss")
    pv = stats.mann_whitney(low, high)["p_value"] if min(len(low), len(high)) > 1 else None
    return Measurement(float(np.median(high) - np.median(low)), math.nan, math.nan, pv, min(len(low), len(high)),
                       "pp", f"beta 0.5's PLT over beta 0.9's: median {np.median(low):+.1f} % at 2 % loss, "
                             f"{np.median(high):+.1f} % at 6-10 % (Mann-Whitney); in ms {low_ms:+.0f} and "
                             f"{high_ms:+.0f}")


def _gentler_faster(df: pd.DataFrame) -> Measurement:
    """"smaller reduction factor ... reduces the congestion window less
    aggressively and hence performs better": Spearman's rho of the cut's
    depth (1 - beta) against PLT at high loss, each PLT divided by its
    condition's median (loss levels differ in scale); positive = the
    gentler cut is faster."""
    d = ok_rows(df, "plt_ms", path__loss_pct=HIGH_LOSS)
    if d.empty or d["beta"].nunique() < 2:
        raise NoData("no high-loss runs over several betas")
    cond = [pair_key(c, "beta") for c in d["cond"]]
    rel = d["plt_ms"] / d.groupby(cond)["plt_ms"].transform("median")
    r = st.spearmanr(1 - d["beta"], rel)
    med = d.groupby("beta")["plt_ms"].median()
    return Measurement(float(r.statistic), math.nan, math.nan, float(r.pvalue), len(d), "rho",
                       "Spearman rho of the cut's depth 1 - beta vs PLT (relative to its loss level's median); "
                       "median PLT by beta: " + ", ".join(f"{b:g}: {v:.0f} ms" for b, v in med.items()))


CLAIMS = (
    claim("reno_beta", "low-loss-similar", S002,
          "for different congestion window reduction factors, modified variant performed similar at a lower loss "
          "percentage", "reno_beta", "PLT of the >1 MB page, loss 2 %, each beta vs 0.5 (largest shown)",
          _reno_low_loss, equivalent(5)),
    claim("reno_beta", "high-loss-hard-cut-slower", S002,
          "as the loss percentage increased, larger reduction factor [the harder cut, in the paper's own words "
          "'reduces the congestion window aggressively'] consumed longer duration for complete page load",
          "reno_beta", "beta 0.5's PLT penalty over beta 0.9, loss 6/10 % minus loss 2 %, >1 MB page",
          _penalty_grows, direction("higher", "the penalty's growth")),
    claim("reno_beta", "high-loss-gentler-wins", S002,
          "Surprisingly, smaller reduction factor performed better on high loss ... smaller reduction factor "
          "reduces the congestion window less aggressively and hence performs better", "reno_beta",
          "Spearman rho of the cut's depth (1 - beta) vs PLT, loss 6/10 %, >1 MB page", _gentler_faster,
          direction("higher", "rho (a gentler cut, a shorter PLT)")),
)
