"""One TCP connection's state while a capture streams past, and its summary:
sequence numbers unwrapped to offsets, TCP options, the client's and the
server's segments (handshake, ACKs and SACKs, D-SACK, retransmissions and
their kinds, flights by the ACK clock, in-flight counts, the client's TLS
records) and the per-connection dict that analyze_pcap returns. The
definitions are in tortoiselab.analysis.flights (its module docstring);
pcapread.py reads the capture and hands each segment to client_packet or
server_packet here.
"""

from __future__ import annotations

import ipaddress
import struct
from array import array
from collections import deque

M32 = 0xFFFFFFFF
HALF = 0x80000000
TH_FIN, TH_SYN, TH_RST, TH_ACK = 0x01, 0x02, 0x04, 0x10

KINDS = ("data", "fast", "rto", "tlp", "other", "ack")
K_DATA, K_FAST, K_RTO, K_TLP, K_OTHER, K_ACK = range(6)
RETRANS_KINDS = KINDS[1:5]

_H = struct.Struct("!H")
_II = struct.Struct("!II")


class Conn:
    """State of one connection while the capture streams past."""

    __slots__ = (
        "client", "server", "t0", "t_syn", "t_synack", "t_ack", "c_isn", "s_isn", "s_base", "c_base",
        "syn_seen", "synack_seen", "mss_server", "mss_client", "sack_ok", "done",
        # server data
        "snd_max", "snd_una", "una_t", "bytes_sent", "segments", "data_segments", "first_data_t",
        "last_server_t", "last_client_t", "dupacks", "sack_hi", "last_win", "rec_point", "rec_kind",
        "retrans", "flights", "fl_pending", "fl_first_new", "fl_min_retx", "outq", "max_seg", "rwnd",
        "c_wscale", "s_wscale", "exchange", "xchg_pending",
        # client stream / TLS
        "c_max", "c_first_payload_t", "tls", "tls_sync", "tls_next", "tls_types", "t_ch", "t_tls_end",
        "tls_version", "hrr", "c_payload_bytes", "tls_app_end",
        # series
        "s_t", "s_seq", "s_len", "s_kind", "rtt_s", "rtt_from_data", "fin_t", "rst",
    )

    def __init__(self, client: tuple, server: tuple, t0: float) -> None:
        self.client, self.server, self.t0 = client, server, t0
        self.t_syn = self.t_synack = self.t_ack = None
        self.c_isn = self.s_isn = self.s_base = self.c_base = None
        self.syn_seen = self.synack_seen = False
        self.mss_server = self.mss_client = None
        self.sack_ok = False
        self.done = False
        self.snd_max = self.snd_una = 0
        self.una_t = None
        self.bytes_sent = self.segments = self.data_segments = 0
        self.first_data_t = self.last_server_t = self.last_client_t = None
        self.dupacks = 0
        self.sack_hi = 0
        self.last_win = None
        self.rec_point = None
        self.rec_kind = 0
        self.retrans: list[list] = []  # [t, seq, len, kind, spurious, series index]
        self.flights: list[list] = []  # [t, segments, bytes, new_bytes, retrans, phase_is_data]
        self.fl_pending = True
        self.fl_first_new = None
        self.fl_min_retx = None
        self.outq: deque[int] = deque()  # end offsets of new-data segments not yet acknowledged
        self.max_seg = 0
        self.rwnd = None
        self.c_wscale = self.s_wscale = None
        self.exchange = 0
        self.xchg_pending = True
        self.c_max = 0
        self.c_first_payload_t = None
        self.tls = None  # None: unknown yet, True / False
        self.tls_sync = True
        self.tls_next = 0
        self.tls_types: list[int] = []
        self.t_ch = self.t_tls_end = None
        self.tls_app_end = None  # client stream offset where its first application-data record ends
        self.tls_version = None
        self.hrr = False
        self.c_payload_bytes = 0
        self.s_t, self.s_seq, self.s_len, self.s_kind = array("d"), array("q"), array("l"), array("b")
        self.rtt_s = None
        self.rtt_from_data = False
        self.fin_t = None
        self.rst = False


def _unwrap(raw: int, base: int, ref: int) -> int:
    """Offset of a 32-bit sequence number from `base`, unwrapped near `ref`."""
    r = ((raw - base) & M32) + (ref & ~M32)
    if r < ref - HALF:
        r += 1 << 32
    elif r > ref + HALF:
        r -= 1 << 32
    return r


