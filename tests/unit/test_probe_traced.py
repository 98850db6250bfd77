"""The probe on a traced path (issue 37): its header from the traced links,
a trace's outages reported as outages, a traced link's buffer drops kept
apart from the path's loss, and the trace check over the whole trace or a
window the user picks (host/probe.py, spec/requests.py, spec/trace.py,
analysis/fidelity.py trace_check, guest/replay.py rate_events)."""

import itertools
import math

import pytest

from tortoiselab.analysis.fidelity import trace_check
from tortoiselab.analysis.parsers import parse_qdisc_drops
from tortoiselab.guest.replay import rate_events
from tortoiselab.host.probe import ProbeReport, describe_path, evaluate, probe_measure, traced_links
from tortoiselab.spec.pathspec import PathSpec
from tortoiselab.spec.requests import ProbeMeasure, ProbeRequest
from tortoiselab.spec.trace import FRAME_BYTES, Trace

STEADY = Trace.from_times(list(range(1, 10_001)), name="steady")  # one packet per ms for 10 s: 12 Mbit/s of IP
GAPPED = Trace.from_times([t for t in range(1, 10_001) if not 10 < t <= 1010], name="gapped")  # a 1-s outage


def _write(tmp_path, name: str, times) -> str:
    f = tmp_path / name
    f.write_text("".join(f"{t}\n" for t in times))
    return str(f)


# --- outages ----------------------------------------------------------------------

def test_outages_are_gaps_longer_than_the_threshold():
    t = Trace.from_times([300, 301, 302, 900, 905, 1000], name="o")
    assert t.outages() == [(0, 300), (302, 900)]  # the gap from the previous loop's end counts too
    assert t.outages(400) == [(302, 900)]
    o = t.describe()["outages"]
    assert (o["threshold_ms"], o["count"], o["total_ms"], o["longest_ms"]) == (200, 2, 898, 598)
    assert GAPPED.describe()["outages"]["intervals_ms"] == [[10, 1011]]
    assert STEADY.outages() == [] and (STEADY.describe()["min_mbit"], STEADY.describe()["max_mbit"]) == (11.988, 12.0)


# --- the probe's header -------------------------------------------------------------

def _traced_path(tmp_path) -> PathSpec:
    down = _write(tmp_path, "lte.down", [t for t in range(1, 30_001) if not 4000 < t <= 7000])
    up = _write(tmp_path, "lte.up", range(2, 30_001, 2))
    return PathSpec(rtt_ms=100, loss_pct=0, trace_down=down, trace_up=up, trace_queue_ms=300)


def test_the_header_describes_the_traced_links_not_the_defaults(tmp_path):
    """issue 37: the header printed "rate 10.0 Mbit/s, queue 42 pkts" on
    traced paths whose buffers were 210/248 packets."""
    p = _traced_path(tmp_path)
    line = describe_path(p)
    assert "rate 10.0" not in line and f"queue {p.queue()} pkts" not in line
    assert f"down trace lte.down (mean 10.800 Mbit/s), buffer {p.trace_queue('down')} pkts" in line
    assert f"up trace lte.up (mean 6.000 Mbit/s), buffer {p.trace_queue('up')} pkts" in line
    window = ProbeMeasure().trace_window(p)
    rep = ProbeReport("uml", "virtual", "7.3.4", ["cubic"], "ovs", p.model_dump(), "cubic",
                      links=traced_links(p), trace_window=window.model_dump())
    text = rep.text()
    assert f"30 s, mean 10.8 Mbit/s, 1-s bins 0 to 12 Mbit/s; buffer {p.trace_queue('down')} pkts" in text
    assert "outages down     1, 3.001 s in all, longest 3.001 s; 4-7.001 s (no delivery opportunity for over " \
           "200 ms" in text
    assert "outages up       none" in text
    assert "trace replay     lte.down, the whole trace: 0-30 s (30 s), after 1 s of warm-up" in text
    untraced = PathSpec(rtt_ms=100, loss_pct=1, rate_mbit=10)
    assert describe_path(untraced) == f"rtt 100.0 ms, rate 10.0 Mbit/s, loss 1.0 % per direction, queue " \
                                      f"{untraced.queue()} pkts"


# --- loss against the buffer's drops --------------------------------------------------

def _task(p: PathSpec, up: dict) -> dict:
    samples = [(k * 100, k * 100 * FRAME_BYTES, k * 100) for k in range(320)]
    return {"ping": {"transmitted": 20, "received": 20, "min_ms": 100.0},
            "bulk": {"client": {"bytes": 1, "seconds": 31.5}, "samples": []},
            "trace": {"bin_ms": 100, "changes": 10, "late_max_ns": 0, "errors": [], "replay_from_ms": 29_000,
                      "window": ProbeMeasure().trace_window(p).model_dump(),
                      "drops": {"down": {"buffer": 5, "netem": 0}, "up": {"buffer": 0, "netem": 0}},
                      "samples": {"down": samples}},
            "loss_down": {"sent": 4000, "received": 4000, "buffer_drops": 0, "netem_drops": 0, "interval_ms": 2.0},
            "loss_up": up}


