"""CUBIC+ for HTTP/2 (Stony Brook, seed 002): CUBIC with a gentler back-off
(beta only, and with the RTT-aware K) against the control, the same module
with n = 1 (plain RFC 9438 CUBIC: the paper's change and nothing else
differs), under loss, over delay and initial windows; Linux's stock cubic
(with HyStart, which the module lacks) is shown beside it, labelled
(labs/03-cubic-plus.md)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from tortoiselab.analysis.rankci import shift_between_groups
from tortoiselab.spec import cols
from tortoiselab.studies.measure import Where, change, direction, equivalent, exact_change, pairs, tie_reason
from tortoiselab.studies.model import ALPHA, SEEDS, Measurement, NoData, claim

S002 = SEEDS["002"]
CONTROL, BETA_ONLY, BETA_K = "cubic_plus(n=1)", "cubic_plus(n=6)", "cubic_plus(n=6,rtt_aware=1)"
# the RTT-aware K is the lab's own function f(s) = 2R / (R + s) (the paper gives none; kernel/modules/README.md):
# its sensitivity, R moved from its default 100 ms to a quarter and four times (K x 0.4 and x 1.6 at 100 ms)
K_REFS_MS = (25, 400)


def beta_k(ref_ms: int) -> str:
    """The arm of CUBIC+ with the RTT-aware K at reference RTT ref_ms."""
    return f"cubic_plus(n=6,rtt_aware=1,rtt_ref_ms={ref_ms})"
STOCK = "cubic"  # Linux's tcp_cubic, with HyStart: a secondary comparison only
# the paper's size classes (Table 1; Figures 3-5 and 7-11): 1-10 KB "medium",
# 10-100 KB and > 1 MB "larger"
OBJ_500, OBJ_5K, OBJ_50K, OBJ_1M = "objects/500.bin", "objects/5000.bin", "objects/50000.bin", "objects/1000000.bin"
LOSSY = {cols.LOSS: lambda s: s > 0}
TIE_5K = ("the 5 KB object is left out: its ~4-segment responses fit the window after almost any back-off, so "
          "beta' can act only where a cut leaves fewer (IW 3): a tie by construction elsewhere")


def _distinct(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Loss-free runs on the virtual clock repeat exactly: where every
    repetition of a (condition, arm) gave the same value, keep one, so that
    copies do not count as evidence (lossy runs differ by seed and stay)."""
    d = df.copy()
    d["_key"] = d["cond"].astype(str) + "|" + d["arm"].astype(str)
    lossless = d[cols.LOSS].fillna(0) == 0
    same = d[lossless].groupby("_key")[metric].transform("nunique") <= 1
    drop = same[same].index
    first = d.loc[drop].sort_values("repetition").drop_duplicates("_key").index
    return d.drop(index=drop.difference(first)).drop(columns="_key")


def _tie_note(df: pd.DataFrame, url: str, where: Where) -> str:
    """How many control/arm pairs of url in the runs where selects are
    identical, with TIE_5K."""
    p = pairs(df, cols.THROUGHPUT, "arm", CONTROL, BETA_ONLY, {cols.URL: url, **where})
    same = int((p["arm"] == p["control"]).sum())
    return f"; {TIE_5K}: {same} of {len(p)} pairs identical" if len(p) else ""


def _vs_control(metric: str, arm: str, where: Where, tie_url: str | None = None):
    """The arm's median per-pair change against the n = 1 control over the
    runs where selects, with the same arm against stock cubic in the
    detail (and how many of tie_url's lossy pairs are identical)."""
    def measure(df: pd.DataFrame) -> Measurement:
        m = change(df, metric, "arm", CONTROL, arm, "ratio", where=where)
        note = _tie_note(df, tie_url, LOSSY) if tie_url else ""
        return replace(m, detail=m.detail + _stock(df, metric, arm, where) + note)
    return measure


def _stock(df: pd.DataFrame, metric: str, arm: str, where: Where) -> str:
    """The arm against Linux's stock cubic, for the detail line ("" without
    stock-cubic runs)."""
    try:
        s = change(df, metric, "arm", STOCK, arm, "ratio", where=where)
    except NoData:
        return ""
    return f"; secondary, {arm} against stock cubic (which has HyStart): {s.text()}"