def _options(buf: bytes, start: int, end: int) -> tuple[int | None, list[tuple[int, int]], bool, int | None]:
    """MSS, SACK blocks (raw edges), SACK-permitted and window scale from TCP options."""
    mss, blocks, sack_ok, wscale = None, [], False, None
    i = start
    while i < end:
        kind = buf[i]
        if kind == 0:
            break
        if kind == 1:
            i += 1
            continue
        if i + 1 >= end:
            break
        ln = buf[i + 1]
        if ln < 2 or i + ln > end:
            break
        if kind == 2 and ln == 4:
            mss = _H.unpack_from(buf, i + 2)[0]
        elif kind == 4:
            sack_ok = True
        elif kind == 3 and ln == 3:
            wscale = min(buf[i + 2], 14)
        elif kind == 5:
            for j in range(i + 2, i + ln - 7, 8):
                blocks.append(_II.unpack_from(buf, j))
        i += ln
    return mss, blocks, sack_ok, wscale


def client_packet(c: Conn, ts: float, buf: bytes, tcp_off: int, doff: int, flags: int, seq: int, ack: int,
                  win: int, plen: int, keep: bool) -> None:
    """A segment from the client: its SYN, its byte stream (TLS records, new
    exchanges), and its ACK (cumulative, SACK and D-SACK, duplicate ACKs,
    receive window, the ACK clock's end of a flight)."""
    if flags & TH_SYN:
        if not c.syn_seen:
            c.syn_seen, c.t_syn, c.c_isn, c.c_base = True, ts, seq, (seq + 1) & M32
            c.mss_client, _b, c.sack_ok, c.c_wscale = _options(buf, tcp_off + 20, min(len(buf), tcp_off + doff))
        return
    if c.c_base is None:
        c.c_base = seq
    c.last_client_t = ts
    if flags & TH_RST:
        c.rst = True
    new_data = False
    if plen > 0:
        s = _unwrap(seq, c.c_base, c.c_max)
        e = s + plen
        if c.c_first_payload_t is None:
            c.c_first_payload_t = ts
        if e > c.c_max:
            new_data = True
            if c.tls is not False and c.t_tls_end is None:
                start = tcp_off + doff
                avail = min(len(buf) - start, plen)
                _tls_records(c, ts, buf, start, avail, s, e)
            c.c_payload_bytes += e - max(s, c.c_max)
            c.c_max = e
    if not flags & TH_ACK or c.s_base is None:
        if new_data and c.snd_una >= c.snd_max:
            c.xchg_pending = True
        return
    if c.synack_seen and c.t_ack is None and ack == (c.s_isn + 1) & M32:
        c.t_ack = ts
        if c.rtt_s is None and c.t_syn is not None:
            c.rtt_s = ts - c.t_syn
    a = _unwrap(ack, c.s_base, c.snd_una)
    blocks = ()
    if doff > 20 and not (doff == 32 and buf[tcp_off + 20] == 1 and buf[tcp_off + 21] == 1
                          and buf[tcp_off + 22] == 8):
        _m, raw, _ok, _w = _options(buf, tcp_off + 20, min(len(buf), tcp_off + doff))
        if raw:
            blocks = [(_unwrap(lo, c.s_base, a), _unwrap(hi, c.s_base, a)) for lo, hi in raw]
    if a > c.snd_una:
        if c.rtt_s is None and c.first_data_t is not None and c.snd_una == 0:
            c.rtt_s, c.rtt_from_data = ts - c.first_data_t, True
        c.snd_una, c.una_t = a, ts
        q = c.outq
        while q and q[0] <= a:
            q.popleft()
        c.dupacks = 0
        c.sack_hi = a
        if c.rec_point is not None and a >= c.rec_point:
            c.rec_point = None
    elif a == c.snd_una and plen == 0 and not flags & (TH_SYN | TH_FIN) and c.snd_max > a \
            and (c.last_win is None or win == c.last_win or blocks):
        c.dupacks += 1
    c.last_win = win
    c.rwnd = win << c.c_wscale if c.c_wscale is not None and c.s_wscale is not None else win
    if new_data and c.snd_una >= c.snd_max:
        c.xchg_pending = True  # a request to a server with nothing in flight: a new exchange
    if blocks:
        _sack_blocks(c, a, blocks)
    # ACK clock: does this ACK acknowledge anything sent in the current flight?
    if not c.fl_pending and c.flights:
        fn, fr = c.fl_first_new, c.fl_min_retx
        if (fn is not None and (a > fn or c.sack_hi > fn)) or (fr is not None and a > fr):
            c.fl_pending = True
    if keep:
        c.s_t.append(ts)
        c.s_seq.append(a)
        c.s_len.append(0)
        c.s_kind.append(K_ACK)


