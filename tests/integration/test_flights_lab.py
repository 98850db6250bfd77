"""Flights per round trip from the lab's own captures, against the napkin
floor: one 100 KB object over 100 ms / 100 Mbit/s with no loss at
initcwnd 3, 10 and 30 (uml backend, virtual clock, one lab boot), and the
same object with netem's seeded loss dropping exactly one data segment."""

from collections import Counter

import pytest

from tortoiselab.analysis import flights as F
from tortoiselab.analysis import napkin as N
from tortoiselab.host.pageload import run_loads
from tortoiselab.spec.pathspec import PathSpec

pytestmark = pytest.mark.lab

RTT_MS, RATE_MBIT, SIZE = 100.0, 100.0, 100_000
URL = "https://www.lab.test/objects/100000.bin"
IWS = (3, 10, 30)


def _load(iw: int) -> dict:
    return {"label": f"iw{iw}",
            "server": {"cc": "cubic", "initcwnd_pkts": iw, "protocol": "h2", "tls": "1.3", "cert": "shared"},
            "client": {"url": URL, "loader": "loader"}}


@pytest.fixture(scope="module")
def loads(tmp_path_factory, lab_kernel):
    res = run_loads([_load(iw) for iw in IWS], PathSpec(rtt_ms=RTT_MS, loss_pct=0, rate_mbit=RATE_MBIT),
                    backend="uml", clock="virtual", work=tmp_path_factory.mktemp("flights") / "w")
    assert res["clock"] == "virtual"
    return dict(zip(IWS, res["loads"]))


@pytest.mark.parametrize("iw", IWS)
def test_flights_start_at_the_initial_window_and_double(loads, iw):
    ld = loads[iw]
    assert ld["summary"]["error"] is None
    assert ld["capture"]["dropped_by_kernel"] == 0
    (conn,) = F.analyze_pcap(ld["pcap"])
    print(f"\nIW {iw}: server capture\n{F.format_flights(conn)}")
    assert conn["vantage"] == "server"
    assert conn["tcp_rtt_ms"] == pytest.approx(RTT_MS, abs=1)
    assert conn["handshake_rtts"] == {"tcp": 1, "tls": 1} and conn["tls"]["version"] == "1.3"
    tf = F.transfer_flights(conn)
    verdicts = F.slow_start_verdicts(tf, iw)
    print("transfer:", [(v["segments"], v["reason"]) for v in verdicts])
    assert tf[0]["segments"] == iw
    assert all(v["ok"] for v in verdicts), verdicts
    assert conn["retransmissions"] == []
    # below the client's receive window, each round doubles the last
    if iw < 30:
        assert tf[1]["segments"] == 2 * iw


@pytest.mark.parametrize("iw", IWS)
def test_measured_plt_against_the_napkin_floor(loads, iw):
    ld = loads[iw]
    s = ld["summary"]
    (conn,) = F.analyze_pcap(ld["pcap"])
    floor = N.floor_ms(RTT_MS, RATE_MBIT, SIZE, iw, tls="1.3", dns_lookups=1)
    r = N.ratio(s["plt_ms"], floor)
    rounds = len(F.transfer_flights(conn))
    print(f"\nIW {iw}: PLT {s['plt_ms']:.1f} ms, floor {floor['total_ms']:.1f} ms "
          f"({floor['rtts']} RTT + {floor['serialization_ms']:.1f} ms), measured/floor {r:.4f}; "
          f"the issue's (1+h+k)·RTT+S/C = {floor['napkin_ms']:.1f} ms, measured/that "
          f"{s['plt_ms'] / floor['napkin_ms']:.4f}; data rounds measured {rounds}, "
          f"napkin k {floor['slow_start_rounds']}"
          + ("" if rounds == floor["slow_start_rounds"] else
             " (the client's receive window capped a flight: one more round)"))
    assert r >= 1
    # every round trip the capture shows is in the PLT: DNS + TCP + TLS + data rounds
    assert s["plt_ms"] >= (1 + 1 + 1 + rounds) * RTT_MS


def test_one_dropped_segment_is_one_fast_retransmission(tmp_path_factory, lab_kernel):
    """netem's seeded loss (1.5 % on the downlink, seed 3) drops exactly one
    data segment of this load; the client's capture says which."""
    res = run_loads([_load(10)], PathSpec(rtt_ms=RTT_MS, loss_pct=1.5, loss_up_pct=0, rate_mbit=RATE_MBIT),
                    backend="uml", clock="virtual", seed=3, work=tmp_path_factory.mktemp("drop") / "w")
    (ld,) = res["loads"]
    (srv,) = F.analyze_pcap(ld["pcap"])
    (cli,) = F.analyze_pcap(ld["client_pcap"])
    print("\n" + F.format_flights(srv))

    def sent(c):
        s = c["series"]
        return Counter((q, n) for q, n, k in zip(s["seq"], s["len"], s["kind"]) if k != "ack")

    lost = list((sent(srv) - sent(cli)).elements())
    print("lost:", lost, "retransmissions:", srv["retransmissions"])
    assert len(lost) == 1
    (r,) = srv["retransmissions"]
    assert (r["seq"], r["len"]) == lost[0] and r["kind"] == "fast"
