"""topologies/<name>.py: read as Mininet's `mn --custom` reads them, built
into Topo objects through Mininet's own --topo parsing, and as the lab reads
them (spec/topologies.py); bad parameters refused naming the field."""

from __future__ import annotations

import pytest

from tortoiselab.spec import topologies
from tortoiselab.spec.crosstraffic import schedule
from tortoiselab.spec.pathspec import PathSpec
from tortoiselab.spec.topologies import TOPOLOGY_DIR, TopologyCfg, parse_topology
from tortoiselab.spec.topology import ONE_PATH, WEB_PATH, TopologyError

mininet_util = pytest.importorskip("mininet.util")


def mn_custom(name: str, topo_arg: str):
    """What `mn --custom topologies/<name>.py --topo <topo_arg>` does before
    it starts a network: exec the file into a fresh dict (MininetRunner.custom),
    add its `topos` and build the Topo from the --topo string (buildTopo)."""
    customs: dict = {}
    file = TOPOLOGY_DIR / f"{name}.py"
    exec(compile(file.read_text(), str(file), "exec"), customs, customs)  # noqa: S102
    return mininet_util.buildTopo(customs["topos"], topo_arg)


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
