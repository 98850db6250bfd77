"""CUBIC+ for HTTP/2 (Stony Brook, seed 002): CUBIC with a gentler back-off
(beta only, and with the RTT-aware K) against Linux's cubic, under loss, over
delay and initial windows (labs/03-cubic-plus.md)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tortoiselab.analysis import stats
from tortoiselab.studies.measure import change, direction, equivalent, pairs
from tortoiselab.studies.model import SEEDS, Measurement, NoData, claim

S002 = SEEDS["002"]
CUBIC, BETA_ONLY, BETA_K = "cubic", "cubic_plus(n=6)", "cubic_plus(n=6,rtt_aware=1)"
OBJ_50K, OBJ_1M = "objects/50000.bin", "objects/1000000.bin"


def _cp(metric: str, arm: str, **where):
    return lambda df: change(df, metric, "arm", CUBIC, arm, "ratio", **where)


def _size_effect(df: pd.DataFrame) -> Measurement:
    """Under loss: CUBIC+'s throughput gain for >1 MB objects minus its gain
    for 10-100 KB objects (percentage points); Mann-Whitney between the
    per-pair gains."""
    gains = {}
    for url in (OBJ_1M, OBJ_50K):
        p = pairs(df, "throughput_mbit", "arm", CUBIC, BETA_ONLY, url=url, path__loss_pct=lambda s: s > 0)
        if p.empty:
            raise NoData(f"no lossy h2load runs of {url}")
        gains[url] = (100 * (p["arm"] / p["control"] - 1)).to_numpy(float)
    big, med = gains[OBJ_1M], gains[OBJ_50K]
    pv = stats.mann_whitney(med, big)["p_value"] if min(len(big), len(med)) > 1 else None
    return Measurement(float(np.median(big) - np.median(med)), math.nan, math.nan, pv, min(len(big), len(med)),
                       "pp", f"median gain {np.median(big):+.1f} % for 1 MB, {np.median(med):+.1f} % for 50 KB "
                             "(Mann-Whitney)")


def _worst_of(metric: str, arms: tuple[str, ...], pick: str, **where):
    """The CUBIC+ variant whose change is the largest ("max") or the largest
    in size ("abs"), with the others in detail."""
    def measure(df: pd.DataFrame) -> Measurement:
        ms = {a: change(df, metric, "arm", CUBIC, a, "ratio", **where) for a in arms}
        key = (lambda a: ms[a].value) if pick == "max" else (lambda a: abs(ms[a].value))
        w = max(ms, key=key)
        m = ms[w]
        return Measurement(m.value, m.low, m.high, m.p_value, m.n, "%",
                           f"shown: {w}; " + "; ".join(f"{a}: {ms[a].text()}" for a in ms))
    return measure


CLAIMS = (
    claim("cubic_plus", "loss-throughput", S002,
          "We observe that the throughput of webpages with CUBIC+ [beta only] is better than that of original "
          "version [under packet loss]", "cubic_plus",
          "h2load throughput, 50 KB and 1 MB objects, loss 2/6/10 %, pooled",
          _cp("throughput_mbit", BETA_ONLY, client__loader="h2load", path__loss_pct=lambda s: s > 0),
          direction("higher", "CUBIC+'s throughput")),
    claim("cubic_plus", "larger-objects-gain-more", S002,
          "For webpages with larger object size, we see considerable variation in throughput ... For medium size "
          "objects, we still see improvement ... but not as contrasting", "cubic_plus",
          "CUBIC+ gain for 1 MB minus gain for 50 KB, lossy", _size_effect, direction("higher", "the difference")),
    claim("cubic_plus", "plt-low-loss-equal", S002,
          "page load time for webpages using CUBIC+ almost equals that of default CUBIC TCP under low percentage "
          "of packet loss", "cubic_plus", "PLT of the >1 MB page, loss 0 and 2 %",
          _cp("plt_ms", BETA_ONLY, client__loader="loader", path__loss_pct=[0, 2]), equivalent(5)),
    claim("cubic_plus", "plt-high-loss-better", S002,
          "as packet loss% increases, CUBIC+ was observed to outperform default TCP CUBIC (Figure 6, >1 MB)",
          "cubic_plus", "PLT of the >1 MB page, loss 6 and 10 %",
          _cp("plt_ms", BETA_ONLY, client__loader="loader", path__loss_pct=[6, 10]),
          direction("lower", "CUBIC+'s PLT")),
    claim("cubic_plus", "delay-large-cubic-wins", S002,
          "for larger objects, performance of modified version deteriorates. Default CUBIC TCP outperforms both "
          "modified versions under varying delay", "cubic_plus",
          "h2load throughput, 1 MB, RTT 20/100/200 ms, no loss (the better variant shown)",
          _worst_of("throughput_mbit", (BETA_ONLY, BETA_K), "max", url=OBJ_1M, path__loss_pct=0,
                    server__initcwnd_pkts=10),
          direction("lower", "the better variant's throughput")),
    claim("cubic_plus", "delay-small-close", S002,
          "throughput of the two modified versions ... is close to that of original TCP CUBIC for smaller objects "
          "and medium sized objects", "cubic_plus", "h2load throughput, 50 KB, RTT 20/100/200 ms, no loss",
          _worst_of("throughput_mbit", (BETA_ONLY, BETA_K), "abs", url=OBJ_50K, path__loss_pct=0,
                    server__initcwnd_pkts=10), equivalent(5)),
    claim("cubic_plus", "initcwnd-little-role", S002,
          "initial congestion window has very less role ... All three variants are observed to perform the same "
          "under varying values of initial congestion window size", "cubic_plus",
          "h2load throughput, 50 KB, IW 3/10/32, RTT 100 ms, no loss",
          _worst_of("throughput_mbit", (BETA_ONLY, BETA_K), "abs", url=OBJ_50K, path__loss_pct=0,
                    path__rtt_ms=100), equivalent(5)),
)
