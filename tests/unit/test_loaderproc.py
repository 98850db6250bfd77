"""Our loader as one process, each load run in it (client/loadserver.py),
and its guest side (guest/loaderproc.py), as real processes on the host; no
network: the loads here fail at their arguments or their CA file, block on
opening their log (a FIFO) or in a TLS handshake with a local listener that
never answers."""

import json
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from tortoiselab.client import loadserver
from tortoiselab.guest.executor import Executor
from tortoiselab.guest.loaderproc import MARK, LoaderProcess, LoaderProcessError


class ThisHost:
    """The interface of a Mininet host that LoaderProcess uses, for the test
    process's own namespace."""

    name = "here"

    def popen(self, argv, **kwargs):
        return subprocess.Popen(argv, **kwargs)


def _outputs(tmp_path, i):
    return ["--har", str(tmp_path / f"p{i}.har"), "--summary", str(tmp_path / f"s{i}.json")]


def test_loads_run_in_one_process_and_report_their_exit(tmp_path):
    ex = Executor()
    with LoaderProcess(ex, ThisHost()) as lp:
        server = lp.proc
        for i in range(2):  # the second load runs in the same process
            log = tmp_path / f"loader-{i}.log"
            rc = lp.load(["https://www.lab.test/", *_outputs(tmp_path, i)], log, timeout=60)
            assert rc == 2  # --ca is missing: bad arguments, and both files still written
            assert "the following arguments are required: --ca" in log.read_text()
            assert json.loads((tmp_path / f"s{i}.json").read_text())["ok"] is False
            assert lp.proc is server
    assert server.poll() is not None  # stopped on the way out
    started = [r for r in ex.records if r["argv"][-1] == "tortoiselab.client.loadserver"]
    loads = [r for r in ex.records if r["argv"][0] == MARK]
    assert len(started) == 1 and len(loads) == 2
    assert loads[0]["argv"][1:4] == [sys.executable, "-m", "tortoiselab.client"]
    assert loads[0]["rc"] == 2 and "--ca" in loads[0]["stderr"]


def test_the_verbose_flag_applies_to_its_load_only(tmp_path):
    """main's logging.basicConfig is a no-op once the root logger has a
    handler: without the reset after each load, the first load's level
    would hold for every later one."""
    ca = tmp_path / "junk.pem"
    ca.write_text("not a certificate\n")  # the load starts (asyncio's loop logs at DEBUG), then fails
    with LoaderProcess(Executor(), ThisHost()) as lp:
        logs = []
        for i, verbose in enumerate((False, True, False)):
            log = tmp_path / f"loader-{i}.log"
            argv = ["https://www.lab.test/", "--ca", str(ca), *_outputs(tmp_path, i)] + (["-v"] if verbose else [])
            assert lp.load(argv, log, timeout=60) == 1
            logs.append(log.read_text())
    assert "cannot load the CA file" in logs[0]
    assert ["DEBUG" in text for text in logs] == [False, True, False], logs


def test_a_hung_load_is_killed_at_its_timeout_and_the_next_runs_in_a_new_process(tmp_path):
    fifo = tmp_path / "hangs.log"
    os.mkfifo(fifo)  # the process blocks opening its log: nobody reads
    ex = Executor()
    with LoaderProcess(ex, ThisHost()) as lp:
        first = lp.proc
        t0 = time.monotonic()
        assert lp.load(["https://www.lab.test/"], fifo, timeout=1.0) == -9
        assert time.monotonic() - t0 < 30
        assert first.returncode == -signal.SIGKILL
        assert lp.proc is not first and lp.proc.poll() is None  # ready before the next load
        assert "timed out after 1.0 s" in [r for r in ex.records if r["argv"][0] == MARK][-1]["stderr"]
        assert lp.load(["https://www.lab.test/"], tmp_path / "next.log", timeout=60) == 2


