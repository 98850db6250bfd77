"""dumbbell: N clients, cross-traffic hosts and the server behind one shared
bottleneck (docs/topologies.md).

    client, c2 .. cN, xr  - s1 == bottleneck == s2 -  server, dns, xs

`client` is the measured client (page loads, the probe's transfer); c2 ..
cN load background pages (web-like cross traffic, Poisson arrivals); xs
sends the long-lived bulk flows to xr. Every flow crosses s1-s2, the one
emulated link (the path's netem: delay, loss, rate, queue).

With cdn_rtt_ms a CDN host serves the static objects beside the PoP
(spec/cdn.py): the s1-s2 link becomes the last mile with the CDN's RTT, the
PoP, the DNS server and xs sit behind a second emulated link (s2-s3) that
adds the rest of the path's RTT, and the CDN host (cdn_cc) sits at s2.
Mininet's CLI (topologies/dumbbell.py):

    sudo .venv/bin/python /usr/bin/mn --custom topologies/dumbbell.py --topo dumbbell,2 --link tc
    sudo .venv/bin/python /usr/bin/mn --custom topologies/dumbbell.py --topo dumbbell,cdn_rtt_ms=20 --link tc
"""

from pydantic import Field, field_validator

from tortoiselab.spec import cdn
from tortoiselab.spec.crosstraffic import CrossParams
from tortoiselab.spec.pathspec import PathSpec, stock_algorithm
from tortoiselab.spec.topology import MN_ONLY_RATE, MN_ONLY_RTT, WEB_PATH, Graph, Host, mn_shaping


class Params(CrossParams):
    """clients first (`--topo dumbbell,3`), then the cross traffic
    (spec/crosstraffic.py), then the CDN; rtt_ms and rate_mbit for `mn
    --custom` only."""

    cdn_rtt_ms: float | None = Field(None, gt=0, le=10_000, description="a CDN host beside the PoP serves "
                                     "static.<domain> at this round-trip time (at most the path's rtt_ms); "
                                     "leave it out for one server")
    cdn_cc: str = Field(cdn.CDN_CC, description="the CDN host's congestion control (a stock algorithm)")
    rtt_ms: float = MN_ONLY_RTT
    rate_mbit: float = MN_ONLY_RATE

    @field_validator("cdn_cc")
    @classmethod
    def _stock_cdn(cls, v: str) -> str:
        return stock_algorithm(v)

    def legs(self, path: PathSpec) -> tuple[PathSpec, PathSpec | None]:
        """With a CDN: the last mile and the PoP leg (spec/cdn.legs)."""
        return (path, None) if self.cdn_rtt_ms is None else cdn.legs(path, self.cdn_rtt_ms)

    def mn_links(self) -> dict[str, dict]:
        """With a CDN: the last mile at its RTT, the PoP leg (s2-s3) at the
        rest of rtt_ms."""
        if self.cdn_rtt_ms is None:
            return {"wan": mn_shaping(self.rtt_ms, self.rate_mbit)}
        leg_ms = max(self.rtt_ms - self.cdn_rtt_ms, 0.0)
        return {"wan": mn_shaping(min(self.cdn_rtt_ms, self.rtt_ms), self.rate_mbit),
                "backhaul": mn_shaping(leg_ms, cdn.POP_LEG_RATE_MBIT)}


def graph(params: Params, web: bool = True) -> Graph:
    """WEB_PATH's hosts and links first (so the measured client, server and
    DNS server get the same addresses and MACs), then the others. With a
    CDN, the server's side of WEB_PATH (PoP, DNS server, xs) moves behind
    s3, the s2-s3 link is the PoP leg (Graph.backhaul) and the CDN host
    comes last, at s2."""
    others = [Host(f"c{i}", f"10.0.1.{i}/8") for i in range(2, params.clients + 1)]
    cross = [Host("xr", "10.0.2.1/8"), Host("xs", "10.0.2.2/8")]
    base = WEB_PATH.hosts if web else WEB_PATH.hosts[:2]
    far = "s2" if params.cdn_rtt_ms is None else "s3"
    links = [(far, b) if a == "s2" else (a, b) for a, b in WEB_PATH.links if web or "dns" not in (a, b)]
    if params.cdn_rtt_ms is not None:
        links.insert(links.index(WEB_PATH.wan) + 1, ("s2", "s3"))
    links += [(h.name, "s1") for h in others] + [("xr", "s1"), (far, "xs")]
    roles = [(h.name, "web") for h in others] + [("xr", "cross_rx"), ("xs", "cross_tx")]
    if params.cdn_rtt_ms is None:
        return Graph(hosts=(*base, *others, *cross), switches=WEB_PATH.switches, links=tuple(links),
                     wan=WEB_PATH.wan, roles=tuple(roles))
    return Graph(hosts=(*base, *others, *cross, cdn.CDN), switches=(*WEB_PATH.switches, "s3"),
                 links=(*links, ("s2", cdn.CDN.name)), wan=WEB_PATH.wan,
                 roles=(*roles, (cdn.CDN.name, cdn.CDN_ROLE)), backhaul=("s2", "s3"))

