"""The connections table of a capture: every TCP segment that
tortoiselab.analysis.capture reads handed to its connection's state
(tortoiselab.analysis.tcpconn), and each connection's summary, the dict
analyze_pcap returns. What is measured, and how, is in
tortoiselab.analysis.flights (its module docstring).

A run's table is made once, in the lab guest right after the load
(guest/tasks/pageload.py), and stored with the run as connections.json
beside server.pcap (`capture_table`, TABLE); readers on the host take it
through host/store/captures.py, which parses the capture only for a run
stored before the table existed or with a table of another TABLE_FORMAT.
"""

from __future__ import annotations

import hashlib
import ipaddress
from pathlib import Path

from .capture import TCP, TH_ACK, TH_SYN, read_packets
from .tcpconn import KINDS, RETRANS_KINDS, Conn, carried_request, client_packet, server_packet


def analyze_pcap(path: str | Path, server_port: int | None = 443, keep_series: bool = True) -> list[dict]:
    """One summary per TCP connection (in order of first appearance) in a
    capture. server_port: the server's TCP port; None to take the server
    from each connection's SYN (or, without one, the lower port)."""
    return [summary(c) for c in read_conns(path, server_port, keep_series)]


TABLE = "connections.json"  # the run's connections table, beside server.pcap
# the table's format: raise it whenever analyze_pcap's dicts change (a field,
# a rule), so that tables stored before are read as absent and the capture
# is parsed again by the code of today (host/store/captures.py)
TABLE_FORMAT = 1


def capture_table(path: str | Path, server_port: int = 443) -> dict:
    """A capture's connections table, as a run stores it (TABLE):
    {"format": TABLE_FORMAT, "capture_sha256": the capture's sha256,
    "server_port", "connections": analyze_pcap's dicts without "series"}."""
    return parse_capture(path, server_port)[0]


