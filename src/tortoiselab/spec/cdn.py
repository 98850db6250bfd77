"""A CDN beside the PoP (the dumbbell's `cdn_rtt_ms`, docs/topologies.md):
pure pieces of the set-up, shared by spec/topologies/dumbbell.py, the guest
and the tests.

    client, c2..cN, xr - s1 == last mile == s2 - cdn (static.<domain>, cdn_cc)
                                             s2 == PoP leg == s3 - server (the PoP, www), dns, xs

The last mile (s1-s2) carries the profile's rate, loss, jitter and queue
with the CDN's round-trip time; the PoP leg (s2-s3) adds the rest of the
profile's RTT and nothing else (no loss, a rate far above the last mile's),
so a flow to the PoP has the profile's RTT and one to the CDN the shorter
cdn_rtt_ms, and both share the last mile's queue and losses.
"""

from __future__ import annotations

from tortoiselab.spec.pathspec import PathSpec
from tortoiselab.spec.topology import Host, TopologyError

CDN = Host("cdn", "10.0.4.1/8")
CDN_ROLE = "cdn"
# the PoP leg is no bottleneck: 50 times the fastest profile rate the Tortoise study uses (23.5 Mbit/s)
POP_LEG_RATE_MBIT = 1000.0
# the CDN's fixed algorithm: Linux's default (RFC 8312, RFC 9438), and the most common one on the web near the
# seed's time: on 36 % of the Alexa top 20,000 sites, BBR second with 22 %, Akamai's own rate-based variant on
# 6 % (Mishra et al., "The Great Internet TCP Congestion Control Census", Proc. ACM Meas. Anal. Comput. Syst.
# 3(3), 2019, doi:10.1145/3366693; measured in 2019, two years after the seed: for 2017 an assumption)
CDN_CC = "cubic"


def cdn_ip() -> str:
    """The CDN host's address, without its prefix length."""
    return CDN.ip.split("/")[0]


def legs(path: PathSpec, cdn_rtt_ms: float) -> tuple[PathSpec, PathSpec]:
    """(the last mile, the PoP leg) for a profile's path: the last mile is
    the path with the CDN's RTT (its queue, where the profile leaves it at
    one BDP, kept at the BDP of the profile's whole RTT, so both set-ups
    buffer alike), the PoP leg the RTT left (rate POP_LEG_RATE_MBIT, no
    loss). TopologyError naming topology.cdn_rtt_ms when the path cannot
    be split so."""
    if cdn_rtt_ms > path.rtt_ms:
        raise TopologyError(f"topology.cdn_rtt_ms: {cdn_rtt_ms:g} ms is more than the path's rtt_ms "
                            f"({path.rtt_ms:g} ms); the CDN sits closer to the user than the PoP: give at most "
                            f"{path.rtt_ms:g}")
    if path.jitter_ms > cdn_rtt_ms / 2:
        raise TopologyError(f"topology.cdn_rtt_ms: the last mile's jitter ({path.jitter_ms:g} ms) must fit in its "
                            f"one-way delay; give cdn_rtt_ms at least {2 * path.jitter_ms:g}")
    update: dict = {"rtt_ms": cdn_rtt_ms}
    if path.queue_pkts is None and path.trace_down is None and path.trace_up is None:
        update["queue_pkts"] = path.bdp_pkts()
    last_mile = PathSpec.model_validate({**path.model_dump(exclude_none=True), **update})
    pop_leg = PathSpec(rtt_ms=path.rtt_ms - cdn_rtt_ms, rate_mbit=POP_LEG_RATE_MBIT, loss_pct=0)
    return last_mile, pop_leg


def static_hosts(names: dict[str, str], cdn_address: str) -> list[str]:
    """The hostnames a resolution map sends to the CDN (static.<domain>)."""
    return sorted(n for n, ip in names.items() if ip == cdn_address)