def _gains(df: pd.DataFrame, url: str) -> np.ndarray:
    p = pairs(df, cols.THROUGHPUT, "arm", CONTROL, BETA_ONLY, {cols.URL: url, **LOSSY})
    if p.empty:
        raise NoData(f"no lossy h2load runs of {url} in both arms")
    return (100 * (p["arm"] / p["control"] - 1)).to_numpy(float)


def _pairs_of(df: pd.DataFrame, url: str) -> pd.DataFrame:
    p = pairs(df, cols.THROUGHPUT, "arm", CONTROL, BETA_ONLY, {cols.URL: url, **LOSSY})
    if p.empty:
        raise NoData(f"no lossy h2load runs of {url} in both arms")
    return p


def _gains(df: pd.DataFrame, url: str) -> np.ndarray:
    p = _pairs_of(df, url)
    return (100 * (p["arm"] / p["control"] - 1)).to_numpy(float)


def _size_effect(df: pd.DataFrame) -> Measurement:
    """Under loss: CUBIC+'s throughput gain for the paper's "larger" objects
    (> 1 MB and 10-100 KB, Figures 3-4) against its gain for its "medium"
    ones (1-10 KB, Figure 5), in percentage points: the shift between the
    two groups of per-pair gains (Mann-Whitney, with the Hodges-Lehmann
    estimate and its interval). A tie by construction only by the
    documented rule, every pair of every size identical (tie_reason); how
    many 5 KB pairs are identical is said in the detail (a medium object
    that cannot gain is what the sentence claims, not a tie)."""
    by = {u: _pairs_of(df, u) for u in (OBJ_1M, OBJ_50K, OBJ_5K)}
    big = np.concatenate([_gains(df, OBJ_1M), _gains(df, OBJ_50K)])
    med = _gains(df, OBJ_5K)
    parts = {u: np.median(_gains(df, u)) for u in (OBJ_1M, OBJ_50K, OBJ_5K)}
    same = int(np.sum(med == 0))
    every = pd.concat(by.values())
    tie = tie_reason(every["control"].to_numpy(float), every["arm"].to_numpy(float))
    detail = (f"median gain against n = 1: {np.median(big):+.1f} % for 1 MB and 50 KB ({parts[OBJ_1M]:+.1f} %, "
              f"{parts[OBJ_50K]:+.1f} %), {np.median(med):+.1f} % for 5 KB; 5 KB pairs identical: {same} of {len(med)} "
              "(a 5 KB response fits the window after almost any back-off: the medium objects gain little by "
              "construction, which is what the sentence says; a tie only if every pair is identical)")
    if min(len(big), len(med)) < 2:
        return Measurement(float(np.median(big) - np.median(med)), n=min(len(big), len(med)), unit="pp",
                           detail=detail, tie=tie, n_what="pairs in the smaller group")
    r = shift_between_groups(med, big)
    return Measurement(r.estimate, r.low, r.high, r.p_value, min(len(big), len(med)), "pp",
                       f"{detail}; {r.test}", tie=tie, level=ALPHA, min_p=r.min_p,
                       control=tuple(med.tolist()), arm=tuple(big.tolist()), statistic="shift-groups",
                       n_what="pairs in the smaller group")


def _worst_of(metric: str, arms: tuple[str, ...], pick: str, where: Where, tie_url: str | None = None,
              tie_where: Where | None = None):
    """The CUBIC+ variant whose change against the n = 1 control over the
    runs where selects is the largest ("max") or the largest in size
    ("abs"; on exact runs, in its farthest condition), the others and the
    stock-cubic comparison in detail. Loss-free
    runs (where sets loss 0) repeat exactly on the virtual clock: one pair
    per condition, read as exact values (measure.exact_change), as every
    study reads exact runs."""
    def measure(df: pd.DataFrame) -> Measurement:
        lossless = where.get(cols.LOSS) == 0
        df = _distinct(df, metric)

        def one(a: str) -> Measurement:
            if not lossless:
                return change(df, metric, "arm", CONTROL, a, "ratio", where=where)
            p = pairs(df, metric, "arm", CONTROL, a, where)
            if p.empty:
                raise NoData(f"no paired runs of {a} and {CONTROL} for {metric}")
            return exact_change(p, f"the median per-pair change of {metric}, {a} vs {CONTROL}")
        ms = {a: one(a) for a in arms}
        # "abs" on exact runs: the arm whose farthest condition is farthest from the control (a condition decides)
        key = ((lambda a: ms[a].value) if pick == "max" else
               (lambda a: max(abs(ms[a].low), abs(ms[a].high))) if lossless else (lambda a: abs(ms[a].value)))
        w = max(ms, key=key)
        m = ms[w]
        return replace(m, detail=f"shown: {w} vs {CONTROL}; " + "; ".join(f"{a}: {ms[a].text()}" for a in ms)
                       + _stock(df, metric, w, where) + (_tie_note(df, tie_url, tie_where or {}) if tie_url else "")
                       + ("; loss-free repetitions that repeat exactly counted once" if lossless else ""))
    return measure


