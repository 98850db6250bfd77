"""The napkin floor on a traced downlink (issue 37): from the trace over
the load's own interval, never the rate the trace overrides
(analysis/tracefloor.py, analysis/napkin.py run_floor), and the page's place
in the trace as the guest records it (guest/replay.py trace_offset_ms)."""

import hashlib
import json
from pathlib import Path

import pytest

from tortoiselab.analysis import napkin
from tortoiselab.analysis.tracefloor import TraceLink, traced_data_time_ms
from tortoiselab.guest.replay import trace_offset_ms
from tortoiselab.host import store
from tortoiselab.spec.pathspec import PathSpec
from tortoiselab.spec.trace import FRAME_BYTES, Trace

STEADY = Trace.from_times(list(range(1, 10_001)), name="steady")  # one packet per ms for 10 s: 12 Mbit/s of IP
# one packet per ms, but nothing from 10 ms to 1010 ms (a one-second outage)
GAPPED = Trace.from_times([t for t in range(1, 10_001) if not 10 < t <= 1010], name="gapped")


def _write(tmp_path, name: str, times) -> str:
    f = tmp_path / name
    f.write_text("".join(f"{t}\n" for t in times))
    return str(f)


def test_the_trace_lets_packets_through_no_sooner_than_either_reading_of_it():
    link = TraceLink(STEADY, 0.0)
    # 100 frames from 0: mahimahi's 100th opportunity is at 100 ms; the lab's replay (1 frame/ms
    # and one frame of burst) has them through at 99 ms: the floor takes the sooner
    assert link.serialize_ms(0, 100 * FRAME_BYTES) == pytest.approx(99, abs=0.01)
    assert link.serialize_ms(0, 0) == 0
    # across an outage: 10 frames before it, the 11th no sooner than the outage's end
    assert TraceLink(GAPPED, 0.0).serialize_ms(0, 20 * FRAME_BYTES) >= 1000
    # the same bytes from the load's place in the trace: after the outage, no wait
    assert TraceLink(GAPPED, 2000.0).serialize_ms(0, 20 * FRAME_BYTES) == pytest.approx(19, abs=0.01)
    with pytest.raises(ValueError, match="trace_start_ms"):
        TraceLink(STEADY, -1.0)


def test_a_steady_trace_gives_the_floor_of_its_rate():
    """A trace of one 1514-byte frame per ms is a 12.112 Mbit/s link: the
    traced floor is the fixed-rate floor within what it counts finer, per
    transfer (document, objects): the one frame of burst the replay allows
    and a short last segment by its bytes (the fixed rate charges it whole)."""
    rate = FRAME_BYTES * 8 / 1e3  # Mbit/s of frames
    kw = dict(rtt_ms=100, document_bytes=60_000, object_bytes=800_000, iw_pkts=10, cert_flight_bytes=1409)
    fixed = napkin.page_floor_ms(rate_mbit=rate, **kw)
    traced = napkin.page_floor_ms(rate_mbit=None, link=TraceLink(STEADY, 0.0), **kw)
    assert traced["total_ms"] <= fixed["total_ms"] <= traced["total_ms"] + 2 * 2
    assert traced["trace_down"] == "steady" and traced["trace_mbit_over_floor"] == pytest.approx(12, rel=0.01)
    flights = napkin.round_flights(800_000, 40)
    one = napkin.data_time_ms(100, rate, 800_000, 40)
    assert traced_data_time_ms(100, TraceLink(STEADY, 0.0), 0, 800_000, flights)["rounds"] == one["rounds"]


MANIFEST = {"pages": {"feed.html": {
    "path": "/feed.html",
    "document": {"url": "https://www.lab.test/feed.html", "origin": "https://www.lab.test", "path": "/feed.html",
                 "bytes": 60_000},
    "objects": [{"url": f"https://static.lab.test/{i}.jpg", "origin": "https://static.lab.test", "bytes": 20_000}
                for i in range(40)]}}}
PKI = {"variants": {"shared": {"coalescing": True, "www": {"tls13_flight_estimate_bytes": 1409}}}}


def _config(trace: str, rate_mbit: float = 10.0) -> dict:
    path = PathSpec(rtt_ms=100, loss_pct=0, rate_mbit=rate_mbit, trace_down=trace).model_dump(mode="json")
    return {"path": {"rtt_ms": 100, "resolved": path},
            "server": {"cc": "cubic", "initcwnd_pkts": 10, "protocol": "h2", "tls": "1.3", "cert": "shared"},
            "client": {"page": "feed.html", "loader": "loader", "coalescing": True}}