def test_a_traced_links_buffer_drops_are_not_the_paths_loss(tmp_path):
    """issue 37: 'loss up' read 37 % on a 0 %-loss path, the traced link's
    buffer overflowing counted as loss (the lab: 1668 of 4000 probes)."""
    p = _traced_path(tmp_path)
    up = {"sent": 4000, "received": 2332, "buffer_drops": 1668, "netem_drops": 0, "interval_ms": 2.0}
    rows = {c.quantity: c for c in evaluate(p, _task(p, up), ProbeMeasure())}
    assert rows["loss up"].measured == 0 and rows["loss up"].ok
    assert "the traced link's buffer 1668 (a queue overflow, not counted as loss)" in rows["loss up"].note
    lossy = p.model_copy(update={"loss_up_pct": 1.0})
    up = {"sent": 4000, "received": 2292, "buffer_drops": 1668, "netem_drops": 40, "interval_ms": 2.0}
    row = {c.quantity: c for c in evaluate(lossy, _task(lossy, up), ProbeMeasure())}["loss up"]
    assert row.measured == 1.0 and row.ok and "netem dropped 40 probes (the path's random loss" in row.note


def test_qdisc_drops_by_handle():
    text = ("qdisc netem 1: root refcnt 2 limit 15 delay 50ms\n Sent 9 bytes 3 pkt (dropped 3905, overlimits 0 "
            "requeues 0) \n backlog 0b 0p requeues 0\nqdisc htb 10: parent 1:1 r2q 10 default 0x1\n Sent 9 bytes 3 "
            "pkt (dropped 12, overlimits 27 requeues 0) \nqdisc pfifo 11: parent 10:1 limit 3p\n Sent 9 bytes 3 pkt "
            "(dropped 12, overlimits 0 requeues 0) \n")
    assert parse_qdisc_drops(text) == {"1:": ("netem", 3905), "10:": ("htb", 12), "11:": ("pfifo", 12)}


def test_loss_probes_are_paced_below_a_slow_traced_link(tmp_path):
    slow = PathSpec(rtt_ms=100, loss_pct=0, trace_up=_write(tmp_path, "s.up", range(30, 30_001, 30)))
    m = ProbeMeasure()
    assert m.loss_interval(slow, "down") == 2.0  # untraced: as asked
    interval = m.loss_interval(slow, "up")
    assert 142 * 8 / interval / 1e3 <= 0.5 * Trace.model_validate(slow.trace_up).mean_rate_bps() / 1e6 * 1514 / 1500


# --- the trace check's window ----------------------------------------------------------

def test_the_whole_trace_is_replayed_by_default_and_a_window_on_request(tmp_path):
    p = _traced_path(tmp_path)
    whole = ProbeMeasure().trace_window(p)
    assert (whole.start_ms, whole.end_ms, whole.whole, whole.replay_from_ms) == (0, 30_000, True, 29_000)
    assert whole.bulk_seconds() == 31.5  # warm-up, the 30 s, tail: not the first ~9.5 s only
    part = ProbeMeasure(trace_window_s=(12, 17)).trace_window(p)
    assert (part.replay_from_ms, part.bulk_seconds(), part.whole) == (11_000, 6.5, False)
    with pytest.raises(ValueError, match=r"--trace-window.*<= 30"):
        ProbeMeasure(trace_window_s=(12, 40)).trace_window(p)
    with pytest.raises(ValueError, match="trace_window_s"):
        ProbeRequest(path=p, measure={"trace_window_s": (5, 5)})
    with pytest.raises(ValueError, match=r"bulk_seconds \(--bulk-seconds\).*--trace-window"):
        probe_measure(p, {"bulk_seconds": 5})
    assert probe_measure(PathSpec(), {"bulk_seconds": 5}).bulk_seconds == 5


def test_the_replay_starts_at_the_traces_offset():
    t = Trace.from_times([5, 10, 10, 20, 30, 40], name="t")
    segs = t.segments()
    ev = list(itertools.islice(rate_events(t, 1_000, offset_ms=25), 3))
    inside = next(s for s in segs if s.start_ms < 25 <= s.end_ms)
    assert ev[0] == (1_000, inside.frame_rate_Bps())  # the segment holding 25 ms, at t0
    assert ev[1][0] == 1_000 + (inside.end_ms - 25) * 10**6
    assert list(itertools.islice(rate_events(t, 0, offset_ms=40 + 25), 3)) == \
        list(itertools.islice(rate_events(t, 0, offset_ms=25), 3))


def test_the_check_compares_the_replayed_window_and_leaves_out_ack_outages():
    # a replay from the trace's 29th second: bins at t0 + 1 s are the trace's first 100 ms
    samples, b, n = [], 0, 0
    for k in range(0, 320):
        samples.append((k * 100, b, n))
        ms = (29_000 + k * 100)
        pk = STEADY.opportunities_between(ms, ms + 100) if not (6000 < ms % 10_000 <= 7000) else 0
        b, n = b + pk * FRAME_BYTES, n + pk
    up = Trace.from_times([t for t in range(1, 10_001) if not 6000 < t <= 7000], name="up")
    c = trace_check("down", STEADY, samples, 100, 1.0, 11.0, offset_ms=9_000, ack_trace=up)
    assert c.ok and c.measured == 0.0 and "0-10 s of the trace" in c.note
    assert "bins during an outage of up (the transfer's ACKs) left out" in c.note
    starved = trace_check("down", STEADY, samples, 100, 1.0, 11.0, offset_ms=9_000)
    assert not starved.ok and math.isclose(starved.measured, 10.0, abs_tol=0.2)