def test_a_load_that_raises_fails_alone_and_its_process_is_replaced(tmp_path, ca_pem):
    """SIGINT in the middle of a load (a TLS handshake with a listener that
    never answers) raises KeyboardInterrupt out of main."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    with LoaderProcess(Executor(), ThisHost()) as lp:
        first = lp.proc

        held = []

        def interrupt():
            conn, _ = listener.accept()  # the load is connected: it waits for the ServerHello
            held.append(conn)  # kept open until the load returns: SIGINT is the only thing that ends it
            time.sleep(0.3)
            os.kill(first.pid, signal.SIGINT)

        t = threading.Thread(target=interrupt)
        t.start()
        log = tmp_path / "raises.log"
        rc = lp.load([f"https://127.0.0.1:{port}/", "--ca", ca_pem, *_outputs(tmp_path, 0)], log, timeout=60)
        t.join()
        for conn in held:
            conn.close()
        assert rc == loadserver.EXIT_CRASH
        text = log.read_text()
        assert "KeyboardInterrupt" in text and "the loader process ends: the load raised" in text
        assert first.poll() is not None and lp.proc is not first and lp.proc.poll() is None
        assert lp.load(["https://www.lab.test/", *_outputs(tmp_path, 1)], tmp_path / "next.log", timeout=60) == 2
    listener.close()


def test_a_dead_process_is_started_again_for_the_next_load(tmp_path):
    with LoaderProcess(Executor(), ThisHost()) as lp:
        first = lp.proc
        first.kill()
        first.wait()
        assert lp.load(["https://www.lab.test/"], tmp_path / "x.log", timeout=60) == 2
        assert lp.proc is not first


def test_a_process_that_dies_during_a_load_fails_that_load_and_is_replaced(tmp_path):
    fifo = tmp_path / "hangs.log"
    os.mkfifo(fifo)
    with LoaderProcess(Executor(), ThisHost()) as lp:
        first = lp.proc
        killer = threading.Timer(0.5, first.kill)
        killer.start()
        with pytest.raises(LoaderProcessError, match="loader process exited"):
            lp.load(["https://www.lab.test/"], fifo, timeout=60)
        killer.join()
        assert lp.proc is not first and lp.proc.poll() is None


def test_bad_request_lines_are_refused_and_the_process_goes_on():
    proc = subprocess.Popen([sys.executable, "-m", "tortoiselab.client.loadserver"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate('{"argv": 1}\nnot json\n', timeout=60)
    replies = [json.loads(line) for line in out.splitlines()]
    assert replies[0] == {"ready": proc.pid}
    assert len(replies) == 3 and all("bad request" in r["error"] for r in replies[1:])
    assert proc.returncode == 0


@pytest.mark.parametrize("line,words", [
    ("not json", "not JSON"),
    ('{"argv": 1, "log": "x"}', "expected"),
    ('{"argv": []}', "expected"),
    ('["a"]', "expected"),
])
def test_parse_request_names_what_is_wrong(line, words):
    with pytest.raises(ValueError, match=words):
        loadserver.parse_request(line)


def test_parse_request():
    assert loadserver.parse_request('{"argv": ["u", 3], "log": "/l"}') == (["u", "3"], "/l")


def test_settle_undoes_what_a_load_left_behind():
    known = frozenset(loadserver.open_fds())
    base = loadserver.baseline()
    expected = random.random()
    random.setstate(base.random_state)
    root = logging.getLogger()
    handler = logging.StreamHandler()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    random.random()
    sock = socket.socket()
    fd = sock.detach()  # open, and nothing left to close it: as a leaked socket
    left = loadserver.settle(base, known)
    assert handler not in root.handlers and root.level == base.level
    assert random.random() == expected  # the generator is where it was before the load
    with pytest.raises(OSError):
        os.fstat(fd)
    assert any("random module" in x for x in left)
    assert any(x.startswith(f"fd {fd} (socket:") for x in left)


@pytest.mark.parametrize("rc,left,why", [
    (0, [], None),
    (1, ["fd 7 (socket:[1]) open (closed)"], None),
    (loadserver.EXIT_CRASH, [], "the load raised"),
    (0, ["threads still running: asyncio_0"], "threads still running: asyncio_0"),
])
def test_restart_reason(rc, left, why):
    assert loadserver.restart_reason(rc, left) == why
