"""The lab's topologies (spec/topologies/<name>.py) as the lab reads them,
and topologies/<name>.py as Mininet's `mn --custom` reads them, built into
Topo objects through Mininet's own --topo parsing (guest/topo.py's
GraphTopo); bad parameters refused naming the field."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tortoiselab.project import REPO_DIR
from tortoiselab.spec import topologies
from tortoiselab.spec.crosstraffic import schedule
from tortoiselab.spec.pathspec import PathSpec
from tortoiselab.spec.topologies import TopologyCfg, parse_topology, split_topo_arg
from tortoiselab.spec.topology import ONE_PATH, WEB_PATH, TopologyError

mininet_util = pytest.importorskip("mininet.util")
TOPOLOGY_DIR = REPO_DIR / "topologies"


def mn_custom(name: str, topo_arg: str):
    """What `mn --custom topologies/<name>.py --topo <topo_arg>` does before
    it starts a network: exec the file into a fresh dict (MininetRunner.custom),
    add its `topos` and build the Topo from the --topo string (buildTopo)."""
    customs: dict = {}
    file = TOPOLOGY_DIR / f"{name}.py"
    exec(compile(file.read_text(), str(file), "exec"), customs, customs)  # noqa: S102
    return mininet_util.buildTopo(customs["topos"], topo_arg)


def test_every_topology_has_its_mn_custom_file():
    assert sorted(p.stem for p in TOPOLOGY_DIR.glob("*.py")) == topologies.names() == ["cellular", "dumbbell",
                                                                                         "pop", "wan"]


def test_the_spec_reads_topologies_without_mininet():
    """A topology's parameters and graph come from the package alone: no
    Mininet import (the host and `tortoise validate` need none)."""
    code = ("import sys; from tortoiselab.spec.topologies import TopologyCfg, parse_topology; "
            "TopologyCfg(name='dumbbell', clients=2, cdn_rtt_ms=20).graph(web=True); "
            "parse_topology('pop,backhaul_rtt_ms=120').graph(web=False); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'mininet'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("text", ["dumbbell", "dumbbell,3,bulk_flows=2", "wan,200,10.5", "pop,origin_cc=bbr,x=1e3",
                                  "cellular,trace_down=a=b", "d,,k=", "wan,-3,inf"])
def test_the_topo_syntax_is_split_as_mininet_splits_it(text):
    a, b = split_topo_arg(text), mininet_util.splitArgs(text)
    assert a == b and [type(v) for v in a[1]] == [type(v) for v in b[1]]
    assert [type(v) for v in a[2].values()] == [type(v) for v in b[2].values()]


@pytest.mark.parametrize("name", topologies.names())
def test_every_topology_file_builds_through_mn_custom(name):
    topo = mn_custom(name, name)
    assert "client" in topo.hosts() and "server" in topo.hosts()
    assert ("s1", "s2") in [tuple(sorted(l)) for l in topo.links()]
    opts = topo.linkInfo("s1", "s2")
    assert opts["delay"] == "100ms" and opts["bw"] == 10.0  # mn-only defaults: 200 ms, 10 Mbit/s


def test_the_documented_dumbbell_command():
    topo = mn_custom("dumbbell", "dumbbell,2")
    assert sorted(topo.hosts()) == ["c2", "client", "dns", "server", "xr", "xs"]
    assert sorted(topo.switches()) == ["s1", "s2"]
    topo = mn_custom("dumbbell", "dumbbell,4,bulk_flows=2,rtt_ms=50")
    assert {"c2", "c3", "c4"} <= set(topo.hosts())
    assert topo.linkInfo("s1", "s2")["delay"] == "25ms"


def _built_by_mininet(topo) -> list[tuple]:
    """The calls Mininet.buildFromTopo makes for a Topo (the lab's build,
    guest/net.py mininet_path), recorded instead of made (no root, no
    namespaces)."""
    from mininet.net import Mininet

    class Recorder(Mininet):
        def __init__(self):  # pylint: disable=super-init-not-called - Mininet's needs root; only the calls count
            self.calls, self.cleanup, self.controllers, self.controller, self.switch = [], False, [], None, object

        def addHost(self, name, cls=None, **params):
            self.calls.append(("host", name, params))

        def addSwitch(self, name, cls=None, **params):
            self.calls.append(("switch", name))

        def addLink(self, node1, node2, port1=None, port2=None, cls=None, **params):
            self.calls.append(("link", f"{node1}-eth{port1}", f"{node2}-eth{port2}", params))

    net = Recorder()
    net.buildFromTopo(topo)
    return net.calls


def test_the_lab_builds_a_graph_in_its_order_with_its_macs():
    """Mininet sorts a Topo's nodes by name; the lab's hosts, addresses,
    MACs and interface names follow the graph's order (as they were before
    the lab built through GraphTopo: the CDN dumbbell's `ip -batch` in a
    run's commands.log)."""
    from tortoiselab.guest.topo import GraphTopo

    g = parse_topology("dumbbell,2,bulk_flows=1,cdn_rtt_ms=20").graph(web=True)
    calls = _built_by_mininet(GraphTopo(g))
    assert [c[1] for c in calls if c[0] == "host"] == ["client", "server", "dns", "c2", "xr", "xs", "cdn"]
    assert calls[0] == ("host", "client", {"ip": "10.0.0.1/8", "mac": "00:00:00:00:00:01"})
    assert calls[6] == ("host", "cdn", {"ip": "10.0.4.1/8", "mac": "00:00:00:00:00:07"})
    assert [c[1] for c in calls if c[0] == "switch"] == ["s1", "s2", "s3"]
    links = [(c[1], c[3]["addr1"], c[2], c[3]["addr2"]) for c in calls if c[0] == "link"]
    assert links == [
        ("client-eth0", "00:00:00:00:00:01", "s1-eth1", "02:00:00:00:01:02"),
        ("s1-eth2", "02:00:00:00:02:01", "s2-eth1", "02:00:00:00:02:02"),
        ("s2-eth2", "02:00:00:00:03:01", "s3-eth1", "02:00:00:00:03:02"),
        ("s3-eth2", "02:00:00:00:04:01", "server-eth0", "00:00:00:00:00:02"),
        ("s3-eth3", "02:00:00:00:05:01", "dns-eth0", "00:00:00:00:00:03"),
        ("c2-eth0", "00:00:00:00:00:04", "s1-eth3", "02:00:00:00:06:02"),
        ("xr-eth0", "00:00:00:00:00:05", "s1-eth4", "02:00:00:00:07:02"),
        ("s3-eth4", "02:00:00:00:08:01", "xs-eth0", "00:00:00:00:00:06"),
        ("s2-eth3", "02:00:00:00:09:01", "cdn-eth0", "00:00:00:00:00:07"),
    ]
    assert all(set(c[3]) == {"addr1", "addr2"} for c in calls if c[0] == "link")  # the lab shapes with netem


