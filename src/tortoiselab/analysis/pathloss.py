"""Which packets the emulated path lost in a page load, from the load's two
captures: the server's (before the WAN link) and the client's (after it).

netem draws once per packet it is given, from a PRNG seeded per direction
by the run's seed, so two loads of one run on one kernel lose packets at the
same positions of each direction's stream, whoever sent what: the positions
are the loss draws, and the packets at them are what the endpoints made of
them. This is how the native backend is compared with the uml backend
(tests/integration/test_native_in_guest.py).

A packet is a TCP segment to or from the server's port, known by its
addresses, ports, sequence and acknowledgement numbers, flags, IP length,
IP id and TCP timestamp: unique within a load, since a retransmission
carries a new timestamp. The path never reorders (netem's jitter is set
without reordering, docs/paths.md), so what the receiver captured is a
subsequence of what the sender did: walking both in order, each sent packet
is either the next one received or lost. Only the lab's captures are read:
pcap, Ethernet, read by tortoiselab.analysis.capture.

The link also carries the load's DNS packets (to and from the DNS server
beside the server, which the server's capture does not see), and each takes
a draw: on the real clock a lookup made during the load may cross before or
after a given segment, so positions counted in TCP segments alone would
shift by one from load to load. A position is therefore counted in the
direction's whole stream: the client's queries where the client's capture
saw them sent, its answers where it saw them arrive (after the segments
lost just before them: a lost segment and an answer adjacent in time may
be counted in either order). Positions are netem's draws when the two
captures see every packet the link carries (one client, no cross traffic,
no CDN host).
"""

from __future__ import annotations

from pathlib import Path

from .capture import DNS_PORT, TCP, UDP, read_packets

DIRECTIONS = ("down", "up")  # server to client, client to server


DNS = "dns"  # a DNS packet's entry in a stream: it takes a draw, and neither capture pairs it


def tcp_packets(pcap: str | Path, server_port: int = 443) -> dict[str, list[tuple | str]]:
    """Each direction's TCP packets of the server's port in capture order:
    (src, sport, dst, dport, seq, ack, flags, IP length, IP id, TSval), and
    DNS where a DNS packet was captured (queries up, answers down)."""
    out: dict[str, list[tuple]] = {d: [] for d in DIRECTIONS}
    for p in read_packets(pcap, link="eth"):
        if p.ip_version != 4:
            continue
        if p.transport == UDP and DNS_PORT in (p.sport, p.dport):
            out["up" if p.dport == DNS_PORT else "down"].append(DNS)
        elif p.transport == TCP and server_port in (p.sport, p.dport):
            key = (p.src, p.sport, p.dst, p.dport, p.seq, p.ack, p.flags, p.ip_len, p.ip_id, p.options.tsval)
            out["down" if p.sport == server_port else "up"].append(key)
    return out


def lost_positions(sent: list, received: list) -> list[int]:
    """The positions in `sent` of the packets missing from `received`,
    which must be a subsequence of it. ValueError if `received` holds a
    packet that was not sent, or sent in another order (a capture cut short,
    reordering). DNS entries are neither: they hold a position and are
    never lost (stream())."""
    return [i for i, (_, lost) in enumerate(stream(sent, received)) if lost]


def stream(sent: list, received: list) -> list[tuple]:
    """The direction's packets in the order they crossed the link, each
    (packet, lost): sent's segments, each the next one received or lost,
    with the DNS entries of either side where that side captured them (a
    receiver's DNS entry before the sender's segments that were still to be
    matched)."""
    out, j = [], 0
    for p in sent:
        while j < len(received) and received[j] == DNS:
            out.append((DNS, False))
            j += 1
        if p == DNS:
            out.append((DNS, False))
        elif j < len(received) and received[j] == p:
            out.append((p, False))
            j += 1
        else:
            out.append((p, True))
    while j < len(received) and received[j] == DNS:
        out.append((DNS, False))
        j += 1
    if j != len(received):
        raise ValueError(f"received packet #{j} was never sent in that order (not a subsequence)")
    return out


def _describe(sent: list, i: int) -> dict:
    """A lost packet by what repeats from load to load: its connection
    (numbered in order of appearance in the direction), sequence number
    relative to that connection's first, payload-carrying or not, flags."""
    conns: dict[tuple, int] = {}
    first_seq: dict[tuple, int] = {}
    for p in sent[: i + 1]:
        if p == DNS:
            continue
        c = p[:4]
        conns.setdefault(c, len(conns))
        first_seq.setdefault(c, p[4])
    p = sent[i]
    return {"position": i, "conn": conns[p[:4]], "rel_seq": (p[4] - first_seq[p[:4]]) % 2**32, "flags": p[6],
            "ip_len": p[7]}


def path_losses(server_pcap: str | Path, client_pcap: str | Path, server_port: int = 443) -> dict:
    """Per direction: packets sent into the path, and the lost ones (their
    positions, and each described by _describe)."""
    # DNS from the client's capture alone (the client sends every query and gets every answer; the server's
    # port may see one flooded by the switch before it learns the DNS server's address)
    srv = {d: [p for p in ps if p != DNS] for d, ps in tcp_packets(server_pcap, server_port).items()}
    cli = tcp_packets(client_pcap, server_port)
    out = {}
    for d, sent, received in (("down", srv["down"], cli["down"]), ("up", cli["up"], srv["up"])):
        packets = stream(sent, received)
        order = [p for p, _ in packets]
        out[d] = {"sent": len(packets), "lost": [_describe(order, i) for i, (_, lost) in enumerate(packets) if lost]}
    return out


def common_draws(a: dict, b: dict) -> dict[str, dict]:
    """Two loads' path_losses side by side, per direction, over the packets
    both sent (`reached`: a load that sent fewer met fewer of netem's
    draws): the positions each lost there. On one kernel and one seed the
    two lists are equal, whatever the packets at those positions were (on
    the real clock the endpoints' timing changes what they send)."""
    out = {}
    for d in DIRECTIONS:
        n = min(a[d]["sent"], b[d]["sent"])
        out[d] = {"reached": n, "a": [x["position"] for x in a[d]["lost"] if x["position"] < n],
                  "b": [x["position"] for x in b[d]["lost"] if x["position"] < n]}
    return out
