"""The lab guard (tools/lab_guard.py): a lab's process group does not
outlive its runner, however the runner dies, nor its wall-clock budget."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import group_alive
from tortoiselab.project import PKG_DIR

GUARD = PKG_DIR / "tools" / "lab_guard.py"

# a "runner": starts the guard over a "lab" (a shell with a child of its
# own, as UML has helpers), prints the group id, then waits to be killed
RUNNER = f"""
import subprocess, sys, time
p = subprocess.Popen([sys.executable, "-S", {str(GUARD)!r}, sys.argv[1], "0", "/bin/sh", "-c", "sleep 600 & sleep 600"],
                     stdin=subprocess.PIPE, start_new_session=True)
print(p.pid, flush=True)
p.wait()  # reaps the guard, as host/backends.py does
time.sleep(600)
"""


def _alive(pgid: int) -> bool:
    return group_alive(pgid)  # a zombie waiting for pid 1 to reap it has ended


def _wait_gone(pgid: int, within_s: float) -> float | None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < within_s:
        if not _alive(pgid):
            return time.monotonic() - t0
        time.sleep(0.05)
    return None


def _start_runner(timeout_s: str) -> tuple[subprocess.Popen, int]:
    r = subprocess.Popen([sys.executable, "-c", RUNNER, timeout_s], stdout=subprocess.PIPE, text=True)
    pgid = int(r.stdout.readline())
    deadline = time.monotonic() + 10
    while not _alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return r, pgid


def test_the_lab_dies_within_5_s_of_a_sigkilled_runner():
    r, pgid = _start_runner("600")
    try:
        time.sleep(0.5)
        assert _alive(pgid)
        r.send_signal(signal.SIGKILL)
        r.wait()
        gone = _wait_gone(pgid, 5)
        assert gone is not None, "the lab's process group outlived its runner by 5 s"
    finally:
        if _alive(pgid):
            os.killpg(pgid, signal.SIGKILL)


def test_the_watchdog_lives_in_the_guard():
    r, pgid = _start_runner("1")
    try:
        assert _wait_gone(pgid, 6) is not None, "the guard's watchdog did not end the group"
        assert r.poll() is None  # the runner itself was not touched
    finally:
        r.kill()
        r.wait()
        if _alive(pgid):
            os.killpg(pgid, signal.SIGKILL)


def test_the_programs_status_comes_back():
    p = subprocess.Popen([sys.executable, "-S", str(GUARD), "60", "0", "/bin/sh", "-c", "sleep 0.3; exit 3"],
                         stdin=subprocess.PIPE, start_new_session=True)
    assert p.wait(timeout=30) == 3  # stdin held open: the runner is alive


def test_a_closed_pipe_means_the_runner_is_gone():
    p = subprocess.Popen([sys.executable, "-S", str(GUARD), "60", "0", "/bin/sh", "-c", "sleep 600"],
                         stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    p.stdin.close()
    assert p.wait(timeout=10) == -signal.SIGKILL and "the runner is gone" in p.stderr.read()
    assert _wait_gone(p.pid, 5) is not None


def test_it_refuses_to_run_outside_its_own_group():
    p = subprocess.run([sys.executable, "-S", str(GUARD), "60", "0", "/bin/true"], stdin=subprocess.PIPE,
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "own process group" in p.stderr
    assert Path(GUARD).exists()


def test_with_a_grace_period_the_program_may_clean_up_first(tmp_path):
    """Native backend: SIGTERM first, so the lab task's finally-blocks run."""
    mark = tmp_path / "cleaned"
    script = f"trap 'touch {mark}; exit 0' TERM; sleep 600 & wait"
    p = subprocess.Popen([sys.executable, "-S", str(GUARD), "60", "5", "/bin/sh", "-c", script],
                         stdin=subprocess.PIPE, start_new_session=True)
    time.sleep(0.5)
    p.stdin.close()
    p.wait(timeout=15)
    assert mark.exists() and _wait_gone(p.pid, 5) is not None


# a lab that leaves the guard's process group first thing, as the UML kernel
# does (it calls setsid() in its main): prints its pid, then waits
DETACHING_LAB = "import os, time; os.setsid(); print(os.getpid(), flush=True); time.sleep(600)"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purpose
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False  # reaped while we looked


def _start_detaching_lab():
    p = subprocess.Popen([sys.executable, "-S", str(GUARD), "60", "0", sys.executable, "-c", DETACHING_LAB],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
    lab = int(p.stdout.readline())
    assert os.getpgid(lab) == lab != p.pid  # it did leave the guard's group
    return p, lab


def _gone_within(pid: int, s: float) -> bool:
    deadline = time.monotonic() + s
    while time.monotonic() < deadline:
        if not _pid_alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_lab_in_a_session_of_its_own_dies_with_its_runner():
    p, lab = _start_detaching_lab()
    try:
        p.stdin.close()  # the runner is gone
        p.wait(timeout=10)
        assert _gone_within(lab, 5), "the detached lab outlived its runner"
    finally:
        if _pid_alive(lab):
            os.kill(lab, signal.SIGKILL)


def test_a_sigterm_to_the_guard_ends_a_detached_lab():
    """The host's kill_group sends SIGTERM to the guard's group."""
    p, lab = _start_detaching_lab()
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=10)
        assert _gone_within(lab, 5), "the detached lab outlived the guard"
    finally:
        p.stdin.close()
        if _pid_alive(lab):
            os.kill(lab, signal.SIGKILL)


def _guard_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("lab_guard", GUARD)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_guard_signals_programs_pid_only_while_it_is_program():
    """After the guard reaped PROGRAM, its pid may be another process's:
    that one's group is not signalled (a start time other than the one
    recorded at fork); a gone pid may still be PROGRAM's orphaned group."""
    g = _guard_module()
    stat = "4242 (sh) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 {start} 1 2 3"
    assert g.start_ticks(stat.format(start=777)) == 777
    assert g.start_ticks("4242 (a) b) c)) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 99 0") == 99
    assert g.still_ours(777, stat.format(start=777)) is True
    assert g.still_ours(777, stat.format(start=778)) is False
    assert g.still_ours(777, None) is True
    assert g.start_ticks(None) is None


def test_the_guard_reads_a_live_processes_start_as_the_host_does():
    from tortoiselab.host import procid

    g = _guard_module()
    p = subprocess.Popen(["sleep", "30"])
    try:
        assert g.start_ticks(g._stat(p.pid)) == procid.start_ticks(p.pid) is not None
    finally:
        p.kill()
        p.wait()
