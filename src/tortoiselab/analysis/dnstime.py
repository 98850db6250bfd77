"""DNS lookups as the client's capture shows them: the same ruler for
every loader (docs/browser.md). A loader's own account can miss a lookup:
Chromium's DevTools timing shows none for a request coalesced onto a
connection already open, though the browser looked the name up to check
its address (RFC 9113 §9.1.1).

A lookup of a name is the time from the client's first query for it (any
type: Chromium asks for A and HTTPS at once) to the first answer that
carries an address for it (type A or AAAA); a name never answered with an
address counts from its first query to its last answer.
"""

from __future__ import annotations

from pathlib import Path

import dpkt

from tortoiselab.analysis.pcapread import open_reader

ADDRESS_TYPES = (dpkt.dns.DNS_A, dpkt.dns.DNS_AAAA)


def lookups_ms(pcap: str | Path) -> dict[str, float]:
    """name -> lookup time in ms (module doc), over the UDP port 53
    packets of a client-side capture; {} without one."""
    first_query: dict[str, float] = {}
    answered: dict[str, float] = {}
    last_answer: dict[str, float] = {}
    if not Path(pcap).exists():
        return {}
    for ts, udp in _dns_datagrams(pcap):
        try:
            msg = dpkt.dns.DNS(udp.data)
        except (dpkt.UnpackError, IndexError):
            continue
        for q in msg.qd:
            name = q.name.rstrip(".").lower()
            if msg.qr == dpkt.dns.DNS_Q:
                first_query.setdefault(name, ts)
            elif name in first_query:
                last_answer[name] = ts
                if name not in answered and any(a.type in ADDRESS_TYPES for a in msg.an):
                    answered[name] = ts
    return {n: round((answered.get(n, last_answer.get(n, t0)) - t0) * 1e3, 3) for n, t0 in first_query.items()}


def _dns_datagrams(pcap: str | Path):
    """(time s, UDP datagram) of every IPv4 UDP packet to or from port 53 of
    an Ethernet capture (the lab's)."""
    with open(pcap, "rb") as fh:
        for ts, buf in open_reader(fh):
            try:
                ip = dpkt.ethernet.Ethernet(buf).data
            except (dpkt.UnpackError, IndexError):
                continue
            if isinstance(ip, dpkt.ip.IP) and isinstance(ip.data, dpkt.udp.UDP) and 53 in (ip.data.sport,
                                                                                            ip.data.dport):
                yield ts, ip.data
