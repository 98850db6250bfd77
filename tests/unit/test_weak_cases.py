"""Operational weak cases of issue 50 (docs/faults.md, "A results folder as
untrusted input"): each ends in one `tortoise:` line naming the file and
the fix, with no traceback, and leaves nothing behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.conftest import TORTOISE, experiment_yaml, write_yaml
from tests.unit.results_copy import stored_copy, tree
from tortoiselab.host import backends, runner, setaside, store
from tortoiselab.host.stopping import ended_by, killed_from_outside, lab_signal
from tortoiselab.project import REPO_DIR
from tortoiselab.spec.experiment import expand, load

RUN_ID = "0123456789ab"


def _tortoise(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*TORTOISE, *args], capture_output=True, text=True, timeout=120, env=env)


def _fifo_folders(tmp_path: Path) -> Path:
    """results/ with a: a FIFO as .lock; b: a stale work folder whose claim
    is a FIFO; c: a stale work folder with a regular claim (cleanable)."""
    res = tmp_path / "res"
    for name in "abc":
        (res / name / ".claims").mkdir(parents=True)
    os.mkfifo(res / "a" / ".lock")
    for name in "bc":
        (res / name / f".{RUN_ID}.tmp-5").mkdir()
    os.mkfifo(res / "b" / ".claims" / f"{RUN_ID}.lock")
    (res / "c" / ".claims" / f"{RUN_ID}.lock").write_text("start here 5 then\n", encoding="utf-8")
    return res


def test_a_fifo_as_a_lock_or_claim_is_named_and_ls_and_clean_go_on(tmp_path):
    res = _fifo_folders(tmp_path)
    ls = _tortoise("ls", "--results", str(res))
    assert ls.returncode == 0 and "Traceback" not in ls.stderr, ls.stderr
    assert [ln.split()[0] for ln in ls.stdout.splitlines() if not ln.startswith(" ")] == ["a", "b", "c"]
    claim = res / "b" / ".claims" / f"{RUN_ID}.lock"
    assert f"{claim} is a FIFO" in ls.stdout and f"rm {claim}" in ls.stdout

    clean = _tortoise("clean", "--results", str(res))
    assert clean.returncode == 1 and "Traceback" not in clean.stderr, clean.stderr  # left for you to remove
    assert f"a: left alone: locking {res / 'a'}: {res / 'a' / '.lock'} is a FIFO" in clean.stdout
    assert f"rm {res / 'a' / '.lock'}" in clean.stdout
    assert f"b: left .{RUN_ID}.tmp-5 in place: " in clean.stdout and f"rm {claim}" in clean.stdout
    assert f"c: removed .{RUN_ID}.tmp-5" in clean.stdout  # the other folders are cleaned
    assert (res / "b" / f".{RUN_ID}.tmp-5").is_dir() and not (res / "c" / f".{RUN_ID}.tmp-5").exists()
    assert claim.is_fifo() and (res / "a" / ".lock").is_fifo()  # left in place, never opened as a file


def test_run_names_a_fifo_as_its_lock(tmp_path, lab_kernel):  # the kernel is checked before the lock
    f = write_yaml(tmp_path, experiment_yaml("tiny"), "tiny.yaml")
    exp_dir = tmp_path / "res" / "tiny"
    exp_dir.mkdir(parents=True)
    os.mkfifo(exp_dir / ".lock")
    p = _tortoise("run", str(f), "--results", str(exp_dir.parent), "--backend", "uml")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.splitlines()[-1].startswith("tortoise: ") and f"{exp_dir}/.lock is a FIFO" in p.stderr
    assert f"rm {exp_dir}/.lock" in p.stderr


def test_run_prints_what_it_cleaned_the_did_not_signal_lines_too(tmp_path, lab_kernel):
    """A stale work folder naming a foreign process group (no record proves
    it a lab's): `tortoise run` says it did not signal it and removed the
    folder, as `tortoise clean` would (before: nothing printed)."""
    f = write_yaml(tmp_path, experiment_yaml("tiny"), "tiny.yaml")
    exp_dir = tmp_path / "res" / "tiny"
    run_id = expand(load(f))[0].run_id
    work = exp_dir / f".{run_id}.tmp-77"
    (work / "lab").mkdir(parents=True)
    foreign = subprocess.Popen(["sleep", "120"], start_new_session=True)
    try:
        (work / "lab" / "uml.pgid").write_text(f"{foreign.pid}\n", encoding="utf-8")
        p = _tortoise("run", str(f), "--results", str(exp_dir.parent), "--backend", "uml", "--limit", "0")
        assert p.returncode == 0, p.stderr
        assert f"clean: did not signal process group {foreign.pid} of {work.name}: no uml.proc.json" in p.stderr
        assert f"clean: removed {work.name}" in p.stderr
        assert foreign.poll() is None and not work.exists()
    finally:
        foreign.kill()
        foreign.wait()


@pytest.fixture
def read_only_results(tmp_path):
    """A stored folder (a canned CI folder, its table garbage so that
    verify must rebuild it, and an interrupted run's work folder) seen
    through a read-only bind mount: results/<name>; root only."""
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root (as root, chmod does not stop writes)")
    src, ro = tmp_path / "src", tmp_path / "ro"
    exp_dir = stored_copy("coalescing-population@ci", src)
    (exp_dir / "runs.parquet").write_bytes(b"garbage")
    (exp_dir / f".{RUN_ID}.tmp-5").mkdir()
    ro.mkdir()
    subprocess.run(["mount", "--bind", str(src), str(ro)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True)
        yield ro, tree(src)
    finally:
        subprocess.run(["umount", str(ro)], check=True)


def test_a_read_only_results_folder_is_named_with_the_fix(read_only_results):
    ro, before = read_only_results
    exp_dir = ro / "coalescing-population@ci"
    for args in (["clean", "--results", str(ro)], ["report", str(exp_dir)],
                 ["verify", str(exp_dir), "--rebuild-table"]):
        p = _tortoise(*args)
        assert p.returncode == 2 and "Traceback" not in p.stderr, (args, p.stderr[-2000:])
        (line,) = p.stderr.splitlines()
        assert line.startswith("tortoise: ") and f"cannot write {exp_dir}/" in line, (args, line)
        assert "read-only filesystem" in line and f"cp -a {exp_dir} " in line, (args, line)
    assert _tortoise("verify", str(exp_dir)).returncode == 1  # reading alone works: it names the table
    assert tree(ro) == before


def test_run_names_a_read_only_results_folder(read_only_results, tmp_path, lab_kernel):
    ro, before = read_only_results
    f = REPO_DIR / "experiments" / "coalescing-population.yaml"
    p = _tortoise("run", str(f), "--grid", "ci", "--results", str(ro), "--backend", "uml")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert p.stderr.splitlines()[-1].startswith("tortoise: ") and "read-only filesystem" in p.stderr
    assert tree(ro) == before


def _without(*names: str, **more: str) -> dict:
    return {**{k: v for k, v in os.environ.items() if k not in names}, **more}


def test_run_works_without_home(tmp_path, lab_kernel):
    """HOME unset (a cron job, `env -i`): the cache is found as
    kernel/build-uml.sh documents it, HOME's part from the password
    database (before: a CalledProcessError traceback, "HOME: unbound
    variable" in build-uml.sh)."""
    f = write_yaml(tmp_path, experiment_yaml("tiny"), "tiny.yaml")
    env = _without("HOME", "TORTOISE_CACHE", "XDG_CACHE_HOME", "TORTOISE_KERNEL", "TORTOISE_MODULES")
    p = _tortoise("run", str(f), "--results", str(tmp_path / "res"), "--backend", "uml", "--limit", "0", env=env)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]


def test_no_home_anywhere_names_the_variables_to_set(tmp_path):
    """Without HOME, for a user the password database does not know: one
    error naming TORTOISE_CACHE, XDG_CACHE_HOME and HOME; with
    TORTOISE_CACHE set, the cache is there."""
    if os.geteuid() != 0:
        pytest.skip("switches to a user id with no password entry (root)")
    import pwd

    uid = 54321
    with pytest.raises(KeyError):
        pwd.getpwuid(uid)
    code = ("from tortoiselab.host import labkernel\nfrom tortoiselab.host.errors import RunnerError\n"
            "try:\n    print(labkernel.user_cache(), labkernel.kernel_path())\n"
            "except RunnerError as exc:\n    print('error:', exc)\n")
    argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", TORTOISE[0], "-c", code]
    env = _without("HOME", "TORTOISE_CACHE", "XDG_CACHE_HOME", "TORTOISE_KERNEL")
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, cwd="/")
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.startswith("error: no cache folder: HOME is unset and user 54321 has no home"), p.stdout
    assert "set TORTOISE_CACHE (or XDG_CACHE_HOME, or HOME)" in p.stdout
    cache = tmp_path / "cache"
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60, env={**env, "TORTOISE_CACHE": str(cache)},
                       cwd="/")
    assert p.returncode == 0 and p.stdout.startswith(f"{cache} {cache}/kernel/"), (p.stdout, p.stderr[-2000:])


