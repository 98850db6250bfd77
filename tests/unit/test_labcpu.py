"""host/labcpu.py: the lab's host CPU over a load's interval, by group
(parsing of /proc and inotify events, and the arithmetic of the groups)."""

from __future__ import annotations

import os
import struct

import pytest

from tortoiselab.host import labcpu
from tortoiselab.host.labcpu import Proc, Snapshot, created_names, load_cpu, parse_proc, stat_fields

# a real line's shape (proc(5)); the name holds a space and a ')'
STAT = ("4242 (uml) (x)) S 4200 4242 4242 0 -1 4194560 10 0 0 0 "
        "150 30 7 3 20 0 1 0 987654 1024 100 18446744073709551615")


def test_stat_fields_follow_the_last_parenthesis():
    f = stat_fields(STAT)
    assert f[0] == "S" and f[4 - 3] == "4200" and f[22 - 3] == "987654"


def test_stat_fields_refuse_a_line_without_a_name():
    with pytest.raises(ValueError, match="stat"):
        stat_fields("no name here")


def test_parse_proc_sums_threads_and_converts_ended_children():
    p = parse_proc(4242, STAT, ["1000 5 2\n", "250 1 1\n"], ticks_per_s=100)
    assert p == Proc(pid=4242, start_ticks=987654, ppid=4200, cpu_ns=1250, ended_children_ns=(7 + 3) * 10**7)


def _snap(mark, kernel_ns, ended_ns, kids, read_after=0.005):
    return Snapshot(mark=mark, read_at=mark + read_after, kernel=Proc(1, 10, 0, kernel_ns, ended_ns),
                    children=tuple(Proc(pid, start, 1, ns, 0) for pid, start, ns in kids))


S = 10**9


def test_load_cpu_groups_by_when_a_process_appeared():
    snaps = [
        _snap(100.0, 1 * S, 0, [(2, 5, 1 * S)]),  # set_up: the standing process 2
        _snap(100.2, 2 * S, 0, [(2, 5, 1 * S), (3, 20, S // 2), (4, 21, S // 10)]),  # start: 3, 4 from the set-up
        # end: 2 +0.1 s, 3 +0.3 s, 4 ended (0.1 s before start + 0.05 s in the load), 5 new (0.2 s),
        # the loader (0.4 s) started and ended in between: the kernel's cutime grew by 0.15 + 0.4 s
        _snap(100.9, 2 * S + 7 * S // 10, 55 * S // 100, [(2, 5, 11 * S // 10), (3, 20, 8 * S // 10), (5, 30, 2 * S // 10)]),
    ]
    out = load_cpu(snaps, 100.0, 100.2, 100.9)
    assert out == {"kernel_s": 0.7, "ended_s": 0.45, "standing_s": 0.1, "set_up_s": 0.3, "new_s": 0.2,
                   "total_s": 1.75, "wall_s": 0.7, "lag_ms": [5.0, 5.0]}


def test_load_cpu_a_reused_pid_is_another_process():
    snaps = [_snap(1.0, 0, 0, []), _snap(2.0, 0, 0, [(7, 100, S)]),
             _snap(3.0, 0, S, [(7, 200, S // 4)])]  # 7 ended (1 s, all before start); a new 7 started
    out = load_cpu(snaps, 1.0, 2.0, 3.0)
    assert out["ended_s"] == 0.0 and out["new_s"] == 0.25 and out["set_up_s"] == 0.0


def test_load_cpu_says_why_when_a_mark_was_not_sampled():
    snaps = [_snap(1.0, 0, 0, []), _snap(3.0, 0, 0, [])]
    assert set(load_cpu(snaps, 1.0, 2.0, 3.0)) == {"why"}
    assert set(load_cpu(snaps, None, 1.0, 3.0)) == {"why"}


def test_load_cpu_refuses_a_restarted_kernel_process():
    a = _snap(1.0, 0, 0, [])
    b = Snapshot(2.0, 2.0, Proc(1, 11, 0, S, 0), ())
    assert "changed" in load_cpu([a, b], 1.0, 1.0, 2.0)["why"]


def test_at_mark_matches_to_the_microsecond_only():
    snaps = [_snap(5.000001, 0, 0, [])]
    assert labcpu.at_mark(snaps, 5.0) is snaps[0]
    assert labcpu.at_mark(snaps, 5.00001) is None
    assert labcpu.at_mark(snaps, None) is None


def _event(name: bytes, mask: int = labcpu.IN_CREATE, pad: int = 16) -> bytes:
    body = name + b"\0" * (pad - len(name))
    return struct.pack("iIII", 1, mask, 0, len(body)) + body


def test_created_names_reads_several_events_and_skips_others():
    buf = _event(b"1") + _event(b"2", mask=0x2) + _event(b"17")
    assert created_names(buf) == ["1", "17"]
    assert created_names(b"") == []


def test_children_of_and_read_proc_on_a_fake_proc(tmp_path):
    for pid, ppid in ((10, 1), (11, 10), (12, 10), (13, 11)):
        d = tmp_path / str(pid)
        (d / "task" / str(pid)).mkdir(parents=True)
        (d / "stat").write_text(f"{pid} (p) S {ppid} 0 0 0 -1 0 0 0 0 0 1 1 2 3 20 0 1 0 {pid * 10} 0 0 0")
        (d / "task" / str(pid) / "schedstat").write_text(f"{pid * 1000} 0 1\n")
    (tmp_path / "self").mkdir()  # not a pid: skipped
    assert sorted(labcpu.children_of(10, tmp_path)) == [11, 12]
    snap = labcpu.snapshot(10, 0.0, tmp_path)
    assert snap.kernel.cpu_ns == 10000 and {p.pid for p in snap.children} == {11, 12}
    assert labcpu.read_proc(99, tmp_path) is None


def test_the_sampler_stops_at_once(tmp_path):
    """The runner leaves a batch only when the sampler's thread has ended:
    its select is woken by the stop, not left to its timeout (0.2 s, every
    time: docs/speed.md). A stand-in for the lab: a process with one child,
    as lab_guard.py has the UML kernel."""
    import subprocess
    import sys
    import time

    guard = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; subprocess.run(['sleep', '30'])"],
                             stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while len(labcpu.children_of(guard.pid)) != 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        (tmp_path / "uml.pgid").write_text(str(guard.pid))
        (tmp_path / labcpu.WALL_DIR).mkdir()
        took = []
        for k in range(5):
            with labcpu.MarkSampler(tmp_path) as s:
                i = 0
                while not s.snaps and time.monotonic() < deadline:  # marks until one is read: the thread waits
                    i += 1
                    (tmp_path / labcpu.WALL_DIR / f"m{k}-{i}").touch()
                    time.sleep(0.02)
                t0 = time.monotonic()
            took.append(time.monotonic() - t0)
            assert s.why is None and s.snaps
        assert max(took) < 0.05, took
    finally:
        for pid in labcpu.children_of(guard.pid):
            os.kill(pid, 9)
        guard.kill()
        guard.wait()
