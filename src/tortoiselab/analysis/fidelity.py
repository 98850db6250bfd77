"""Configured against measured: does the emulated path do what it was told?

Pure functions over raw measurements (ping RTTs, byte counters at the
bottleneck, probe packets sent and received), so they are tested without a
lab and the guest only has to measure.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, replace

from tortoiselab.analysis.burstloss import burst_interval, pattern, rate_interval
from tortoiselab.spec.lossmodel import GilbertElliott
from tortoiselab.spec.pathspec import FRAME_BYTES, PathSpec
from tortoiselab.spec.trace import PACKET_BYTES, Trace

PING_FRAME_BYTES = 98  # 56 data + 8 ICMP + 20 IP + 14 Ethernet
# the server's handshake round trip: its SYN-ACK down (20 IP + 40 TCP with
# MSS, SACK, timestamps, window scale + 14 Ethernet), the client's ACK up
# (20 IP + 32 TCP with timestamps + 14 Ethernet)
SYNACK_FRAME_BYTES, ACK_FRAME_BYTES = 74, 66


@dataclass(frozen=True)
class Check:
    """One row of the fidelity table."""

    quantity: str
    configured: float
    expected: float
    measured: float
    low: float  # accepted (or confidence) interval
    high: float
    unit: str
    ok: bool | None  # None: not judged (the note says why)
    note: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def rtt_check(path: PathSpec, min_ms: float | None, replies: int, sent: int) -> Check:
    """Base RTT = the smallest RTT ping saw (its summary line, microsecond
    resolution). Expected = configured RTT plus the serialization of one ping
    frame at the bottleneck in each direction. Tolerance: max(0.5 ms, 1 %)."""
    ser_ms = PING_FRAME_BYTES * 8e3 / (path.rate_mbit * 1e6) + PING_FRAME_BYTES * 8e3 / (path.rate_up * 1e6)
    return _rtt_check(path, min_ms if replies else None, ser_ms, f"no ping reply of {sent}", f"min of {replies}/{sent} pings")


def handshake_rtt_check(path: PathSpec, rtts_ms: list[float], connections: int) -> Check:
    """Base RTT of a page-load run = the smallest SYN -> SYN-ACK -> ACK round
    trip the server's capture saw (analysis/flights.py) among the handshakes
    that are samples of the path (path_handshakes: one that waited for a lost
    SYN, SYN-ACK or ACK to be sent again is none). Expected = configured RTT
    plus the serialization of one handshake frame at the bottleneck each way.
    Tolerance as for ping. When every handshake waited, the path is not
    judged: ok is None (unknown), never False, since a lost packet on a path
    with loss is what the path was told to do."""
    ser_ms = SYNACK_FRAME_BYTES * 8e3 / (path.rate_mbit * 1e6) + ACK_FRAME_BYTES * 8e3 / (path.rate_up * 1e6)
    expected, tol = path.rtt_ms + ser_ms, _rtt_tolerance(path)
    samples, waited = path_handshakes(rtts_ms, expected, tol)
    if waited and not samples:
        return Check("base RTT", path.rtt_ms, round(expected, 3), min(waited), round(expected - tol, 3),
                     round(expected + tol, 3), "ms", None,
                     f"not judged: each of the {len(waited)} TCP handshakes in the server capture waited out a "
                     f"retransmission timeout (at least {HANDSHAKE_RTO_MS:g} ms over the path's round trip: a "
                     "lost SYN, SYN-ACK or ACK), so none is a sample of the path (Karn's rule, RFC 6298)")
    left = (f"; {len(waited)} handshake{'s' if len(waited) > 1 else ''} that waited out a retransmission timeout "
            f"({', '.join(f'{w:g}' for w in waited)} ms) left out") if waited else ""
    return _rtt_check(path, min(samples) if samples else None, ser_ms,
                      f"no TCP handshake in the server capture ({connections} connections)",
                      f"min of {len(samples)} TCP handshakes in the server capture{left}")


# Linux's initial retransmission timeout (TCP_TIMEOUT_INIT, RFC 6298 2.1): a
# lost SYN-ACK is sent again no sooner, and a lost SYN or handshake ACK costs
# at least as long, so a handshake that took this much longer than the path's
# round trip (less the tolerance) waited for a lost packet
HANDSHAKE_RTO_MS = 1000.0


def path_handshakes(rtts_ms: list[float], expected_ms: float, tol_ms: float) -> tuple[list[float], list[float]]:
    """The handshake round trips that are samples of the path, and those
    that waited out a retransmission timeout (at least expected_ms +
    HANDSHAKE_RTO_MS - tol_ms): a round trip with a retransmission in it
    measures the loss, not the path's delay (Karn's rule, RFC 6298 section 3)."""
    cut = expected_ms + HANDSHAKE_RTO_MS - tol_ms
    return [r for r in rtts_ms if r < cut], sorted(r for r in rtts_ms if r >= cut)


def jitter_checks(path: PathSpec, rtts_ms: list[float], sent: int, confidence: float = 0.95) -> list[Check]:
    """RTT of a path with jitter, from ping's per-reply RTTs. Pings go far
    apart, so each packet meets an empty netem and takes its own draw: an
    RTT is the configured RTT plus one draw per direction (mean 0, standard
    deviation jitter_ms each) plus serialization. Rows: the mean RTT, whose
    accepted interval is the base RTT's tolerance widened by the sampling
    error of the mean (z * sqrt(2) * jitter / sqrt(n)); and the jitter per
    direction, the RTTs' standard deviation / sqrt(2), with its exact
    chi-square interval."""
    n = len(rtts_ms)
    base = rtt_check(path, min(rtts_ms) if rtts_ms else None, n, sent)
    if n < 2:
        return [replace(base, quantity="mean RTT", ok=False, note=f"{n} of {sent} pings answered: too few")]
    from scipy.stats import chi2, norm  # here: ~0.8 s to import, kept off `tortoise run`'s path (docs/speed.md)

    mean, sd = statistics.fmean(rtts_ms), statistics.stdev(rtts_ms)
    z = float(norm.ppf(0.5 + confidence / 2))
    tol = max(0.5, 0.01 * path.rtt_ms) + z * math.sqrt(2) * path.jitter_ms / math.sqrt(n)
    level = f"{round(confidence * 100)} %"
    rtt = Check("mean RTT", path.rtt_ms, base.expected, round(mean, 3), round(base.expected - tol, 3),
                round(base.expected + tol, 3), "ms", abs(mean - base.expected) <= tol,
                f"mean of {n}/{sent} pings (jitter: the minimum is no base RTT); tolerance max(0.5 ms, 1 %) "
                f"+ {level} sampling error of the mean")
    a = 1 - confidence
    lo = sd * math.sqrt((n - 1) / float(chi2.ppf(1 - a / 2, n - 1))) / math.sqrt(2)
    hi = sd * math.sqrt((n - 1) / float(chi2.ppf(a / 2, n - 1))) / math.sqrt(2)
    jit = Check("jitter", path.jitter_ms, path.jitter_ms, round(sd / math.sqrt(2), 3), round(lo, 3), round(hi, 3),
                "ms", lo <= path.jitter_ms <= hi,
                f"standard deviation of {n} ping RTTs / sqrt(2); {level} chi-square interval")
    return [rtt, jit]


def _rtt_tolerance(path: PathSpec) -> float:
    return max(0.5, 0.01 * path.rtt_ms)


def _rtt_check(path: PathSpec, min_ms: float | None, ser_ms: float, none_note: str, note: str) -> Check:
    expected = path.rtt_ms + ser_ms
    tol = _rtt_tolerance(path)
    if min_ms is None:
        return Check("base RTT", path.rtt_ms, round(expected, 3), float("nan"), expected - tol, expected + tol,
                     "ms", False, none_note)
    return Check("base RTT", path.rtt_ms, round(expected, 3), min_ms, round(expected - tol, 3),
                 round(expected + tol, 3), "ms", abs(min_ms - expected) <= tol,
                 f"{note}; expected includes {ser_ms:.3f} ms serialization")


def window_rates(samples: list[tuple[float, int]], window_s: float) -> list[float]:
    """Rates (bit/s) over consecutive, non-overlapping windows of about
    `window_s` from (time s, cumulative bytes) samples."""
    rates = []
    if len(samples) < 2:
        return rates
    t0, b0 = samples[0]
    for t, b in samples[1:]:
        if t - t0 >= window_s - 1e-9:
            rates.append((b - b0) * 8 / (t - t0))
            t0, b0 = t, b
    return rates


def rate_check(path: PathSpec, samples: list[tuple[float, int]], warmup_s: float,
               goodput_bps: float | None = None, tol: float = 0.03) -> Check:
    """Bottleneck rate = Ethernet bytes leaving the bottleneck queue per second
    while a bulk TCP transfer keeps it backlogged: the median of 1-second
    windows after `warmup_s` (slow start and its overshoot excluded)."""
    if not samples:
        return Check("bottleneck rate", path.rate_mbit, path.rate_mbit, float("nan"), 0, 0, "Mbit/s", False,
                     "no samples")
    start = samples[0][0] + warmup_s
    steady = [s for s in samples if s[0] >= start]
    rates = window_rates(steady, 1.0)
    if not rates:
        return Check("bottleneck rate", path.rate_mbit, path.rate_mbit, float("nan"), 0, 0, "Mbit/s", False,
                     "transfer shorter than the warm-up")
    measured = statistics.median(rates) / 1e6
    note = f"median of {len(rates)} 1-s windows of link bytes"
    if goodput_bps is not None:
        note += f"; TCP goodput {goodput_bps / 1e6:.3f} Mbit/s"
    lo, hi = path.rate_mbit * (1 - tol), path.rate_mbit * (1 + tol)
    return Check("bottleneck rate", path.rate_mbit, path.rate_mbit, round(measured, 4), lo, hi, "Mbit/s",
                 lo <= measured <= hi, note)


def loss_check(direction: str, configured_pct: float, sent: int, received: int,
               confidence: float = 0.95) -> Check:
    """Loss of one direction with its exact (Clopper-Pearson) binomial
    interval; the check passes when the configured rate lies inside it."""
    if sent <= 0:
        return Check(f"loss {direction}", configured_pct, configured_pct, float("nan"), 0, 0, "%", False,
                     "no probe sent")
    from scipy.stats import binomtest  # here: ~0.8 s to import, kept off `tortoise run`'s path (docs/speed.md)

    lost = sent - received
    ci = binomtest(lost, sent).proportion_ci(confidence_level=confidence, method="exact")
    lo, hi = ci.low * 100, ci.high * 100
    measured = lost / sent * 100
    return Check(f"loss {direction}", configured_pct, configured_pct, round(measured, 4), round(lo, 4),
                 round(hi, 4), "%", lo <= configured_pct <= hi,
                 f"{lost} of {sent} probes lost; {int(confidence * 100)} % exact binomial interval")


def ge_loss_checks(direction: str, model: GilbertElliott, sent: int, lost_seqs: list[int],
                   confidence: float = 0.95) -> list[Check]:
    """Bursty (Gilbert) loss of one direction: the loss rate and the mean
    loss-burst length against the model's, each with an interval that holds
    for correlated losses (analysis/burstloss.py: Wilson on the effective
    sample size; the exact geometric interval). A check passes when the
    configured figure lies inside its interval."""
    rate_pct, burst = round(100 * model.loss_rate(), 4), round(model.mean_burst_pkts(), 4)
    if sent <= 0:
        return [Check(f"loss {direction}", rate_pct, rate_pct, math.nan, 0, 0, "%", False, "no probe sent"),
                Check(f"burst {direction}", burst, burst, math.nan, 0, 0, "pkts", False, "no probe sent")]
    pat = pattern(sent, lost_seqs)
    lo, hi, n_eff = rate_interval(pat, confidence)
    level = f"{round(confidence * 100)} %"
    loss = Check(f"loss {direction}", rate_pct, rate_pct, round(100 * pat.rate, 4), round(100 * lo, 4),
                 round(100 * hi, 4), "%", lo * 100 <= rate_pct <= hi * 100,
                 f"{pat.lost} of {sent} probes lost in {len(pat.bursts)} bursts; {level} Wilson interval "
                 f"on {n_eff:.0f} effective probes (lag-1 autocorrelation {max(0.0, pat.rho()):.3f})")
    blo, bhi = burst_interval(pat.bursts, confidence)
    tail = f"; a last run of {pat.censored} reaching the end left out" if pat.censored else ""
    if not pat.bursts:
        return [loss, Check(f"burst {direction}", burst, burst, math.nan, math.nan, math.nan, "pkts", False,
                            f"no complete loss burst in {sent} probes{tail}: send more probes")]
    bcheck = Check(f"burst {direction}", burst, burst, round(pat.mean_burst, 4),
                   round(blo, 4), round(bhi, 4), "pkts", blo <= burst <= bhi,
                   f"mean of {len(pat.bursts)} complete bursts (longest {max(pat.bursts)}); "
                   f"{level} exact geometric interval{tail}")
    return [loss, bcheck]


def order_check(direction: str, reordered: int | None) -> Check:
    """Jitter without reordering: probes that arrived after a later-sent
    one (tools/udpprobe.py), expected 0 (netem's rate keeps the order:
    guest/commands.py netem())."""
    if reordered is None:
        return Check(f"reorder {direction}", 0, 0, math.nan, 0, 0, "pkts", False, "the receiver counted no order")
    return Check(f"reorder {direction}", 0, 0, reordered, 0, 0, "pkts", reordered == 0,
                 "probes that arrived after a later-sent one")


def format_table(checks: list[Check]) -> str:
    head = f"{'quantity':<16} {'configured':>11} {'expected':>10} {'measured':>10} {'accepted':>21}  ok"
    rows = [head, "-" * len(head)]
    for c in checks:
        rows.append(f"{c.quantity:<16} {c.configured:>11.3f} {c.expected:>10.3f} {c.measured:>10.3f} "
                    f"{'[' + f'{c.low:.3f}, {c.high:.3f}' + ']':>21}  {'yes' if c.ok else '-' if c.ok is None else 'NO'}  {c.unit}")
        if c.note:
            rows.append(f"{'':<16} {c.note}")
    return "\n".join(rows)


def trace_bins(samples: list[tuple[int, int, int]], bin_ms: int) -> list[tuple[int, int]]:
    """(bin start ms, IP bytes) between consecutive counter readings (ms
    from the trace's start, tx bytes, tx packets) taken bin_ms apart: the
    link's frame bytes less 14 bytes of Ethernet header per packet."""
    out = []
    for (t0, b0, p0), (t1, b1, p1) in zip(samples, samples[1:]):
        if t1 - t0 == bin_ms:
            out.append((t0, (b1 - b0) - 14 * (p1 - p0)))
    return out


def trace_check(direction: str, trace: Trace, samples: list[tuple[int, int, int]], bin_ms: int,
                skip_s: float, until_s: float, tol_pct: float = 5.0, offset_ms: int = 0,
                ack_trace: Trace | None = None) -> Check:
    """A replayed trace against the trace: IP bytes the link delivered per
    bin_ms bin (a saturating transfer running) against the bytes of the
    trace's opportunities in the same bin, over the bins from skip_s to
    until_s after the replay's start, which replayed the trace from its
    instant offset_ms (the trace looped). measured = the bins' mean
    absolute error relative to the trace's bytes, sum|delivered - trace| /
    sum trace, in percent; accepted up to tol_pct. Bins that overlap an
    outage of ack_trace (the other direction's trace, replayed from the
    same instant: it carries the transfer's ACKs, without which no sender
    keeps the link busy) are left out of the figure and named in the note.
    The note gives the part of the trace checked, the delivered total
    against the trace's and the worst bin (at its instant of the trace)."""
    name = f"trace {direction}"
    bins = [(t, b) for t, b in trace_bins(samples, bin_ms) if t >= skip_s * 1e3 and t + bin_ms <= until_s * 1e3]
    if not bins:
        return Check(name, 0.0, 0.0, float("nan"), 0.0, tol_pct, "% bin error", False,
                     f"no whole {bin_ms}-ms bin between {skip_s} s and {until_s} s")
    first = (offset_ms + bins[0][0]) % trace.period_ms
    span = bins[-1][0] + bin_ms - bins[0][0]
    outages = ack_trace.outages() if ack_trace is not None else []
    starved = [(t, b) for t, b in bins if outages and _in_outage(outages, ack_trace.period_ms, offset_ms + t, bin_ms)]
    bins = [x for x in bins if x not in starved] or bins
    want = [trace.opportunities_between(offset_ms + t, offset_ms + t + bin_ms) * PACKET_BYTES for t, _ in bins]
    got = [b for _, b in bins]
    total = sum(want)
    err = sum(abs(g - w) for g, w in zip(got, want)) / total * 100 if total else float("inf")
    worst = max(range(len(bins)), key=lambda i: abs(got[i] - want[i]))
    note = (f"{trace.name}: {len(bins)} bins of {bin_ms} ms, {first / 1e3:g}-{(first + span) / 1e3:g} s of the trace "
            f"({trace.period_ms / 1e3:g} s long); delivered {sum(got)} B, "
            f"trace {total} B ({(sum(got) / total - 1) * 100 if total else 0:+.2f} %); worst bin at "
            f"{(offset_ms + bins[worst][0]) % trace.period_ms / 1e3:.1f} s: {got[worst]} B vs {want[worst]} B")
    if starved and ack_trace is not None:
        lost = sum(trace.opportunities_between(offset_ms + t, offset_ms + t + bin_ms) for t, _ in starved)
        note += (f"; {len(starved)} bins during an outage of {ack_trace.name} (the transfer's ACKs) left out: "
                 f"delivered {sum(b for _, b in starved)} B, trace {lost * PACKET_BYTES} B")
    return Check(name, 0.0, 0.0, round(err, 3), 0.0, tol_pct, "% bin error", err <= tol_pct, note)


def _in_outage(outages: list[tuple[int, int]], period_ms: int, t_ms: int, bin_ms: int) -> bool:
    """Whether the bin [t_ms, t_ms + bin_ms) of a looped trace overlaps one
    of its outages (Trace.outages: (start, end) over one period)."""
    a = t_ms % period_ms
    return any(s < a + bin_ms and a < e or s < a + bin_ms - period_ms for s, e in outages)


# a full-size segment's payload (MSS 1448 with timestamps) in its 1514-byte frame
SEGMENT_PAYLOAD_BYTES = 1448


def _at(samples: list[tuple[float, float]], t: float) -> float:
    """A cumulative count at time t, linear between samples (clamped)."""
    if not samples:
        return 0.0
    if t <= samples[0][0]:
        return samples[0][1]
    for (t0, b0), (t1, b1) in zip(samples, samples[1:]):
        if t0 <= t <= t1:
            return b0 + (b1 - b0) * (t - t0) / (t1 - t0) if t1 > t0 else b1
    return samples[-1][1]


def cross_checks(cross: dict, bulk: dict, fair_pct: float | None) -> list[Check]:
    """A shared bottleneck (docs/topologies.md) during the probe's bulk
    transfer: the cross traffic's share of the bytes delivered, and whether
    the flows' bytes account for what left the bottleneck.

    `cross`: the cross flows' cumulative bytes every 100 ms (s after the
    cross traffic's start); `bulk`: the bottleneck's byte counter during the
    transfer (s after its start, which is bulk["start_s"] on the cross
    clock) and the measured client's bytes. Over the transfer, share =
    cross payload / (cross + measured payload); accounted = their payload
    in full-size frames / the bottleneck's bytes (within 3 %)."""
    link = [tuple(s) for s in bulk["samples"]]
    t_a, t_b = bulk["start_s"] + link[0][0], bulk["start_s"] + link[-1][0]
    moved = 0.0
    for host in cross["samples"].values():
        totals = [(t, float(sum(bs))) for t, bs in host["samples"]]
        moved += _at(totals, t_b) - _at(totals, t_a)
    own = bulk["client"]["bytes"]
    share = 100 * moved / (moved + own) if moved + own else math.nan
    flows = cross["flows"]
    note = (f"{len(flows)} cross flows moved {moved / 1e6:.2f} MB during the transfer, the measured flow "
            f"{own / 1e6:.2f} MB; " + (f"fair share {fair_pct:.1f} %" if fair_pct is not None else
                                       "no fair share (web loads or other algorithms)")
            + "; reported, not a tolerance")
    rows = [Check("cross share", fair_pct if fair_pct is not None else math.nan,
                  fair_pct if fair_pct is not None else math.nan, round(share, 2), 0.0, 100.0, "%",
                  moved > 0 and not cross["errors"], note + (f"; errors: {cross['errors']}" if cross["errors"] else ""))]
    wire = link[-1][1] - link[0][1]
    acc = 100 * (moved + own) * FRAME_BYTES / SEGMENT_PAYLOAD_BYTES / wire if wire else math.nan
    rows.append(Check("flows accounted", 100.0, 100.0, round(acc, 2), 97.0, 103.0, "%", abs(acc - 100) <= 3,
                      "the flows' payload in 1514-byte frames / the bytes that left the bottleneck"))
    return rows


def cross_rates_mbit(cross: dict, t_a: float, t_b: float) -> dict[str, float]:
    """The cross flows' throughput by kind (bulk, web) between t_a and t_b
    (s on the cross traffic's clock, e.g. a page load's window), Mbit/s of
    payload, from their bytes sampled every 100 ms."""
    kinds = {f["id"]: f["kind"] for f in cross["flows"]}
    moved = {"bulk": 0.0, "web": 0.0}
    for host in cross["samples"].values():
        for i, fid in enumerate(host["ids"]):
            if fid in kinds:
                series = [(t, float(bs[i])) for t, bs in host["samples"]]
                moved[kinds[fid]] += _at(series, t_b) - _at(series, t_a)
    span = t_b - t_a
    return {k: round(v * 8 / span / 1e6, 4) if span > 0 else math.nan for k, v in moved.items()}


# --- a run record's fidelity, judged for its path (the grade, the runner) ------------

# a run whose every handshake waited out a retransmission timeout (a lost SYN,
# SYN-ACK or ACK: analysis/fidelity.handshake_rtt_check): its path is not
# judged, so it counts neither for nor against the share
NOT_JUDGED = "not judged"
JITTER_SIGMAS = 3.0  # allowance for one RTT sample on a path with jitter
FRAME_BITS = 1514 * 8  # a full-size frame at the bottleneck (the lab's PathSpec.queue counts these)


def cross_traffic(rec: dict) -> bool:
    """Did other flows share the bottleneck during the run (topology.bulk_flows
    or web_loads_per_s, recorded in run.json `cross`)?"""
    topo = (rec.get("config") or {}).get("topology") or {}
    return bool((rec.get("cross") or {}).get("flows")) or bool(topo.get("bulk_flows") or topo.get("web_loads_per_s"))


def queue_ms(path: dict) -> float:
    """The most queueing delay a packet can meet on a round trip: the
    bottleneck's buffer (queue_pkts full-size frames, both directions) drained
    at each direction's rate. A path without queue_pkts has the lab's
    default, one BDP (PathSpec.queue)."""
    q = path.get("queue_pkts")
    if q is None and path.get("rate_mbit") and path.get("rtt_ms"):
        q = PathSpec(rtt_ms=path["rtt_ms"], rate_mbit=path["rate_mbit"]).bdp_pkts()
    q = float(q or 0)
    rates = [path.get("rate_mbit"), path.get("rate_up_mbit") or path.get("rate_mbit")]
    return sum(q * FRAME_BITS / (float(r) * 1e3) for r in rates if r)


def judged_fidelity(rec: dict) -> tuple[bool | None, str, str]:
    """A run record's RTT check as judged for the path it had: (faithful,
    why, allowance used: "", "jitter", "queue" or NOT_JUDGED). The
    runner's check compares one handshake RTT with a tolerance of
    max(0.5 ms, 1 %), which two kinds of path cannot meet:
    - with netem jitter (normal, sigma = jitter_ms per direction, so
      sigma*sqrt(2) per round trip) one sample is within JITTER_SIGMAS of
      those sigmas around the expected RTT;
    - with cross traffic (docs/topologies.md) the handshake waits in the queue the
      other flows built: the sample lies between the expected RTT and that
      plus both directions' full buffers (`queue_ms`), widened by the jitter
      allowance. A sample below the configured RTT still fails: no queue
      makes a path shorter."""
    fid = (rec.get("fidelity") or [None])[0]
    if not isinstance(fid, dict):
        return None, "no fidelity measurement", ""
    ok, measured, expected = bool(fid.get("ok")), fid.get("measured"), fid.get("expected")  # not a column
    why = (f"{fid.get('quantity', 'RTT')} measured {measured} {fid.get('unit', '')}, expected {expected} "
           f"[{fid.get('low')}, {fid.get('high')}]")
    if "ok" in fid and fid["ok"] is None:  # not a column; not judged: no handshake sampled the path
        return None, f"{why}; {fid.get('note')}", NOT_JUDGED
    path = rec.get("path") or {}
    jitter = float(path.get("jitter_ms") or 0)
    cross = cross_traffic(rec)
    if ok or not (jitter > 0 or cross) or not isinstance(measured, (int, float)) \
            or not isinstance(expected, (int, float)):
        return ok, why, ""
    band = JITTER_SIGMAS * jitter * 2 ** 0.5
    low = min(float(fid.get("low") or expected), expected - band)
    high = max(float(fid.get("high") or expected), expected + band)
    if not cross:
        return low <= measured <= high, f"{why}; jitter {jitter:g} ms allows +-{band:.1f} ms", "jitter"
    queue = queue_ms(path)
    return (low <= measured <= high + queue,
            f"{why}; cross traffic's queue allows up to +{queue:.1f} ms"
            + (f", jitter {jitter:g} ms +-{band:.1f} ms" if jitter else ""), "queue")


DISTURBED = "disturbed"  # the start of a run's error when the real clock did not keep its path


def disturbance(clock: str, rec: dict) -> str | None:
    """Why a run is no measurement of its configured path although every
    request was answered: on the real clock a path measured off its
    configuration, after the allowances of judged_fidelity, means the host
    did not keep the emulated time (too busy); such a run is stored failed,
    never ok (docs/faults.md). None when it is not so: a faithful or
    unjudged path, or the virtual clock (whose time no load on the host
    can disturb; an off path there is the configuration's, e.g. a trace)."""
    if clock != "real":
        return None
    ok, why, _how = judged_fidelity(rec)
    if ok is not False:
        return None
    return (f"{DISTURBED}: the real clock's lab did not keep the configured path ({why}): the host was too busy; "
            "run it on the virtual clock (--clock virtual) or with fewer --jobs on a quieter host")
