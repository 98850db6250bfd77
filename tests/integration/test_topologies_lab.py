"""Every topology in topologies/ booted in the UML lab kernel on the virtual
clock (docs/topologies.md): base RTT within max(0.5 ms, 1 %), bottleneck
rate within 3 % (a cellular last mile: the replayed trace within 5 % per
100-ms bin), the cross traffic's bytes accounting for the bottleneck's
within 3 %; the same seed moves the same cross-traffic bytes; bad
parameters refused before anything starts."""

import json
import subprocess

import pytest

from tests.conftest import TORTOISE
from tests.integration.conftest import lossfree_probe as probe

pytestmark = pytest.mark.lab



CASES = {
    "wan": ("wan", 50, 10),
    "dumbbell-bulk": ("dumbbell,2,bulk_flows=1", 50, 10),
    "dumbbell-web": ("dumbbell,3,bulk_flows=2,web_loads_per_s=2,web_page_bytes=300000", 80, 20),
    "cellular": ("cellular,trace_down=lte.down,trace_up=lte.up,buffer_ms=500", 50, None),
    "pop": ("pop,backhaul_rtt_ms=150,backhaul_rate_mbit=50,origin_cc=bbr", 20, 10),
}


@pytest.mark.parametrize("case", CASES)
def test_each_topology_is_emulated_as_configured(tmp_path, lab_kernel, case):
    topology, rtt_ms, rate_mbit = CASES[case]
    length = ("--bulk-seconds", "8") if rate_mbit is not None else ("--trace-window", "0", "8")  # a traced last mile
    p, rep = probe(tmp_path / "w", "--topology", topology, "--rtt-ms", str(rtt_ms),
                   "--rate-mbit", str(rate_mbit or 10), *length)
    assert rep is not None, p.stderr
    table = {c["quantity"]: c for c in rep["checks"]}
    for c in rep["checks"]:  # the figures, for the log
        print(f"{case:<14} {c['quantity']:<16} configured {c['configured']:>8} measured {c['measured']:>9} "
              f"accepted [{c['low']}, {c['high']}] {c['note']}")
    assert rep["topology"]["name"] == topology.split(",")[0]
    rtt = table["base RTT"]
    assert abs(rtt["measured"] - rtt["expected"]) <= max(0.5, 0.01 * rtt_ms)
    if rate_mbit is not None:
        assert abs(table["bottleneck rate"]["measured"] - rate_mbit) <= 0.03 * rate_mbit
    else:  # a traced last mile: the replayed trace's bytes per 100 ms
        assert table["trace down"]["measured"] <= 5.0
    if topology.startswith("pop"):  # the second leg: PoP to origin
        assert abs(table["backhaul RTT"]["measured"] - table["backhaul RTT"]["expected"]) <= max(0.5, 0.01 * 150)
        assert abs(table["backhaul rate"]["measured"] - 50) <= 0.03 * 50
    if topology.startswith("dumbbell"):
        assert abs(table["flows accounted"]["measured"] - 100) <= 3
        assert 0 < table["cross share"]["measured"] < 100
        flows = rep["cross"]["flows"]
        assert flows and all(f["bytes"] > 0 and f["error"] is None for f in flows)
        assert all(f["done"] for f in flows if f["kind"] == "web" and f["end_s"] < 10)
    assert rep["ok"] and p.returncode == 0


def test_the_same_seed_moves_the_same_cross_traffic(tmp_path, lab_kernel):
    runs = []
    for name in ("a", "b"):
        p, rep = probe(tmp_path / name, "--topology", "dumbbell,3,bulk_flows=1,web_loads_per_s=3,lead_s=2",
                       "--rtt-ms", "40", "--rate-mbit", "10", "--bulk-seconds", "3", "--seed", "5")
        assert rep is not None, p.stderr
        task = json.loads((tmp_path / name / "result.json").read_text())["task"]
        runs.append((task["cross"]["flows"], task["cross"]["samples"], task["bulk"]["samples"]))
    assert runs[0] == runs[1]


@pytest.mark.parametrize("topology,field", [
    ("dumbbell,many", "topology.clients"),
    ("dumbbell,1,bulk_cc=tortoise", "topology.bulk_cc"),
    ("cellular,trace_down=/nonexistent.down", "topology.trace_down"),
    ("ring", "topology.name"),
])
def test_bad_topologies_are_refused_before_anything_starts(tmp_path, topology, field):
    p, rep = probe(tmp_path / "w", "--topology", topology, timeout=60)
    assert p.returncode == 2 and rep is None
    assert field in p.stderr
    assert not (tmp_path / "w").exists()


def test_a_page_loads_through_the_pops_reverse_proxy(tmp_path, lab_kernel):
    """pop: the client's TLS ends at the PoP, whose Apache passes every
    request on to the origin over the backhaul as HTTP/2 over TLS
    (mod_proxy_http2); the two legs run their own algorithms."""
    from tortoiselab.spec.pathspec import PathSpec
    from tortoiselab.spec.requests import LoadSpec, PageLoadRequest
    from tortoiselab.spec.topologies import TopologyCfg
    from tortoiselab.host import backends

    req = PageLoadRequest(path=PathSpec(rtt_ms=20, loss_pct=0, rate_mbit=10), seed=1,
                          topology=TopologyCfg(name="pop", backhaul_rtt_ms=150, backhaul_rate_mbit=50,
                                               origin_cc="bbr"),
                          loads=[LoadSpec.model_validate({"label": "a", "server": {"cc": "hybla"},
                                                          "client": {"page": "small.html"}})])
    work = tmp_path / "w"
    result = backends.run_task(backends.choose("uml", "virtual", ["hybla", "bbr"]), req, work, timeout_s=600)
    load = result["task"]["loads"][0]
    summary = load["summary"]
    print("pop small.html PLT", summary["plt_ms"], "ms")
    assert summary.get("error") is None and summary["plt_ms"] > 20 + 150  # one round trip of each leg at least
    origin = (work / "origin-access.log").read_text().splitlines()
    pop = (work / "pop-access.log").read_text().splitlines()
    assert len(origin) == len(pop) > 1
    assert all(line.startswith("10.0.0.2 ") and " HTTP/2.0 TLSv1.3 " in line for line in origin)  # from the PoP
    assert all(line.startswith("10.0.0.1 ") for line in pop)  # from the client
    assert load["server_sysctls"]["net.ipv4.tcp_congestion_control"] == "hybla"


def test_page_loads_with_cross_traffic_repeat_to_the_microsecond(tmp_path, lab_kernel):
    """The fairness experiment's ci grid (a dumbbell with bulk flows and
    background loads): every run ok, its cross traffic recorded, and a rerun
    of each identical to the microsecond (every server-side packet)."""
    from tests.conftest import REPO

    exp = REPO / "experiments" / "tortoise-fairness.yaml"
    args = [*TORTOISE, "run", str(exp), "--grid", "ci", "--backend", "uml", "--clock", "virtual",
            "--jobs", "1", "--results", str(tmp_path)]
    for extra in ([], ["--verify-determinism", "2"]):  # the runs, then a rerun of each compared with it
        p = subprocess.run([*args, *extra], capture_output=True, text=True, timeout=1200)
        print(p.stdout[-1500:])
        assert p.returncode == 0, p.stderr[-2000:]
    assert "2 of 2 runs identical" in p.stdout
    for run in (tmp_path / "tortoise-fairness@ci").glob("*/run.json"):
        rec = json.loads(run.read_text())
        assert rec["ok"] and rec["cross"]["bytes"]["bulk"] > 0
        assert {f["id"] for f in rec["cross"]["flows"]} >= {"bulk0", "bulk1"}