def _tls_records(c: Conn, ts: float, buf: bytes, start: int, avail: int, s: int, e: int) -> None:
    """Walk the TLS record headers of the client's stream inside one segment
    (offsets s..e, of which `avail` bytes were captured from buf[start:]).
    When a header falls outside the captured bytes the walk resumes at the
    next segment that starts with a record header (TLS writers start a
    segment with each record they flush; encrypted bytes look like a header
    by chance about once in a million)."""
    if not c.tls_sync:
        if avail >= 5 and buf[start] in (20, 21, 22, 23) and buf[start + 1] == 3 and buf[start + 2] <= 4:
            c.tls_next, c.tls_sync = s, True
        else:
            return
    while c.tls_next < e:
        i = c.tls_next - s
        if i < 0 or i + 5 > avail:
            c.tls_sync = False  # a header we cannot see (lost segment, or past the snaplen)
            return
        typ, major, ln = buf[start + i], buf[start + i + 1], (buf[start + i + 3] << 8) | buf[start + i + 4]
        if major != 3 or typ not in (20, 21, 22, 23):
            if not c.tls_types:
                c.tls = False
            c.tls_sync = False
            return
        hs = buf[start + i + 5] if typ == 22 and i + 5 < avail else None
        if not c.tls_types:
            if typ != 22 or hs not in (1, None):
                c.tls = False
                return
            c.tls, c.t_ch = True, ts
        else:
            if typ == 22 and hs == 1:
                c.hrr = True  # a second ClientHello: the server asked for another key share
            elif typ == 22 and c.tls_version is None:
                c.tls_version = "1.2"  # ClientKeyExchange (or a client certificate) in the clear
            elif typ == 23:
                c.t_tls_end, c.tls_app_end = ts, c.tls_next + 5 + ln
                if c.tls_version is None:
                    c.tls_version = "1.3"
                c.tls_types.append(typ)
                return
        c.tls_types.append(typ)
        c.tls_next += 5 + ln


def _sack_blocks(c: Conn, a: int, blocks: list[tuple[int, int]]) -> None:
    """The SACK blocks (offsets) of a client ACK whose cumulative ACK is a: a
    first block below a, or inside the second, is a D-SACK (RFC 2883); the
    others raise the highest SACKed offset."""
    lo0, hi0 = blocks[0]
    if hi0 <= a or (len(blocks) > 1 and blocks[1][0] <= lo0 and hi0 <= blocks[1][1]):
        _dsack(c, lo0, hi0)  # D-SACK: these bytes arrived twice
        blocks = blocks[1:]
    for lo, hi in blocks:
        if hi > c.sack_hi:
            c.sack_hi = hi


def _dsack(c: Conn, lo: int, hi: int) -> None:
    for r in reversed(c.retrans):
        if r[1] < hi and lo < r[1] + r[2]:
            r[4] = True
            return


