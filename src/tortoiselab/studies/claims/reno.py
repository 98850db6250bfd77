"""Reno's reduction factor 0.5-0.9 (Stony Brook, seed 002): the page load
for each beta against 0.5 at low loss, and both readings of the paper's
claim at high loss (labs/03-cubic-plus.md)."""

from __future__ import annotations

import math

import pandas as pd
from scipy import stats as st

from tortoiselab.studies.measure import change, direction, equivalent, ok_rows, pair_key
from tortoiselab.studies.model import SEEDS, Measurement, NoData, claim

S002 = SEEDS["002"]


def _reno(metric: str, arm_beta: float, **where):
    return lambda df: change(df, metric, "beta", 0.5, arm_beta, "ratio", **where)


def _reno_low_loss(df: pd.DataFrame) -> Measurement:
    ms = {b: change(df, "plt_ms", "beta", 0.5, b, "ratio", path__loss_pct=[0, 2])
          for b in sorted(set(df["beta"].dropna()) - {0.5})}
    if not ms:
        raise NoData("no reno_beta runs beyond beta 0.5")
    w = max(ms, key=lambda b: abs(ms[b].value))
    m = ms[w]
    return Measurement(m.value, m.low, m.high, m.p_value, m.n, "%",
                       f"shown: beta {w:g} vs 0.5; " + "; ".join(f"beta {b:g}: {ms[b].text()}" for b in ms))


def _reno_trend(df: pd.DataFrame) -> Measurement:
    """Spearman's rho of beta against PLT at high loss, each PLT divided by
    its condition's median (loss levels differ in scale)."""
    d = ok_rows(df, "plt_ms", path__loss_pct=[6, 8, 10])
    if d.empty or d["beta"].nunique() < 2:
        raise NoData("no high-loss runs over several betas")
    cond = [pair_key(c, "beta") for c in d["cond"]]
    rel = d["plt_ms"] / d.groupby(cond)["plt_ms"].transform("median")
    r = st.spearmanr(d["beta"], rel)
    med = d.groupby("beta")["plt_ms"].median()
    return Measurement(float(r.statistic), math.nan, math.nan, float(r.pvalue), len(d), "rho",
                       "Spearman rho of beta vs PLT (relative to its loss level's median); median PLT by beta: "
                       + ", ".join(f"{b:g}: {v:.0f} ms" for b, v in med.items()))


CLAIMS = (
    claim("reno_beta", "low-loss-similar", S002,
          "for different congestion window reduction factors, modified variant performed similar at a lower loss "
          "percentage", "reno_beta", "PLT of the >1 MB page, loss 0 and 2 %, each beta vs 0.5 (largest shown)",
          _reno_low_loss, equivalent(5)),
    claim("reno_beta", "high-loss-literal", S002,
          "as the loss percentage increased, larger reduction factor consumed longer duration for complete page "
          "load. Surprisingly, smaller reduction factor performed better on high loss [read literally: beta 0.9 "
          "slower than beta 0.5, beta = the factor cwnd is multiplied by]", "reno_beta",
          "PLT of the >1 MB page, loss 6/10 %, beta 0.9 vs 0.5",
          _reno("plt_ms", 0.9, path__loss_pct=[6, 8, 10]), direction("higher", "beta 0.9's PLT")),
    claim("reno_beta", "high-loss-gentler-wins", S002,
          "smaller reduction factor reduces the congestion window less aggressively and hence performs better "
          "[the paper's own mechanism: a gentler back-off, i.e. a larger beta, is faster under high loss]",
          "reno_beta", "Spearman rho of beta vs PLT, loss 6/10 %", _reno_trend,
          direction("lower", "rho (larger beta, shorter PLT)")),
)
