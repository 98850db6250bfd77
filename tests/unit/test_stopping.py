"""Stopping the runner (host/stopping.py, issue 35 item 7): a lab's wait
notices the stop event within STOP_POLL_S and its own process group is
ended (a real `sleep`, in a session of its own; a foreign one survives);
a batch keeps what its lab finished and names the rest; what the CLI says
and the exit code. The whole path with the real lab:
tests/integration/test_interrupts.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import experiment_yaml, group_alive
from tortoiselab.host import backends, runner, stopping
from tortoiselab.spec.experiment import expand, load


def _sleep() -> subprocess.Popen:
    return subprocess.Popen(["sleep", "60"], stdin=subprocess.PIPE, start_new_session=True)


def _set_later(stop: threading.Event, after_s: float) -> None:
    threading.Timer(after_s, stop.set).start()


def test_a_lab_wait_ends_its_own_group_soon_after_stop_and_nothing_else():
    lab, foreign = _sleep(), _sleep()
    try:
        stop = threading.Event()
        _set_later(stop, 0.3)
        t0 = time.monotonic()
        with pytest.raises(stopping.LabInterrupted):
            backends._wait_or_kill(lab, 60, stop)
        assert time.monotonic() - t0 < 0.3 + stopping.STOP_POLL_S + 1.0
        assert lab.poll() is not None and not group_alive(lab.pid)
        assert foreign.poll() is None and group_alive(foreign.pid)  # another group: untouched
    finally:
        for p in (lab, foreign):
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
            p.wait()


def test_without_stop_a_wait_is_the_plain_wait():
    p = subprocess.Popen(["sleep", "0.1"])
    stopping.wait_unless_stopped(p, 5, None)
    assert p.returncode == 0
    q = subprocess.Popen(["sleep", "0.1"])
    stopping.wait_unless_stopped(q, 5, threading.Event())  # never set: waits to the end
    assert q.returncode == 0
    r = _sleep()
    try:
        with pytest.raises(subprocess.TimeoutExpired):  # the watchdog still applies
            stopping.wait_unless_stopped(r, 0.3, threading.Event())
    finally:
        os.kill(r.pid, signal.SIGKILL)
        r.wait()


def test_a_lab_is_not_started_once_the_runner_is_stopping(tmp_path):
    stop = threading.Event()
    stop.set()
    with pytest.raises(stopping.LabInterrupted):
        backends.run_task(backends.BackendInfo("uml", "virtual", "/k/linux"), None, tmp_path / "w", stop=stop)
    assert not (tmp_path / "w").exists()


EXP = experiment_yaml("unit", {"name": "stopping", "repetitions": 4})


def test_a_stopped_batch_stores_what_its_lab_finished_and_names_the_rest(tmp_path, monkeypatch):
    """The guest writes load-000/result.json, then the runner is stopped
    during the second load: the first run is stored, the others are
    named, nothing else is left."""
    f = tmp_path / "e.yaml"
    f.write_text(EXP)
    runs = expand(load(f))
    exp_dir = tmp_path / "results" / "stopping"
    exp_dir.mkdir(parents=True)
    stop = threading.Event()

    def lab(info, req, work: Path, timeout_s: float, stop=None) -> dict:
        work.mkdir(parents=True)
        (work / "boot.json").write_text(json.dumps({"kernel_release": "x", "uptime_start_s": 1.0, "switch": "ovs"}))
        (work / "load-000").mkdir()
        (work / "load-000" / "result.json").write_text(json.dumps(
            {"index": 0, "label": req.loads[0].label, "error": "not a real lab", "sim_set_up_s": 2.0,
             "sim_end_s": 3.0}))
        (work / "load-001").mkdir()  # the second load under way
        _set_later(stop, 0.7)  # after the runner has seen (and stored) the first load
        while not stop.wait(stopping.STOP_POLL_S):
            pass
        raise stopping.LabInterrupted("the runner is being stopped (SIGINT or SIGTERM): the lab was ended")

    monkeypatch.setattr(backends, "run_task", lab)
    seen = []
    with pytest.raises(stopping.RunInterrupted) as exc:
        runner.run_batch(runs, exp_dir, backends.BackendInfo("uml", "virtual", "/k/linux"), tmp_path, tmp_path, {},
                         stop=stop, on_stored=lambda r: seen.append(r["run_id"]))
    assert seen == [runs[0].run_id] and [d.name for d in exp_dir.iterdir()] == [runs[0].run_id]
    assert exc.value.run_ids == [r.run_id for r in runs[1:]]


def test_what_the_runner_says_when_stopped():
    stored = [{"run_id": "aaaaaaaaaaaa", "ok": True}, {"run_id": "bbbbbbbbbbbb", "ok": False}]
    assert stopping.stop_message("SIGTERM", ["cccccccccccc", "dddddddddddd"], stored, 3, 5, 9, "runs.parquet") == (
        "stopped by SIGTERM; ended the lab of 2 runs under way (cccccccccccc, dddddddddddd): not stored, still "
        "pending; 3 pending runs not started; stored 2 runs in this invocation (aaaaaaaaaaaa, bbbbbbbbbbbb; "
        "failed: bbbbbbbbbbbb); runs.parquet: 5 of 9 runs complete; run the same command again to do the rest")
    assert stopping.stop_message("SIGINT", [], [], 0, 0, 4, "runs.parquet", ["ResultsFull: results: no space"]) == (
        "stopped by SIGINT; no lab was under way; stored 0 runs in this invocation; runs.parquet: 0 of 4 runs "
        "complete; error: ResultsFull: results: no space; run the same command again to do the rest")


def test_exit_codes_name_the_signal():
    assert stopping.interrupted(KeyboardInterrupt()) == ("interrupted by SIGINT", 130)
    assert stopping.interrupted(KeyboardInterrupt("SIGTERM")) == ("interrupted by SIGTERM", 143)
    assert stopping.interrupted(stopping.Stopped("stopped by SIGTERM; ...", "SIGTERM")) == (
        "stopped by SIGTERM; ...", 143)


def test_the_wind_down_does_not_wait_for_batches_it_cancelled():
    """Batches queued behind the running ones are cancelled, never started:
    the wind-down ends as soon as the running ones have ended their labs.
    Before (issue 50, SIGTERM during the Chromium grid: 704 runs not
    started) it waited its whole limit (60 s): concurrent.futures.wait
    never counts a future cancelled in the queue as done."""
    from concurrent.futures import ThreadPoolExecutor

    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=2)

    def batch(i: int) -> int:
        stop.wait(30)  # a lab that ends once the runner stops
        if i < 2:
            raise stopping.RunInterrupted(f"run {i}: interrupted", [f"run{i}"])
        return i

    futs = [pool.submit(batch, i) for i in range(10)]
    t0 = time.monotonic()
    ended, errors = stopping.wind_down(pool, futs, stop, timeout_s=10)
    took = time.monotonic() - t0
    pool.shutdown(wait=True)
    assert took < 2, f"the wind-down took {took:.1f} s"
    assert ended == ["run0", "run1"] and errors == []
    assert sum(f.cancelled() for f in futs) == 8
