"""Capacity traces (spec/trace.py): mahimahi's format, checked before
anything starts, and the rate segments the lab replays."""

import pytest

from tortoiselab.spec import idform
from tortoiselab.spec.pathspec import PathError, PathSpec, parse_path
from tortoiselab.spec.trace import Trace, TraceError, parse_mahimahi, rate_segments


def test_parse_a_trace_with_repeated_milliseconds():
    assert parse_mahimahi("0\n0\n5\n12\n12\n12\n20\n") == (0, 0, 5, 12, 12, 12, 20)
    assert parse_mahimahi("3\r\n7") == (3, 7)  # CRLF and no final newline


@pytest.mark.parametrize("text,words", [
    ("", "empty"),
    ("\n", "line 1: empty line"),
    ("1\n\n3\n", "line 2: empty line"),
    ("1\n2\nabc\n", "line 3: not a whole number"),
    ("1\n-2\n", "line 2: not a whole number"),
    ("1.5\n", "line 1: not a whole number"),
    ("1\n5\n4\n", "line 3: a timestamp smaller than line 2's"),
    ("0\n0\n", "line 2: the trace lasts no time"),
])
def test_bad_traces_name_the_line(text, words):
    with pytest.raises(TraceError, match=words):
        parse_mahimahi(text)


def test_looping_counts_as_mahimahi_loops():
    t = Trace.from_times([0, 0, 5, 10])  # period 10 ms; the opportunities at 0 are at 10, 20, ... too
    assert t.opportunities_between(0, 10) == 3  # 0, 0, 5
    assert t.opportunities_between(0, 11) == 6  # + 10 (the last line) + the two at 10 of the next loop
    # [10, 30): 10 (line 4), 10, 10 (loop 1's zeros), 15, 20 (loop 1's last), 20, 20 (loop 2's zeros), 25
    assert t.opportunities_between(10, 30) == 8
    assert sum(t.bin_bytes(10, 3)) == t.opportunities_between(0, 30) * 1500


def test_segments_carry_every_opportunity_and_no_rate_is_zero():
    times = (0, 1, 1, 2, 40, 41, 95, 100)
    segs = rate_segments(times, 10)
    assert sum(s.packets for s in segs) == len(times)
    assert segs[0].start_ms == 0 and segs[-1].end_ms == 100
    assert all(b.start_ms == a.end_ms for a, b in zip(segs, segs[1:]))
    assert all(s.end_ms - s.start_ms >= 10 and s.packets >= 1 for s in segs)


def test_a_path_takes_a_trace_file_and_names_the_field(tmp_path):
    good = tmp_path / "ok.down"
    good.write_text("".join(f"{i}\n" for i in range(1, 101)))  # one packet per ms: 12 Mbit/s
    p = PathSpec(rtt_ms=50, trace_down=str(good))
    assert p.trace_down.name == "ok.down" and p.trace_down.mean_rate_bps() == pytest.approx(12e6)
    back = PathSpec.model_validate_json(p.model_dump_json())  # as the guest reads a request
    assert back.trace_down.times_ms == p.trace_down.times_ms
    bad = tmp_path / "bad.up"
    bad.write_text("1\n2\nx\n")
    with pytest.raises(PathError, match=r"path\.trace_up: .*bad.up: line 3: not a whole number") as bad_line:
        parse_path({"trace_up": str(bad)})
    assert "'x'" not in str(bad_line.value)  # the file is named, its content never quoted
    with pytest.raises(PathError, match=r"path\.trace_down: .*no trace file"):
        parse_path({"trace_down": str(tmp_path / "missing")})
    good.write_text("1\n2\n")  # changed after the run was set up
    with pytest.raises(ValueError, match="changed since"):
        PathSpec.model_validate_json(p.model_dump_json())


def test_a_path_without_a_trace_dumps_as_before():
    """In the id form (spec/idform.py: what run ids hash) a path without a
    trace is what it was before traces existed."""
    assert "trace_down" not in idform.path_form(PathSpec().model_dump())
    assert PathSpec().model_dump()["trace_down"] is None  # the model itself dumps every field


def test_trace_queue_is_time_at_the_mean_rate(tmp_path):
    f = tmp_path / "t"
    f.write_text("".join(f"{i}\n" for i in range(1, 1001)))  # 1 packet/ms
    p = PathSpec(rtt_ms=100, trace_down=str(f), trace_queue_ms=500)
    assert p.trace_queue("down") == 500
    assert PathSpec(rtt_ms=100, trace_down=str(f)).trace_queue("down") == 100  # one BDP
