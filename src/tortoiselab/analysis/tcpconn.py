"""One TCP connection's state while a capture streams past:
sequence numbers unwrapped to offsets, the client's and the server's
segments (handshake, ACKs and SACKs, D-SACK, retransmissions and their
kinds, flights by the ACK clock, in-flight counts, the client's TLS
records). The definitions are in tortoiselab.analysis.flights (its module
docstring); tortoiselab.analysis.conntable reads the capture
(tortoiselab.analysis.capture), hands each TCP segment (a capture.Packet)
to client_packet or server_packet here and makes each connection's summary.

A connection's state is a few named parts (Conn): each side's sequence
state (ClientSide, ServerSide), what the client's ACKs told the server
(AckFeedback), the server's recovery episode (Recovery), its flights by the
ACK clock (FlightClock, Flight), the request/response exchanges
(Exchanges), the client's TLS records (ClientTls) and the time-sequence
series (Series).
"""

from __future__ import annotations

from array import array
from collections import deque
from dataclasses import dataclass, field

from .capture import TH_ACK, TH_FIN, TH_RST, TH_SYN, Packet

M32 = 0xFFFFFFFF
HALF = 0x80000000

KINDS = ("data", "fast", "rto", "tlp", "other", "ack")
K_DATA, K_FAST, K_RTO, K_TLP, K_OTHER, K_ACK = range(6)
RETRANS_KINDS = KINDS[1:5]


@dataclass(slots=True)
class ClientSide:
    """The client's sequence state: its SYN and its byte stream, in offsets
    from its first data byte."""

    syn_seen: bool = False
    t_syn: float | None = None
    isn: int | None = None  # the SYN's sequence number
    base: int | None = None  # the raw sequence number of offset 0
    mss: int | None = None  # the SYN's options
    window_scale: int | None = None
    sack_permitted: bool = False
    stream_end: int = 0  # the offset past the highest byte sent
    payload_bytes: int = 0  # bytes sent, each counted once
    first_payload_t: float | None = None
    last_t: float | None = None  # its last segment (but a SYN)


@dataclass(slots=True)
class ServerSide:
    """The server's sequence state as a sender, in offsets from its first
    data byte, and what it sent."""

    synack_seen: bool = False
    t_synack: float | None = None
    isn: int | None = None  # the SYN-ACK's sequence number
    base: int | None = None  # the raw sequence number of offset 0
    mss: int | None = None  # the SYN-ACK's options
    window_scale: int | None = None
    snd_max: int = 0  # the offset past the highest byte sent
    snd_una: int = 0  # the cumulative ACK: the first byte not acknowledged
    una_t: float | None = None  # when snd_una last moved
    unacked_ends: deque[int] = field(default_factory=deque)  # end offsets of new-data segments not yet ACKed
    max_segment: int = 0  # the largest payload sent
    segments: int = 0  # segments with payload
    data_segments: int = 0  # of them, those with data (not keep-alives or window probes)
    bytes_sent: int = 0  # their payload bytes, retransmissions included
    first_data_t: float | None = None
    last_t: float | None = None  # its last data segment
    fin_t: float | None = None


@dataclass(slots=True)
class AckFeedback:
    """What the client's ACKs have told the server."""

    dupacks: int = 0  # duplicate ACKs since the cumulative ACK last moved
    sack_high: int = 0  # the highest offset ACKed or SACKed
    last_window: int | None = None  # the window field of the last ACK (unscaled)
    rwnd_bytes: int | None = None  # that window in bytes (scaled when both SYNs agreed a scale)


@dataclass(slots=True)
class Recovery:
    """The server's recovery episode: opened by a timeout or a fast
    retransmission, it lasts until the cumulative ACK passes `until`."""

    until: int | None = None  # snd_max when it opened; None: not in recovery
    kind: int = K_DATA  # K_RTO or K_FAST: the kind of the retransmissions inside it