def _k_sensitivity(cid: str, text: str, metric_text: str, pick: str, judge_rule, where: Where) -> tuple:
    """Variants of a delay claim read on the RTT-aware K alone, at each
    reference RTT of K_REFS_MS: how far the lab's choice of f moves the
    verdict."""
    return tuple(claim("cubic_plus", f"{cid}-k-ref-{r}ms", S002, text, "cubic_plus",
                       f"{metric_text}; CUBIC+ with the RTT-aware K at R = {r} ms alone",
                       _worst_of(cols.THROUGHPUT, (beta_k(r),), pick, where), judge_rule, sentence=cid,
                       variant=f"the lab's RTT-aware K with R = {r} ms (K x {2 * r / (r + 100):.1f} at 100 ms)")
                 for r in K_REFS_MS)


DELAY_LARGE = ("for larger objects, performance of modified version deteriorates. Default CUBIC TCP outperforms both "
               "modified versions under varying delay")
DELAY_SMALL = ("throughput of the two modified versions ... is close to that of original TCP CUBIC for smaller "
               "objects and medium sized objects")
DELAY_LARGE_WHAT = "h2load throughput, 1 MB, RTT 20/100/200 ms, no netem loss (3 MB overflow the one-BDP queue), vs n = 1"
DELAY_LARGE_WHERE = {cols.URL: OBJ_1M, cols.LOSS: 0, cols.INITCWND: 10}
# the paper's 7.2 and 7.3 vary delay and the initial window without added loss (Table 1, Figures 7-11): the primary
# readings; the lab's 2 % loss beside them (variants), where the back-off can act on these sizes
DELAY_SMALL_WHAT = "h2load throughput, 5 KB and 50 KB, RTT 20/100/200 ms, no netem loss (the paper's 7.2), vs n = 1"
DELAY_SMALL_WHERE = {cols.URL: [OBJ_5K, OBJ_50K], cols.LOSS: 0, cols.INITCWND: 10}
DELAY_SMALL_LOSSY_WHAT = "h2load throughput, 50 KB, RTT 20/100/200 ms, 2 % loss, vs n = 1"
DELAY_SMALL_LOSSY_WHERE = {cols.URL: OBJ_50K, cols.LOSS: 2, cols.INITCWND: 10}
PAPER_GRID = "paper"  # experiments/cubic_plus.yaml: the loss-free delay and IW sweeps, one repetition (exact runs)
IW_TEXT = ("initial congestion window has very less role ... All three variants are observed to perform the same "
           "under varying values of initial congestion window size")
IW_WHERE = {cols.URL: [OBJ_5K, OBJ_50K], cols.LOSS: 0, cols.RTT: 100, cols.INITCWND: [3, 10, 21, 32]}
IW_LOSSY_WHERE = {cols.URL: OBJ_50K, cols.LOSS: 2, cols.RTT: 100}
TINY_TEXT = "For really small objects (<1KB size), both the algorithms were found to perform same in terms of packet loss"


