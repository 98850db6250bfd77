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

from tortoiselab.analysis.capture import read_packets

ADDRESS_TYPES = (1, 28)  # A, AAAA (RFC 1035 §3.2.2, RFC 3596 §2.1)


def lookups_ms(pcap: str | Path) -> dict[str, float]:
    """name -> lookup time in ms (module doc), over the DNS messages of the
    IPv4 UDP port 53 packets of a client-side capture
    (tortoiselab.analysis.capture); {} without one."""
    first_query: dict[str, float] = {}
    answered: dict[str, float] = {}
    last_answer: dict[str, float] = {}
    if not Path(pcap).exists():
        return {}
    for p in read_packets(pcap):
        msg = p.dns
        if msg is None or p.ip_version != 4:
            continue
        for q in msg.questions:
            name = q.rstrip(".").lower()
            if not msg.is_response:
                first_query.setdefault(name, p.t_s)
            elif name in first_query:
                last_answer[name] = p.t_s
                if name not in answered and any(t in ADDRESS_TYPES for t in msg.answer_types):
                    answered[name] = p.t_s
    return {n: round((answered.get(n, last_answer.get(n, t0)) - t0) * 1e3, 3) for n, t0 in first_query.items()}