def test_a_traced_runs_floor_is_the_traces_not_the_default_rate(tmp_path):
    """issue 37: a feed load over an LTE trace stored a floor from the
    default 10 Mbit/s the trace overrides, and beat it."""
    slow = _write(tmp_path, "slow.down", range(10, 100_001, 10))  # one packet per 10 ms: 1.2 Mbit/s
    a = napkin.run_floor(_config(slow, 10.0), MANIFEST, PKI, (), 1.4)
    b = napkin.run_floor(_config(slow, 1000.0), MANIFEST, PKI, (), 1.4)
    assert a["floor_ms"] == b["floor_ms"]  # rate_mbit is not the link's
    untraced = napkin.page_floor_ms(100, 10.0, 60_000, 0, 10, cert_flight_bytes=1409,
                                    second_origin="coalesced", second_origin_bytes=800_000)
    assert a["floor_ms"] > untraced["total_ms"] + 3000  # 860 KB at 1.2 Mbit/s: seconds more than at 10
    assert a["model"]["trace_down"] == "slow.down" and a["model"]["trace_start_ms"] == 1.4


def test_the_store_computes_a_traced_runs_floor_from_its_trace(tmp_path):
    """A record without a floor gets one as the runner stores it (host/store/
    upgrade): from the trace and the page's start in it, whatever rate_mbit says."""
    exp = tmp_path / "exp"
    for sub, name, doc in (("site", "manifest.json", MANIFEST), ("pki", "pki.json", PKI)):
        (exp / ".lab" / sub).mkdir(parents=True)
        (exp / ".lab" / sub / name).write_text(json.dumps(doc))
    (exp / "r1").mkdir()
    slow = _write(tmp_path, "slow.down", range(10, 100_001, 10))  # 1.2 Mbit/s
    missing = store.upgrade({"config": _config(slow, 10.0), "summary": {"plt_ms": 9000.0, "trace_start_ms": 1.4}},
                            exp / "r1")["summary"]  # a record's trace is read from the folder's copy only
    assert missing["floor_ms"] is None and "no stored copy" in missing["floor_model"]["why"]
    (exp / ".lab" / "traces").mkdir()  # the copy the runner stores (host/storedtraces.py)
    data = Path(slow).read_bytes()
    (exp / ".lab" / "traces" / hashlib.sha256(data).hexdigest()).write_bytes(data)
    floors = [store.upgrade({"config": _config(slow, rate), "summary": {"plt_ms": 9000.0, "trace_start_ms": 1.4}},
                            exp / "r1")["summary"] for rate in (10.0, 1000.0)]
    assert floors[0]["floor_ms"] == floors[1]["floor_ms"] > 4000
    assert floors[0]["floor_model"]["trace_down"] == "slow.down"


def test_the_floor_meets_the_trace_where_the_load_started(tmp_path):
    f = _write(tmp_path, "gap.down", [t for t in range(1, 20_001) if not 500 < t <= 2500])  # 2-s outage
    at_start = napkin.run_floor(_config(f), MANIFEST, PKI, (), 0.0)["floor_ms"]
    later = napkin.run_floor(_config(f), MANIFEST, PKI, (), 5000.0)["floor_ms"]
    assert at_start > later + 1000  # the document's transfer waits out the outage


def test_no_floor_without_the_loads_place_in_the_trace(tmp_path):
    f = napkin.run_floor(_config(_write(tmp_path, "t.down", range(1, 1001))), MANIFEST, PKI)
    assert f["floor_ms"] is None and "trace_start_ms" in f["why"] and "rate_mbit" in f["why"]
    gone = _config(_write(tmp_path, "u.down", range(1, 1001)))
    (tmp_path / "u.down").write_text("1\n2\n")  # changed since the run
    f = napkin.run_floor(gone, MANIFEST, PKI, (), 0.0)
    assert f["floor_ms"] is None and f["why"].startswith("trace_down u.down")


def test_the_page_start_in_the_trace_from_the_loaders_wall_clock():
    # the guest's realtime is its monotonic clock + 1893456000 s (the virtual clock's epoch)
    assert trace_offset_ms("2030-01-01T00:00:11.501364Z", 11.5, 1893456000.0) == pytest.approx(1.364, abs=1e-6)
    assert trace_offset_ms(None, 11.5, 0.0) is None
