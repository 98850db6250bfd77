"""A stale work folder signals only a lab provably ours (host/procid.py,
host/locks.clean_stale; docs/faults.md): a foreign process group it names
survives `clean_stale` and `tortoise clean`, whatever record the folder
holds (none, another boot's, another process's, garbage), while a group
recorded as the runner records a lab at launch is ended. Real folders and
real processes: each test starts its own `sleep` in a session of its own
and ends it by its own pid."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import TORTOISE, group_alive
from tortoiselab.host import procid
from tortoiselab.host.locks import PROC_RECORD, claim, clean_stale

RUN = "0123456789ab"


@pytest.fixture
def sleeper():
    """A process group of its own, foreign to any lab: ended by its pid afterwards."""
    p = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        yield p
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)


def _stale(exp_dir: Path, pid: int, rec: object | None = None, host: str | None = None) -> Path:
    """An interrupted run's work folder naming pid as its lab's group."""
    tmp = exp_dir / f".{RUN}.tmp-0000001-00001-boot"
    (tmp / "lab").mkdir(parents=True)
    (tmp / "lab" / "uml.pgid").write_text(str(pid))
    if rec is not None:
        (tmp / "lab" / PROC_RECORD).write_text(rec if isinstance(rec, str) else json.dumps(rec))
    if host is not None:
        with claim(exp_dir, RUN) as fh:
            fh.write(f"start {host} 4242 2026-01-01T00:00:00+00:00\ndone x\n")
    return tmp


def _gone(p: subprocess.Popen, timeout_s: float = 10) -> bool:
    try:
        p.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return False
    return not group_alive(p.pid)


def _tampered(pid: int) -> dict[str, object]:
    """Records of pid as a copied, kept or edited folder would hold them."""
    real = procid.record(pid)
    return {
        "no record (pgid only)": None,
        "another machine or boot": {**real, "boot_id": "00000000-1111-2222-3333-444444444444"},
        "a pid used again (other start)": {**real, "start": real["start"] - 1},
        "another command": {**real, "cmdline": ["python", "-S", "lab_guard.py", "umid=tl-x"]},
        "garbage": "{not json",
        "pid as a string": {**real, "pid": str(pid)},
        "pid 1": {**real, "pid": 1},
    }


KINDS = list(_tampered(os.getpid()))


@pytest.mark.parametrize("kind", KINDS)
def test_a_foreign_group_survives_clean_stale(tmp_path, sleeper, kind):
    exp_dir = tmp_path / "res" / "tiny"
    exp_dir.mkdir(parents=True)
    tmp = _stale(exp_dir, sleeper.pid, _tampered(sleeper.pid)[kind], host=socket.gethostname())
    done = clean_stale(exp_dir)
    time.sleep(0.2)
    assert sleeper.poll() is None and group_alive(sleeper.pid), f"{kind}: a foreign group was signalled"
    said = [ln for ln in done if "did not signal" in ln]
    assert len(said) == 1 and str(sleeper.pid) in said[0] and tmp.name in said[0], done
    assert not any(ln.startswith("killed") for ln in done)
    assert not tmp.exists()  # the folder itself is ours to remove


def test_a_record_from_another_host_is_not_signalled(tmp_path, sleeper):
    exp_dir = tmp_path / "tiny"
    exp_dir.mkdir()
    _stale(exp_dir, sleeper.pid, procid.record(sleeper.pid), host="elsewhere")
    done = clean_stale(exp_dir)
    assert sleeper.poll() is None and group_alive(sleeper.pid)
    assert any("ran on elsewhere, not here" in ln for ln in done), done


@pytest.mark.parametrize("kind", ["no record (pgid only)", "another machine or boot"])
def test_a_foreign_group_survives_tortoise_clean(tmp_path, sleeper, kind):
    """A folder copied out of another VM called like this one (the claim
    names this host) or kept across a reboot: `tortoise clean` kills nothing
    and says why."""
    res = tmp_path / "res"
    (res / "tiny").mkdir(parents=True)
    _stale(res / "tiny", sleeper.pid, _tampered(sleeper.pid)[kind], host=socket.gethostname())
    p = subprocess.run([*TORTOISE, "clean", "--results", str(res)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    time.sleep(0.2)
    assert sleeper.poll() is None and group_alive(sleeper.pid), p.stdout
    assert f"did not signal process group {sleeper.pid}" in p.stdout and "killed" not in p.stdout, p.stdout


LEADER = """
import subprocess, sys, time
child = subprocess.Popen(["sleep", "300"])  # in this process's group, as UML's helpers are in the lab's
print(child.pid, flush=True)
time.sleep(300)
"""


@pytest.fixture
def lab_like():
    """A group leader with a member, started as host/backends.py starts a
    lab (a session of its own); (leader, member pid). Ended by its pid."""
    p = subprocess.Popen([sys.executable, "-c", LEADER], start_new_session=True, stdout=subprocess.PIPE, text=True)
    member = int(p.stdout.readline())
    try:
        yield p, member
    finally:
        if group_alive(p.pid):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)


def _wait_gone(pgid: int, timeout_s: float = 10) -> bool:
    deadline = time.monotonic() + timeout_s
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not group_alive(pgid)


@pytest.fixture
def guard_lab():
    """start(work) -> (guard, member pid): a lab as host/backends.py starts
    one, under this installation's lab guard with HOME set to its work
    folder, and a member in its group. Ended by the guard's pid."""
    started = []

    def start(work: Path) -> tuple[subprocess.Popen, int]:
        p = subprocess.Popen([sys.executable, "-S", str(procid.LAB_GUARD), "300", "0", sys.executable, "-c", LEADER],
                             start_new_session=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "HOME": str(work)})
        started.append(p)
        return p, int(p.stdout.readline())

    yield start
    for p in started:
        if group_alive(p.pid):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)