def parse_capture(path: str | Path, server_port: int = 443) -> tuple[dict, list[dict]]:
    """The capture parsed once: its table (capture_table) and analyze_pcap's
    dicts as parsed (keep_series=False still keeps the segments a capture
    not taken at the sender needs for its flights: flights.flights' "gap"
    split), for figures made on the spot."""
    with open(path, "rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    conns = analyze_pcap(path, server_port, keep_series=False)
    return table_of([{k: v for k, v in c.items() if k != "series"} for c in conns], digest, server_port), conns


def table_of(conns: list[dict], capture_sha256: str, server_port: int = 443) -> dict:
    """The table (capture_table's dict) of connections already parsed."""
    return {"format": TABLE_FORMAT, "capture_sha256": capture_sha256, "server_port": server_port,
            "connections": conns}


def table_connections(table: object, capture_sha256: str, server_port: int = 443) -> list[dict] | None:
    """The connections of a stored table (capture_table's dict, as read
    back) if it is of this TABLE_FORMAT and for this port; None for a table
    of another format or port (parse the capture again). ValueError, naming
    the field, for a table that is not one or that was made from other bytes
    than the capture's (capture_sha256)."""
    if not isinstance(table, dict):
        raise ValueError(f"not a connections table (a JSON object with format, capture_sha256, connections): "
                         f"{type(table).__name__}")
    if table.get("format") != TABLE_FORMAT or table.get("server_port") != server_port:
        return None
    if table.get("capture_sha256") != capture_sha256:
        raise ValueError(f"capture_sha256 {str(table.get('capture_sha256'))[:16]}... is not the capture's "
                         f"({capture_sha256[:16]}...): the table was made from other bytes")
    conns = table.get("connections")
    if not isinstance(conns, list) or not all(isinstance(c, dict) for c in conns):
        raise ValueError("connections: not a list of connections (objects)")
    return conns


def read_conns(path: str | Path, server_port: int | None = 443, keep_series: bool = True) -> list[Conn]:
    """Every TCP segment of the capture through its connection's state
    (segments whose IP header says they are shorter than their TCP header
    are passed by); the connections in order of first appearance."""
    conns: dict[tuple, Conn] = {}
    out: list[Conn] = []
    for p in read_packets(path):
        if p.transport != TCP or p.payload_len < 0:
            continue
        # --- which connection, which direction
        if server_port is not None:
            if p.sport == server_port:
                key, from_client = (p.dst, p.dport, p.src, p.sport), False
            elif p.dport == server_port:
                key, from_client = (p.src, p.sport, p.dst, p.dport), True
            else:
                continue
        else:
            key, from_client = _direction(conns, p.src, p.sport, p.dst, p.dport, p.flags)
        c = conns.get(key)
        if c is not None and from_client and p.flags & TH_SYN and not p.flags & TH_ACK and c.client.syn_seen \
                and p.seq != c.client.isn:
            c = None  # the same ports again: a new connection
        if c is None:
            c = Conn(key[:2], key[2:], p.t_s)
            conns[key] = c
            out.append(c)
        if from_client:
            client_packet(c, p, keep_series)
        else:
            server_packet(c, p, keep_series)
    return out


def _direction(conns: dict, src: bytes, sport: int, dst: bytes, dport: int, flags: int) -> tuple[tuple, bool]:
    """Without a server port: the connection's key (client address and port,
    server address and port) and whether the segment comes from the client,
    from a connection already seen, else the SYN, else the lower port."""
    k1, k2 = (src, sport, dst, dport), (dst, dport, src, sport)
    if k1 in conns:
        return k1, True
    if k2 in conns:
        return k2, False
    if flags & TH_SYN and not flags & TH_ACK:
        return k1, True
    if flags & TH_SYN:
        return k2, False
    if sport > dport:
        return k1, True
    return k2, False


def summary(c: Conn) -> dict:
    """The connection as analyze_pcap returns it (fields: tortoiselab.analysis.flights)."""
    t0, cl, sv, tls_state = c.t0, c.client, c.server, c.tls
    rtt_ms = c.rtt_s * 1e3 if c.rtt_s is not None else None
    vantage = "unknown"
    if cl.t_syn is not None and sv.t_synack is not None and c.t_ack is not None:
        vantage = "server" if (sv.t_synack - cl.t_syn) < (c.t_ack - sv.t_synack) else "client"
    flights = c.flight_clock.flights
    tls = None
    if tls_state.is_tls:
        t_ch, t_end = tls_state.t_client_hello, tls_state.t_end
        hs_ms = (t_end - t_ch) * 1e3 if t_end is not None and t_ch is not None else None
        srv_hs = [f for f in flights if not f.data_phase]
        tls = {"version": tls_state.version, "hello_retry": tls_state.hello_retry,
               "client_hello_ms": _ms(t_ch, t0), "end_ms": _ms(t_end, t0),
               "handshake_ms": round(hs_ms, 3) if hs_ms is not None else None,
               "rtts": round(hs_ms / rtt_ms, 3) if hs_ms is not None and rtt_ms else None,
               "server_handshake_flights": len(srv_hs),
               "server_handshake_bytes": sum(f.bytes for f in srv_hs)}
    hs_rtts = {"tcp": 1 if cl.syn_seen else None,
               "tls": round(tls["rtts"]) if tls and tls["rtts"] is not None
               else (0 if tls_state.is_tls is False else None)}
    fl = [{"round": i + 1, "phase": "data" if f.data_phase else "handshake", "exchange": f.exchange,
           "t_ms": _ms(f.t, t0), "segments": f.segments, "bytes": f.bytes, "new_bytes": f.new_bytes,
           "retransmissions": f.retransmissions, "inflight_pkts_max": f.inflight_pkts_max,
           "inflight_bytes_max": f.inflight_bytes_max, "rwnd_bytes": f.rwnd_bytes, "rwnd_limited": f.rwnd_limited}
          for i, f in enumerate(flights)]
    retrans = [{"t_ms": _ms(r.t, t0), "seq": r.seq, "len": r.length, "kind": KINDS[r.kind], "spurious": r.spurious}
               for r in c.retransmissions]
    counts = {k: sum(1 for r in retrans if r["kind"] == k) for k in RETRANS_KINDS}
    counts["spurious"] = sum(1 for r in retrans if r["spurious"])
    data_bytes, transfer_ms, goodput = _goodput(c)
    s = c.series
    series = {"t_ms": [round((t - t0) * 1e3, 3) for t in s.t], "seq": s.seq.tolist(),
              "len": s.length.tolist(), "kind": [KINDS[k] for k in s.kind]}
    return {
        "client": _fmt_addr(c.client_addr), "server": _fmt_addr(c.server_addr), "vantage": vantage,
        "start": c.t0, "syn_seen": cl.syn_seen,
        "tcp_rtt_ms": round(rtt_ms, 3) if rtt_ms is not None else None,
        "rtt_from": None if rtt_ms is None else ("data" if c.rtt_from_data else "handshake"),
        "syn_ms": _ms(cl.t_syn, t0), "synack_ms": _ms(sv.t_synack, t0), "ack_ms": _ms(c.t_ack, t0),
        "mss": {"client": cl.mss, "server": sv.mss}, "sack": cl.sack_permitted,
        "tls": tls, "handshake_rtts": hs_rtts,
        "request_ms": _ms(tls_state.t_end if tls_state.is_tls else cl.first_payload_t, t0),
        "carried_request": carried_request(c),
        "first_data_ms": _ms(sv.first_data_t, t0), "last_ack_ms": _ms(sv.una_t, t0),
        "server_bytes_sent": sv.bytes_sent, "server_bytes_unique": sv.snd_max,
        "server_bytes_acked": min(sv.snd_una, sv.snd_max), "client_bytes": cl.payload_bytes,
        "data_segments": sv.data_segments, "data_bytes": data_bytes,
        "transfer_ms": transfer_ms, "goodput_mbit": goodput,
        "flight_method": "ack" if vantage == "server" else "gap",
        "flights_ack": fl,
        "retransmissions": retrans, "retrans_counts": counts,
        "fin_ms": _ms(sv.fin_t, t0), "reset": c.reset,
        "series": series,
    }


def _goodput(c: Conn) -> tuple[int, float | None, float | None]:
    """Over the data phase: the bytes acknowledged, the transfer time in ms
    (its first server segment to the ACK that covers the last) and the
    goodput in Mbit/s; (0, None, None) without a data phase or an ACK."""
    sv = c.server
    data_fl = [f for f in c.flight_clock.flights if f.data_phase]
    if not data_fl or sv.una_t is None:
        return 0, None, None
    data_bytes = max(0, min(sv.snd_una, sv.snd_max) - data_fl[0].first_seq)
    dt = sv.una_t - data_fl[0].t
    if dt > 0 and data_bytes > 0:
        return data_bytes, round(dt * 1e3, 3), round(data_bytes * 8 / dt / 1e6, 3)
    return data_bytes, None, None


def _ms(t: float | None, t0: float) -> float | None:
    return None if t is None else round((t - t0) * 1e3, 3)


def _fmt_addr(a: tuple) -> str:
    ip = ipaddress.ip_address(a[0])
    return f"[{ip}]:{a[1]}" if ip.version == 6 else f"{ip}:{a[1]}"
