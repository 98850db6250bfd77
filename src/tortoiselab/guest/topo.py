"""The one adapter from the lab's graphs to Mininet (docs/topologies.md):
GraphTopo, a Mininet `Topo` built from a spec/topology.Graph, which the lab
builds (guest/net.py mininet_path) and `mn --custom topologies/<name>.py`
builds (mn_topos).

The Topo holds every name, address and MAC the lab uses: host k of the
graph (from 1) has Mininet's `--mac` address k (00:00:00:00:00:0k), the
i-th link's switch end 02:00:00:00:<i>:<end> and its host end the host's
own MAC, so a host is born with its address and no switch port takes a
random one (the kernel's random MACs decided when Open vSwitch re-picked a
bridge's own MAC as ports joined: docs/determinism.md).
"""

from __future__ import annotations

from functools import partial
from typing import Callable

from mininet.link import TCLink
from mininet.topo import Topo
from mininet.util import macColonHex

from tortoiselab.spec.topologies import load
from tortoiselab.spec.topology import Graph


def link_macs(graph: Graph) -> list[dict[str, str]]:
    """Each link's two ends' MACs (Mininet's addr1, addr2), in the graph's
    link order (the module's docstring)."""
    hosts = {h.name: macColonHex(k) for k, h in enumerate(graph.hosts, 1)}
    return [{f"addr{end}": hosts.get(node, f"02:00:00:00:{i:02x}:{end:02x}") for end, node in enumerate(link, 1)}
            for i, link in enumerate(graph.links, 1)]


class GraphTopo(Topo):
    """A lab graph as a Mininet Topo; link_opts adds options to named links
    (mn's TCLink shaping). Mininet's own Topo lists nodes sorted by name
    and links in its edge store's order (Mininet.buildFromTopo adds them so);
    this one lists them in the graph's order, which the hosts' addresses and
    MACs and the interfaces' names follow."""

    def __init__(self, graph: Graph, link_opts: dict[tuple[str, str], dict] | None = None) -> None:
        self.graph = graph
        self.link_opts = link_opts or {}
        super().__init__()

    def build(self) -> None:  # pylint: disable=arguments-differ
        self.graph.validate()
        for k, h in enumerate(self.graph.hosts, 1):
            self.addHost(h.name, ip=h.ip, mac=macColonHex(k))
        for s in self.graph.switches:
            self.addSwitch(s)
        for (a, b), macs in zip(self.graph.links, link_macs(self.graph)):
            self.addLink(a, b, **macs, **self.link_opts.get((a, b), {}))

    def hosts(self, sort: bool = True) -> list[str]:
        """The graph's hosts, in its order whatever `sort` says."""
        return [h.name for h in self.graph.hosts]

    def switches(self, sort: bool = True) -> list[str]:
        """The graph's switches, in its order whatever `sort` says."""
        return list(self.graph.switches)

    def links(self, sort: bool = False, withKeys: bool = False, withInfo: bool = False) -> list[tuple]:
        """(node1, node2[, key][, info]) of each link, in the graph's order
        whatever `sort` says."""
        out = []
        for a, b in self.graph.links:
            entry, key = self._linkEntry(a, b)
            out.append((a, b, *((key,) if withKeys else ()), *((entry[key],) if withInfo else ())))
        return out


def mn_topo(name: str, *args: object, **kw: object) -> GraphTopo:
    """What `mn --topo name,a,k=v` builds: the lab's topology `name` with
    those parameters (positional in the order of its Params) and its
    emulated links shaped by TCLink for Mininet's CLI (TopoParams.mn_links;
    in the lab the experiment's path shapes them)."""
    topology = load(name)
    params = topology.params.from_args(args, kw, name)
    graph = topology.graph(params, True)
    shaped = {getattr(graph, which): {"cls": TCLink, **opts} for which, opts in params.mn_links().items()}
    return GraphTopo(graph, shaped)


def mn_topos(name: str) -> dict[str, Callable[..., GraphTopo]]:
    """A topologies/<name>.py file's `topos` for `mn --custom`."""
    return {name: partial(mn_topo, name)}
