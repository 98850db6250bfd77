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
"""

from __future__ import annotations

import math
import struct
from array import array
from collections import deque
from pathlib import Path

import dpkt

M32 = 0xFFFFFFFF
HALF = 0x80000000
TH_FIN, TH_SYN, TH_RST, TH_ACK = 0x01, 0x02, 0x04, 0x10

KINDS = ("data", "fast", "rto", "tlp", "other", "ack")
K_DATA, K_FAST, K_RTO, K_TLP, K_OTHER, K_ACK = range(6)
RETRANS_KINDS = KINDS[1:5]

_TCP = struct.Struct("!HHIIHH")
_IP4 = struct.Struct("!BBHHHBB2x4s4s")
_IP6 = struct.Struct("!4xHBx16s16s")
_H = struct.Struct("!H")
_II = struct.Struct("!II")

# link type -> how to find the IP header
_LINK = {
    dpkt.pcap.DLT_EN10MB: "eth",
    dpkt.pcap.DLT_LINUX_SLL: "sll",
    276: "sll2",  # DLT_LINUX_SLL2
    101: "raw", 12: "raw", 14: "raw", 228: "raw", 229: "raw",  # LINKTYPE_RAW, DLT_RAW, IPv4, IPv6
    dpkt.pcap.DLT_NULL: "null", dpkt.pcap.DLT_LOOP: "null",
}


class _Conn:
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
        "tls_version", "hrr", "c_payload_bytes",
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


def _open_reader(fh):
    magic = fh.read(4)
    fh.seek(0)
    if magic == b"\x0a\x0d\x0d\x0a":
        return dpkt.pcapng.Reader(fh)
    return dpkt.pcap.Reader(fh)


def analyze_pcap(path: str | Path, server_port: int | None = 443, keep_series: bool = True) -> list[dict]:
    """One summary per TCP connection (in order of first appearance) in a
    capture. server_port: the server's TCP port; None to take the server
    from each connection's SYN (or, without one, the lower port)."""
    conns: dict[tuple, _Conn] = {}
    out: list[_Conn] = []
    with open(path, "rb") as fh:
        reader = _open_reader(fh)
        link = _LINK.get(reader.datalink())
        if link is None:
            raise ValueError(f"{path}: link type {reader.datalink()} is not supported "
                             "(Ethernet, Linux cooked, raw IP or loopback)")
        for ts, buf in reader:
            # --- link layer -> IP header offset
            if link == "eth":
                if len(buf) < 34:
                    continue
                et = (buf[12] << 8) | buf[13]
                off = 14
                while et in (0x8100, 0x88A8) and len(buf) >= off + 4:
                    et = (buf[off + 2] << 8) | buf[off + 3]
                    off += 4
                if et != 0x0800 and et != 0x86DD:
                    continue
            elif link == "sll":
                off = 16
            elif link == "sll2":
                off = 20
            elif link == "null":
                off = 4
            else:
                off = 0
            if len(buf) < off + 20:
                continue
            v = buf[off] >> 4
            if v == 4:
                vhl, _tos, tot, _id, frag, _ttl, proto, src, dst = _IP4.unpack_from(buf, off)
                if proto != 6 or frag & 0x1FFF:  # TCP, and not a later fragment
                    continue
                ihl = (vhl & 15) * 4
                tcp_off = off + ihl
                ip_payload = tot - ihl
            elif v == 6:
                if len(buf) < off + 40:
                    continue
                plen6, nxt, src, dst = _IP6.unpack_from(buf, off)
                if nxt != 6:
                    continue
                tcp_off = off + 40
                ip_payload = plen6
            else:
                continue
            if len(buf) < tcp_off + 20:
                continue
            sport, dport, seq, ack, offfl, win = _TCP.unpack_from(buf, tcp_off)
            doff = (offfl >> 12) * 4
            flags = offfl & 0x3F
            plen = ip_payload - doff
            if plen < 0:
                continue
            ts = float(ts)
            # --- which connection, which direction
            if server_port is not None:
                if sport == server_port:
                    key, from_client = (dst, dport, src, sport), False
                elif dport == server_port:
                    key, from_client = (src, sport, dst, dport), True
                else:
                    continue
            else:
                k1, k2 = (src, sport, dst, dport), (dst, dport, src, sport)
                if k1 in conns:
                    key, from_client = k1, True
                elif k2 in conns:
                    key, from_client = k2, False
                elif flags & TH_SYN and not flags & TH_ACK:
                    key, from_client = k1, True
                elif flags & TH_SYN:
                    key, from_client = k2, False
                elif sport > dport:
                    key, from_client = k1, True
                else:
                    key, from_client = k2, False
            c = conns.get(key)
            if c is not None and from_client and flags & TH_SYN and not flags & TH_ACK and c.syn_seen \
                    and seq != c.c_isn:
                c = None  # the same ports again: a new connection
            if c is None:
                c = _Conn(key[:2], key[2:], ts)
                conns[key] = c
                out.append(c)
            if from_client:
                _client_packet(c, ts, buf, tcp_off, doff, flags, seq, ack, win, plen, keep_series)
            else:
                _server_packet(c, ts, buf, tcp_off, doff, flags, seq, ack, plen, keep_series)
    return [_summary(c) for c in out]