@dataclass(slots=True)
class Flight:
    """One flight (round) of the server's by the ACK clock."""

    t: float  # its first segment
    first_seq: int  # the offset of its first segment
    data_phase: bool  # after the TLS handshake (or not TLS)
    exchange: int  # the request/response exchange it belongs to
    segments: int = 0
    bytes: int = 0
    new_bytes: int = 0
    retransmissions: int = 0
    inflight_pkts_max: int = 0
    inflight_bytes_max: int = 0
    rwnd_bytes: int | None = None  # the window the flight ran into, or the last one it saw
    rwnd_limited: bool = False


@dataclass(slots=True)
class FlightClock:
    """The server's flights by the ACK clock: a flight ends when an ACK
    acknowledges something sent in it; the next server segment opens one."""

    flights: list[Flight] = field(default_factory=list)
    next_opens: bool = True  # the next server segment opens a flight
    first_new: int | None = None  # snd_max when the current flight first sent new data
    lowest_retransmitted: int | None = None  # the lowest offset it retransmitted


@dataclass(slots=True)
class Exchanges:
    """Request/response exchanges: a client request while the server has
    nothing in flight starts one; its first flight counts it."""

    count: int = 0
    request_pending: bool = True  # a request not yet answered by a flight


@dataclass(slots=True)
class ClientTls:
    """The client's TLS records, walked header by header (_tls_records)."""

    is_tls: bool | None = None  # None: not known yet
    in_sync: bool = True  # next_header is a record header
    next_header: int = 0  # the stream offset of the next record header
    record_types: list[int] = field(default_factory=list)
    t_client_hello: float | None = None
    t_end: float | None = None  # the first application-data record: the handshake's end
    app_end: int | None = None  # the stream offset where that record ends
    version: str | None = None
    hello_retry: bool = False  # a second ClientHello


@dataclass(slots=True)
class Retransmission:
    t: float
    seq: int  # offset
    length: int
    kind: int  # K_FAST, K_RTO, K_TLP or K_OTHER
    spurious: bool = False  # a D-SACK said these bytes arrived twice


@dataclass(slots=True)
class Series:
    """The time-sequence plot: a point per server data segment and per
    client ACK (seq: the cumulative ACK)."""

    t: array = field(default_factory=lambda: array("d"))
    seq: array = field(default_factory=lambda: array("q"))
    length: array = field(default_factory=lambda: array("l"))
    kind: array = field(default_factory=lambda: array("b"))

    def add(self, t: float, seq: int, length: int, kind: int) -> None:
        self.t.append(t)
        self.seq.append(seq)
        self.length.append(length)
        self.kind.append(kind)


@dataclass(slots=True)
class Conn:
    """State of one connection while the capture streams past."""

    client_addr: tuple  # (IP address bytes, port)
    server_addr: tuple
    t0: float  # its first packet
    client: ClientSide = field(default_factory=ClientSide)
    server: ServerSide = field(default_factory=ServerSide)
    acks: AckFeedback = field(default_factory=AckFeedback)
    recovery: Recovery = field(default_factory=Recovery)
    flight_clock: FlightClock = field(default_factory=FlightClock)
    exchanges: Exchanges = field(default_factory=Exchanges)
    tls: ClientTls = field(default_factory=ClientTls)
    retransmissions: list[Retransmission] = field(default_factory=list)
    series: Series = field(default_factory=Series)
    t_ack: float | None = None  # the handshake's ACK
    rtt_s: float | None = None
    rtt_from_data: bool = False  # the RTT from the first data and its ACK (no handshake seen)
    reset: bool = False


def _unwrap(raw: int, base: int, ref: int) -> int:
    """Offset of a 32-bit sequence number from `base`, unwrapped near `ref`."""
    r = ((raw - base) & M32) + (ref & ~M32)
    if r < ref - HALF:
        r += 1 << 32
    elif r > ref + HALF:
        r -= 1 << 32
    return r


