"""The executor's bookkeeping, on real processes in this namespace (no lab)."""

import errno
import sys
import time
from pathlib import Path

import pytest

from tortoiselab.guest.executor import CommandError, Executor


def test_capture_keeps_the_exit_code_and_both_streams(tmp_path):
    ex = Executor(log_path=tmp_path / "commands.log")
    rc, out, err = ex.capture([sys.executable, "-c", "import sys; print('o'); print('e', file=sys.stderr); sys.exit(3)"])
    assert (rc, out, err) == (3, "o\n", "e\n")
    assert ex.records[-1]["rc"] == 3 and ex.records[-1]["where"] == "root" and ex.records[-1]["stderr"] == "e\n"
    line = (tmp_path / "commands.log").read_text().splitlines()[0]
    assert "[root] rc=3 " in line and line.split()[1].startswith("+")


def test_capture_kills_at_the_timeout_and_says_so():
    rc, _out, err = Executor().capture([sys.executable, "-c", "import time; print('x', flush=True); time.sleep(30)"],
                                       timeout=1)
    assert rc != 0 and "timed out after 1 s" in err


def test_run_raises_with_the_command_and_its_stderr():
    ex = Executor()
    assert ex.run([sys.executable, "-c", "print('fine')"]) == "fine\n"
    with pytest.raises(CommandError, match=r"\[root\] .* exited 2: boom"):
        ex.run([sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(2)"])
    assert ex.run([sys.executable, "-c", "import sys; sys.exit(1)"], check=False) == ""


def test_record_logs_a_step_without_a_process():
    ex = Executor()
    ex.record("root", ["write", "/x", "1"], 0, "", "", 0.0)
    assert ex.records[0]["argv"] == ["write", "/x", "1"] and "stderr" not in ex.records[0]


def test_write_logs_the_setting_and_keeps_the_kernels_refusal(tmp_path):
    ex = Executor(log_path=tmp_path / "commands.log")
    f = tmp_path / "beta"
    assert ex.write(f, "0.800") == (0, "")
    assert f.read_text() == "0.800"
    assert ex.records[-1]["argv"] == ["write", str(f), "0.800"] and ex.records[-1]["rc"] == 0
    rc, err = ex.write(tmp_path / "no" / "such" / "parameter", "1")
    assert rc == errno.ENOENT and "No such file" in err
    assert ex.records[-1]["rc"] == errno.ENOENT and "No such file" in ex.records[-1]["stderr"]
    log = (tmp_path / "commands.log").read_text().splitlines()
    assert f"[root] rc=0 write {f} 0.800" in log[0] and f"rc={errno.ENOENT} write" in log[1]


def test_sysctl_paths_and_reads_in_this_process():
    from tortoiselab.guest.executor import netns_of, sysctl_path

    assert sysctl_path("net.ipv6.conf.s1-eth1.disable_ipv6") == Path("/proc/sys/net/ipv6/conf/s1-eth1/disable_ipv6")
    ex = Executor()
    with netns_of(None):  # the root namespace: nothing to enter
        got = ex.read_sysctls(["kernel.ostype", "net.ipv4.no_such_setting"])
    assert got == {"kernel.ostype": "Linux", "net.ipv4.no_such_setting": ""}
    assert ex.records == []  # reads are not steps of the lab


def _state(pid: int) -> str:
    """A process's state letter from /proc, or "gone"."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return "gone"


def test_run_to_file_in_the_root_namespace_runs_in_cwd_and_kills_its_group_at_the_timeout(tmp_path):
    ex = Executor()
    rc, timed_out = ex.run_to_file(["sh", "-c", "pwd; echo $$ > shell.pid; sleep 30 & echo $! > child.pid; wait"],
                                   None, tmp_path / "out.log", timeout=1, kill_wait=5, cwd=tmp_path)
    assert (rc, timed_out) == (-9, True)
    assert (tmp_path / "out.log").read_text().splitlines()[0] == str(tmp_path)
    child = int((tmp_path / "child.pid").read_text())
    # the shell's background child went with its group (a zombie until init reaps it at most); SIGKILL
    # takes effect when the child next runs, which on a loaded machine is not at once (seen: 'R')
    deadline = time.monotonic() + 5
    while (state := _state(child)) not in ("Z", "gone") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert state in ("Z", "gone")
    assert ex.records[-1]["where"] == "root" and "timed out after 1 s" in ex.records[-1]["stderr"]


def test_run_to_file_in_the_root_namespace_returns_the_exit_code(tmp_path):
    rc, timed_out = Executor().run_to_file([sys.executable, "-c", "print('hi'); raise SystemExit(3)"], None,
                                           tmp_path / "out.log", timeout=30)
    assert (rc, timed_out) == (3, False) and (tmp_path / "out.log").read_text() == "hi\n"


def test_run_feeds_stdin_and_logs_it(tmp_path):
    ex = Executor(log_path=tmp_path / "commands.log")
    out = ex.run([sys.executable, "-c", "import sys; print(sys.stdin.read().upper(), end='')"], stdin="a\nb\n")
    assert out == "A\nB\n" and ex.records[-1]["stdin"] == "a\nb\n"
    log = (tmp_path / "commands.log").read_text().splitlines()
    assert log[1:] == ["    < a", "    < b"]
    ex.run([sys.executable, "-c", "pass"])
    assert "stdin" not in ex.records[-1]