def test_a_group_recorded_as_a_lab_is_killed(tmp_path, guard_lab):
    """Recorded as host/backends.py records a lab at launch (procid.record of
    the guard, the group's leader), and the live process the lab of that
    work folder: clean_stale ends the whole group."""
    exp_dir = tmp_path / "tiny"
    exp_dir.mkdir()
    p, member = guard_lab(Path(os.path.realpath(exp_dir)) / f".{RUN}.tmp-0000001-00001-boot" / "lab")
    _stale(exp_dir, p.pid, procid.record(p.pid))
    done = clean_stale(exp_dir)
    assert f"killed lab process group {p.pid} of .{RUN}.tmp-0000001-00001-boot" in done, done
    assert p.wait(timeout=10) == -signal.SIGKILL
    assert _wait_gone(p.pid), f"member {member} of the lab's group lives on"


def test_a_record_forged_from_proc_signals_nothing(tmp_path, lab_like, guard_lab):
    """The record is the folder's word: anyone can copy a foreign process's
    boot id, start time and command line out of /proc into it. Neither a
    process that is no lab guard nor the guard of another folder's lab is
    signalled, however exact the record."""
    exp_dir = tmp_path / "tiny"
    exp_dir.mkdir()
    foreign, member = lab_like
    _stale(exp_dir, foreign.pid, procid.record(foreign.pid))
    done = clean_stale(exp_dir)
    assert any(f"did not signal process group {foreign.pid}" in d and "is not a lab guard" in d for d in done), done
    assert foreign.poll() is None and group_alive(foreign.pid)
    other, _ = guard_lab(tmp_path / "elsewhere" / "lab")
    _stale(exp_dir, other.pid, procid.record(other.pid))
    done = clean_stale(exp_dir)
    assert any(f"did not signal process group {other.pid}" in d and "the lab of another folder" in d
               for d in done), done
    assert other.poll() is None and group_alive(other.pid)


def test_is_ours_says_what_it_found(sleeper):
    rec = procid.record(sleeper.pid)
    assert procid.is_ours(rec, group=True) == (True, "")
    ok, why = procid.is_ours({**rec, "start": rec["start"] + 5})
    assert not ok and why.startswith(f"pid {sleeper.pid} is another process now")
    ok, why = procid.is_ours({**rec, "boot_id": "x"})
    assert not ok and "another machine or boot" in why
    sleeper.kill()
    sleeper.wait()
    ok, why = procid.is_ours(rec)
    assert (ok, why) == (False, f"pid {sleeper.pid} no longer runs")
    assert procid.kill_group_if_ours(rec) == (False, f"pid {sleeper.pid} no longer runs")


