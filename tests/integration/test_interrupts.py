"""SIGINT to the runner's process group, or SIGTERM to the runner, in the
middle of a batch (--batch 4) once its first run is stored (issue 35 item
7, docs/faults.md "Interrupts"): the runner exits within seconds with 130 or
143, says which runs' lab it ended and which runs it stored, the stored runs
are whole and in runs.parquet, no work folder and no lab process is left
(checked by the recorded ids only: the lab guard's group from uml.pgid and
the UML kernel's own group, the guard's child), and a rerun does the rest.

Before the fix the batch went on to its end (5-18 s), then the runner
printed "interrupted; the lab was stopped" and wrote no runs.parquet."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import TORTOISE, experiment_yaml, group_alive, write_yaml
from tortoiselab.host import store

pytestmark = pytest.mark.lab

EXP = experiment_yaml("tiny", {"name": "stopper", "repetitions": 4, "path.loss_pct": 1})
RUN_ID = "[0-9a-f]" * 12
STOP_S = 6.0  # from the signal to the runner's exit (0.7 s measured on an idle 2-core machine)


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _argv(f: Path, results: Path) -> list[str]:
    return [*TORTOISE, "run", str(f), "--results", str(results), "--backend", "uml", "--clock", "virtual",
            "--batch", "4"]


def _lab_groups(exp_dir: Path, timeout_s: float = 600) -> tuple[int, int]:
    """The batch's lab as recorded: the guard's process group (uml.pgid)
    and the UML kernel's own (the guard's child, a group of its own)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pg = sorted(exp_dir.glob(".*.tmp-*-boot/lab/uml.pgid")) if exp_dir.exists() else []
        text = pg[0].read_text().strip() if pg else ""
        if text:
            guard = int(text)
            kids = Path(f"/proc/{guard}/task/{guard}/children")
            child = kids.read_text().split() if kids.exists() else []
            if child:
                return guard, int(child[0])
        time.sleep(0.02)
    raise AssertionError(f"no lab started in {exp_dir} within {timeout_s} s")


def _live_members(pgid: int) -> list[str]:
    """The processes of a process group that are not dead (zombies are)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()  # state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            out.append(text[:text.rindex(")") + 1])
    return out


def _wait_for_first_run(exp_dir: Path, proc: subprocess.Popen, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        if list(exp_dir.glob(RUN_ID)):
            return
        time.sleep(0.02)
    raise AssertionError(f"no run stored in {exp_dir} within {timeout_s} s (runner exit {proc.poll()})")


@pytest.mark.parametrize("how", ["SIGINT to the group", "SIGTERM to the runner"])
def test_a_signal_mid_batch_stops_promptly_and_truthfully(tmp_path, lab_kernel, how):
    f = write_yaml(tmp_path, EXP, "stopper.yaml")
    results = tmp_path / "results"
    exp_dir = results / "stopper"
    # a session of its own: the group's SIGINT reaches the runner, not pytest; and SIGINT at its
    # default, as a terminal starts a command (a script's background job, CI's maybe, inherits it
    # ignored, and Python then keeps ignoring it, as POSIX asks)
    proc = subprocess.Popen(_argv(f, results), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_sigint_default)
    try:
        guard, uml = _lab_groups(exp_dir)
        _wait_for_first_run(exp_dir, proc)
        t0 = time.monotonic()
        if how.startswith("SIGINT"):
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=120)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    name, code = ("SIGINT", 130) if how.startswith("SIGINT") else ("SIGTERM", 143)
    assert proc.returncode == code, err[-3000:]
    assert took < STOP_S, f"the runner took {took:.1f} s to stop after {name}"
    assert "Traceback" not in err, err[-3000:]
    # what it says is what happened
    m = re.search(rf"tortoise: stopped by {name}; ended the lab of (\d+) runs? under way \(([0-9a-f, ]+)\): not "
                  r"stored, still pending; stored (\d+) runs? in this invocation \(([0-9a-f, ]+)\); runs.parquet: "
                  r"(\d+) of 4 runs complete; run the same command again to do the rest", err)
    assert m, err[-3000:]
    ended, stored_said = set(m.group(2).split(", ")), set(m.group(4).split(", "))
    stored = {d.name for d in store.run_dirs(exp_dir)}
    assert stored_said == stored and len(stored) == int(m.group(3)) == int(m.group(5)) >= 1
    assert len(ended) == int(m.group(1)) and ended.isdisjoint(stored) and len(ended | stored) == 4
    # the stored runs whole, and runs.parquet holds exactly them
    assert all(st.record is not None and st.record.ok for st in store.read_records(exp_dir))
    df, _ = store.read_table(exp_dir)
    assert set(df["run_id"]) == stored and len(df) == len(stored)
    assert not list(exp_dir.glob(".*.tmp-*")), "a work folder was left behind"
    # no lab process left at the runner's exit: the recorded groups only (the
    # dead wait a moment for init to reap them: the guard that was their parent is gone)
    assert _live_members(guard) == [] and _live_members(uml) == [], (guard, uml)
    deadline = time.monotonic() + 5
    while (group_alive(guard) or group_alive(uml)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not group_alive(guard) and not group_alive(uml), (guard, uml)
    # resume does the rest, the stored runs untouched
    kept = {d.name: (d / "run.json").stat().st_mtime_ns for d in store.run_dirs(exp_dir)}
    p = subprocess.run(_argv(f, results), capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    after = {d.name: (d / "run.json").stat().st_mtime_ns for d in store.run_dirs(exp_dir)}
    assert len(after) == 4 and all(after[r] == t for r, t in kept.items())
    df, _ = store.read_table(exp_dir)
    assert len(df) == 4 and df["ok"].all()
    assert not list(exp_dir.glob(".*.tmp-*"))


def test_sigterm_with_batches_queued_stops_within_seconds(tmp_path, lab_kernel):
    """More batches than jobs (the Chromium grid: 704 runs not started):
    the batches still queued are cancelled and the runner exits within
    seconds. Before (issue 50) it exited 143 only after the wind-down's
    60 s: it waited for the cancelled batches, which never run."""
    f = write_yaml(tmp_path, EXP, "stopper.yaml")
    results = tmp_path / "results"
    argv = [*_argv(f, results)[:-1], "1", "--jobs", "1"]  # --batch 1: four batches, one at a time
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _lab_groups(results / "stopper")
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=120)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143 and "Traceback" not in err, err[-3000:]
    assert took < STOP_S, f"the runner took {took:.1f} s to stop after SIGTERM"
    assert re.search(r"tortoise: stopped by SIGTERM; ended the lab of 1 run under way \([0-9a-f]+\): not stored, "
                     r"still pending; 3 pending runs not started; stored 0 runs", err), err[-3000:]
