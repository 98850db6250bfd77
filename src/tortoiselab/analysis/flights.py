"""What the sender put in flight, round trip by round trip: per TCP
connection in a capture, the handshakes in round trips, the server's flights,
its retransmissions and their kinds, a time-sequence series and goodput.

Read with dpkt's pcap reader (pcapng through dpkt's pcapng reader), one
packet at a time, headers unpacked with struct (no dpkt object per packet,
no tshark): a 100 MB capture takes seconds and memory grows with the number
of packets kept in the time-sequence series (a few compact arrays), not with
the file. Link types: Ethernet (with 802.1Q tags), Linux cooked (SLL and
SLL2), raw IP and BSD loopback; IPv4 and IPv6 (without extension headers).
Payload lengths come from the IP header's total length, never from the
captured bytes, so a short snaplen (the lab's 128 bytes) loses nothing.

Definitions (times in ms from the connection's first packet; sequence
numbers as offsets from the first payload byte, so byte 0 is the first byte
the server sent after its SYN-ACK):

- vantage: "server" when the capture was taken at the server (its SYN-ACK
  leaves right after the SYN arrives: SYN->SYN-ACK is much shorter than
  SYN-ACK->ACK), "client" when the other way round.
- tcp_rtt_ms: SYN -> the handshake's final ACK. At either end, and anywhere
  in between, that is one round trip.
- TLS: the client's byte stream is followed record by record (5-byte record
  headers, visible even at snaplen 128 because each record's position is
  known from the previous header's length). tls.handshake_ms runs from the
  ClientHello to the first record of type application_data the client sends:
  for TLS 1.3 that is its (encrypted) Finished, sent together with the first
  request; for TLS 1.2 it is the first request, which the client may only
  send once the server's Finished has arrived. Either way it is the moment the
  client can send its request, so tls.rtts = handshake_ms / tcp_rtt_ms is 1
  for TLS 1.3, 2 for TLS 1.2, and one more when the server's handshake
  flight does not fit its initial window (the napkin article's "3 TLS round
  trips"). tls.version is read from the client's records after the
  ClientHello (1.2: a ClientKeyExchange in the clear; 1.3: ChangeCipherSpec
  then application_data).
- flights (one "round" each): the server's data segments grouped by the ACK
  clock, the way the kernel's own round-trip counting works (BBR's
  packet-timed round trip): a flight ends, and the next begins with the
  server's next data segment, once a client ACK acknowledges (cumulatively
  or by SACK) any byte that was sent in the current flight. Everything the
  server sends in the meantime, released by the ACKs of the previous flight,
  belongs to the current flight. Why this and not a silence threshold: it
  does not depend on a guessed RTT, on pacing spreading a flight out, or on a
  flight taking longer to serialize than RTT/2; it counts a window per round
  trip even when the flights run into each other, and an ACK that only
  acknowledges earlier flights never starts a round. It needs the order in
  which ACKs reached the sender, so it is used for server-side captures; for
  a capture taken at the client (or when the handshake was not captured) the
  flights are split by silence instead: a new flight starts when a server
  data segment arrives more than RTT/2 after the previous one
  (`flights(conn, method="gap")` gives that split for any capture).
  A flight's phase is "handshake" when it starts before the client's TLS
  handshake ends (see above), else "data". Segments are packets, whatever
  their size, as the congestion window counts them (so at IW 3 the first
  data flight is 3 small packets: TLS 1.3 session tickets and HTTP/2
  SETTINGS). Each flight also carries: exchange (a new one starts when the
  client sends new data while the server has nothing unacknowledged, e.g.
  the first request, a later request, HTTP/2's GOAWAY; server captures
  only), the most packets and bytes in flight during it (the sender's
  window, as far as the capture shows it), the client's advertised receive
  window (scaled) and rwnd_limited, true when the flight reached that
  window (then it cannot double, whatever the congestion window).
  transfer_flights(conn) picks the data flights of the first response;
  slow_start_verdicts() says which of them match IW, 2·IW, 4·IW ... and why
  the others do not.
- retransmissions: a server data segment that starts below the highest
  sequence number sent so far. Kind, from what the sender had seen:
  "fast" when it was sent in response to ACKs (less than RTT/2 after the
  last packet of the connection) after >= 3 duplicate ACKs or a SACK block
  above it, or later in the same recovery episode; "rto" when a timer sent
  it (a silence of at least RTT/2 in both directions before it: Linux's RTO
  is at least RTT + 200 ms, its tail loss probe 2 RTT) and it is the first
  unacknowledged segment, or when it follows such a timeout within the same
  recovery episode (go-back-N up to the highest sequence sent at the
  timeout); "tlp" when a timer sent it but it re-sends the last segment
  while earlier ones are outstanding (Linux's tail loss probe); "other" when
  none applies (e.g. after one or two duplicate ACKs without SACK). A
  retransmission is marked spurious when a later D-SACK (RFC 2883) reports
  its bytes as received twice. Keep-alives and window probes (<= 1 byte of
  already acknowledged data) are not retransmissions. The kinds read the
  sender's view, so they are exact for server-side captures and
  approximate for client-side ones.
- series: the time-sequence plot, one point per server data segment (kind
  "data" or the retransmission's kind) and per client ACK (kind "ack",
  seq = the cumulative ACK), as columns t_ms, seq, len, kind.
- goodput_mbit: bytes of the data phase acknowledged, over the time from the
  data phase's first server segment to the ACK that covers the last of them.

The code: capture.py reads the capture (the one reader of the lab's
captures), conntable.py hands each TCP segment to its connection and makes
the table (analyze_pcap), tcpconn.py keeps each connection's state; this
module is the public face (the functions over analyze_pcap's dicts, KINDS,
RETRANS_KINDS).
"""