def server_packet(c: Conn, ts: float, buf: bytes, tcp_off: int, doff: int, flags: int, seq: int, ack: int,
                  plen: int, keep: bool) -> None:
    """A segment from the server: its SYN-ACK, FIN or RST, and its data
    (retransmission kind, flight, packets and bytes in flight)."""
    if flags & TH_SYN:
        if flags & TH_ACK and not c.synack_seen:
            c.synack_seen, c.t_synack, c.s_isn, c.s_base = True, ts, seq, (seq + 1) & M32
            c.mss_server, _b, _ok, c.s_wscale = _options(buf, tcp_off + 20, min(len(buf), tcp_off + doff))
        return
    if c.s_base is None:
        c.s_base = seq
    if flags & TH_RST:
        c.rst = True
    if flags & TH_FIN and c.fin_t is None:
        c.fin_t = ts
    if plen <= 0:
        return
    s = _unwrap(seq, c.s_base, c.snd_max)
    e = s + plen
    c.segments += 1
    if e <= c.snd_una and plen <= 1:
        return  # keep-alive or window probe
    c.bytes_sent += plen
    c.data_segments += 1
    if c.first_data_t is None:
        c.first_data_t = ts
    kind = K_DATA
    new = e - c.snd_max if e > c.snd_max else 0
    if s < c.snd_max:
        kind = _retrans_kind(c, ts, s, e)
        c.retrans.append([ts, s, plen, kind, False, len(c.s_t)])
    # flights (ACK clock)
    if c.fl_pending:
        _open_flight(c, ts, s)
    fl = c.flights[-1]
    fl[1] += 1
    fl[2] += plen
    fl[3] += new
    if kind != K_DATA:
        fl[4] += 1
        if c.fl_min_retx is None or s < c.fl_min_retx:
            c.fl_min_retx = s
    if new and c.fl_first_new is None:
        c.fl_first_new = c.snd_max
    if e > c.snd_max:
        c.snd_max = e
        c.outq.append(e)
    if plen > c.max_seg:
        c.max_seg = plen
    infl = c.snd_max - c.snd_una
    if len(c.outq) > fl[8]:
        fl[8] = len(c.outq)
    if infl > fl[9]:
        fl[9] = infl
    if c.rwnd is not None and not fl[11]:
        fl[10] = c.rwnd  # the window the flight ran into, or the last one it saw
        if infl + c.max_seg > c.rwnd:
            fl[11] = True
    c.last_server_t = ts
    if keep:
        c.s_t.append(ts)
        c.s_seq.append(s)
        c.s_len.append(plen)
        c.s_kind.append(kind)


def _retrans_kind(c: Conn, ts: float, s: int, e: int) -> int:
    """The kind of a server segment that starts below the highest sequence
    sent so far (offsets s..e), from what the sender had seen; a timeout or
    a fast retransmission opens a recovery episode up to snd_max."""
    rtt = c.rtt_s if c.rtt_s is not None else 0.2
    last = max(t for t in (c.last_client_t, c.last_server_t, c.t0) if t is not None)
    quiet = ts - last
    if quiet >= max(rtt / 2, 0.005):
        # a timer fired
        if s > c.snd_una and e >= c.snd_max:
            return K_TLP
        c.rec_point, c.rec_kind = c.snd_max, K_RTO
        return K_RTO
    if c.rec_point is not None and c.snd_una < c.rec_point:
        return c.rec_kind
    if c.dupacks >= 3 or c.sack_hi > s:
        c.rec_point, c.rec_kind = c.snd_max, K_FAST
        return K_FAST
    return K_OTHER


def _open_flight(c: Conn, ts: float, s: int) -> None:
    """A new flight (round) starts with the server segment at offset s: an
    ACK acknowledged something of the previous one (or this is the first)."""
    c.fl_pending = False
    c.fl_first_new = None
    c.fl_min_retx = None
    data_phase = not c.tls or (c.t_tls_end is not None and ts >= c.t_tls_end)
    if c.xchg_pending:
        c.exchange += 1
        c.xchg_pending = False
    # t, segments, bytes, new bytes, retransmissions, data phase, first seq, exchange,
    # max packets in flight, max bytes in flight, receive window then, receive-window limited
    c.flights.append([ts, 0, 0, 0, 0, data_phase, s, c.exchange, 0, 0, None, False])


# a TLS 1.3 alert record (close_notify): header, alert, inner type, AEAD tag
TLS13_ALERT_RECORD = 5 + 2 + 1 + 16


def carried_request(c: Conn) -> bool:
    """The client sent the server something beyond its handshake: a request.
    TLS 1.3: more than an alert after the record that carries its Finished
    (the first application-data record, RFC 8446 §5); TLS 1.2: an
    application-data record at all (its Finished is a handshake record);
    plain TCP: any payload. A connection opened and dropped after (or
    during) its handshake, as a browser's spare connects are, carried none."""
    if c.tls is False or c.tls is None:
        return c.c_max > 0
    if c.tls_app_end is None:
        return False
    return c.c_max > c.tls_app_end + TLS13_ALERT_RECORD if c.tls_version == "1.3" else True


def _ms(t: float | None, t0: float) -> float | None:
    return None if t is None else round((t - t0) * 1e3, 3)


def _fmt_addr(a: tuple) -> str:
    ip = ipaddress.ip_address(a[0])
    return f"[{ip}]:{a[1]}" if ip.version == 6 else f"{ip}:{a[1]}"


