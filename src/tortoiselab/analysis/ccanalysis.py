"""How an algorithm reacted to one loss, read off the kernel's own cwnd
(tcp:tcp_probe samples: [t s, snd_cwnd, ssthresh, srtt us, snd_una, snd_nxt];
each sample is taken as an ACK arrives, before the ACK is processed).

Pure functions: the lab records, these compute.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

CUBIC_C = 0.4  # RFC 9438 section 4.1, segments / s^3


@dataclass(frozen=True)
class LossEvent:
    t_loss: float  # when the sender reduced (first sample showing the new ssthresh)
    cwnd_before: int  # cwnd the reduction was computed from
    ssthresh_after: int
    ratio: float  # ssthresh_after / cwnd_before: the multiplicative decrease
    t_recovered: float | None  # the ACK that ended recovery (snd_una past the recovery point)
    cwnd_recovered: int | None  # cwnd right after it: RFC 6937/5681 set it to ssthresh
    srtt_ms: float

    def as_dict(self) -> dict:
        return asdict(self)


def find_loss_event(samples: list[list[float]]) -> LossEvent | None:
    """The first multiplicative decrease: ssthresh changes to a value below the
    cwnd just before it. (HyStart's exit from slow start sets ssthresh = cwnd,
    which is not a decrease and is skipped.)"""
    for i in range(1, len(samples)):
        prev, cur = samples[i - 1], samples[i]
        if cur[2] != prev[2] and cur[2] < prev[1]:
            before, after = int(prev[1]), int(cur[2])
            # recovery point: what had been sent when the loss was detected
            high = int(prev[5])
            j = next((k for k in range(i, len(samples)) if _seq_ge(int(samples[k][4]), high)), None)
            rec = samples[j + 1] if j is not None and j + 1 < len(samples) else None
            return LossEvent(
                t_loss=cur[0], cwnd_before=before, ssthresh_after=after, ratio=after / before,
                t_recovered=samples[j][0] if rec else None, cwnd_recovered=int(rec[1]) if rec else None,
                srtt_ms=cur[3] / 1000.0)
    return None


def _seq_ge(a: int, b: int) -> bool:
    """a >= b in 32-bit sequence space."""
    return ((a - b) & 0xFFFFFFFF) < 0x80000000


def cubic_k(w_max: float, beta: float, c: float = CUBIC_C) -> float:
    """RFC 9438 eq. 2 with cwnd_epoch = beta * W_max: K = cbrt(W_max (1 - beta) / C)."""
    return (w_max * (1 - beta) / c) ** (1 / 3)


def rtt_aware_factor(srtt_ms: float, rtt_ref_ms: float) -> float:
    """Our CUBIC+ RTT-aware K scale f(s) = 2R / (R + s) (kernel/modules/README.md)."""
    return 2 * rtt_ref_ms / (rtt_ref_ms + srtt_ms)


def fit_k(samples: list[list[float]], ev: LossEvent, w_max: float, c: float = CUBIC_C,
          horizon_s: float | None = None) -> dict:
    """Fit K in cwnd(t) = C (t - K)^3 + W_max to the regrowth after the loss,
    t from the start of the congestion-avoidance epoch (the end of recovery).
    The kernel moves cwnd toward the cubic target one RTT ahead (RFC 9438
    section 4.2), so the fit is of t + RTT. Returns K and the fit's RMS error."""
    if ev.t_recovered is None:
        return {"k_fit_s": math.nan, "rms_segments": math.nan, "points": 0}
    t0 = ev.t_recovered
    rtt = ev.srtt_ms / 1000.0
    pts = [(s[0] - t0, s[1]) for s in samples if s[0] >= t0 and (horizon_s is None or s[0] - t0 <= horizon_s)]
    if len(pts) < 10:
        return {"k_fit_s": math.nan, "rms_segments": math.nan, "points": len(pts)}
    t = np.array([p[0] for p in pts]) + rtt
    w = np.array([p[1] for p in pts], dtype=float)
    best = (math.inf, math.nan)
    # K is one number: a fine grid search is exact enough and cannot diverge
    for k in np.arange(0.0, 30.0, 0.005):
        err = float(np.mean((c * (t - k) ** 3 + w_max - w) ** 2))
        if err < best[0]:
            best = (err, float(k))
    return {"k_fit_s": round(best[1], 3), "rms_segments": round(math.sqrt(best[0]), 3), "points": len(pts)}