def client_packet(c: Conn, p: Packet, keep: bool) -> None:
    """A segment from the client: its SYN, its byte stream (TLS records, new
    exchanges), and its ACK (cumulative, SACK and D-SACK, duplicate ACKs,
    receive window, the ACK clock's end of a flight). keep: add the ACK to
    the series."""
    cl, sv, ts = c.client, c.server, p.t_s
    if p.flags & TH_SYN:
        if not cl.syn_seen:
            cl.syn_seen, cl.t_syn, cl.isn, cl.base = True, ts, p.seq, (p.seq + 1) & M32
            cl.mss, cl.sack_permitted, cl.window_scale = p.options.mss, p.options.sack_permitted, \
                p.options.window_scale
        return
    if cl.base is None:
        cl.base = p.seq
    cl.last_t = ts
    if p.flags & TH_RST:
        c.reset = True
    new_data = _client_stream(c, p)
    if not p.flags & TH_ACK or sv.base is None:
        if new_data and sv.snd_una >= sv.snd_max:
            c.exchanges.request_pending = True
        return
    if sv.synack_seen and c.t_ack is None and p.ack == (sv.isn + 1) & M32:
        c.t_ack = ts
        if c.rtt_s is None and cl.t_syn is not None:
            c.rtt_s = ts - cl.t_syn
    a = _unwrap(p.ack, sv.base, sv.snd_una)
    blocks = [(_unwrap(lo, sv.base, a), _unwrap(hi, sv.base, a)) for lo, hi in p.options.sack_blocks]
    acks = c.acks
    if a > sv.snd_una:
        if c.rtt_s is None and sv.first_data_t is not None and sv.snd_una == 0:
            c.rtt_s, c.rtt_from_data = ts - sv.first_data_t, True
        sv.snd_una, sv.una_t = a, ts
        q = sv.unacked_ends
        while q and q[0] <= a:
            q.popleft()
        acks.dupacks = 0
        acks.sack_high = a
        if c.recovery.until is not None and a >= c.recovery.until:
            c.recovery.until = None
    elif a == sv.snd_una and p.payload_len == 0 and not p.flags & (TH_SYN | TH_FIN) and sv.snd_max > a \
            and (acks.last_window is None or p.window == acks.last_window or blocks):
        acks.dupacks += 1
    acks.last_window = p.window
    acks.rwnd_bytes = p.window << cl.window_scale \
        if cl.window_scale is not None and sv.window_scale is not None else p.window
    if new_data and sv.snd_una >= sv.snd_max:
        c.exchanges.request_pending = True  # a request to a server with nothing in flight: a new exchange
    if blocks:
        _sack_blocks(c, a, blocks)
    # ACK clock: does this ACK acknowledge anything sent in the current flight?
    fc = c.flight_clock
    if not fc.next_opens and fc.flights:
        fn, fr = fc.first_new, fc.lowest_retransmitted
        if (fn is not None and (a > fn or acks.sack_high > fn)) or (fr is not None and a > fr):
            fc.next_opens = True
    if keep:
        c.series.add(ts, a, 0, K_ACK)


def _client_stream(c: Conn, p: Packet) -> bool:
    """The client's payload in its byte stream (and its TLS records);
    whether it carried bytes beyond those sent before."""
    cl = c.client
    if p.payload_len <= 0:
        return False
    s = _unwrap(p.seq, cl.base, cl.stream_end)
    e = s + p.payload_len
    if cl.first_payload_t is None:
        cl.first_payload_t = p.t_s
    if e <= cl.stream_end:
        return False
    if c.tls.is_tls is not False and c.tls.t_end is None:
        _tls_records(c.tls, p.t_s, p.payload, s, e)
    cl.payload_bytes += e - max(s, cl.stream_end)
    cl.stream_end = e
    return True