def test_mn_shapes_the_emulated_links():
    from mininet.link import TCLink

    topo = mn_custom("dumbbell", "dumbbell,cdn_rtt_ms=20,rtt_ms=100")
    assert {k: topo.linkInfo("s1", "s2")[k] for k in ("cls", "delay", "bw")} == {"cls": TCLink, "delay": "10ms",
                                                                                   "bw": 10.0}
    assert topo.linkInfo("s2", "s3")["delay"] == "40ms"
    assert "cls" not in topo.linkInfo("client", "s1")
    assert mn_custom("cellular", "cellular").linkInfo("s1", "s2")["max_queue_size"] == 1000


def test_wan_is_the_path_the_lab_always_built():
    assert TopologyCfg().name == "wan"
    assert TopologyCfg().graph(web=True) == WEB_PATH
    assert TopologyCfg().graph(web=False) == ONE_PATH
    assert TopologyCfg().apply(PathSpec()) == PathSpec()


def test_dumbbell_keeps_the_measured_hosts_first():
    g = parse_topology("dumbbell,3,bulk_flows=2").graph(web=True)
    assert g.hosts[:3] == WEB_PATH.hosts and g.links[:4] == WEB_PATH.links
    assert g.with_role("web") == ["c2", "c3"] and g.with_role("cross_tx") == ["xs"]
    g.validate()