def _client_packet(c: _Conn, ts: float, buf: bytes, tcp_off: int, doff: int, flags: int, seq: int, ack: int,
                   win: int, plen: int, keep: bool) -> None:
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
        lo0, hi0 = blocks[0]
        if hi0 <= a or (len(blocks) > 1 and blocks[1][0] <= lo0 and hi0 <= blocks[1][1]):
            _dsack(c, lo0, hi0)  # D-SACK: these bytes arrived twice
            blocks = blocks[1:]
        for lo, hi in blocks:
            if hi > c.sack_hi:
                c.sack_hi = hi
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


def _tls_records(c: _Conn, ts: float, buf: bytes, start: int, avail: int, s: int, e: int) -> None:
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
                c.t_tls_end = ts
                if c.tls_version is None:
                    c.tls_version = "1.3"
                c.tls_types.append(typ)
                return
        c.tls_types.append(typ)
        c.tls_next += 5 + ln


def _dsack(c: _Conn, lo: int, hi: int) -> None:
    for r in reversed(c.retrans):
        if r[1] < hi and lo < r[1] + r[2]:
            r[4] = True
            return


def _server_packet(c: _Conn, ts: float, buf: bytes, tcp_off: int, doff: int, flags: int, seq: int, ack: int,
                   plen: int, keep: bool) -> None:
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
        rtt = c.rtt_s if c.rtt_s is not None else 0.2
        last = max(t for t in (c.last_client_t, c.last_server_t, c.t0) if t is not None)
        quiet = ts - last
        if quiet >= max(rtt / 2, 0.005):
            # a timer fired
            if s > c.snd_una and e >= c.snd_max:
                kind = K_TLP
            else:
                kind = K_RTO
                c.rec_point, c.rec_kind = c.snd_max, K_RTO
        elif c.rec_point is not None and c.snd_una < c.rec_point:
            kind = c.rec_kind
        elif c.dupacks >= 3 or c.sack_hi > s:
            kind = K_FAST
            c.rec_point, c.rec_kind = c.snd_max, K_FAST
        else:
            kind = K_OTHER
        c.retrans.append([ts, s, plen, kind, False, len(c.s_t)])
    # flights (ACK clock)
    if c.fl_pending:
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


def _ms(t: float | None, t0: float) -> float | None:
    return None if t is None else round((t - t0) * 1e3, 3)


def _fmt_addr(a: tuple) -> str:
    import ipaddress

    ip = ipaddress.ip_address(a[0])
    return f"[{ip}]:{a[1]}" if ip.version == 6 else f"{ip}:{a[1]}"


def _summary(c: _Conn) -> dict:
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


def handshake_summary(conn: dict) -> dict:
    """The few fields of a connection (a dict from analyze_pcap) that a run
    stores for every connection (run.json -> connections): its ends, the TCP
    round trip, the TLS handshake in ms and in round trips, and the server's
    flights before the client could send its request."""
    tls = conn.get("tls") or {}
    return {"client": conn["client"], "server": conn["server"], "tcp_rtt_ms": conn["tcp_rtt_ms"],
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
                    "ok": reason not in ("short", "long")})
    return out