def test_the_signal_that_ended_a_lab_is_read_from_its_guards_exit_status():
    assert lab_signal(137) == signal.SIGKILL and lab_signal(143) == signal.SIGTERM  # the guard's report: 128 + N
    assert lab_signal(-9) == signal.SIGKILL  # the guard itself killed
    assert lab_signal(0) is lab_signal(1) is lab_signal(128) is lab_signal(None) is lab_signal(128 + 99) is None
    for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        assert killed_from_outside(f"lab: {ended_by(sig)}; it wrote no result") == sig.name
    assert killed_from_outside(f"lab: {ended_by(signal.SIGSEGV)}") is None  # a crash is the lab's own
    assert "SIGSEGV (signal 11): it crashed" in ended_by(signal.SIGSEGV)
    assert killed_from_outside("lab: the lab wrote no result") is killed_from_outside(None) is None


def test_a_lab_without_a_result_says_which_signal_ended_it(tmp_path):
    log = tmp_path / "console.log"
    log.write_text("tortoise-guest: kernel 7.3.4\n", encoding="utf-8")
    with pytest.raises(backends.LabError) as exc:
        backends._read_result(tmp_path, log, "uml", 137)
    assert str(exc.value).startswith("the lab was ended by SIGKILL (signal 9) from outside the runner")
    assert f"(see {log})" in str(exc.value) and "tortoise-guest: kernel 7.3.4" in str(exc.value)
    with pytest.raises(backends.LabError, match=r"^the lab wrote no result"):
        backends._read_result(tmp_path, log, "uml", 0)