def _tls_records(tls: ClientTls, ts: float, data: bytes, s: int, e: int) -> None:
    """Walk the TLS record headers of the client's stream inside one segment
    (offsets s..e, of which `data` holds those captured). When a header
    falls outside the captured bytes the walk resumes at the next segment
    that starts with a record header (TLS writers start a segment with each
    record they flush; encrypted bytes look like a header by chance about
    once in a million)."""
    avail = len(data)
    if not tls.in_sync:
        if avail >= 5 and data[0] in (20, 21, 22, 23) and data[1] == 3 and data[2] <= 4:
            tls.next_header, tls.in_sync = s, True
        else:
            return
    while tls.next_header < e:
        i = tls.next_header - s
        if i < 0 or i + 5 > avail:
            tls.in_sync = False  # a header we cannot see (lost segment, or past the snaplen)
            return
        typ, major, ln = data[i], data[i + 1], (data[i + 3] << 8) | data[i + 4]
        if major != 3 or typ not in (20, 21, 22, 23):
            if not tls.record_types:
                tls.is_tls = False
            tls.in_sync = False
            return
        hs = data[i + 5] if typ == 22 and i + 5 < avail else None
        if not tls.record_types:
            if typ != 22 or hs not in (1, None):
                tls.is_tls = False
                return
            tls.is_tls, tls.t_client_hello = True, ts
        else:
            if typ == 22 and hs == 1:
                tls.hello_retry = True  # a second ClientHello: the server asked for another key share
            elif typ == 22 and tls.version is None:
                tls.version = "1.2"  # ClientKeyExchange (or a client certificate) in the clear
            elif typ == 23:
                tls.t_end, tls.app_end = ts, tls.next_header + 5 + ln
                if tls.version is None:
                    tls.version = "1.3"
                tls.record_types.append(typ)
                return
        tls.record_types.append(typ)
        tls.next_header += 5 + ln


def _sack_blocks(c: Conn, a: int, blocks: list[tuple[int, int]]) -> None:
    """The SACK blocks (offsets) of a client ACK whose cumulative ACK is a: a
    first block below a, or inside the second, is a D-SACK (RFC 2883); the
    others raise the highest SACKed offset."""
    lo0, hi0 = blocks[0]
    if hi0 <= a or (len(blocks) > 1 and blocks[1][0] <= lo0 and hi0 <= blocks[1][1]):
        _dsack(c, lo0, hi0)  # D-SACK: these bytes arrived twice
        blocks = blocks[1:]
    for lo, hi in blocks:
        if hi > c.acks.sack_high:
            c.acks.sack_high = hi


def _dsack(c: Conn, lo: int, hi: int) -> None:
    """The latest retransmission that overlaps lo..hi was spurious."""
    for r in reversed(c.retransmissions):
        if r.seq < hi and lo < r.seq + r.length:
            r.spurious = True
            return


def server_packet(c: Conn, p: Packet, keep: bool) -> None:
    """A segment from the server: its SYN-ACK, FIN or RST, and its data
    (retransmission kind, flight, packets and bytes in flight). keep: add
    its data to the series."""
    sv, ts, plen = c.server, p.t_s, p.payload_len
    if p.flags & TH_SYN:
        if p.flags & TH_ACK and not sv.synack_seen:
            sv.synack_seen, sv.t_synack, sv.isn, sv.base = True, ts, p.seq, (p.seq + 1) & M32
            sv.mss, sv.window_scale = p.options.mss, p.options.window_scale
        return
    if sv.base is None:
        sv.base = p.seq
    if p.flags & TH_RST:
        c.reset = True
    if p.flags & TH_FIN and sv.fin_t is None:
        sv.fin_t = ts
    if plen <= 0:
        return
    s = _unwrap(p.seq, sv.base, sv.snd_max)
    e = s + plen
    sv.segments += 1
    if e <= sv.snd_una and plen <= 1:
        return  # keep-alive or window probe
    sv.bytes_sent += plen
    sv.data_segments += 1
    if sv.first_data_t is None:
        sv.first_data_t = ts
    kind = K_DATA
    new = e - sv.snd_max if e > sv.snd_max else 0
    if s < sv.snd_max:
        kind = _retrans_kind(c, ts, s, e)
        c.retransmissions.append(Retransmission(ts, s, plen, kind))
    _count_in_flight(c, ts, s, plen, new, kind)
    if e > sv.snd_max:
        sv.snd_max = e
        sv.unacked_ends.append(e)
    if plen > sv.max_segment:
        sv.max_segment = plen
    _flight_peaks(c)
    sv.last_t = ts
    if keep:
        c.series.add(ts, s, plen, kind)


