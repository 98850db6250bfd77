"""An analytic model of a response's slow start under Linux Hybla and under
a standard slow start (docs/maps.md, "The model of Hybla's slow start"):
the rounds an object of B bytes takes at RTT r and bottleneck rate R, each
round's flight, and the times the client sees (first byte, last byte, the
content download and the PLT).

Hybla (Caini & Firrincieli 2004, "TCP Hybla: a TCP enhancement for
heterogeneous networks", Int. J. Satellite Commun. Netw. 22(5)): with
ρ = RTT / RTT0, RTT0 = 25 ms (ρ at least 1), slow start adds 2^ρ − 1
segments to the window per ACK received, so a long path's window grows as
fast per second as a 25 ms path's. The first window is max(2, ⌊ρ⌋)
segments whatever initcwnd says: the lab's own server captures show first
flights of 2, 2, 4, 6, 8, 12 segments at 25, 50, 100, 150, 200, 300 ms
(docs/maps.md). A standard slow start (RFC 5681 with the window counted in
segments acknowledged, as Linux counts it; H-TCP, CUBIC and Reno alike)
starts at IW (10, RFC 6928) and doubles per round.

What the model adds to the window rules, each a parameter:

- delayed ACKs (RFC 1122, RFC 5681 §4.2): the client acknowledges every
  second segment, so a flight of n segments returns ⌈n/2⌉ ACKs, and
  Hybla's per-ACK increment counts ACKs, not segments;
- the client's receive window: a round sends at most rwnd bytes (the
  previous rounds all acknowledged by its end), a segment cut at the
  window's edge;
- the lead: the small packets the server sends before the response (TLS 1.3
  session tickets, HTTP/2 SETTINGS and its ack: 303, 303, 50, 31 bytes in the
  lab's captures, analysis/napkin.py POST_HANDSHAKE_SEGMENTS), which take
  their places in the first window, as the window counts packets;
- the bottleneck: every packet is serialized at R with its headers
  (HEADER_BYTES); a round leaves the server when the first ACK of the round
  before returns (after its first two segments arrived), and waits for the
  link when the previous flight is still being serialized, so a flight that
  takes longer than an RTT to serialize runs into the next.

Rounds are counted as analysis/flights.py counts them in a capture: one per
flight of the ACK clock. Times: the request leaves the client at 0; the
client reads the response's first byte once its first TLS record has
arrived (first_read_bytes after the lead: the loader's TLS stack reads
whole records), and its last with the last packet; the PLT adds the
set-up's round trips before the request (DNS, TCP, TLS 1.3: 3, docs/analysis.md
"The PLT floor"). A pure module: no capture, no lab.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from tortoiselab.analysis.tracefloor import HEADER_BYTES
from tortoiselab.spec import cols

RTT0_MS = 25.0            # Hybla's reference RTT (Caini & Firrincieli 2004; Linux's rtt0 default)
MSS = 1448                # payload bytes per full segment (MSS 1460 less the 12 bytes of timestamps)
IW = 10                   # a standard sender's first window (RFC 6928; the lab's initcwnd)
ACK_EVERY = 2             # delayed ACKs: one per second segment (RFC 1122 4.2.3.2)
LAB_LEAD = (303, 303, 50, 31)  # the lab's post-handshake packets before the response (TLS 1.3, HTTP/2)
LAB_RWND_BYTES = 51_200   # the lab's client: its advertised window from the second round on (server captures)
TLS_RECORD_BYTES = 16_384 + 22  # a full TLS 1.3 record: 16 KB of plaintext, header 5, type 1, tag 16
LAB_BASE_HTML_BYTES = 60_255    # the base HTML's response on the wire (60,000 bytes of body, HTTP/2 and TLS)
SETUP_RTTS = 3            # DNS, TCP, TLS 1.3 before the request


def rho(rtt_ms: float, rtt0_ms: float = RTT0_MS) -> float:
    """Hybla's ρ = RTT / RTT0, at least 1."""
    if rtt_ms <= 0 or rtt0_ms <= 0:
        raise ValueError(f"rtt_ms ({rtt_ms}) and rtt0_ms ({rtt0_ms}) must be above 0")
    return max(1.0, rtt_ms / rtt0_ms)


@dataclass(frozen=True)
class Sender:
    """A slow start: its first window (segments) and its growth, either
    `per_ack` segments per ACK (Hybla: 2^ρ − 1) or, when per_ack is None,
    one segment per segment acknowledged (doubling per round)."""
    name: str
    first_window: int
    per_ack: float | None = None

    def grow(self, cwnd: float, segments: int, ack_every: int = ACK_EVERY) -> float:
        if self.per_ack is None:
            return cwnd + segments
        return cwnd + math.ceil(segments / ack_every) * self.per_ack


def hybla(rtt_ms: float, rtt0_ms: float = RTT0_MS) -> Sender:
    """Hybla at rtt_ms: first window max(2, ⌊ρ⌋), 2^ρ − 1 per ACK."""
    r = rho(rtt_ms, rtt0_ms)
    return Sender("hybla", max(2, math.floor(r)), 2.0 ** r - 1)


def standard(iw: int = IW) -> Sender:
    """A standard slow start from `iw` segments, doubling per round."""
    if iw < 1:
        raise ValueError(f"iw: {iw}; at least 1 segment")
    return Sender(f"IW {iw}", iw)


