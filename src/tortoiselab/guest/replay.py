"""Replay capacity traces on the lab's links, at exact instants of the clock.

A traced direction of the WAN hop is netem (delay, jitter, loss; no rate)
with an HTB child whose one class is the link: its rate is the trace's
current segment (spec/trace.py, Trace.segments: each segment carries the
opportunities inside it), its pfifo the link's buffer (guest/commands.py,
trace_link). One thread of the guest's own process changes the class's
rate at every segment boundary: it sleeps until the boundary on
CLOCK_MONOTONIC with an absolute deadline (clock_nanosleep TIMER_ABSTIME),
then sends one RTM_NEWTCLASS change over a netlink socket it keeps open. No
process starts per change (a fork+exec costs 2-4 ms of CPU in the UML
guest); on the virtual clock the change lands at the boundary exactly.

HTB keeps a class's tokens across a change (sch_htb.c htb_change_class
recomputes the rate, never the tokens), and charges each packet at the rate
in force when it leaves: a rate change takes effect from the next packet,
queued or not. (tbf refills its bucket on every change, and netem's own
rate fixes a packet's departure when it is queued: both would deliver the
wrong bytes around each boundary.)

The same thread reads the traced devices' byte and packet counters at every
`sample_ms` boundary from the trace's start, for the fidelity check
(analysis/fidelity.py, trace_check).
"""

from __future__ import annotations

import heapq
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Iterator

from tortoiselab.guest.clock import sleep_until_monotonic
from tortoiselab.guest.executor import Executor
from tortoiselab.spec.trace import FRAME_BYTES, Trace

RTM_NEWTCLASS = 40
NLM_F_REQUEST, NLM_F_ACK = 0x1, 0x4
NLMSG_ERROR = 2
TCA_KIND, TCA_OPTIONS = 1, 2
TCA_HTB_PARMS, TCA_HTB_RATE64, TCA_HTB_CEIL64 = 1, 6, 7
TC_LINKLAYER_ETHERNET = 1
U32_MAX = 0xFFFFFFFF
# the link's handles (guest/commands.py trace_link): netem 1:, its child HTB
# 10:, the HTB's one class 10:1 with a pfifo 11:
HTB_HANDLE, LINK_CLASS = 0x00100000, 0x00100001  # tc writes handles in hex
PSCHED_SHIFT = 6  # the kernel's psched ticks are 64 ns


def _attr(kind: int, payload: bytes) -> bytes:
    return struct.pack("=HH", 4 + len(payload), kind) + payload + b"\0" * ((-len(payload)) % 4)