from __future__ import annotations

import math
from pathlib import Path

from .conntable import analyze_pcap
from .tcpconn import KINDS, RETRANS_KINDS

__all__ = ["KINDS", "RETRANS_KINDS", "analyze_pcap", "flights", "format_flights", "handshake_summary",
           "slow_start_verdicts", "transfer_flights"]


def handshake_summary(conn: dict) -> dict:
    """The few fields of a connection (a dict from analyze_pcap) that a run
    stores for every connection (run.json -> connections): its ends, whether
    it carried a request (tcpconn.carried_request), the TCP
    round trip, the TLS handshake in ms and in round trips, and the server's
    flights before the client could send its request."""
    tls = conn.get("tls") or {}
    return {"client": conn["client"], "server": conn["server"], "carried_request": conn["carried_request"],
            "tcp_rtt_ms": conn["tcp_rtt_ms"],
            "tls_version": tls.get("version"), "tls_ms": tls.get("handshake_ms"),
            "tls_rtts": conn["handshake_rtts"]["tls"],
            "server_flights_before_finished": [{"segments": f["segments"], "bytes": f["bytes"]}
                                               for f in _handshake_flights(conn)]}


def _handshake_flights(conn: dict) -> list[dict]:
    try:
        return flights(conn, phase="handshake")
    except ValueError:  # a split by silence with no RTT (the handshake not captured)
        return []


def flights(conn: dict, method: str | None = None, phase: str | None = None) -> list[dict]:
    """The server's flights of one connection (a dict from analyze_pcap):
    [{"round", "phase", "t_ms", "segments", "bytes", "new_bytes",
    "retransmissions"}]. method: "ack" (the ACK clock, for server-side
    captures), "gap" (silence > RTT/2), or None for the connection's own
    choice (conn["flight_method"]). phase: "handshake" or "data" to keep only
    those flights; rounds are numbered within what is returned."""
    method = method or conn["flight_method"]
    if method == "ack":
        fl = [dict(f) for f in conn["flights_ack"]]
    elif method == "gap":
        fl = _gap_flights(conn)
    else:
        raise ValueError(f"method: unknown flight method {method!r}; use ack or gap")
    if phase is not None:
        if phase not in ("handshake", "data"):
            raise ValueError(f"phase: {phase!r}; use handshake or data")
        fl = [f for f in fl if f["phase"] == phase]
    for i, f in enumerate(fl):
        f["round"] = i + 1
    return fl


def _gap_flights(conn: dict) -> list[dict]:
    rtt = conn["tcp_rtt_ms"]
    if rtt is None:
        raise ValueError("the gap split needs the connection's RTT (no handshake in the capture)")
    s = conn["series"]
    tls_end = conn["tls"]["end_ms"] if conn["tls"] else None
    tls = conn["tls"] is not None
    out: list[dict] = []
    prev = None
    hi = 0
    for t, seq, ln, kind in zip(s["t_ms"], s["seq"], s["len"], s["kind"]):
        if kind == "ack":
            continue
        if prev is None or t - prev > rtt / 2:
            data = not tls or (tls_end is not None and t >= tls_end)
            out.append({"round": len(out) + 1, "phase": "data" if data else "handshake", "t_ms": t,
                        "segments": 0, "bytes": 0, "new_bytes": 0, "retransmissions": 0})
        f = out[-1]
        f["segments"] += 1
        f["bytes"] += ln
        f["new_bytes"] += max(0, seq + ln - max(seq, hi))
        hi = max(hi, seq + ln)
        if kind != "data":
            f["retransmissions"] += 1
        prev = t
    return out