def summary(c: Conn) -> dict:
    """The connection as analyze_pcap returns it (fields: tortoiselab.analysis.flights)."""
    t0 = c.t0
    rtt_ms = c.rtt_s * 1e3 if c.rtt_s is not None else None
    vantage = "unknown"
    if c.t_syn is not None and c.t_synack is not None and c.t_ack is not None:
        vantage = "server" if (c.t_synack - c.t_syn) < (c.t_ack - c.t_synack) else "client"
    tls = None
    if c.tls:
        hs_ms = (c.t_tls_end - c.t_ch) * 1e3 if c.t_tls_end is not None and c.t_ch is not None else None
        srv_hs = [f for f in c.flights if not f[5]]
        tls = {"version": c.tls_version, "hello_retry": c.hrr,
               "client_hello_ms": _ms(c.t_ch, t0), "end_ms": _ms(c.t_tls_end, t0),
               "handshake_ms": round(hs_ms, 3) if hs_ms is not None else None,
               "rtts": round(hs_ms / rtt_ms, 3) if hs_ms is not None and rtt_ms else None,
               "server_handshake_flights": len(srv_hs),
               "server_handshake_bytes": sum(f[2] for f in srv_hs)}
    hs_rtts = {"tcp": 1 if c.syn_seen else None,
               "tls": round(tls["rtts"]) if tls and tls["rtts"] is not None else (0 if c.tls is False else None)}
    fl = [{"round": i + 1, "phase": "data" if f[5] else "handshake", "exchange": f[7], "t_ms": _ms(f[0], t0),
           "segments": f[1], "bytes": f[2], "new_bytes": f[3], "retransmissions": f[4],
           "inflight_pkts_max": f[8], "inflight_bytes_max": f[9], "rwnd_bytes": f[10], "rwnd_limited": f[11]}
          for i, f in enumerate(c.flights)]
    retrans = [{"t_ms": _ms(r[0], t0), "seq": r[1], "len": r[2], "kind": KINDS[r[3]], "spurious": r[4]}
               for r in c.retrans]
    counts = {k: sum(1 for r in retrans if r["kind"] == k) for k in RETRANS_KINDS}
    counts["spurious"] = sum(1 for r in retrans if r["spurious"])
    # goodput over the data phase
    data_fl = [f for f in c.flights if f[5]]
    goodput = transfer_ms = None
    data_bytes = 0
    if data_fl and c.una_t is not None:
        start_seq = data_fl[0][6]
        data_bytes = max(0, min(c.snd_una, c.snd_max) - start_seq)
        dt = c.una_t - data_fl[0][0]
        if dt > 0 and data_bytes > 0:
            transfer_ms = round(dt * 1e3, 3)
            goodput = round(data_bytes * 8 / dt / 1e6, 3)
    series = {"t_ms": [round((t - t0) * 1e3, 3) for t in c.s_t], "seq": c.s_seq.tolist(),
              "len": c.s_len.tolist(), "kind": [KINDS[k] for k in c.s_kind]}
    return {
        "client": _fmt_addr(c.client), "server": _fmt_addr(c.server), "vantage": vantage,
        "start": c.t0, "syn_seen": c.syn_seen,
        "tcp_rtt_ms": round(rtt_ms, 3) if rtt_ms is not None else None,
        "rtt_from": None if rtt_ms is None else ("data" if c.rtt_from_data else "handshake"),
        "syn_ms": _ms(c.t_syn, t0), "synack_ms": _ms(c.t_synack, t0), "ack_ms": _ms(c.t_ack, t0),
        "mss": {"client": c.mss_client, "server": c.mss_server}, "sack": c.sack_ok,
        "tls": tls, "handshake_rtts": hs_rtts,
        "request_ms": _ms(c.t_tls_end if c.tls else c.c_first_payload_t, t0),
        "carried_request": carried_request(c),
        "first_data_ms": _ms(c.first_data_t, t0), "last_ack_ms": _ms(c.una_t, t0),
        "server_bytes_sent": c.bytes_sent, "server_bytes_unique": c.snd_max,
        "server_bytes_acked": min(c.snd_una, c.snd_max), "client_bytes": c.c_payload_bytes,
        "data_segments": c.data_segments, "data_bytes": data_bytes,
        "transfer_ms": transfer_ms, "goodput_mbit": goodput,
        "flight_method": "ack" if vantage == "server" else "gap",
        "flights_ack": fl,
        "retransmissions": retrans, "retrans_counts": counts,
        "fin_ms": _ms(c.fin_t, t0), "reset": c.rst,
        "series": series,
    }
