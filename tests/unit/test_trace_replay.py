"""Replaying a trace (guest/replay.py, guest/commands.py) and checking it
(analysis/fidelity.py trace_check), without a lab."""

import itertools
import struct

from tortoiselab.analysis.fidelity import trace_bins, trace_check
from tortoiselab.guest import commands as C
from tortoiselab.guest.replay import ReplayLink, TraceReplay, burst_ticks, htb_class_change, rate_events
from tortoiselab.spec.pathspec import PathSpec
from tortoiselab.spec.trace import Trace

TRACE = Trace.from_times([5, 10, 10, 20, 30, 40], name="t")  # period 40 ms


def test_a_traced_direction_is_netem_without_rate_and_an_htb_link(tmp_path):
    f = tmp_path / "t.down"
    f.write_text("".join(f"{i}\n" for i in range(1, 101)))
    p = PathSpec(rtt_ms=100, loss_pct=1, trace_down=str(f), trace_queue_ms=200)
    limit = str(p.trace_netem_limit_pkts("down"))
    assert C.netem("s2-eth1", p, 1.0, traced="down") == [
        "tc", "qdisc", "replace", "dev", "s2-eth1", "root", "handle", "1:", "netem", "limit", limit,
        "delay", "50ms", "loss", "random", "1%"]
    assert C.netem_seed("s2-eth1", p, 1.0, 7, "py", traced="down")[-2:] == ["--loss-pct", "1"]
    assert C.trace_link("s2-eth1", 1_514_000, 200) == [
        ["tc", "qdisc", "replace", "dev", "s2-eth1", "parent", "1:1", "handle", "10:", "htb", "default", "1"],
        ["tc", "class", "replace", "dev", "s2-eth1", "parent", "10:", "classid", "10:1", "htb", "rate",
         "12112000bit", "ceil", "12112000bit", "burst", "1514b", "cburst", "1514b", "quantum", "1514"],
        ["tc", "qdisc", "replace", "dev", "s2-eth1", "parent", "10:1", "handle", "11:", "pfifo", "limit", "200"]]
    assert C.trace_link("s2-eth1", 1_514_000, 200, new=False) == C.trace_link("s2-eth1", 1_514_000, 200)[1:]
    assert "rate" in C.netem("s2-eth1", p, 1.0)  # the untraced form is unchanged


def test_the_rate_change_message_is_an_htb_class_change():
    msg = htb_class_change(7, 2_500_000, seq=3)
    length, kind, flags, seq, _ = struct.unpack("=IHHII", msg[:16])
    assert (length, kind, flags, seq) == (len(msg), 40, 0x5, 3)  # RTM_NEWTCLASS, REQUEST|ACK, no CREATE
    _, ifindex, handle, parent, _ = struct.unpack("=BxxxiIII", msg[16:36])
    assert (ifindex, handle, parent) == (7, 0x00100001, 0x00100000)  # tc's 10:1 under 10:
    assert msg[36:44] == struct.pack("=HH", 8, 1) + b"htb\0"
    rate = struct.unpack("=I", msg[60:64])[0]  # after TCA_OPTIONS, TCA_HTB_PARMS: tc_ratespec.rate
    assert rate == 2_500_000
    assert burst_ticks(1514) == 10**9 >> 6  # one frame at 1514 B/s: one second


def test_rate_events_loop_the_trace_from_t0():
    ev = list(itertools.islice(rate_events(TRACE, 1_000), 2 * len(TRACE.segments())))
    period = TRACE.period_ms * 10**6
    segs = TRACE.segments()
    assert [t for t, _ in ev] == [1_000 + k * period + s.start_ms * 10**6 for k in (0, 1) for s in segs]
    assert [r for _, r in ev[:len(segs)]] == [s.frame_rate_Bps() for s in segs]


def test_each_link_keeps_its_own_events():
    other = Trace.from_times([7, 14], name="u")
    rep = TraceReplay(None, [ReplayLink("a", TRACE), ReplayLink("b", other)], 0.0, sample_ms=10)
    ev = list(itertools.islice(rep._events(), 40))
    assert {ln.dev for _, _, ln, r in ev if ln is not None and r == TRACE.segments()[0].frame_rate_Bps()} == {"a"}
    assert {ln.dev for _, _, ln, _ in ev if ln is not None} == {"a", "b"}
    assert [t for t, *_ in ev] == sorted(t for t, *_ in ev)
    assert sum(1 for _, _, ln, _ in ev if ln is None) >= 3  # the samples at 0, 10, 20 ms


def test_trace_check_compares_ip_bytes_per_bin():
    t = Trace.from_times(list(range(1, 1001)))  # 1 packet per ms: 100 per 100-ms bin
    exact = [(k * 100, k * 100 * 1514, k * 100) for k in range(21)]  # frames, counted with their header
    assert trace_bins(exact, 100)[0] == (0, 150_000)
    ok = trace_check("down", t, exact, 100, 1.0, 2.0)
    assert ok.ok and ok.measured == 0.0 and "10 bins" in ok.note
    short = [(ms, b * 9 // 10, p) for ms, b, p in exact]  # ~10 % fewer bytes
    bad = trace_check("down", t, short, 100, 1.0, 2.0)
    assert not bad.ok and bad.measured > 5
    assert not trace_check("down", t, exact[:5], 100, 1.0, 2.0).ok  # no bin after the first second
