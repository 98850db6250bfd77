"""The one reader of the lab's captures: a pcap (the classic format tcpdump
writes, or pcapng) read into typed packets, for every analysis that looks
at one (tortoiselab.analysis.flights through tcpconn, analysis.pathloss,
analysis.dnstime and host.determinism).

The file format is dpkt's (its pcap and pcapng readers, a dependency of the
project); the headers are unpacked here with struct, one Packet per frame,
no dpkt object per packet (a 100 MB capture is read in seconds:
tests/unit/test_flights.py, the benchmark). Link types: Ethernet (with
802.1Q tags), Linux cooked (SLL and SLL2), raw IP and BSD loopback; IPv4
and IPv6 (without extension headers). Every frame gives a Packet, also one
that is not IP (ARP, ...) or whose transport header was not captured: what a
packet carries says how far it was read (Packet.ip_version, .transport).

Lengths come from the IP header's lengths, never from the captured bytes,
so a short snaplen loses nothing but payload bytes (Packet.payload holds
those captured, Packet.payload_len all of them). TCP options are parsed
once, here (parse_tcp_options); the DNS messages of UDP port 53 too
(DnsMessage, through dpkt's DNS parser).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import dpkt

TH_FIN, TH_SYN, TH_RST, TH_PUSH, TH_ACK = 0x01, 0x02, 0x04, 0x08, 0x10
TCP, UDP = "tcp", "udp"
DNS_PORT = 53

_TCP = struct.Struct("!HHIIHH")
_UDP = struct.Struct("!HH")
_IP4 = struct.Struct("!BBHHHBB2x4s4s")
_IP6 = struct.Struct("!4xHBx16s16s")
_H = struct.Struct("!H")
_II = struct.Struct("!II")
_TS_ONLY = b"\x01\x01\x08\x0a"  # NOP, NOP, Timestamps (kind 8, length 10): what Linux puts on most segments

# link type -> how to find the IP header
_LINK = {
    dpkt.pcap.DLT_EN10MB: "eth",
    dpkt.pcap.DLT_LINUX_SLL: "sll",
    276: "sll2",  # DLT_LINUX_SLL2
    101: "raw", 12: "raw", 14: "raw", 228: "raw", 229: "raw",  # LINKTYPE_RAW, DLT_RAW, IPv4, IPv6
    dpkt.pcap.DLT_NULL: "null", dpkt.pcap.DLT_LOOP: "null",
}
# where the IP header starts for the link types with a fixed-size header
_IP_OFFSET = {"sll": 16, "sll2": 20, "null": 4, "raw": 0}


class TcpOptions(NamedTuple):
    """The TCP options of a segment that the analyses read (RFC 9293 §3.1:
    an option list ends at End of Option List or at the header's end; one
    malformed stops the walk). An option present twice: the last counts;
    SACK blocks of every SACK option, in order."""

    mss: int | None = None  # Maximum Segment Size, kind 2 (RFC 9293 §3.2)
    window_scale: int | None = None  # shift count, kind 3, at most 14 (RFC 7323 §2.3)
    sack_permitted: bool = False  # kind 4 (RFC 2018 §2)
    sack_blocks: tuple[tuple[int, int], ...] = ()  # (left edge, right edge) raw sequence numbers, kind 5 (RFC 2018 §3)
    tsval: int | None = None  # Timestamps, kind 8, length 10 (RFC 7323 §3.2): TSval
    tsecr: int | None = None  # and TSecr


NO_OPTIONS = TcpOptions()


class DnsMessage(NamedTuple):
    """What the analyses read of a DNS message (RFC 1035 §4.1)."""

    is_response: bool  # QR
    questions: tuple[str, ...]  # QNAMEs as the message spells them
    answer_types: tuple[int, ...]  # TYPE of each answer record (1 A, 28 AAAA)


@dataclass(slots=True)
class Packet:
    """One captured frame, read as far as its headers were captured."""

    t_s: float  # capture time, seconds since the epoch
    frame_len: int  # bytes captured of the frame
    ip_version: int = 0  # 4 or 6; 0: not IP, or its header not captured
    src: bytes = b""  # IP addresses (4 or 16 bytes)
    dst: bytes = b""
    ip_len: int = 0  # IP total length (header and payload; IPv6: 40 + payload length)
    ip_id: int = 0  # IPv4 identification
    proto: int = -1  # IP protocol (IPv6: next header); 6 TCP, 17 UDP
    transport: str | None = None  # TCP or UDP: its header was read; None: another protocol, a later
    #                               fragment, or a header not captured
    sport: int = 0
    dport: int = 0
    seq: int = 0  # TCP
    ack: int = 0
    flags: int = 0  # the 9 flag bits (FIN 0x01 ... NS 0x100)
    window: int = 0  # as sent, unscaled
    options: TcpOptions = NO_OPTIONS
    payload_len: int = 0  # transport payload bytes by the IP header (negative: a header that lies)
    payload: bytes = b""  # the payload bytes captured (fewer than payload_len past the snaplen)
    dns: DnsMessage | None = None  # UDP to or from port 53 whose payload parses as DNS


def parse_tcp_options(buf: bytes, start: int, end: int) -> TcpOptions:
    """The options of buf[start:end] (the bytes between a TCP header's fixed
    20 bytes and its data offset, as captured)."""
    if end - start == 12 and buf[start:start + 4] == _TS_ONLY:
        tsval, tsecr = _II.unpack_from(buf, start + 4)
        return TcpOptions(tsval=tsval, tsecr=tsecr)
    mss = wscale = tsval = tsecr = None
    sack_ok, blocks = False, []
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
        elif kind == 3 and ln == 3:
            wscale = min(buf[i + 2], 14)
        elif kind == 4:
            sack_ok = True
        elif kind == 5:
            blocks += [_II.unpack_from(buf, j) for j in range(i + 2, i + ln - 7, 8)]
        elif kind == 8 and ln == 10:
            tsval, tsecr = _II.unpack_from(buf, i + 2)
        i += ln
    return TcpOptions(mss, wscale, sack_ok, tuple(blocks), tsval, tsecr)


def parse_dns(payload: bytes) -> DnsMessage | None:
    """A DNS message from a UDP payload (dpkt's parser); None when it does
    not parse (cut by the snaplen, or not DNS)."""
    try:
        msg = dpkt.dns.DNS(payload)
    except (dpkt.UnpackError, IndexError, struct.error, ValueError):
        return None
    return DnsMessage(msg.qr == dpkt.dns.DNS_R, tuple(q.name for q in msg.qd), tuple(a.type for a in msg.an))


def read_packets(path: str | Path, link: str | None = None) -> Iterator[Packet]:
    """Every frame of the capture at path, in capture order. link: "eth" to
    require Ethernet (ValueError otherwise); None for any supported link
    type (ValueError for another)."""
    with open(path, "rb") as fh:
        reader = _open_reader(fh)
        kind = _LINK.get(reader.datalink())
        if kind is None or (link is not None and kind != link):
            want = "Ethernet" if link == "eth" else "Ethernet, Linux cooked, raw IP or loopback"
            raise ValueError(f"{path}: link type {reader.datalink()} is not supported ({want})")
        for ts, buf in reader:
            yield _packet(float(ts), buf, _ip_offset(buf, kind))


def _open_reader(fh):
    """A dpkt reader for a pcap or pcapng file object."""
    magic = fh.read(4)
    fh.seek(0)
    if magic == b"\x0a\x0d\x0d\x0a":
        return dpkt.pcapng.Reader(fh)
    return dpkt.pcap.Reader(fh)


def _ip_offset(buf: bytes, kind: str) -> int | None:
    """Where the IP header starts in a frame of this link type; None for an
    Ethernet frame that carries no IP."""
    if kind != "eth":
        return _IP_OFFSET[kind]
    if len(buf) < 14:
        return None
    et, off = (buf[12] << 8) | buf[13], 14
    while et in (0x8100, 0x88A8) and len(buf) >= off + 4:
        et, off = (buf[off + 2] << 8) | buf[off + 3], off + 4
    return off if et in (0x0800, 0x86DD) else None


def _packet(t_s: float, buf: bytes, off: int | None) -> Packet:
    """A frame read as far as its headers go (off: where its IP header
    starts, None for none). Runs once per packet: keep it inline."""
    n = len(buf)
    if off is None or n < off + 20:
        return Packet(t_s, n)
    v = buf[off] >> 4
    if v == 4:
        vhl, _tos, tot, ip_id, frag, _ttl, proto, src, dst = _IP4.unpack_from(buf, off)
        l4 = off + (vhl & 15) * 4
        if l4 < off + 20:
            return Packet(t_s, n)  # a header length below the header's size: not an IP header
        ip_len, later_fragment = tot, frag & 0x1FFF
    elif v == 6 and n >= off + 40:
        plen6, proto, src, dst = _IP6.unpack_from(buf, off)
        l4, ip_len, ip_id, later_fragment = off + 40, 40 + plen6, 0, 0
    else:
        return Packet(t_s, n)
    end = min(n, off + ip_len) if ip_len else n  # IPv4 total length 0 (segmentation offload): the frame's end
    payload_len = off + ip_len - l4
    if later_fragment:
        return Packet(t_s, n, v, src, dst, ip_len, ip_id, proto)
    if proto == 6 and end >= l4 + 20:
        sport, dport, seq, ack, offfl, win = _TCP.unpack_from(buf, l4)
        doff = (offfl >> 12) * 4
        if doff >= 20:
            opts = parse_tcp_options(buf, l4 + 20, min(end, l4 + doff)) if doff > 20 else NO_OPTIONS
            return Packet(t_s, n, v, src, dst, ip_len, ip_id, proto, TCP, sport, dport, seq, ack, offfl & 0x1FF,
                          win, opts, payload_len - doff, buf[l4 + doff:end])
    elif proto == 17 and end >= l4 + 8:
        sport, dport = _UDP.unpack_from(buf, l4)
        payload = buf[l4 + 8:end]
        dns = parse_dns(payload) if DNS_PORT in (sport, dport) else None
        return Packet(t_s, n, v, src, dst, ip_len, ip_id, proto, UDP, sport, dport, payload_len=payload_len - 8,
                      payload=payload, dns=dns)
    return Packet(t_s, n, v, src, dst, ip_len, ip_id, proto)