def test_pop_has_a_backhaul_of_its_own():
    t = parse_topology("pop,backhaul_rtt_ms=120,origin_cc=bbr")
    g = t.graph(web=True)
    assert g.hosts[:3] == WEB_PATH.hosts and g.backhaul == ("s2", "s3") and g.with_role("origin") == ["origin"]
    assert t.params().backhaul_path() == PathSpec(rtt_ms=120, rate_mbit=100, loss_pct=0)
    topo = mn_custom("pop", "pop,backhaul_rtt_ms=120")
    assert topo.linkInfo("s2", "s3")["delay"] == "60ms"
    with pytest.raises(TopologyError, match="topology.origin_cc"):
        parse_topology("pop,origin_cc=tortoise")


def test_cellular_sets_the_traces_and_a_deep_buffer():
    path = TopologyCfg(name="cellular", trace_down="3g.down", trace_up="3g.up", buffer_ms=800).apply(
        PathSpec(rtt_ms=80, loss_pct=0))
    assert (path.trace_down.name, path.trace_up.name, path.trace_queue_ms) == ("3g.down", "3g.up", 800)
    assert path.rtt_ms == 80


@pytest.mark.parametrize("text,field", [
    ("dumbbell,x", "topology.clients: Input should be a valid integer"),
    ("dumbbell,0", "topology.clients: Input should be greater than or equal to 1"),
    ("dumbbell,1,bulk_cc=foo", "topology.bulk_cc: unknown algorithm 'foo'"),
    ("dumbbell,1,web_loads_per_s=2", "topology.web_loads_per_s: background page loads need clients"),
    ("dumbbell,1,colour=red", "topology.colour: Extra inputs are not permitted"),
    ("cellular,trace_down=no-such-trace", "topology.trace_down: no trace file 'no-such-trace'"),
    ("wan,100", "topology.rtt_ms: only for mn --custom; in the lab give path.rtt_ms"),
    ("ring", "topology.name: no topology 'ring'"),
])
def test_bad_parameters_are_refused_naming_the_field(text, field):
    with pytest.raises(TopologyError) as err:
        parse_topology(text)
    assert field in str(err.value)


def test_bad_parameters_are_refused_by_mn_custom_too():
    with pytest.raises(TopologyError, match="topology.clients"):
        mn_custom("dumbbell", "dumbbell,many")


def test_cross_traffic_follows_the_seed():
    p = parse_topology("dumbbell,3,bulk_flows=2,web_loads_per_s=4").params()
    a, b, c = schedule(p, 7, 30), schedule(p, 7, 30), schedule(p, 8, 30)
    assert a == b and a != c
    assert [f.kind for f in a[:2]] == ["bulk", "bulk"] and a[0].nbytes is None
    web = [f for f in a if f.kind == "web"]
    assert 60 < len(web) < 180  # 4 per second for 30 s
    assert {f.host for f in web} == {"c2", "c3"}


def _experiment(tmp_path, extra: str):
    from tortoiselab.spec.experiment import expand, load

    f = tmp_path / "e.yaml"
    f.write_text("name: t\npath: {rtt_ms: 100, loss_pct: 0, rate_mbit: 10}\nclient: {page: small.html}\n" + extra)
    return expand(load(f))