def format_flights(conn: dict, method: str | None = None) -> str:
    """The napkin article's table: segments and bytes per round trip."""
    rows = [f"{'round':>5}  {'phase':<9} {'xchg':>4} {'t (ms)':>9} {'segments':>8} {'bytes':>8} {'retrans':>7} "
            f"{'rwnd':>8}"]
    for f in flights(conn, method):
        rw = "-" if f.get("rwnd_bytes") is None else f"{f['rwnd_bytes']}{'*' if f.get('rwnd_limited') else ''}"
        rows.append(f"{f['round']:>5}  {f['phase']:<9} {f.get('exchange', '-')!s:>4} {f['t_ms']:>9.1f} "
                    f"{f['segments']:>8} {f['bytes']:>8} {f['retransmissions']:>7} {rw:>8}")
    rows.append("(rwnd: the client's advertised window during the flight; * = the flight reached it)")
    return "\n".join(rows)


def transfer_flights(conn: dict, method: str | None = None) -> list[dict]:
    """The flights that carried the first response: the data-phase flights
    of the exchange the first data flight belongs to (an exchange starts
    when the client sends new data while the server has nothing in flight,
    so a later request, or HTTP/2's GOAWAY at the end, starts another).
    Exchanges need the order in which the server saw requests and ACKs, so
    for a capture not taken at the server this is every data-phase flight
    of the silence split."""
    if conn["vantage"] != "server":
        return flights(conn, "gap", phase="data")
    data = flights(conn, "ack", phase="data")
    if not data:
        return []
    first = data[0]["exchange"]
    ack_rounds = [f for f in data if f["exchange"] == first]
    if (method or conn["flight_method"]) == "ack":
        for i, f in enumerate(ack_rounds):
            f["round"] = i + 1
        return ack_rounds
    # the silence split, over the same span of time
    t_lo = ack_rounds[0]["t_ms"]
    later = [f["t_ms"] for f in data if f["exchange"] != first and f["t_ms"] > t_lo]
    t_hi = min(later) if later else math.inf
    out = [f for f in flights(conn, "gap", phase="data") if t_lo <= f["t_ms"] < t_hi]
    for i, f in enumerate(out):
        f["round"] = i + 1
    return out


def slow_start_verdicts(fl: list[dict], iw: int) -> list[dict]:
    """For each flight of a transfer, what loss-free slow start predicts and
    whether the flight matches it: the first flight carries IW segments, each
    later one twice the one before, except where the client's receive window
    capped it (the flight reached the advertised window) or the object ended
    (the last flight). reason: "iw", "doubled", "rwnd", "end", or "short"
    (fewer segments than predicted with no cap to explain it) / "long"."""
    out = []
    for i, f in enumerate(fl):
        want = iw if i == 0 else 2 * fl[i - 1]["segments"]
        n = f["segments"]
        last = i == len(fl) - 1
        if n == want:
            reason = "iw" if i == 0 else "doubled"
        elif n < want and f.get("rwnd_limited"):
            reason = "rwnd"
        elif n < want and last:
            reason = "end"
        else:
            reason = "short" if n < want else "long"
        out.append({"round": f["round"], "segments": n, "predicted": want, "reason": reason,
                    "ok": reason not in ("short", "long")})  # not a column: a flight's verdict
    return out


def steady_throughput_mbit(conn: dict, share: float = 0.5) -> float | None:
    """Throughput once a transfer is under way, from one connection of a
    server-side capture (analyze_pcap with its series): the bytes the client
    acknowledged after its cumulative ACK first covered `share` of what it
    acknowledged in all, over the time from that ACK to the last. Slow start
    and the first losses fall in the first part, so on a lossy long path
    this is the figure a Mathis-law fit wants, where the whole transfer's
    (h2load's own) reads 1.2-1.5x higher. None without enough ACKs."""
    s = conn.get("series") or {}
    acks = [(t, q) for t, q, k in zip(s.get("t_ms", []), s.get("seq", []), s.get("kind", [])) if k == "ack"]
    if len(acks) < 3 or not 0 < share < 1:
        return None
    first, last = acks[0][1], acks[-1][1]
    mid = next(((t, q) for t, q in acks if q >= first + share * (last - first)), None)
    if mid is None or acks[-1][0] <= mid[0] or last <= mid[1]:
        return None
    return round((last - mid[1]) * 8 / ((acks[-1][0] - mid[0]) / 1e3) / 1e6, 4)


def pcap_steady_throughput_mbit(pcap: Path) -> float | None:
    """The transfer's steady-state throughput from the server capture
    (steady_throughput_mbit, on the connection that moved
    the most bytes); None without a capture."""
    if not pcap.exists():
        return None
    conns = analyze_pcap(pcap)
    return steady_throughput_mbit(max(conns, key=lambda c: c["server_bytes_acked"])) if conns else None
