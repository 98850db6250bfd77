"""dumbbell: N clients, cross-traffic hosts and the server behind one shared
bottleneck (docs/topologies.md).

    client, c2 .. cN, xr  - s1 == bottleneck == s2 -  server, dns, xs

`client` is the measured client (page loads, the probe's transfer); c2 ..
cN load background pages (web-like cross traffic, Poisson arrivals); xs
sends the long-lived bulk flows to xr. Every flow crosses s1-s2, the one
emulated link (the path's netem: delay, loss, rate, queue). Mininet's CLI:

    sudo .venv/bin/python /usr/bin/mn --custom topologies/dumbbell.py --topo dumbbell,2 --link tc
"""

from mininet.link import TCLink
from mininet.topo import Topo

from tortoiselab.spec.crosstraffic import CrossParams
from tortoiselab.spec.topology import (MN_ONLY_RATE, MN_ONLY_RTT, WEB_PATH, Graph, Host, add_graph,
                                       mn_wan_link)


class Params(CrossParams):
    """clients first (`--topo dumbbell,3`), then the cross traffic
    (spec/crosstraffic.py); rtt_ms and rate_mbit for `mn --custom` only."""

    rtt_ms: float = MN_ONLY_RTT
    rate_mbit: float = MN_ONLY_RATE

    def wan_link_opts(self) -> dict:
        return mn_wan_link(TCLink, self.rtt_ms, self.rate_mbit)


def graph(params: Params, web: bool = True) -> Graph:
    """WEB_PATH's hosts and links first (so the measured client, server and
    DNS server get the same addresses and MACs), then the others."""
    others = [Host(f"c{i}", f"10.0.1.{i}/8") for i in range(2, params.clients + 1)]
    cross = [Host("xr", "10.0.2.1/8"), Host("xs", "10.0.2.2/8")]
    base = WEB_PATH.hosts if web else WEB_PATH.hosts[:2]
    links = [link for link in WEB_PATH.links if web or "dns" not in link]
    links += [(h.name, "s1") for h in others] + [("xr", "s1"), ("s2", "xs")]
    roles = [(h.name, "web") for h in others] + [("xr", "cross_rx"), ("xs", "cross_tx")]
    return Graph(hosts=(*base, *others, *cross), switches=WEB_PATH.switches, links=tuple(links),
                 wan=WEB_PATH.wan, roles=tuple(roles))


class DumbbellTopo(Topo):
    def build(self, *args, **kw):  # pylint: disable=arguments-differ
        params = Params.from_args(args, kw, "dumbbell")
        add_graph(self, graph(params, web=True), params.wan_link_opts())


topos = {"dumbbell": DumbbellTopo}
