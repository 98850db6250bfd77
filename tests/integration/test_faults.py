"""Fault injection (docs/faults.md): the runner killed with SIGKILL at
boot, in the middle of a page load and while it stores a run, then run
again; a results filesystem that fills up mid-run. Nothing completed is
lost or duplicated, no lab outlives its runner by more than 5 s, and no
work folder is left behind."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import TORTOISE, experiment_yaml, group_alive, host_state, write_yaml
from tortoiselab.host import store
from tortoiselab.host.runner import FAULT_PAUSE_ENV

pytestmark = pytest.mark.lab

EXP = experiment_yaml("tiny", {"name": "faults", "path.loss_pct": 1, "sweep.server.cc": ["cubic", "reno", "bbr"]})
GUEST_GONE_S = 5.0


def _start(f: Path, results: Path, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([*TORTOISE, "run", str(f), "--results", str(results), "--backend", "uml",
                             "--clock", "virtual"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


def _wait_for(exp_dir: Path, pattern: str, timeout_s: float = 600) -> Path:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        hits = sorted(exp_dir.glob(pattern)) if exp_dir.exists() else []
        if hits:
            return hits[0]
        time.sleep(0.05)
    raise AssertionError(f"nothing matched {pattern} in {exp_dir} within {timeout_s} s")


def _lab_pgid(work: Path, timeout_s: float = 30) -> int:
    """The lab's process group id from uml.pgid, once the runner has written
    it whole: the file appears (what _wait_for sees) a moment before its
    digits are in it (a fresh-clone CI read it empty under load)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        text = (work / "lab" / "uml.pgid").read_text()
        if text.strip().isdigit():
            return int(text)
        time.sleep(0.01)
    raise AssertionError(f"{work / 'lab' / 'uml.pgid'} held no process group id within {timeout_s} s")


def _kill_and_check_guest(proc: subprocess.Popen, work: Path) -> float:
    """SIGKILL the runner; the seconds its lab's process group lived on."""
    pgid = _lab_pgid(work)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    t0 = time.monotonic()
    while group_alive(pgid) and time.monotonic() - t0 < 30:
        time.sleep(0.05)
    lived = time.monotonic() - t0
    assert not group_alive(pgid), f"the lab's process group {pgid} outlived its runner by 30 s"
    return lived


def _completed(exp_dir: Path) -> dict[str, tuple]:
    return {d.name: tuple((f.name, f.stat().st_mtime_ns) for f in sorted(d.iterdir()))
            for d in store.run_dirs(exp_dir)}


