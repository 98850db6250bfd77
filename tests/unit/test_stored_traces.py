"""A results folder reads nothing outside it and the project (issue 50,
Build 1; docs/traces.md, "Traces of a stored experiment"; docs/faults.md).

The attack: a stored folder's experiment.yaml names `trace_down:
/etc/shadow` (here a secret file made outside the folder, and
/proc/self/environ with a secret in the reader's environment). Before,
`verify`, `report` and `grade` printed the file's first line, `report`
wrote it into report.html, `grade` said complete, and `ls` opened it. Now
every reader resolves a stored experiment's traces from the project's
shipped traces or the folder's own copies only: the named file is never
opened nor looked at (its atime, and strace when it is installed), no byte
of it is in any output or file, and `verify` and `grade` refuse, naming
experiment.yaml and the fix. Also: the runner's copies make a folder whose
user trace is gone verifiable, with the same run ids; `tortoise show`
takes a run id, not a path or a glob. Real folders, real CLI processes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import TORTOISE
from tests.unit.results_copy import stored_copy
from tests.unit.test_grade import graded, write_runs
from tortoiselab.analysis import napkin
from tortoiselab.course import grade
from tortoiselab.host import storedtraces, versions
from tortoiselab.host.storedtraces import folder_traces
from tortoiselab.spec import cols
from tortoiselab.spec import trace as tr
from tortoiselab.spec.experiment import expand, load

SECRET = "hunter2-TORTOISE-SECRET-4242"
ENV_SECRET = "TORTOISE_TEST_SECRET_VALUE_9131"
ORIGINAL_PATH = "path: {rtt_ms: 130, loss_pct: 0, rate_mbit: 15}"


def _plant(exp_dir: Path, target: str) -> None:
    """The folder's experiment.yaml names `target` as its downlink's trace."""
    y = exp_dir / "experiment.yaml"
    text = y.read_text()
    assert ORIGINAL_PATH in text
    y.write_text(text.replace(ORIGINAL_PATH, ORIGINAL_PATH[:-1] + f", trace_down: {target}}}"))


@pytest.fixture(params=["file", "environ"])
def hostile(request, tmp_path) -> tuple[Path, Path, str]:
    """(results root, the file the folder names, the secret in it): a stored
    copy of the canned initcwnd@ci folder whose experiment.yaml names a
    secret file outside it, or /proc/self/environ (the reader's secrets)."""
    results = tmp_path / "res"
    results.mkdir()
    exp = stored_copy("initcwnd@ci", results)
    if request.param == "file":
        victim = tmp_path / "outside" / "shadow"
        victim.parent.mkdir()
        victim.write_text(f"root:{SECRET}:19000:0:99999:7:::\n")
        os.utime(victim, (1_000_000, 2_000_000))  # atime before mtime: a read moves it (relatime, strictatime)
        secret = SECRET
    else:
        victim, secret = Path("/proc/self/environ"), ENV_SECRET
    _plant(exp, str(victim))
    return results, victim, secret


def _env() -> dict[str, str]:
    return {**os.environ, "TORTOISE_SECRET": ENV_SECRET}


def _tortoise(*args: str, strace_log: Path | None = None) -> subprocess.CompletedProcess:
    pre = ["strace", "-f", "-qq", "-e", "trace=openat,open,stat,lstat,newfstatat,statx,access,readlink",
           "-o", str(strace_log)] if strace_log else []
    return subprocess.run([*pre, *TORTOISE, *args], capture_output=True, text=True, timeout=300, env=_env())


def _commands(results: Path) -> list[tuple[str, ...]]:
    exp = results / "initcwnd@ci"
    return [("verify", str(exp)), ("ls", "--results", str(results)),
            ("report", str(exp)), ("grade", "labs/04-initcwnd.md", str(exp))]


def _written(results: Path) -> bytes:
    return b"".join(p.read_bytes() for p in results.rglob("*") if p.is_file() and not p.is_symlink())


def test_a_trace_named_outside_the_folder_is_never_read(hostile, tmp_path, monkeypatch):
    """Each reader once, under strace where it is installed (`make
    setup-test`): no open, stat or access of the named file."""
    results, victim, secret = hostile
    monkeypatch.chdir(Path(__file__).resolve().parents[2])  # labs/ of the repository
    atime = os.stat(victim).st_atime_ns if victim.is_relative_to(results.parent) else None  # /proc: no atime
    traced = shutil.which("strace") is not None
    out = {}
    for args in _commands(results):
        log = tmp_path / f"strace-{args[0]}.txt" if traced else None
        p = _tortoise(*args, strace_log=log)
        out[args[0]] = p
        text = p.stdout + p.stderr
        assert secret not in text and "root:" not in text, (args, text)
        assert "Traceback" not in p.stderr, (args, p.stderr)
        if log is not None:
            calls = log.read_text()
            assert "openat(" in calls and "experiment.yaml" in calls  # the tracer saw the reader's files
            touched = [line for line in calls.splitlines() if str(victim) in line]
            assert not touched, (args, touched[:3])
    assert secret.encode() not in _written(results)  # report.html included
    assert (results / "initcwnd@ci" / "report.html").exists()
    assert atime is None or os.stat(victim).st_atime_ns == atime  # never opened
    named = f"is not read: {storedtraces.NOT_READ}"
    v = out["verify"]
    assert v.returncode == 1 and "experiment.yaml failing" in v.stdout and named in v.stdout, v.stdout
    assert "holds no copy of it" in v.stdout and "fix: run the experiment file again" in v.stdout
    g = out["grade"]
    assert g.returncode == 1 and "[MISSING] experiment: the folder's experiment.yaml cannot be read" in g.stdout
    assert named in g.stdout, g.stdout
    r = out["report"]
    assert r.returncode == 0 and named in r.stdout + r.stderr  # the page renders, and says why the file is not read
    assert out["ls"].returncode == 0 and "initcwnd@ci" in out["ls"].stdout
    if not traced:
        pytest.skip("checked by atime and output only: strace is missing (`make setup-test` installs it)")


def test_grade_refuses_a_folder_whose_trace_is_not_stored(tmp_path, repo_toy):
    """Before: the stored file's error was a note under a passing check:
    "complete", exit 0, with the named file's first line in the note."""
    victim = tmp_path / "secret.down"
    victim.write_text(f"{SECRET}\n")
    folder = write_runs(repo_toy / "results", repo_toy / "experiments" / "toy.yaml", "reduced")
    assert grade.complete(graded(repo_toy, folder)[1])
    y = folder / "experiment.yaml"
    y.write_text(y.read_text().replace("rate_mbit: 10}", f"rate_mbit: 10, trace_down: {victim}}}"))
    os.utime(victim, (1_000_000, 2_000_000))
    lab, sections, checks = graded(repo_toy, folder)
    assert not grade.complete(sections)
    c = checks["experiment"]
    assert not c.ok and c.summary == "the folder's experiment.yaml cannot be read"
    text = grade.format_grade(lab, sections)
    assert "holds no copy of it" in text and "fix: run the lab's experiment unchanged" in text
    assert SECRET not in text and os.stat(victim).st_atime_ns == 1_000_000_000_000_000
    y.unlink()
    assert not checks_ok(repo_toy, folder, "experiment")  # a missing file is no pass either


def checks_ok(repo: Path, folder: Path, name: str) -> bool:
    return graded(repo, folder)[2][name].ok


@pytest.fixture
def repo_toy(tmp_path):
    from tests.unit.test_grade import EXP, LAB, OTHER
    r = tmp_path / "repo"
    (r / "experiments").mkdir(parents=True)
    (r / "labs").mkdir()
    (r / "experiments" / "toy.yaml").write_text(EXP)
    (r / "experiments" / "other.yaml").write_text(OTHER)
    (r / "labs" / "09-toy.md").write_text(LAB.format(extra=""))
    return r


# --- the runner's copies ---------------------------------------------------------------------

TRACED = """\
name: mytrace
repetitions: 2
seed: 5
path: {rtt_ms: 80, loss_pct: 0, trace_down: TRACE, trace_up: lte.up}
client: {page: tiny.html}
sweep:
  server.cc: [cubic, bbr]
"""


def _stored_as_the_runner_stores(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """(the experiment's folder, the user's trace, the run ids): the folder's
    experiment.yaml and trace copies written as host/runner.py writes them."""
    mine = tmp_path / "home" / "cell.down"
    mine.parent.mkdir()
    shutil.copy(tr.TRACE_DIR / "3g.down", mine)
    f = tmp_path / "e.yaml"
    f.write_text(TRACED.replace("TRACE", str(mine)))
    with tr.seen() as refs:
        exp = load(f)
    assert set(refs) == {str(mine), "lte.up"}
    exp_dir = tmp_path / "res" / exp.name
    exp_dir.mkdir(parents=True)
    (exp_dir / "experiment.yaml").write_text(f.read_text())
    assert storedtraces.store_copies(exp_dir, refs) == 1  # the user's trace; lte.up is the project's
    ids = [r.run_id for r in expand(exp)]
    (exp_dir / versions.RECORD).write_text(json.dumps(versions.version(exp.name, ids)))
    return exp_dir, mine, ids


def test_the_runners_copy_gives_the_same_runs_when_the_users_trace_is_gone(tmp_path):
    exp_dir, mine, ids = _stored_as_the_runner_stores(tmp_path)
    sha = tr.read_trace_file(mine)[0]
    assert (exp_dir / ".lab" / "traces" / sha).read_bytes() == mine.read_bytes()
    index = json.loads((exp_dir / ".lab" / "traces" / "index.json").read_text())
    assert index == {str(mine): {"file": str(mine), "name": "cell.down", "sha256": sha}}
    mine.unlink()  # the user's file gone (another machine): the folder still says what its runs are
    got, why = versions.folder_runs(exp_dir)
    assert why == "" and got == frozenset(ids)


def test_a_forged_index_or_copy_reaches_nothing_outside(tmp_path):
    exp_dir, mine, ids = _stored_as_the_runner_stores(tmp_path)
    victim = tmp_path / "outside.down"
    victim.write_text("1\n2\n")
    os.utime(victim, (1_000_000, 2_000_000))
    folder = exp_dir / ".lab" / "traces"
    sha = tr.read_trace_file(mine)[0]
    # the copy edited: its bytes are not the sha256 the runs recorded
    (folder / sha).write_text("5\n6\n")
    traces = storedtraces.FolderTraces(exp_dir)
    got, why = versions.folder_runs(exp_dir, traces)
    assert got is None and "changed since the run was set up" in why
    # the index pointing elsewhere: its file is a label, the bytes still come from the copy by sha256
    (folder / sha).unlink()
    (folder / "index.json").write_text(json.dumps({str(mine): {"file": str(victim), "name": "x", "sha256": sha}}))
    traces = storedtraces.FolderTraces(exp_dir)
    got, why = versions.folder_runs(exp_dir, traces)
    assert got is None and "no stored copy" in traces.refused[0]
    # the copies folder a link to a folder outside: refused, not followed
    shutil.rmtree(folder)
    (tmp_path / "elsewhere").mkdir()
    folder.symlink_to(tmp_path / "elsewhere")
    traces = storedtraces.FolderTraces(exp_dir)
    assert versions.folder_runs(exp_dir, traces)[0] is None and "is a link" in traces.refused[0]
    assert os.stat(victim).st_atime_ns == 1_000_000_000_000_000


def test_a_records_trace_is_read_from_the_folder_only(tmp_path):
    """A run.json's configuration holds its traces as {file, name, sha256};
    the floor of an old record is computed from it (host/store upgrade)."""
    victim = tmp_path / "outside.down"
    victim.write_text("".join(f"{i}\n" for i in range(1, 1001)))
    sha = tr.read_trace_file(victim)[0]
    os.utime(victim, (1_000_000, 2_000_000))
    exp_dir = tmp_path / "res" / "x"
    exp_dir.mkdir(parents=True)
    config = {"path": {"resolved": {"rtt_ms": 50, "trace_down": {"file": str(victim), "name": "v", "sha256": sha}}},
              "server": {}, "client": {"page": "tiny.html"}}
    manifest = {"pages": {}, "objects": []}
    with folder_traces(exp_dir) as traces:
        f = napkin.run_floor(config, manifest, None, (), 0.0)
    assert f[cols.FLOOR] is None and "no stored copy" in f["why"] and traces.refused
    assert os.stat(victim).st_atime_ns == 1_000_000_000_000_000
    shipped = {**config, "path": {"resolved": {"rtt_ms": 50, "trace_down": {
        "file": "topologies/traces/../../../" + str(victim), "name": "v", "sha256": sha}}}}
    with folder_traces(exp_dir):  # a recorded path into the project's traces and out again: no shipped trace
        assert "no stored copy" in napkin.run_floor(shipped, manifest, None, (), 0.0)["why"]
    assert os.stat(victim).st_atime_ns == 1_000_000_000_000_000


def test_trace_errors_name_the_file_and_line_never_the_content(tmp_path):
    bad = tmp_path / "bad.down"
    bad.write_text(f"{SECRET}\n")
    with pytest.raises(tr.TraceError) as e:
        tr.read_trace_file(bad)
    assert str(bad) in str(e.value) and "line 1: not a whole number" in str(e.value) and SECRET not in str(e.value)
    bad.write_text("10\n7\n")  # numbers are content too
    with pytest.raises(tr.TraceError, match="line 2: a timestamp smaller than line 1's") as e:
        tr.read_trace_file(bad)
    assert not re.search(r"\b(7|10)\b", str(e.value).replace(str(bad), ""))


# --- tortoise show ---------------------------------------------------------------------------


def test_show_takes_a_run_id_never_a_path_or_a_glob(tmp_path):
    results = tmp_path / "res"
    results.mkdir()
    stored_copy("initcwnd@ci", results)
    outside = tmp_path / "other" / "x@ci"
    outside.parent.mkdir()
    stored_copy("initcwnd@ci", outside.parent)  # runs outside --results, reachable by ../
    for bad in ("..", "../other/initcwnd@ci/1072698669c7", "*", "1072698669c7/..", "10726*", "", "1072698669c7a"):
        p = subprocess.run([*TORTOISE, "show", bad, "--results", str(results)], capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 2 and "not a run id" in p.stderr and "Traceback" not in p.stderr, (bad, p.stderr)
    p = subprocess.run([*TORTOISE, "show", "10726", "--results", str(results)], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and "run 1072698669c7 of initcwnd@ci" in p.stdout, p.stderr
    assert str(outside.parent) not in p.stdout


def test_a_slurm_job_record_reaches_nothing_outside(tmp_path):
    """`tortoise ls` works out the runs of a folder's queued Slurm tasks from
    the submission it recorded (.slurm/<stamp>/experiment.yaml): a record
    whose folder is elsewhere, or whose frozen file names a trace outside,
    gives no runs, and nothing outside is read."""
    from tortoiselab.host import slurm
    exp_dir, mine, ids = _stored_as_the_runner_stores(tmp_path)
    sub = exp_dir / ".slurm" / "20260101T000000.000000Z"
    sub.mkdir(parents=True)
    shutil.copy(exp_dir / "experiment.yaml", sub / "experiment.yaml")
    (sub / "runs.txt").write_text("".join(f"{r}\n" for r in ids))
    job = {"dir": str(sub), "tasks": 1, "grid": None}
    assert sorted(slurm._stored_task_runs(exp_dir, job, 0)) == sorted(ids)  # its trace: the folder's copy
    victim = tmp_path / "outside" / "v.down"
    victim.parent.mkdir()
    victim.write_text("1\n2\n")
    os.utime(victim, (1_000_000, 2_000_000))
    (sub / "experiment.yaml").write_text((sub / "experiment.yaml").read_text().replace(str(mine), str(victim)))
    assert slurm._stored_task_runs(exp_dir, job, 0) == []
    elsewhere = tmp_path / "outside" / "sub"
    shutil.copytree(sub, elsewhere)
    assert slurm._stored_task_runs(exp_dir, {**job, "dir": str(elsewhere)}, 0) == []
    assert slurm._stored_task_runs(exp_dir, {**job, "dir": str(exp_dir / ".slurm" / ".." / ".." / "x")}, 0) == []
    assert os.stat(victim).st_atime_ns == 1_000_000_000_000_000