class KilledLab:
    """backends.run_task as a lab ended by `sig` on the load `die_at` of its
    first boot (its guard's exit status told), whole on later boots."""

    def __init__(self, sig: signal.Signals, die_at: int) -> None:
        self.sig, self.die_at, self.boots = sig, die_at, 0

    def __call__(self, info, req, work: Path, timeout_s: float, stop=None) -> dict:
        work.mkdir(parents=True)
        self.boots += 1
        (work / "boot.json").write_text(json.dumps({"kernel_release": "x", "uptime_start_s": 1.0}), encoding="utf-8")
        for i, ld in enumerate(req.loads):
            if self.boots == 1 and i == self.die_at:
                raise backends.LabError(f"{ended_by(self.sig)}; it wrote no result (see {work / 'console.log'})")
            (work / f"load-{i:03d}").mkdir()
            (work / f"load-{i:03d}" / "result.json").write_text(json.dumps(
                {"index": i, "label": ld.label, "error": "not a real lab", "sim_set_up_s": 2.0 + i,
                 "sim_end_s": 3.0 + i}), encoding="utf-8")
        return {"ok": True, "task": {}}


@pytest.mark.parametrize("sig,redone", [(signal.SIGKILL, True), (signal.SIGTERM, True), (signal.SIGSEGV, False)])
def test_a_run_whose_lab_was_killed_from_outside_is_moved_aside_and_done_again(tmp_path, monkeypatch, sig, redone):
    """The run the lab was on when something outside the runner killed it
    is stored as failed naming the signal; the next run moves it into
    .killed/ (kept, whole) and does it again. A crash (SIGSEGV) is named,
    stored and not redone."""
    f = write_yaml(tmp_path, experiment_yaml("unit", {"name": "killed", "repetitions": 3}), "e.yaml")
    runs = expand(load(f))
    ids = [r.run_id for r in runs]
    exp_dir = tmp_path / "results" / "killed"
    exp_dir.mkdir(parents=True)
    monkeypatch.setattr(backends, "run_task", KilledLab(sig, die_at=1))
    runner.run_batch(runs, exp_dir, backends.BackendInfo("uml", "virtual", "/k/linux"), tmp_path, tmp_path, {})
    error = store.read_record(exp_dir / ids[1]).error
    assert error.startswith(f"lab: the lab was ended by {sig.name} (signal {sig.value})"), error
    assert [store.completed(exp_dir, i) for i in ids] == [True, True, True]

    before = tree(exp_dir / ids[1])
    moved = setaside.move_killed_aside(exp_dir, ids)
    if not redone:
        assert moved == [] and store.completed(exp_dir, ids[1])
        return
    (line,) = moved
    assert line.startswith(f"{ids[1]} ({sig.name}) -> {exp_dir / '.killed' / ids[1]}-")
    assert [store.completed(exp_dir, i) for i in ids] == [True, False, True]  # pending again
    (kept,) = (exp_dir / ".killed").iterdir()
    assert tree(kept) == before and store.read_record(kept).error == error  # kept whole
    assert setaside.move_killed_aside(exp_dir, ids) == []