def flights(object_bytes: int, sender: Sender, rwnd_bytes: int | None = LAB_RWND_BYTES,
            lead: tuple[int, ...] = LAB_LEAD, mss: int = MSS, ack_every: int = ACK_EVERY) -> list[list[int]]:
    """Each round's packets (payload bytes) until the lead and the object
    are sent: a round sends up to ⌊cwnd⌋ packets and rwnd_bytes bytes; the
    window then grows by the round's packets (sender.grow)."""
    if object_bytes < 0 or mss < 1 or ack_every < 1:
        raise ValueError("object_bytes >= 0, mss >= 1 and ack_every >= 1, please")
    if rwnd_bytes is not None and rwnd_bytes < 1:
        raise ValueError(f"rwnd_bytes: {rwnd_bytes}; at least 1 byte, or None for no cap")
    queue = deque(list(lead) + [mss] * (object_bytes // mss) + ([object_bytes % mss] if object_bytes % mss else []))
    out: list[list[int]] = []
    cwnd = float(sender.first_window)
    while queue:
        room = rwnd_bytes if rwnd_bytes is not None else math.inf
        sent: list[int] = []
        while queue and len(sent) < math.floor(cwnd) and room > 0:
            size = queue.popleft()
            if size > room:  # cut at the window's edge; the rest leads the next round
                queue.appendleft(size - int(room))
                size = int(room)
            sent.append(size)
            room -= size
        out.append(sent)
        cwnd = sender.grow(cwnd, len(sent), ack_every)
    return out


def timeline(fl: list[list[int]], rtt_ms: float, rate_mbit: float, first_read_bytes: int = TLS_RECORD_BYTES,
             lead_bytes: int = sum(LAB_LEAD), header_bytes: int = HEADER_BYTES, ack_every: int = ACK_EVERY,
             setup_rtts: int = SETUP_RTTS) -> dict:
    """When the client sees the response of flights `fl` (from the request
    leaving it, ms): first_byte_ms (the first first_read_bytes of the
    response after the lead have arrived), last_byte_ms,
    content_download_ms (the two's difference, as the loader's
    content_download_ms), plt_ms (setup_rtts round trips more), rounds,
    and the longest flight's serialization against the RTT."""
    if rtt_ms <= 0 or rate_mbit <= 0:
        raise ValueError(f"rtt_ms ({rtt_ms}) and rate_mbit ({rate_mbit}) must be above 0")
    one_way = rtt_ms / 2
    tx = [[(b + header_bytes) * 8 / (rate_mbit * 1e3) for b in f] for f in fl]
    release, link_free, got = one_way, one_way, 0  # the request reaches the server at one_way
    first = last = math.nan
    for f, t in zip(fl, tx):
        clock = max(release, link_free)
        for j, (b, dt) in enumerate(zip(f, t)):
            clock += dt
            got += b
            if math.isnan(first) and got >= lead_bytes + first_read_bytes:
                first = clock + one_way
            if j == min(ack_every, len(f)) - 1:  # the round's first ACK releases the next round
                release = clock + rtt_ms
        link_free = clock
        last = clock + one_way
    first = last if math.isnan(first) else first  # a response shorter than a record: read whole at its end
    longest = max((sum(t) for t in tx), default=0.0)
    return {"rounds": len(fl), "first_byte_ms": first, "last_byte_ms": last, cols.CDT: last - first,
            cols.PLT: setup_rtts * rtt_ms + last, "longest_flight_ms": longest,
            "flight_over_rtt": longest > rtt_ms}


def transfer(object_bytes: int, sender: Sender, rtt_ms: float, rate_mbit: float,
             rwnd_bytes: int | None = LAB_RWND_BYTES, lead: tuple[int, ...] = LAB_LEAD, **kw) -> dict:
    """flights() and timeline() in one: rounds, each round's segments, the
    times; kw goes to timeline()."""
    fl = flights(object_bytes, sender, rwnd_bytes, lead)
    return {"sender": sender.name, "segments": [len(f) for f in fl], **timeline(fl, rtt_ms, rate_mbit,
                                                                              lead_bytes=sum(lead), **kw)}


def compare(object_bytes: int, rtt_ms: float, rate_mbit: float, iw: int = IW, **kw) -> dict:
    """Hybla against a standard slow start of IW `iw` for one object: each
    one's transfer(), the rounds Hybla saves and its changes in content
    download and PLT (%)."""
    h = transfer(object_bytes, hybla(rtt_ms), rtt_ms, rate_mbit, **kw)
    s = transfer(object_bytes, standard(iw), rtt_ms, rate_mbit, **kw)
    pct = {k: 100 * (h[k] / s[k] - 1) if s[k] > 0 else math.nan for k in (cols.CDT, cols.PLT)}
    return {"hybla": h, "standard": s, "rounds_saved": s["rounds"] - h["rounds"],
            "cdt_change_pct": pct[cols.CDT], "plt_change_pct": pct[cols.PLT]}


def flip_rtt_ms(object_bytes: int, rtts_ms: list[float], rate_mbit: float, iw: int = IW, **kw) -> float | None:
    """The smallest of rtts_ms (ascending) from which Hybla takes fewer
    rounds than the standard sender at it and every larger one; None when
    it never does."""
    saves = [compare(object_bytes, r, rate_mbit, iw, **kw)["rounds_saved"] > 0 for r in rtts_ms]
    for i in range(len(rtts_ms)):
        if all(saves[i:]):
            return rtts_ms[i]
    return None