def test_a_member_is_not_signalled_as_a_group(lab_like):
    """A record that names a member of a group rather than its leader (an
    edited folder naming a lab's helper): not a group to end."""
    p, member = lab_like
    ok, why = procid.kill_group_if_ours(procid.record(member))
    assert not ok and why == f"pid {member} no longer leads its process group (group {p.pid})"
    assert p.poll() is None and group_alive(p.pid)


# --- the scripts' recorded pids (scripts/procid.sh) ---------------------------------------

REPO = Path(__file__).resolve().parents[2]


def _sh(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f". {REPO / 'scripts' / 'procid.sh'}; {script}", "sh", *args],
                          capture_output=True, text=True, timeout=30)


def test_the_scripts_record_and_check_a_pid_as_the_host_does(tmp_path, sleeper):
    rec = _sh('proc_record "$1"', str(sleeper.pid))
    pid, start, boot, cmd = rec.stdout.split()
    assert (int(pid), int(start), boot) == (sleeper.pid, procid.start_ticks(sleeper.pid), procid.boot_id())
    assert cmd == hashlib.sha256(Path(f"/proc/{sleeper.pid}/cmdline").read_bytes()).hexdigest()[:16]
    f = tmp_path / "x.id"
    for text, rc, why in [
        (rec.stdout, 0, ""),
        (f"{pid} {start} {boot}\n", 0, ""),  # recorded before the command line was: the other two checked
        (f"{pid} {start} {boot} 0123456789abcdef\n", 1, f"pid {pid} runs another command line than the one "
                                                       "recorded"),
        (f"{pid} {int(start) + 1} {boot}\n", 1, f"pid {pid} is another process now"),
        (f"{pid} {start} 00000000-0000-0000-0000-000000000000\n", 1, "another machine or boot"),
        (f"1 {start} {boot}\n", 1, "not a pid record"),
        ("junk\n", 1, "not a pid record"),
    ]:
        f.write_text(text)
        p = _sh('proc_ours "$1"', str(f))
        assert p.returncode == rc and why in p.stderr, (text, p.stderr)
    assert sleeper.poll() is None


def test_vm_qemu_destroy_spares_a_foreign_pid_its_state_names(tmp_path, sleeper):
    """A state folder copied from another clone or kept across a reboot:
    its qemu.pid names a process of this machine that is no VM of ours."""
    (tmp_path / "scripts").mkdir()
    for name in ("vm-qemu.sh", "procid.sh"):
        (tmp_path / "scripts" / name).write_text((REPO / "scripts" / name).read_text())
    state = tmp_path / ".vagrant" / "qemu"
    state.mkdir(parents=True)
    (state / "qemu.pid").write_text(f"{sleeper.pid}\n")
    p = subprocess.run(["bash", str(tmp_path / "scripts" / "vm-qemu.sh"), "destroy"], capture_output=True,
                       text=True, timeout=60)
    time.sleep(0.2)
    assert sleeper.poll() is None, "a foreign process was signalled"
    assert p.returncode == 0 and f"did not signal pid {sleeper.pid}: no record" in p.stdout, p.stdout + p.stderr


def test_a_reaped_leaders_pid_is_signalled_only_while_no_other_process_has_it(sleeper):
    """host/backends.kill_group after the lab's leader was reaped: a process
    with that pid and another start time is not our lab's group."""
    started = procid.start_ticks(sleeper.pid)
    assert procid.group_may_be_ours(sleeper.pid, started) is True
    assert procid.group_may_be_ours(sleeper.pid, started - 1) is False  # the pid given anew
    sleeper.kill()
    sleeper.wait()
    assert procid.group_may_be_ours(sleeper.pid, started) is True  # gone: only its own group can hold the id


def test_kill_group_leaves_a_pid_given_anew_alone(sleeper):
    """A Popen whose recorded start is not the start of the process that has
    its pid now (as after the lab's leader was reaped and the pid reused):
    kill_group signals nothing."""
    from tortoiselab.host.backends import kill_group

    sleeper.tl_started = procid.start_ticks(sleeper.pid) - 1
    kill_group(sleeper)
    time.sleep(0.2)
    assert sleeper.poll() is None and group_alive(sleeper.pid)
    sleeper.tl_started += 1
    kill_group(sleeper)
    assert sleeper.poll() is not None
