"""Reading a capture for analyze_pcap: dpkt's pcap reader (pcapng through
dpkt's pcapng reader), one packet at a time, headers unpacked with struct (no
dpkt object per packet, no tshark), each TCP segment handed to its
connection's state (tcpconn.py). Link types: Ethernet (with 802.1Q tags),
Linux cooked (SLL and SLL2), raw IP and BSD loopback; IPv4 and IPv6 (without
extension headers). Payload lengths come from the IP header's total length,
never from the captured bytes, so a short snaplen loses nothing. What is
measured, and how, is in tortoiselab.analysis.flights (its module docstring).
"""

from __future__ import annotations

import struct
from pathlib import Path

import dpkt

from .tcpconn import TH_ACK, TH_SYN, Conn, client_packet, server_packet, summary

_TCP = struct.Struct("!HHIIHH")
_IP4 = struct.Struct("!BBHHHBB2x4s4s")
_IP6 = struct.Struct("!4xHBx16s16s")

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


def open_reader(fh):
    """A dpkt reader for a pcap or pcapng file object."""
    magic = fh.read(4)
    fh.seek(0)
    if magic == b"\x0a\x0d\x0d\x0a":
        return dpkt.pcapng.Reader(fh)
    return dpkt.pcap.Reader(fh)


def analyze_pcap(path: str | Path, server_port: int | None = 443, keep_series: bool = True) -> list[dict]:
    """One summary per TCP connection (in order of first appearance) in a
    capture. server_port: the server's TCP port; None to take the server
    from each connection's SYN (or, without one, the lower port)."""
    with open(path, "rb") as fh:
        reader = open_reader(fh)
        link = _LINK.get(reader.datalink())
        if link is None:
            raise ValueError(f"{path}: link type {reader.datalink()} is not supported "
                             "(Ethernet, Linux cooked, raw IP or loopback)")
        conns = _read_conns(reader, link, server_port, keep_series)
    return [summary(c) for c in conns]


def _read_conns(reader, link: str, server_port: int | None, keep_series: bool) -> list[Conn]:
    """Every TCP segment of the capture through its connection's state; the
    connections in order of first appearance. The loop runs once per packet
    of a capture of up to some 100 MB: keep it inline."""
    conns: dict[tuple, Conn] = {}
    out: list[Conn] = []
    eth = link == "eth"
    fixed_off = _IP_OFFSET.get(link, 0)
    for ts, buf in reader:
        # --- link layer -> IP header offset
        if eth:
            if len(buf) < 34:
                continue
            et = (buf[12] << 8) | buf[13]
            off = 14
            while et in (0x8100, 0x88A8) and len(buf) >= off + 4:
                et = (buf[off + 2] << 8) | buf[off + 3]
                off += 4
            if et != 0x0800 and et != 0x86DD:
                continue
        else:
            off = fixed_off
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
            key, from_client = _direction(conns, src, sport, dst, dport, flags)
        c = conns.get(key)
        if c is not None and from_client and flags & TH_SYN and not flags & TH_ACK and c.syn_seen \
                and seq != c.c_isn:
            c = None  # the same ports again: a new connection
        if c is None:
            c = Conn(key[:2], key[2:], ts)
            conns[key] = c
            out.append(c)
        if from_client:
            client_packet(c, ts, buf, tcp_off, doff, flags, seq, ack, win, plen, keep_series)
        else:
            server_packet(c, ts, buf, tcp_off, doff, flags, seq, ack, plen, keep_series)
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
