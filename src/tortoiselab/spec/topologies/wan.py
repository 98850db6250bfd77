"""wan: client - s1 - WAN - s2 - server, the lab's default path.

The emulation (netem: delay, loss, rate, queue; docs/paths.md) sits on the
s1-s2 link only. In the lab a DNS server sits beside the server (a lookup
pays the RTT). Mininet's CLI (topologies/wan.py):

    sudo .venv/bin/python /usr/bin/mn --custom topologies/wan.py --topo wan,200,10 --link tc
"""

from tortoiselab.spec.topology import MN_ONLY_RATE, MN_ONLY_RTT, ONE_PATH, WEB_PATH, Graph, TopoParams, mn_shaping


class Params(TopoParams):
    """Both are for `mn --custom` only: in the lab the experiment's `path`
    sets the WAN link, and giving them in `topology:` is refused."""

    rtt_ms: float = MN_ONLY_RTT
    rate_mbit: float = MN_ONLY_RATE

    def mn_links(self) -> dict[str, dict]:
        return {"wan": mn_shaping(self.rtt_ms, self.rate_mbit)}


def graph(params: Params, web: bool = True) -> Graph:
    """The one path, with the DNS server for page loads (exactly the graphs
    the lab built before topology files existed: same hosts, order, MACs)."""
    return WEB_PATH if web else ONE_PATH
