"""The napkin floor's bottleneck on a traced downlink (analysis/napkin.py):
how soon a capacity trace lets a number of packets through, from a given
instant of a load.

A traced link has no rate to divide bytes by. What it has is the trace's
delivery opportunities (spec/trace.py: one 1500-byte packet per line, at a
whole millisecond, the file looping) and the load's place in the trace: a
page load replays its path's traces from its own start instant
(guest/tasks/pageload.py), and the run records how far into the trace the
page's start fell (`trace_start_ms`, guest/replay.py trace_offset_ms).

`TraceLink.serialize_ms` is a lower bound of the time a backlogged link
takes to pass some bytes from an instant on, under either reading of the
trace, whichever lets more through:

- mahimahi's (mm-link): a packet may leave at each opportunity; from an
  instant a to b at most the opportunities at whole milliseconds from
  floor(a) to b, both included;
- the lab's replay (guest/replay.py, docs/traces.md): the trace cut into
  segments of at least 10 ms, each at the rate that carries its
  opportunities, so the packets are spread evenly inside a segment; an HTB
  class of one frame's burst lets at most one frame more through than that
  rate over any interval.

A packet is a full-size segment in its Ethernet frame (1514 bytes, the
1500-byte IP packet of one opportunity); a shorter one is counted by its
bytes, as the lab's link counts them. The floor never uses a rate the trace
overrides (PathSpec.rate_mbit is the untraced default).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

from pydantic import ValidationError

from tortoiselab.spec.trace import FRAME_BYTES, PACKET_BYTES, Trace, TraceError

HEADER_BYTES = 66  # a segment's headers on the wire: Ethernet 14 + IPv4 20 + TCP 20 + timestamps 12
RESOLUTION_MS = 1e-4  # the bisection stops this close to the answer, and answers the lower end


@dataclass(frozen=True)
class TraceLink:
    """A traced downlink as the floor sees it: the trace, and the instant
    of the load's start in it (ms after the trace's start)."""

    trace: Trace
    start_ms: float
    _ends: list[int] = field(init=False, repr=False, compare=False)  # segment ends over one period
    _cum: list[int] = field(init=False, repr=False, compare=False)  # packets by each end

    def __post_init__(self) -> None:
        if self.start_ms < 0:
            raise ValueError(f"trace_start_ms: {self.start_ms}; the load's start within the trace is >= 0 ms")
        ends, cum, n = [0], [0], 0
        for s in self.trace.segments():
            n += s.packets
            ends.append(s.end_ms)
            cum.append(n)
        object.__setattr__(self, "_ends", ends)
        object.__setattr__(self, "_cum", cum)

    def _replayed(self, t_ms: float) -> float:
        """Packets the lab's replay lets through from the trace's start to
        t_ms at its segments' rates (the looped trace)."""
        period = self.trace.period_ms
        loops, r = divmod(t_ms, period)
        i = min(bisect.bisect_right(self._ends, r), len(self._ends) - 1)  # the segment (ends[i-1], ends[i]]
        a, b = self._ends[i - 1], self._ends[i]
        inside = self._cum[i - 1] + (self._cum[i] - self._cum[i - 1]) * (r - a) / (b - a)
        return loops * self._cum[-1] + inside

    def capacity_frames(self, a_ms: float, b_ms: float) -> float:
        """Full-size frames the link can pass from trace instant a_ms to
        b_ms, at most: the larger of mahimahi's count and the lab's replay
        (plus its one-frame burst); see the module's doc."""
        mm = self.trace.opportunities_between(int(a_ms // 1), int(b_ms // 1) + 1)
        return max(float(mm), self._replayed(b_ms) - self._replayed(a_ms) + 1)

    def serialize_ms(self, at_ms: float, wire_bytes: float) -> float:
        """The least time, from at_ms on the load's clock, until the link
        can have passed wire_bytes (Ethernet frames' bytes): a lower bound
        of the bottleneck's share of a transfer that reaches it at at_ms."""
        need = wire_bytes / FRAME_BYTES
        if need <= 0:
            return 0.0
        a = self.start_ms + at_ms
        lo, hi = 0.0, float(self.trace.period_ms)
        while self.capacity_frames(a, a + hi) < need:
            lo, hi = hi, 2 * hi
        while hi - lo > RESOLUTION_MS:
            mid = (lo + hi) / 2
            if self.capacity_frames(a, a + mid) >= need:
                hi = mid
            else:
                lo = mid
        return lo

    def mean_rate_mbit(self, a_ms: float, b_ms: float) -> float:
        """The trace's delivery rate from a_ms to b_ms on the load's clock:
        IP Mbit/s of its opportunities in that interval."""
        if b_ms <= a_ms:
            raise ValueError("b_ms > a_ms, please")
        n = self.trace.opportunities_between(round(self.start_ms + a_ms), round(self.start_ms + b_ms))
        return n * PACKET_BYTES * 8 / (b_ms - a_ms) / 1e3

    def describe(self) -> dict:
        """What the floor's model records of the link."""
        return {"trace_down": self.trace.name, "trace_start_ms": round(self.start_ms, 3)}


def traced_data_time_ms(rtt_ms: float, link: TraceLink, start_ms: float, size_bytes: int, flights: list[int],
                        mss: int = 1448, header_bytes: int = HEADER_BYTES) -> dict:
    """napkin.data_time_ms over a traced downlink, for the given flights
    (napkin.round_flights). Round k's flight reaches the bottleneck k RTTs
    after the request left the client (the request's one-way trip, then the
    downlink's delay, which netem applies before the traced link:
    guest/commands.py), so the bytes from round k on cannot
    all have arrived before k·RTT + the time the trace takes to pass them
    from that instant (TraceLink.serialize_ms). Each k gives a lower bound;
    the floor is the largest (with a fixed rate the same k as
    data_time_ms's: the first round that fills the pipe, or the last)."""
    best = {"rounds": 0, "tail_segments": 0, "tail_bytes": 0, "link_saturated": False, "serialization_ms": 0.0,
            "total_ms": 0.0}
    segments = math.ceil(size_bytes / mss) if size_bytes > 0 else 0
    sent, last = 0, max((k for k, w in enumerate(flights, 1) if w), default=0)
    for k, w in enumerate(flights, 1):
        if w:
            tail_segments, tail_bytes = segments - sent, size_bytes - sent * mss
            ser = link.serialize_ms(start_ms + k * rtt_ms, tail_bytes + tail_segments * header_bytes)
            if k * rtt_ms + ser > best["total_ms"]:
                best = {"rounds": k, "tail_segments": tail_segments, "tail_bytes": tail_bytes,
                        "link_saturated": k < last, "serialization_ms": ser, "total_ms": k * rtt_ms + ser}
        sent += w
    return best


def traced_downlink(trace: dict | str | None, start_ms: float | None) -> tuple[TraceLink | None, str | None]:
    """(the floor's traced downlink, None), (None, None) for an untraced
    downlink, or (None, why there is no floor): the load's start within the
    trace unknown (a run recorded before `trace_start_ms`), or the trace's
    file gone or changed since the run."""
    if not trace:
        return None, None
    name = trace.get("name") if isinstance(trace, dict) else str(trace)
    if start_ms is None:
        return None, (f"trace_down {name}: the page's start within the trace is not recorded (trace_start_ms), and "
                      "a trace's rate differs from instant to instant; rate_mbit is a default the trace overrides")
    try:
        return TraceLink(Trace.model_validate(trace), float(start_ms)), None
    except ValidationError as exc:  # its messages, not pydantic's closing line (a link to its docs)
        return None, f"trace_down {name}: {'; '.join(e['msg'] for e in exc.errors())[:300]}"
    except (TraceError, ValueError) as exc:
        return None, f"trace_down {name}: {str(exc).splitlines()[-1][:200]}"