def test_an_experiment_names_its_topology(tmp_path):
    wan = _experiment(tmp_path, "")
    assert "topology" not in wan[0].config  # no topology: the run ids of before
    assert [r.run_id for r in _experiment(tmp_path, "topology: {}\n")] == [r.run_id for r in wan]
    runs = _experiment(tmp_path, "topology: {name: dumbbell, clients: 2, bulk_flows: 1}\n"
                                 "sweep: {topology.bulk_flows: [1, 3]}\n")
    assert [r.config["topology"]["bulk_flows"] for r in runs] == [1, 3]
    assert len({r.run_id for r in runs} | {wan[0].run_id}) == 3
    cell = _experiment(tmp_path, "topology: {name: cellular, trace_down: 3g.down, trace_up: 3g.up}\n")
    assert cell[0].path.trace_down.name == "3g.down" and cell[0].path.trace_queue_ms == 500


def test_an_experiments_bad_topology_is_refused_naming_the_field(tmp_path):
    from tortoiselab.spec.experiment import ExperimentError, load

    with pytest.raises(ExperimentError, match=r"topology.clients: Input should be a valid integer"):
        _experiment(tmp_path, "topology: {name: dumbbell, clients: lots}\n")
    with pytest.raises(ExperimentError, match=r"topology.rtt_ms: only for mn --custom"):
        _experiment(tmp_path, "topology: {name: dumbbell, rtt_ms: 30}\n")
    with pytest.raises(ExperimentError, match=r"topology.bulk_flows: Input should be greater than or equal to 0 "
                                              r"\(got -1\).*\[from sweep.topology.bulk_flows\[1\]\]"):
        _experiment(tmp_path, "topology: {name: dumbbell}\nsweep: {topology.bulk_flows: [1, -1]}\n")
    f = tmp_path / "c.yaml"  # a path field the topology sets, given in the path too
    f.write_text("name: t\npath: {rtt_ms: 100, loss_pct: 0, trace_down: 3g.down}\ntopology: {name: cellular}\n")
    with pytest.raises(ExperimentError, match=r"path.trace_down: the cellular topology sets"):
        load(f)


def test_cross_figures_from_samples():
    from tortoiselab.analysis.fidelity import cross_checks, cross_rates_mbit

    # one bulk flow at 5 Mbit/s of payload from t=0, samples every 100 ms
    cross = {"flows": [{"id": "bulk0", "kind": "bulk"}], "errors": [],
             "samples": {"xr": {"ids": ["bulk0"], "samples": [[k / 10, [62500 * k]] for k in range(101)]}}}
    assert cross_rates_mbit(cross, 2.0, 6.0) == {"bulk": 5.0, "web": 0.0}
    # the measured flow moved as much over 4 s; the link carried both in full frames
    wire = 2 * 62500 * 40 * 1514 / 1448
    bulk = {"start_s": 2.0, "samples": [[0.0, 0], [4.0, wire]], "client": {"bytes": 62500 * 40}}
    share, accounted = cross_checks(cross, bulk, 50.0)
    assert share.measured == 50.0 and share.ok
    assert accounted.measured == 100.0 and accounted.ok


def test_the_fairness_table_pairs_each_algorithm_with_the_control_by_seed():
    import pandas as pd

    from tortoiselab.analysis.fairness import fairness_table, format_table

    rows = []
    for seed in range(8):
        rows.append({"server.cc": "cubic", "seed": seed, "ok": True, "plt_ms": 1000.0 + seed,
                     "cross_bulk_mbit": 6.0, "cross_web_mbit": 1.0})
        rows.append({"server.cc": "hybla", "seed": seed, "ok": True, "plt_ms": 500.0 + seed / 2,
                     "cross_bulk_mbit": 5.4, "cross_web_mbit": 1.0})
    table = fairness_table(pd.DataFrame(rows))
    assert [r.cc for r in table] == ["cubic", "hybla"] and table[0].changes is None
    ch = table[1].changes
    assert round(ch["plt_ms"].value, 6) == -50.0 and round(ch["cross_bulk_mbit"].value, 6) == -10.0
    assert ch["cross_bulk_mbit"].low == ch["cross_bulk_mbit"].high == ch["cross_bulk_mbit"].value
    assert "(control)" in format_table(table)
