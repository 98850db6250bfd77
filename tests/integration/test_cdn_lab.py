"""The CDN set-up in the lab kernel (docs/topologies.md, "A CDN beside the
PoP"): feed.html over India desktop with the PoP on Hybla. The record and
the two servers' captures must show the document served by the PoP under
Hybla (its first data flight Hybla's first window: 2 segments at 54 ms,
not initcwnd 10) and the 46 static objects by the CDN host under CUBIC
(initcwnd 10, then slow start), every request answered."""

import json
import subprocess

import pytest

from tests.conftest import TORTOISE, write_yaml

pytestmark = pytest.mark.lab

EXPERIMENT = """name: cdn
repetitions: 1
seed: 2017
server: {cc: hybla, initcwnd_pkts: 10, protocol: h2, tls: "1.3", cert: shared}
client: {page: feed.html, coalescing: true}
path: {region: india-desktop-2017}
topology: {name: dumbbell, clients: 1, cdn_rtt_ms: 27}
"""


def _first_data_flight(conn: dict) -> int:
    return next(f["segments"] for f in conn["flights_ack"] if f["phase"] == "data")


def test_static_objects_come_from_the_cdn_under_cubic_and_the_document_from_the_pop_under_hybla(tmp_path, lab_kernel):
    from tortoiselab.analysis.flights import analyze_pcap

    exp = write_yaml(tmp_path, EXPERIMENT)
    p = subprocess.run([*TORTOISE, "run", str(exp), "--backend", "uml", "--clock", "virtual", "--jobs", "1",
                        "--results", str(tmp_path / "results")], capture_output=True, text=True, timeout=900)
    print(p.stdout[-1500:])
    assert p.returncode == 0, p.stderr[-2000:]
    (run,) = (tmp_path / "results" / "cdn").glob("*/run.json")
    rec = json.loads(run.read_text())
    site = json.loads((tmp_path / "results" / "cdn" / ".lab" / "site" / "manifest.json").read_text())
    page = site["pages"]["feed.html"]
    assert rec["ok"], rec["error"]
    assert rec["summary"]["requests"] == page["n_requests"] == 47
    # which host served what (from the HAR), and each host's algorithm as its namespace held it
    cdn = rec["cdn"]
    assert cdn["served_by"]["cdn"]["requests"] == 46 and cdn["served_by"]["cdn"]["hosts"] == ["static.lab.test"]
    assert cdn["served_by"]["server"]["requests"] == 1 and cdn["served_by"]["server"]["hosts"] == ["www.lab.test"]
    assert cdn["misplaced"] == []
    assert rec["meta"]["server_sysctls"]["net.ipv4.tcp_congestion_control"] == "hybla"
    assert cdn["sysctls"]["net.ipv4.tcp_congestion_control"] == "cubic"
    # the captures: each host's own connections, the bytes each sent and how its first data flight was sized
    pop = [c for c in analyze_pcap(run.parent / "server.pcap", keep_series=False) if c["server"] == "10.0.0.2:443"]
    edge = [c for c in analyze_pcap(run.parent / "cdn.pcap", keep_series=False) if c["server"] == "10.0.4.1:443"]
    assert len(pop) == 1 and len(edge) == 1, (pop, edge)
    assert edge[0]["server_bytes_unique"] >= page["object_bytes"]  # the 46 static objects (801,528 bytes)
    assert page["document_bytes"] <= pop[0]["server_bytes_unique"] < page["document_bytes"] + 10_000
    assert _first_data_flight(pop[0]) <= 3  # Hybla: rho = RTT / 25 ms = 2.2 segments, initcwnd ignored
    assert _first_data_flight(edge[0]) == 10  # CUBIC: initcwnd 10
    assert pop[0]["tcp_rtt_ms"] == pytest.approx(54, abs=3) and edge[0]["tcp_rtt_ms"] == pytest.approx(27, abs=5)
