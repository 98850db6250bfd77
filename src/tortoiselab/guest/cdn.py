"""The CDN host beside the PoP in the lab (spec/cdn.py, docs/topologies.md):
its algorithm, its capture and what a load's record keeps of it."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from tortoiselab.analysis.flights import analyze_pcap, handshake_summary
from tortoiselab.analysis.servedby import misplaced, served_by
from tortoiselab.guest.executor import Executor
from tortoiselab.guest.net import PathLab
from tortoiselab.guest.webtier import capture
from tortoiselab.spec.cdn import CDN_ROLE
from tortoiselab.spec.topologies import TopologyCfg
from tortoiselab.spec.topology import Graph

CDN_SYSCTLS = ("net.ipv4.tcp_congestion_control", "net.ipv4.tcp_no_metrics_save",
               "net.ipv4.tcp_slow_start_after_idle")


def cdn_node(ex: Executor, lab: PathLab, topology: TopologyCfg, graph: Graph) -> object | None:
    """The CDN host, with its fixed algorithm (the topology's cdn_cc) and
    no saved metrics, as the PoP; None for a set-up without one."""
    names = graph.with_role(CDN_ROLE)
    if not names:
        return None
    node = lab.nodes[names[0]]
    ex.sysctl({"net.ipv4.tcp_no_metrics_save": 1,
               "net.ipv4.tcp_congestion_control": topology.params().cdn_cc}, host=node)
    return node


def cdn_capture(ex: Executor, node, out: Path) -> AbstractContextManager:
    """tcpdump on the CDN host (its Capture), nothing without one."""
    return capture(ex, node, out) if node is not None else nullcontext(None)


def own_connections(conns: list[dict], ip: str) -> list[dict]:
    """The connections whose server end is the address ip."""
    return [c for c in conns if str(c.get("server", "")).rsplit(":", 1)[0] == ip]


def cdn_result(ex: Executor, lab: PathLab, node, cap, pcap: Path, har: str | None, names: dict[str, str],
               pop_conns: list[dict]) -> dict:
    """A load's `cdn` (and the PoP's `connections`, pop_conns of its own
    address): the CDN host's address, its TCP settings as read back
    (its algorithm), its capture's counters and connections, and which host
    served which objects (from the HAR: analysis/servedby.py), with every
    URL answered by a host its name does not resolve to; {} without a CDN.
    Each capture keeps its own host's connections only (`connections`, the
    PoP's, replaced so): the switches flood a connection's first frames
    before they learn where its server is, so each host sees a few of the
    other's."""
    if node is None:
        return {}
    stats = cap.stop()
    entries = json.loads(Path(har).read_text(encoding="utf-8"))["log"]["entries"] if har and Path(har).exists() else []
    conns = [handshake_summary(x) for x in analyze_pcap(pcap, keep_series=False)] if pcap.exists() else []
    return {"connections": own_connections(pop_conns, lab.server.IP()),
            "cdn": {"host": node.name, "ip": node.IP(), "sysctls": ex.read_sysctls(CDN_SYSCTLS, host=node),
                    "capture": stats, "pcap": str(pcap), "connections": own_connections(conns, node.IP()),
                    "served_by": served_by(entries, {lab.server.IP(): "server", node.IP(): "cdn"}),
                    "misplaced": misplaced(entries, names)}}
