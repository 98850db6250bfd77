from pathlib import Path

import pytest

from tortoiselab.analysis.parsers import parse_ping, parse_ss_ti, parse_tc_filter_drops

DATA = Path(__file__).parent.parent / "data"


def test_ping_summary_has_microseconds():
    r = parse_ping((DATA / "ping_200ms.txt").read_text())
    assert (r.transmitted, r.received) == (20, 20)
    assert len(r.rtts_ms) == 20
    assert r.min_ms == 200.157 and r.avg_ms == 200.158 and r.max_ms == 200.172


def test_ping_without_summary_is_an_error():
    with pytest.raises(ValueError, match="summary"):
        parse_ping("ping: connect: Network is unreachable\n")


def test_ss_ti_reads_algorithm_and_cwnd():
    socks = parse_ss_ti((DATA / "ss_ti_cubic.txt").read_text())
    assert len(socks) == 1
    s = socks[0]
    assert (s.local, s.peer, s.algorithm, s.cwnd, s.mss) == ("10.0.0.2:5001", "10.0.0.1:48144", "cubic", 76, 1448)
    assert s.rtt_ms == 216.729


def test_ss_ti_dctcp_fallback_name():
    text = ("Recv-Q Send-Q Local Address:Port Peer Address:Port Process\n"
            "0      0      10.0.0.2:6000     10.0.0.1:40000\n"
            "\t dctcp-reno wscale:9,9 rto:240 rtt:40.1/1 mss:1448 cwnd:10\n")
    assert parse_ss_ti(text)[0].algorithm == "dctcp-reno"


def test_nghttp_stats():
    from tortoiselab.analysis.parsers import parse_nghttp_stats

    r = parse_nghttp_stats((DATA / "nghttp_tiny_stats.txt").read_text())
    assert r["requests"] == 51  # tiny.html + 50 objects
    assert all(x["status"] == 200 for x in r["rows"])
    assert r["rows"][0]["path"] == "/tiny.html" and r["rows"][0]["request_start_ms"] == 0.001
    assert r["plt_ms"] == 304.149  # html at ~101 ms, objects in two more round trips
    assert parse_nghttp_stats("no stats")["plt_ms"] is None


def test_h2load_summary():
    from tortoiselab.analysis.parsers import parse_h2load

    r = parse_h2load((DATA / "h2load_1mb.txt").read_text())
    assert (r["requests"], r["succeeded"], r["failed"]) == (3, 3, 0)
    assert r["data_bytes"] == 3_000_000 and r["seconds"] == 1.46
    assert r["throughput_mbit"] == round(3_000_000 * 8 / 1.46 / 1e6, 4)
    with pytest.raises(ValueError, match="summary"):
        parse_h2load("connect failed")


def test_tc_filter_drops_sum_the_filters_actions():
    assert parse_tc_filter_drops((DATA / "tc_filter_drop_stats.txt").read_text()) == 1
    assert parse_tc_filter_drops("no stats") is None