def burst_ticks(rate_Bps: int, burst_bytes: int = FRAME_BYTES) -> int:
    """HTB's buffer: the time one full frame takes at the rate, in psched
    ticks (what tc's `burst 1514b` gives): a link idle for a while sends
    one frame at once, never more."""
    return min(U32_MAX, -(-burst_bytes * 10**9 // rate_Bps) >> PSCHED_SHIFT) or 1


def htb_class_change(ifindex: int, rate_Bps: int, seq: int) -> bytes:
    """RTM_NEWTCLASS without CREATE: class 10:1 of the HTB 10: on ifindex
    to rate = ceil = rate_Bps (Ethernet bytes per second), burst one frame."""
    rate32 = min(rate_Bps, U32_MAX)
    spec = struct.pack("=BBHhHI", 0, TC_LINKLAYER_ETHERNET, 0, 0, 0, rate32)  # struct tc_ratespec
    ticks = burst_ticks(rate_Bps)
    opt = spec + spec + struct.pack("=5I", ticks, ticks, FRAME_BYTES, 0, 0)  # buffer, cbuffer, quantum, level, prio
    opts = _attr(TCA_HTB_PARMS, opt)
    if rate_Bps >= U32_MAX:
        opts += _attr(TCA_HTB_RATE64, struct.pack("=Q", rate_Bps)) + _attr(TCA_HTB_CEIL64, struct.pack("=Q", rate_Bps))
    tcm = struct.pack("=BxxxiIII", socket.AF_UNSPEC, ifindex, LINK_CLASS, HTB_HANDLE, 0)
    body = tcm + _attr(TCA_KIND, b"htb\0") + _attr(TCA_OPTIONS, opts)
    return struct.pack("=IHHII", 16 + len(body), RTM_NEWTCLASS, NLM_F_REQUEST | NLM_F_ACK, seq, 0) + body


def rate_events(trace: Trace, t0_ns: int, offset_ms: int = 0) -> Iterator[tuple[int, int]]:
    """(instant ns, rate Bps) of every segment start of the looped trace
    from t0_ns on, without end: each rate holds until the next event. The
    trace's instant offset_ms (its period taken off) is replayed at t0_ns:
    the first event, at t0_ns, is the rate of the segment that holds it."""
    segs = trace.segments()
    period_ns = trace.period_ms * 10**6
    offset = offset_ms % trace.period_ms
    loop = 0
    while True:
        base = t0_ns + loop * period_ns - offset * 10**6
        for s in segs:
            if loop == 0 and s.end_ms <= offset:
                continue
            yield max(t0_ns, base + s.start_ms * 10**6), s.frame_rate_Bps()
        loop += 1


def trace_offset_ms(started_at: str | None, t0_s: float, wall_minus_mono_s: float) -> float | None:
    """How far into its path's traces a page load started: the loader's
    page start (its summary's started_at, an ISO wall time: the HAR's
    startedDateTime) on the monotonic clock, less the replay's start t0_s,
    in ms; wall_minus_mono_s is the guest's realtime less its monotonic
    clock (the loader's anchor pair, client/timeline.py, is taken on the
    same kernel's clocks). None without a started_at; the floor of such a
    load on a traced downlink is not computed (analysis/tracefloor.py)."""
    if not started_at:
        return None
    wall = datetime.fromisoformat(started_at.replace("Z", "+00:00")).timestamp()
    return round((wall - wall_minus_mono_s - t0_s) * 1e3, 3)


def sample_events(t0_ns: int, step_ms: int) -> Iterator[tuple[int, None]]:
    k = 0
    while True:
        yield t0_ns + k * step_ms * 10**6, None
        k += 1


def _tagged(events: Iterator[tuple[int, int | None]], order: int, link: "ReplayLink | None"
            ) -> Iterator[tuple[int, int, "ReplayLink | None", int | None]]:
    """(instant, order, link, rate): a function, so that each stream keeps
    its own link (a generator expression would see the loop's last one)."""
    for t, rate in events:
        yield t, order, link, rate


@dataclass
class ReplayLink:
    dev: str
    trace: Trace
    ifindex: int = 0


@dataclass
class ReplayStats:
    changes: int = 0
    late_max_ns: int = 0  # how late the thread woke for an event, at most
    errors: list[str] = field(default_factory=list)
    samples: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)  # dev -> (ms, bytes, packets)


class TraceReplay:
    """Replay each link's trace from t0 (CLOCK_MONOTONIC seconds) until
    stopped, the trace's instant offset_ms at t0 (0: its start); a context
    manager. The first segment's rate is set at once."""

    def __init__(self, ex: Executor, links: list[ReplayLink], t0_s: float, sample_ms: int | None = None,
                 offset_ms: int = 0) -> None:
        self.ex, self.links, self.sample_ms, self.offset_ms = ex, links, sample_ms, offset_ms
        self.t0_ns = int(round(t0_s * 1e9))
        self.stats = ReplayStats(samples={ln.dev: [] for ln in links} if sample_ms else {})
        self._stop = threading.Event()
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._seq = 0

    def __enter__(self) -> "TraceReplay":
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        self._sock.bind((0, 0))
        for ln in self.links:
            ln.ifindex = socket.if_nametoindex(ln.dev)
            self._set(ln, next(rate_events(ln.trace, self.t0_ns, self.offset_ms))[1])
        t = time.monotonic()
        self.ex.record("root", ["(in-process)", "trace-replay", f"t0={self.t0_ns / 1e9:.6f}",
                                *([f"from={self.offset_ms}ms"] if self.offset_ms else []),
                                *[f"{ln.dev}={ln.trace.name}" for ln in self.links]], 0, "", "", t)
        self._thread = threading.Thread(target=self._run, name="trace-replay", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._sock is not None:
            self._sock.close()
        self.ex.record("root", ["(in-process)", "trace-replay", "stop", f"changes={self.stats.changes}",
                                f"late_max_ns={self.stats.late_max_ns}", f"errors={len(self.stats.errors)}"],
                       1 if self.stats.errors else 0, "", "; ".join(self.stats.errors[:3]), time.monotonic())

    def _set(self, ln: ReplayLink, rate_Bps: int) -> None:
        self._seq += 1
        assert self._sock is not None
        self._sock.send(htb_class_change(ln.ifindex, rate_Bps, self._seq))
        reply = self._sock.recv(65536)
        kind = struct.unpack("=H", reply[4:6])[0]
        err = struct.unpack("=i", reply[16:20])[0] if kind == NLMSG_ERROR else -1
        if err:
            self.stats.errors.append(f"{ln.dev}: rate {rate_Bps} B/s refused (netlink {err})")

    def _events(self) -> Iterator[tuple[int, int, ReplayLink | None, int | None]]:
        """Every link's rate changes and the sampling instants, in time
        order (a sample before the changes of its instant)."""
        streams = [_tagged(rate_events(ln.trace, self.t0_ns, self.offset_ms), i, ln)
                   for i, ln in enumerate(self.links)]
        if self.sample_ms:
            streams.append(_tagged(sample_events(self.t0_ns, self.sample_ms), -1, None))
        return heapq.merge(*streams, key=lambda e: (e[0], e[1]))

    def _run(self) -> None:
        max_sleep_ns = 100 * 10**6  # the stop flag is seen within 100 ms
        for t_ns, _, ln, rate in self._events():
            while True:
                if self._stop.is_set():
                    return
                now = time.monotonic_ns()
                if now >= t_ns:
                    break
                sleep_until_monotonic(min(t_ns, now + max_sleep_ns) / 1e9)
            self.stats.late_max_ns = max(self.stats.late_max_ns, time.monotonic_ns() - t_ns)
            try:
                if ln is None:
                    self._sample(t_ns)
                elif t_ns > self.t0_ns:  # the first rate was set on entry
                    self._set(ln, rate)
                    self.stats.changes += 1
            except OSError as exc:
                self.stats.errors.append(str(exc))

    def _sample(self, t_ns: int) -> None:
        ms = (t_ns - self.t0_ns) // 10**6
        for ln in self.links:
            stats = Path(f"/sys/class/net/{ln.dev}/statistics")
            self.stats.samples[ln.dev].append((ms, int((stats / "tx_bytes").read_text(encoding="utf-8")),
                                               int((stats / "tx_packets").read_text(encoding="utf-8"))))
