"""The loader's fork server (client/forkserver.py) and its guest side
(guest/forkloader.py), as real processes on the host; no network: the loads
here fail at their arguments or block on opening their log (a FIFO)."""

import json
import os
import subprocess
import sys
import time

import pytest

from tortoiselab.guest.executor import Executor
from tortoiselab.guest.forkloader import ForkLoader, ForkLoaderError


class ThisHost:
    """The interface of a Mininet host that ForkLoader uses, for the test
    process's own namespace."""

    name = "here"

    def popen(self, argv, **kwargs):
        return subprocess.Popen(argv, **kwargs)


def test_a_load_runs_the_loaders_main_and_reports_its_exit(tmp_path):
    ex = Executor()
    with ForkLoader(ex, ThisHost()) as fork:
        for i in range(2):  # the second load forks from the same server
            log = tmp_path / f"loader-{i}.log"
            rc = fork.load(["https://www.lab.test/", "--har", str(tmp_path / f"p{i}.har"),
                            "--summary", str(tmp_path / f"s{i}.json")], log, timeout=60)
            assert rc == 2  # --ca is missing: bad arguments, and both files still written
            assert "the following arguments are required: --ca" in log.read_text()
            assert json.loads((tmp_path / f"s{i}.json").read_text())["ok"] is False
        server = fork.proc
    assert server.poll() is not None  # stopped on the way out
    forked = [r for r in ex.records if r["argv"][0] == "(forked)"]
    assert len(forked) == 2 and forked[0]["argv"][1:4] == [sys.executable, "-m", "tortoiselab.client"]
    assert forked[0]["rc"] == 2 and "--ca" in forked[0]["stderr"]


def test_a_hung_load_is_killed_at_its_timeout_and_the_next_one_runs(tmp_path):
    fifo = tmp_path / "hangs.log"
    os.mkfifo(fifo)  # the child blocks opening its log: nobody reads
    ex = Executor()
    with ForkLoader(ex, ThisHost()) as fork:
        t0 = time.monotonic()
        assert fork.load(["https://www.lab.test/"], fifo, timeout=1.0) == -9
        assert time.monotonic() - t0 < 20
        assert "timed out after 1.0 s" in ex.records[-1]["stderr"]
        assert fork.load(["https://www.lab.test/"], tmp_path / "next.log", timeout=60) == 2


def test_a_dead_server_is_started_again_for_the_next_load(tmp_path):
    with ForkLoader(Executor(), ThisHost()) as fork:
        first = fork.proc
        first.kill()
        first.wait()
        assert fork.load(["https://www.lab.test/"], tmp_path / "x.log", timeout=60) == 2
        assert fork.proc is not first


def test_a_server_that_dies_during_a_load_is_an_error_of_that_load(tmp_path):
    fifo = tmp_path / "hangs.log"
    os.mkfifo(fifo)
    fork = ForkLoader(Executor(), ThisHost())
    fork.start()
    try:
        proc = fork.proc
        proc.stdin.write(b'{"argv": [], "log": "%s"}\n' % str(fifo).encode())
        pid = fork._message(time.monotonic() + 30)["pid"]
        proc.kill()
        os.kill(pid, 9)
        with pytest.raises(ForkLoaderError, match="fork server exited"):
            fork._message(time.monotonic() + 30)
    finally:
        fork.stop()


def test_a_bad_request_line_is_refused_and_the_server_goes_on():
    proc = subprocess.Popen([sys.executable, "-m", "tortoiselab.client.forkserver"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate('{"argv": 1}\nnot json\n', timeout=60)
    replies = [json.loads(line) for line in out.splitlines()]
    assert len(replies) == 2 and all("bad request" in r["error"] for r in replies)
    assert proc.returncode == 0
