"""Hosts in the lab (docs/hosts.md): one 1 MB object over 100 ms / 100
Mbit/s without loss at initcwnd 10 (uml backend, virtual clock, one lab
boot), loaded by a client with Mininet's buffers (no host set), the desktop
host, the mobile host, and Mininet's again (a later load gets back what the
host was born with). The desktop's slow start reads 10, 20, 40 segments in
its first three data rounds; Mininet's 87380-byte default caps the third."""

import pytest

from tortoiselab.analysis import flights as F
from tortoiselab.host.pageload import run_loads
from tortoiselab.spec.hostspec import named_host
from tortoiselab.spec.pathspec import PathSpec

pytestmark = pytest.mark.lab

URL = "https://www.lab.test/objects/1000000.bin"
HOSTS = ("unset", "desktop", "mobile", "unset-again")


def _load(label: str) -> dict:
    client = {"url": URL, "loader": "loader"}
    if not label.startswith("unset"):
        client["host"] = label
    return {"label": label, "server": {"cc": "cubic", "initcwnd_pkts": 10}, "client": client}


@pytest.fixture(scope="module")
def loads(tmp_path_factory, lab_kernel):
    res = run_loads([_load(h) for h in HOSTS], PathSpec(rtt_ms=100, loss_pct=0, rate_mbit=100),
                    backend="uml", clock="virtual", work=tmp_path_factory.mktemp("hosts") / "w")
    assert res["clock"] == "virtual"
    return dict(zip(HOSTS, res["loads"]))


def _rounds(ld: dict) -> tuple[list[dict], dict]:
    assert ld["summary"]["error"] is None and ld["capture"]["dropped_by_kernel"] == 0
    (conn,) = F.analyze_pcap(ld["pcap"])
    tf = F.transfer_flights(conn)
    return tf, conn


@pytest.mark.parametrize("label", HOSTS)
def test_read_back_is_what_was_asked(loads, label):
    got = loads[label]["client_sysctls"]
    print(f"\n{label}: {got}")
    if label.startswith("unset"):  # Mininet's (mininet/util.py fixLimits), put back after the mobile load
        want = named_host("mininet")
    else:
        want = named_host(label)
    assert got["net.ipv4.tcp_rmem"].split() == [str(x) for x in want.tcp_rmem]
    assert got["net.ipv4.tcp_wmem"].split() == [str(x) for x in want.tcp_wmem]
    # the server was never set: Mininet's throughout
    assert loads[label]["server_sysctls"]["net.ipv4.tcp_rmem"].split() == ["10240", "87380", "16777216"]


@pytest.mark.parametrize("label", HOSTS)
def test_slow_start_rounds(loads, label):
    tf, conn = _rounds(loads[label])
    verdicts = F.slow_start_verdicts(tf, 10)
    print(f"\n{label}: PLT {loads[label]['summary']['plt_ms']:.1f} ms, rounds {[f['segments'] for f in tf]}, rwnd "
          f"{[(f['rwnd_bytes'], f['rwnd_limited']) for f in tf]}, verdicts {[v['reason'] for v in verdicts]}")
    print(F.format_flights(conn))
    assert conn["retransmissions"] == []
    segs = [f["segments"] for f in tf]
    if label in ("desktop", "mobile"):
        assert segs[:3] == [10, 20, 40]
        assert all(v["ok"] for v in verdicts[:3]), verdicts
    else:  # Mininet's buffers: the client's window caps the third round below 40
        assert segs[:2] == [10, 20] and segs[2] < 40


def test_unset_loads_repeat(loads):
    """A load without a host after the mobile one runs as the first did."""
    a, _ = _rounds(loads["unset"])
    b, _ = _rounds(loads["unset-again"])
    assert [f["segments"] for f in a] == [f["segments"] for f in b]
