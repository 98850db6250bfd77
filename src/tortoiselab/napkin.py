"""The napkin model of a page load: the physical floor under a measured PLT.

Seed 003 (Napkin Problem 15) counts round trips: 1 for TCP, h for TLS, k
for the response in slow start, plus the time to push the bytes through the
bottleneck; its worked example (information.dk from Quebec) adds up to
1 + 3 + 6 = 10 round trips, "with our roundtrip time at 130ms ... the 1.3s
total time we observed". Here:

    PLT ≈ (d + 1 + h + k)·RTT + serialization

- d: DNS lookups that cross the path (the lab's resolver sits behind the WAN
  hop: one round trip per uncached name);
- 1: the TCP handshake;
- h: TLS round trips before the client may send its request: 1 for TLS 1.3,
  2 for TLS 1.2, 0 without TLS, plus the extra rounds the server needs when
  its handshake flight (certificate chain and all) does not fit its initial
  window: one more when IW·MSS < flight <= 3·IW·MSS (the article's 6908-byte
  chain at IW 3), i.e. slow_start_rounds(flight, IW) - 1 in general;
- k: slow-start rounds for the response: the smallest k with
  IW·MSS·(2^k - 1) >= S (the window doubles every round trip);
- serialization: the issue's napkin term is S/C, all the bytes at the
  bottleneck rate (`napkin_ms`). That over-counts: while a round's flight
  takes less than an RTT to serialize, it is sent during the wait for the
  ACK clock, and only the last round's bytes add to the round trips
  (measured in the lab: IW 3, 100 KB at 100 Mbit/s, 100 ms: 804.4 ms against
  8 RTT + S/C = 808 ms). The floor (`total_ms`) therefore charges what an
  ideal sender cannot hide: rounds are counted until the object ends or a
  flight would take longer than an RTT to serialize (the window has passed
  the bandwidth-delay product and the link stays busy from then on), and
  the bytes of that last round onward are charged at the bottleneck rate,
  on the wire (MSS + 66 bytes of Ethernet, IP and TCP headers per segment).
  For the napkin regime (flights well under one BDP) that is
  (d + 1 + h + k)·RTT + S_last/C; for a bulk transfer it tends to
  (d + 1 + h + j)·RTT + S_rest/C, with j the rounds it takes to fill the pipe.

The floor ignores what the lab cannot remove: a receiver window smaller than
the doubled window (the lab's client advertises ~42-52 KB early on, which
costs IW 10 and IW 30 one extra round for 100 KB), delayed ACKs, server and
client CPU, and HTTP overheads. So measured / floor >= 1, and the gap is
something to explain.
"""

from __future__ import annotations

import math

TLS_RTTS = {"1.3": 1, "1.2": 2, None: 0, "none": 0}
HEADER_BYTES = 66  # Ethernet 14 + IPv4 20 + TCP 20 + timestamps 12


def slow_start_rounds(size_bytes: int, iw_pkts: int, mss: int = 1448) -> int:
    """Round trips slow start needs for size_bytes: the smallest k with
    IW·MSS·(2^k - 1) >= S (0 for nothing to send)."""
    if size_bytes < 0 or iw_pkts < 1 or mss < 1:
        raise ValueError("size_bytes >= 0, iw_pkts >= 1 and mss >= 1, please")
    if size_bytes == 0:
        return 0
    segments = math.ceil(size_bytes / mss)
    k = 0
    while iw_pkts * (2 ** k - 1) < segments:
        k += 1
    return k


def tls_round_trips(tls: str | None, iw_pkts: int, cert_flight_bytes: int | None = None, mss: int = 1448) -> int:
    """h: TLS round trips before the request, with the extra rounds of a
    server handshake flight larger than the initial window."""
    if tls not in TLS_RTTS:
        raise ValueError(f"tls: {tls!r}; use '1.3', '1.2' or None")
    h = TLS_RTTS[tls]
    if h and cert_flight_bytes:
        h += max(0, slow_start_rounds(cert_flight_bytes, iw_pkts, mss) - 1)
    return h


def data_time_ms(rtt_ms: float, rate_mbit: float, size_bytes: int, iw_pkts: int, mss: int = 1448,
                 header_bytes: int = HEADER_BYTES) -> dict:
    """From the request leaving the client to the response's last byte
    arriving, for an ideal slow-start sender: rounds every RTT while a
    flight serializes in less than an RTT, then the bottleneck's rate."""
    if rtt_ms < 0 or rate_mbit <= 0:
        raise ValueError("rtt_ms >= 0 and rate_mbit > 0, please")
    segments = math.ceil(size_bytes / mss) if size_bytes > 0 else 0
    per_seg_ms = (mss + header_bytes) * 8 / (rate_mbit * 1e3)
    rounds, sent, saturated = 0, 0, False
    tail_bytes = 0
    while sent < segments:
        rounds += 1
        w = min(iw_pkts * 2 ** (rounds - 1), segments - sent)
        if w * per_seg_ms >= rtt_ms or sent + w >= segments:
            saturated = w * per_seg_ms >= rtt_ms and sent + w < segments
            tail_segments = segments - sent
            tail_bytes = size_bytes - sent * mss
            break
        sent += w
    else:
        tail_segments = 0
    ser = tail_segments * per_seg_ms
    return {"rounds": rounds, "tail_segments": tail_segments, "tail_bytes": tail_bytes,
            "link_saturated": saturated, "serialization_ms": ser, "total_ms": rounds * rtt_ms + ser}


def floor_ms(rtt_ms: float, rate_mbit: float, size_bytes: int, iw_pkts: int, tls: str | None = "1.3",
             cert_flight_bytes: int | None = None, dns_lookups: int = 0, mss: int = 1448,
             header_bytes: int = HEADER_BYTES) -> dict:
    """The floor of one object's load over a path, and its parts (see the
    module's docstring): total_ms (the floor), rtts and their split,
    serialization_ms (what the floor charges for the bottleneck),
    napkin_ms = (d + 1 + h + k)·RTT + S/C, the issue's formula as written."""
    if dns_lookups < 0:
        raise ValueError("dns_lookups >= 0, please")
    h = tls_round_trips(tls, iw_pkts, cert_flight_bytes, mss)
    k = slow_start_rounds(size_bytes, iw_pkts, mss)
    data = data_time_ms(rtt_ms, rate_mbit, size_bytes, iw_pkts, mss, header_bytes)
    setup = dns_lookups + 1 + h
    s_over_c = size_bytes * 8 / (rate_mbit * 1e3)
    return {
        "total_ms": round(setup * rtt_ms + data["total_ms"], 3),
        "rtts": setup + data["rounds"],
        "rtt_ms": rtt_ms,
        "dns_rtts": dns_lookups, "tcp_rtts": 1, "tls_rtts": h,
        "slow_start_rounds": k, "data_rounds": data["rounds"], "link_saturated": data["link_saturated"],
        "round_trips_ms": round((setup + data["rounds"]) * rtt_ms, 3),
        "serialization_ms": round(data["serialization_ms"], 3),
        "s_over_c_ms": round(s_over_c, 3),
        "napkin_rtts": setup + k,
        "napkin_ms": round((setup + k) * rtt_ms + s_over_c, 3),
    }


def ratio(measured_ms: float | None, floor: dict | float) -> float | None:
    """measured / floor (>= 1 unless something beat physics or the model)."""
    f = floor["total_ms"] if isinstance(floor, dict) else floor
    if measured_ms is None or not f:
        return None
    return round(measured_ms / f, 4)