CLAIMS = (
    claim("cubic_plus", "loss-throughput", S002,
          "We observe that the throughput of webpages with CUBIC+ [beta only] is better than that of original "
          "version [under packet loss]", "cubic_plus",
          "h2load throughput, 50 KB and 1 MB objects, loss 2/6/10 %, pooled; control: the module with n = 1",
          _vs_control(cols.THROUGHPUT, BETA_ONLY, {cols.URL: [OBJ_50K, OBJ_1M], **LOSSY}, tie_url=OBJ_5K),
          direction("higher", "CUBIC+'s throughput")),
    claim("cubic_plus", "larger-objects-gain-more", S002,
          "For webpages with larger object size, we see considerable variation in throughput ... (Figure 3,4) For "
          "medium size objects, we still see improvement ... but not as contrasting (Figure 5)", "cubic_plus",
          "CUBIC+ gain for > 1 MB and 10-100 KB objects minus gain for 1-10 KB objects, lossy, against n = 1",
          _size_effect, direction("higher", "the larger objects' gain over the 1-10 KB objects'", 5, "pp")),
    claim("cubic_plus", "plt-low-loss-equal", S002,
          "page load time for webpages using CUBIC+ almost equals that of default CUBIC TCP under low percentage "
          "of packet loss", "cubic_plus", "PLT of the >1 MB page, loss 2 % (the lowest non-zero level), vs n = 1",
          _vs_control(cols.PLT, BETA_ONLY, {cols.LOADER: "loader", cols.LOSS: 2}), equivalent(5)),
    claim("cubic_plus", "plt-high-loss-better", S002,
          "as packet loss% increases, CUBIC+ was observed to outperform default TCP CUBIC (Figure 6, >1 MB)",
          "cubic_plus", "PLT of the >1 MB page, loss 6 and 10 %, vs n = 1",
          _vs_control(cols.PLT, BETA_ONLY, {cols.LOADER: "loader", cols.LOSS: [6, 8, 10]}),
          direction("lower", "CUBIC+'s PLT")),
    claim("cubic_plus", "delay-large-cubic-wins", S002, DELAY_LARGE, "cubic_plus",
          DELAY_LARGE_WHAT + " (the better variant shown)",
          _worst_of(cols.THROUGHPUT, (BETA_ONLY, BETA_K), "max", DELAY_LARGE_WHERE),
          direction("lower", "the better variant's throughput")),
    claim("cubic_plus", "delay-small-close", S002, DELAY_SMALL, "cubic_plus",
          DELAY_SMALL_WHAT + " (exact runs: one pair per condition; the arm farthest from the control shown)",
          _worst_of(cols.THROUGHPUT, (BETA_ONLY, BETA_K), "abs", DELAY_SMALL_WHERE), equivalent(5), grid=PAPER_GRID),
    claim("cubic_plus", "delay-small-close-lossy", S002, DELAY_SMALL, "cubic_plus",
          DELAY_SMALL_LOSSY_WHAT + " (5 KB ties even with loss)",
          _worst_of(cols.THROUGHPUT, (BETA_ONLY, BETA_K), "abs", DELAY_SMALL_LOSSY_WHERE, tie_url=OBJ_5K,
                    tie_where={cols.LOSS: 2, cols.INITCWND: 10}), equivalent(5), sentence="delay-small-close",
          variant="2 % loss (the lab's: without loss every arm runs the same slow start)"),
    claim("cubic_plus", "initcwnd-little-role", S002, IW_TEXT, "cubic_plus",
          "h2load throughput, 5 KB and 50 KB, IW 3/10/21/32 (the paper's Table 1), RTT 100 ms, no netem loss (the "
          "paper's 7.3), vs n = 1 (exact runs: one pair per condition)",
          _worst_of(cols.THROUGHPUT, (BETA_ONLY, BETA_K), "abs", IW_WHERE), equivalent(5), grid=PAPER_GRID),
    claim("cubic_plus", "initcwnd-little-role-lossy", S002, IW_TEXT, "cubic_plus",
          "h2load throughput, 50 KB, IW 3/10/21/32, RTT 100 ms, 2 % loss (5 KB ties even with loss), vs n = 1",
          _worst_of(cols.THROUGHPUT, (BETA_ONLY, BETA_K), "abs", IW_LOSSY_WHERE, tie_url=OBJ_5K,
                    tie_where={cols.LOSS: 2, cols.RTT: 100}), equivalent(5), sentence="initcwnd-little-role",
          variant="2 % loss (the lab's: without loss every arm runs the same slow start)"),
    claim("cubic_plus", "tiny-objects-same", S002, TINY_TEXT, "cubic_plus",
          "h2load throughput, the < 1 KB object (500 B), loss 2/6/10 %, CUBIC+ (beta only) vs n = 1",
          _vs_control(cols.THROUGHPUT, BETA_ONLY, {cols.URL: OBJ_500, **LOSSY}), equivalent(5)),
    *_k_sensitivity("delay-large-cubic-wins", DELAY_LARGE, DELAY_LARGE_WHAT, "max",
                    direction("lower", "the better variant's throughput"), DELAY_LARGE_WHERE),
    *_k_sensitivity("delay-small-close", DELAY_SMALL, DELAY_SMALL_LOSSY_WHAT, "abs", equivalent(5),
                    DELAY_SMALL_LOSSY_WHERE),
)