def _count_in_flight(c: Conn, ts: float, s: int, plen: int, new: int, kind: int) -> None:
    """A server data segment at offset s (plen bytes, `new` of them never
    sent before) in its flight by the ACK clock, opening one if due."""
    fc = c.flight_clock
    if fc.next_opens:
        _open_flight(c, ts, s)
    fl = fc.flights[-1]
    fl.segments += 1
    fl.bytes += plen
    fl.new_bytes += new
    if kind != K_DATA:
        fl.retransmissions += 1
        if fc.lowest_retransmitted is None or s < fc.lowest_retransmitted:
            fc.lowest_retransmitted = s
    if new and fc.first_new is None:
        fc.first_new = c.server.snd_max


def _flight_peaks(c: Conn) -> None:
    """The current flight's peaks of packets and bytes in flight, and the
    receive window it ran into, after a server data segment."""
    sv, fl = c.server, c.flight_clock.flights[-1]
    infl = sv.snd_max - sv.snd_una
    if len(sv.unacked_ends) > fl.inflight_pkts_max:
        fl.inflight_pkts_max = len(sv.unacked_ends)
    if infl > fl.inflight_bytes_max:
        fl.inflight_bytes_max = infl
    rwnd = c.acks.rwnd_bytes
    if rwnd is not None and not fl.rwnd_limited:
        fl.rwnd_bytes = rwnd  # the window the flight ran into, or the last one it saw
        if infl + sv.max_segment > rwnd:
            fl.rwnd_limited = True


def _retrans_kind(c: Conn, ts: float, s: int, e: int) -> int:
    """The kind of a server segment that starts below the highest sequence
    sent so far (offsets s..e), from what the sender had seen; a timeout or
    a fast retransmission opens a recovery episode up to snd_max."""
    sv, rec = c.server, c.recovery
    rtt = c.rtt_s if c.rtt_s is not None else 0.2
    last = max(t for t in (c.client.last_t, sv.last_t, c.t0) if t is not None)
    quiet = ts - last
    if quiet >= max(rtt / 2, 0.005):
        # a timer fired
        if s > sv.snd_una and e >= sv.snd_max:
            return K_TLP
        rec.until, rec.kind = sv.snd_max, K_RTO
        return K_RTO
    if rec.until is not None and sv.snd_una < rec.until:
        return rec.kind
    if c.acks.dupacks >= 3 or c.acks.sack_high > s:
        rec.until, rec.kind = sv.snd_max, K_FAST
        return K_FAST
    return K_OTHER


def _open_flight(c: Conn, ts: float, s: int) -> None:
    """A new flight (round) starts with the server segment at offset s: an
    ACK acknowledged something of the previous one (or this is the first)."""
    fc, tls, x = c.flight_clock, c.tls, c.exchanges
    fc.next_opens = False
    fc.first_new = None
    fc.lowest_retransmitted = None
    data_phase = not tls.is_tls or (tls.t_end is not None and ts >= tls.t_end)
    if x.request_pending:
        x.count += 1
        x.request_pending = False
    fc.flights.append(Flight(ts, s, data_phase, x.count))


# a TLS 1.3 alert record (close_notify): header, alert, inner type, AEAD tag
TLS13_ALERT_RECORD = 5 + 2 + 1 + 16


def carried_request(c: Conn) -> bool:
    """The client sent the server something beyond its handshake: a request.
    TLS 1.3: more than an alert after the record that carries its Finished
    (the first application-data record, RFC 8446 §5); TLS 1.2: an
    application-data record at all (its Finished is a handshake record);
    plain TCP: any payload. A connection opened and dropped after (or
    during) its handshake, as a browser's spare connects are, carried none."""
    tls, end = c.tls, c.client.stream_end
    if tls.is_tls is False or tls.is_tls is None:
        return end > 0
    if tls.app_end is None:
        return False
    return end > tls.app_end + TLS13_ALERT_RECORD if tls.version == "1.3" else True