def _resume_and_check(f: Path, results: Path, kept: dict) -> None:
    exp_dir = results / "faults"
    p = subprocess.run([*TORTOISE, "run", str(f), "--results", str(results), "--backend", "uml",
                        "--clock", "virtual"], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    after = _completed(exp_dir)
    assert len(after) == 3 and all(after[r] == files for r, files in kept.items())  # nothing lost or touched
    assert not list(exp_dir.glob(".*.tmp-*")), "a work folder was left behind"
    df, _ = store.read_table(exp_dir)
    assert len(df) == 3 and df["run_id"].is_unique and df["ok"].all()
    for claim in (exp_dir / ".claims").glob("*.lock"):  # each run done to the end exactly once
        lines = claim.read_text().splitlines()
        assert sum(ln.startswith("done ") for ln in lines) == 1, lines


@pytest.mark.parametrize("moment,pattern,env", [
    ("boot", ".*.tmp-*/lab/uml.pgid", {}),
    ("mid-load", ".*.tmp-*/lab/load-000/server.pcap", {}),
    ("storing", ".*.tmp-*/run.json", {FAULT_PAUSE_ENV: "20"}),
])
def test_sigkill_then_resume(tmp_path, lab_kernel, moment, pattern, env):
    before = host_state()
    f = write_yaml(tmp_path, EXP, "faults.yaml")
    results = tmp_path / "results"
    exp_dir = results / "faults"
    proc = _start(f, results, env)
    hit = _wait_for(exp_dir, pattern)
    work = next(p for p in hit.parents if p.name.startswith(".") and ".tmp-" in p.name)
    if moment == "storing":  # the lab is over by then: its group is gone already
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert (work / "run.json").exists() and not list(exp_dir.glob("[0-9a-f]" * 12))
    else:
        lived = _kill_and_check_guest(proc, work)
        assert lived < GUEST_GONE_S, f"the lab lived {lived:.1f} s after its runner was killed at {moment}"
    kept = _completed(exp_dir)
    _resume_and_check(f, results, kept)
    subprocess.run([*TORTOISE, "clean", "--results", str(results)], capture_output=True, text=True, check=True)
    assert host_state() == before


def test_a_lab_killed_from_outside_is_named_and_done_again(tmp_path, lab_kernel):
    """The lab kernel killed (SIGKILL) in the middle of a page load by
    someone else than the runner: the run is stored as failed naming the
    signal, the runner goes on; the next `tortoise run` moves it aside into
    .killed/ (kept) and does it again (issue 50: "the lab wrote no result",
    and a rerun did not redo it)."""
    f = write_yaml(tmp_path, experiment_yaml("tiny", {"name": "faults"}), "faults.yaml")
    results = tmp_path / "results"
    exp_dir = results / "faults"
    proc = _start(f, results)
    hit = _wait_for(exp_dir, ".*.tmp-*/lab/load-000/server.pcap")
    guard = int((hit.parent.parent / "uml.pgid").read_text())
    (kernel,) = [int(c) for c in Path(f"/proc/{guard}/task/{guard}/children").read_text().split()]
    os.kill(kernel, signal.SIGKILL)
    assert proc.wait(timeout=120) == 3, proc.stderr.read()[-2000:]  # a failed run (docs/running.md)
    (st,) = store.read_records(exp_dir)
    assert st.record.error.startswith("lab: the lab was ended by SIGKILL (signal 9) from outside the runner")
    p = subprocess.run([*TORTOISE, "run", str(f), "--results", str(results), "--backend", "uml",
                        "--clock", "virtual"], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    assert f"aside (kept) and redid it: {st.run_dir.name} (SIGKILL) -> {exp_dir / '.killed'}" in p.stdout
    (again,) = store.read_records(exp_dir)
    assert again.record.ok
    (kept,) = (exp_dir / ".killed").iterdir()
    assert store.read_record(kept).error == st.record.error
    assert not list(exp_dir.glob(".*.tmp-*"))


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs (root)")
@pytest.mark.parametrize("runs_room", [1.5, 0.5])
def test_a_full_results_filesystem_stops_the_runner_clearly(tmp_path, lab_kernel, runs_room):
    """The results folder on a filesystem that fills up after a run or two
    (or while the first is stored: room for the site and half a run):
    a clear error, every stored run whole, no work folder left, the lab's
    boot folder (.<id>.tmp-<tag>-boot) included (issue 50: left behind when
    the space ran out while a run was stored rather than in the lab)."""
    f = write_yaml(tmp_path, EXP, "faults.yaml")
    probe = tmp_path / "sizing"
    subprocess.run([*TORTOISE, "run", str(f), "--results", str(probe), "--backend", "uml", "--clock", "virtual",
                    "--limit", "1"], capture_output=True, text=True, timeout=900, check=True)
    lab_bytes = sum(p.stat().st_size for p in (probe / "faults" / ".lab").rglob("*") if p.is_file())
    run_bytes = sum(p.stat().st_size for d in store.run_dirs(probe / "faults") for p in d.rglob("*"))
    small = tmp_path / "small"
    small.mkdir()
    size = lab_bytes + int(runs_room * run_bytes)  # the site and about one run (or half of one)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=755", "tmpfs", str(small)], check=True)
    try:
        p = subprocess.run([*TORTOISE, "run", str(f), "--results", str(small), "--backend", "uml",
                            "--clock", "virtual"], capture_output=True, text=True, timeout=900)
        assert p.returncode == 2, p.stderr[-2000:]
        assert "no space left on the filesystem" in p.stderr and "Traceback" not in p.stderr, p.stderr[-2000:]
        exp_dir = small / "faults"
        stored = store.read_records(exp_dir)  # every stored run reads whole
        assert len(stored) < 3
        for st in stored:
            assert json.loads((st.run_dir / "run.json").read_text())["run_id"] == st.run_dir.name
        left = sorted(p.name for p in exp_dir.glob(".*.tmp-*"))
        assert not left, f"work folders left on the full filesystem: {left}"
    finally:
        subprocess.run(["umount", str(small)], check=False)
        shutil.rmtree(probe, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="switches to the unprivileged user nobody (root)")
def test_an_unprivileged_user_runs_the_lab(lab_kernel):
    """The uml backend as an ordinary user: the lab kernel and our modules
    where that user can read them, results in a folder of their own. Seen:
    tcpdump in the guest could not hand its capture file to its own user
    through hostfs and wrote 24 bytes; the run is now whole."""
    import tempfile

    from tortoiselab.host import labkernel

    top = Path(tempfile.mkdtemp(prefix="tortoise-unpriv-", dir="/tmp"))
    try:
        top.chmod(0o755)
        kernel = top / "linux"
        shutil.copy2(lab_kernel, kernel)
        shutil.copy2(lab_kernel.parent / "config", top / "config")
        mods = labkernel.modules_path(lab_kernel)
        shutil.copytree(mods, top / mods.name)
        results = top / "results"
        results.mkdir()
        shutil.chown(results, "nobody")
        f = top / "e.yaml"
        f.write_text(EXP.replace("[cubic, reno, bbr]", "[cubic]"))
        subprocess.run(["chmod", "-R", "a+rX", str(top)], check=True)
        env = {"PATH": os.environ["PATH"], "HOME": str(results), "TORTOISE_KERNEL": str(kernel),
               "TORTOISE_MODULES": str(top / mods.name)}
        p = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *TORTOISE, "run",
                            str(f), "--results", str(results), "--backend", "uml"], capture_output=True, text=True,
                           env=env, cwd=top, timeout=900)
        assert p.returncode == 0, p.stderr[-2000:]
        (st,) = store.read_records(results / "faults")
        assert st.record.ok and st.record.capture.server.captured > 0, st.record.error
        assert (st.run_dir / "server.pcap").stat().st_uid != 0  # the user's own file
    finally:
        shutil.rmtree(top, ignore_errors=True)
