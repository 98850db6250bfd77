"""wan: client - s1 - WAN - s2 - server, the lab's default path.

The emulation (netem: delay, loss, rate, queue; docs/paths.md) sits on the
s1-s2 link only. In the lab a DNS server sits beside the server (a lookup
pays the RTT). Mininet's CLI:

    sudo .venv/bin/python /usr/bin/mn --custom topologies/wan.py --topo wan,200,10 --link tc
"""

from mininet.link import TCLink
from mininet.topo import Topo
from tortoiselab.spec.topology import (MN_ONLY_RATE, MN_ONLY_RTT, ONE_PATH, WEB_PATH, Graph, TopoParams, add_graph,
                                       mn_wan_link)


class Params(TopoParams):
    """Both are for `mn --custom` only: in the lab the experiment's `path`
    sets the WAN link, and giving them in `topology:` is refused."""

    rtt_ms: float = MN_ONLY_RTT
    rate_mbit: float = MN_ONLY_RATE

    def wan_link_opts(self) -> dict:
        return mn_wan_link(TCLink, self.rtt_ms, self.rate_mbit)


def graph(params: Params, web: bool = True) -> Graph:
    """The one path, with the DNS server for page loads (exactly the graphs
    the lab built before topology files existed: same hosts, order, MACs)."""
    return WEB_PATH if web else ONE_PATH


class WanTopo(Topo):
    def build(self, *args, **kw):  # pylint: disable=arguments-differ
        params = Params.from_args(args, kw, "wan")
        add_graph(self, graph(params, web=True), params.wan_link_opts())


topos = {"wan": WanTopo}
