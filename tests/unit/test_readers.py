"""Readers of a results folder never follow a link and never hang
(host/safefs.read_bytes_regular, host/readfiles.py; docs/faults.md): a
run.json, a run folder, runs.parquet, experiment.yaml, experiment.json or a
.lab file that is a link, a FIFO or no regular file is named with the fix,
never read through. Also: determinism reads records through the store, a
reuse never takes a damaged run, `tortoise clean` removes a killed verify's
scratch only when its lock is free, and a failed run's error cites a log
its folder holds. Real folders, links, FIFOs and processes."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TORTOISE, experiment_yaml
from tortoiselab.host import audit, backends, readfiles, reuse, runner, safefs, store, verify
from tortoiselab.host import determinism as D
from tortoiselab.host.locks import IN_USE, clean_results
from tortoiselab.host.versions import one_experiment
from tortoiselab.spec.experiment import expand, load

REPO = Path(__file__).resolve().parents[2]
CANNED = REPO / "tests" / "data" / "runs" / "initcwnd@ci"
EXP = REPO / "experiments" / "initcwnd.yaml"
A, B = "1072698669c7", "b1a05207aa21"  # the canned runs


@pytest.fixture
def results(tmp_path) -> Path:
    """A results root holding a copy of the canned initcwnd@ci folder."""
    shutil.copytree(CANNED, tmp_path / "res" / "initcwnd@ci")
    return tmp_path / "res"


@pytest.fixture
def elsewhere(tmp_path) -> Path:
    """A copy of a run outside the results folder, with a made-up PLT: what a
    link would make a reader read."""
    d = tmp_path / "elsewhere" / A
    shutil.copytree(CANNED / A, d)
    raw = json.loads((d / "run.json").read_text())
    raw["summary"]["plt_ms"] = 1.0
    (d / "run.json").write_text(json.dumps(raw))
    return d


def _tortoise(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*TORTOISE, *args], capture_output=True, text=True, timeout=timeout)


# --- the helper --------------------------------------------------------------------------


def test_read_bytes_regular_reads_files_and_refuses_the_rest(tmp_path):
    root = tmp_path / "r"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f").write_bytes(b"abc")
    assert safefs.read_bytes_regular(root / "d" / "f", root) == b"abc"
    (root / "link").symlink_to(root / "d" / "f")
    (root / "dlink").symlink_to(root / "d")
    os.mkfifo(root / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "sock"))
    try:
        with pytest.raises(safefs.LinkRefused, match=r"link .* is a link, .*remove it \(rm "):
            safefs.read_bytes_regular(root / "link", root)
        with pytest.raises(safefs.LinkRefused, match="dlink"):  # a link above the file too
            safefs.read_bytes_regular(root / "dlink" / "f", root)
        for name, kind in (("fifo", "a FIFO"), ("sock", "a socket"), ("d", "a folder")):
            with pytest.raises(safefs.NotRegular, match=f"{name} is {kind}, not a regular file.*remove it"):
                safefs.read_bytes_regular(root / name, root, doing="test")
        with pytest.raises(FileNotFoundError):
            safefs.read_bytes_regular(root / "none", root)
    finally:
        sock.close()


# --- run.json and run folders -----------------------------------------------------------


def test_a_run_json_that_is_a_link_is_named_never_read(results, elsewhere):
    exp = results / "initcwnd@ci"
    (exp / A / "run.json").unlink()
    (exp / A / "run.json").symlink_to(elsewhere / "run.json")
    with pytest.raises(store.DamagedRecord, match=rf"run {A}: .*run.json \(a link to {elsewhere}/run.json\) is a "
                                                  r"link.*remove it \(rm .*moves the run's folder aside"):
        store.read_record(exp / A)
    got = {st.run_dir.name: st for st in store.read_records(exp, strict=False)}
    assert got[A].record is None and "is a link" in got[A].error and got[B].record is not None
    p = _tortoise("show", A, "--results", str(results))
    assert p.returncode == 2 and "is a link" in p.stderr and "1.0" not in p.stdout, p.stdout + p.stderr
    p = _tortoise("ls", "--results", str(results))
    assert "1 damaged" in p.stdout, p.stdout + p.stderr


def test_a_run_folder_that_is_a_link_is_named_as_damaged_never_entered(results, elsewhere):
    exp = results / "initcwnd@ci"
    shutil.rmtree(exp / A)
    (exp / A).symlink_to(elsewhere)
    assert [d.name for d in store.run_dirs(exp)] == [A, B]  # listed, so that it is named
    assert store.completed(exp, A)
    with pytest.raises(store.DamagedRecord, match=rf"run {A}: .*{A} \(a link to {elsewhere}\) is a link"):
        store.read_record(exp / A)
    with pytest.raises(store.DamagedRecord):
        store.load_runs(exp)  # never a row of PLT 1.0 from elsewhere
    p = _tortoise("ls", "--results", str(results))
    assert "1/2 done" in p.stdout and "1 damaged" in p.stdout, p.stdout + p.stderr
    p = _tortoise("verify", str(exp))
    assert p.returncode == 1 and f"run {A}: {exp / A}: not a folder (a link?)" in p.stdout, p.stdout
    p = _tortoise("report", str(exp), "--out", str(results.parent / "r.html"))
    assert p.returncode == 2 and f"initcwnd@ci/{A}" in p.stderr and "--skip-damaged" in p.stderr, p.stderr


def test_a_run_json_that_is_a_fifo_hangs_no_reader(results):
    exp = results / "initcwnd@ci"
    (exp / A / "run.json").unlink()
    os.mkfifo(exp / A / "run.json")
    for args in (("ls", "--results", str(results)), ("show", A, "--results", str(results)),
                 ("verify", str(exp))):
        p = _tortoise(*args, timeout=30)  # before: blocked for ever opening the FIFO
        assert p.returncode != 0 or "1 damaged" in p.stdout, (args, p.stdout, p.stderr)
    p = _tortoise("show", A, "--results", str(results), timeout=30)
    assert p.returncode == 2 and "is a FIFO, not a regular file" in p.stderr and "rm " in p.stderr, p.stderr


# --- the folder's own files ---------------------------------------------------------------


def test_runs_parquet_that_is_a_fifo_or_a_link_is_named_never_read(results, tmp_path):
    exp = results / "initcwnd@ci"
    store.rebuild_table(exp)
    shutil.copy(exp / "runs.parquet", tmp_path / "victim.parquet")
    (exp / "runs.parquet").unlink()
    os.mkfifo(exp / "runs.parquet")
    p = _tortoise("verify", str(exp), timeout=30)  # before: blocked on the FIFO
    assert p.returncode == 1 and "runs.parquet: a FIFO, not a regular file: never read" in p.stdout, p.stdout + p.stderr
    assert f"fix: rm {exp / 'runs.parquet'}; then `tortoise verify" in p.stdout
    df, rebuilt = store.read_table(exp)  # the records give the table
    assert rebuilt and sorted(df["run_id"]) == [A, B]
    (exp / "runs.parquet").unlink()
    (exp / "runs.parquet").symlink_to(tmp_path / "victim.parquet")
    assert store.read_table(exp)[1]
    with pytest.raises(safefs.LinkRefused):
        readfiles.read_parquet(exp / "runs.parquet")


def test_experiment_files_that_are_fifos_or_links_hang_no_reader(results, tmp_path):
    exp = results / "initcwnd@ci"
    (exp / "experiment.yaml").unlink()
    os.mkfifo(exp / "experiment.yaml")
    p = _tortoise("ls", "--results", str(results), timeout=30)  # before: blocked loading the FIFO
    assert p.returncode == 0 and "initcwnd@ci" in p.stdout and "2/? done" in p.stdout, p.stdout + p.stderr
    p = _tortoise("report", str(exp), "--out", str(tmp_path / "r.html"), timeout=60)
    assert p.returncode == 2 and "experiment.yaml is a FIFO" in p.stderr, p.stdout + p.stderr
    (exp / "experiment.yaml").unlink()
    (exp / "experiment.yaml").symlink_to(CANNED / "experiment.yaml")
    p = _tortoise("report", str(exp), "--out", str(tmp_path / "r.html"), timeout=60)
    assert p.returncode == 2 and "experiment.yaml (a link to" in p.stderr, p.stdout + p.stderr
    os.mkfifo(exp / "experiment.json")
    ci = load(EXP, grid="ci")
    with pytest.raises(safefs.NotRegular, match="experiment.json is a FIFO"):  # before: blocked on the FIFO
        one_experiment(exp, ci, expand(ci))


def test_lab_files_that_are_links_are_refused_not_read(results, tmp_path):
    exp = results / "initcwnd@ci"
    (tmp_path / "manifest.json").write_text(json.dumps({"seed": 1, "pages": {}}))
    (exp / ".lab" / "site").mkdir(parents=True, exist_ok=True)
    (exp / ".lab" / "site" / "manifest.json").unlink(missing_ok=True)
    (exp / ".lab" / "site" / "manifest.json").symlink_to(tmp_path / "manifest.json")
    with pytest.raises(safefs.LinkRefused, match="manifest.json"):
        audit.folder_site(exp)  # a planted link does not turn the physics gate off unnamed
    with pytest.raises(safefs.LinkRefused):
        readfiles.lab_json(exp, "site")
    shutil.rmtree(exp / ".lab")
    assert audit.folder_site(exp) == (None, None)  # missing: as before, a note


# --- item 2: determinism reads records through the store ---------------------------------


def test_verify_determinism_names_a_truncated_record_with_the_fix(results):
    exp = results / "initcwnd@ci"
    f = exp / A / "run.json"
    f.write_bytes(f.read_bytes()[:100])
    with pytest.raises(store.DamagedRecord, match=rf"run {A}: .*unreadable run record .*fix: `tortoise run "):
        D.sample_runs(exp, [A, B], 2, seed=1)  # before: a bare JSONDecodeError
    with pytest.raises(store.DamagedRecord, match=rf"run {A}: "):
        D.fingerprint(exp / A)


# --- item 3: a reuse never takes a damaged run --------------------------------------------


def test_a_damaged_source_run_is_not_taken_and_is_named(results, capsys):
    src = results / "initcwnd@ci"  # its runs carry manifests, as the runner stores runs now
    raw = json.loads((src / A / "run.json").read_text())
    raw["summary"]["plt_ms"] /= 2  # a made-up number, still a valid record
    (src / A / "run.json").write_text(json.dumps(raw))
    taken = reuse.take_locked(EXP, "reduced", "ci", results)
    assert list(taken) == [B] and len(taken.damaged) == 1 and A in taken.damaged[0]
    err = capsys.readouterr().err
    assert f"not reused: run {A} of {src} is damaged (run.json: changed since the run was stored" in err
    assert f"`tortoise verify {src}`" in err and not (results / "initcwnd@reduced" / A).exists()


# --- item 4: `tortoise clean` and a killed verify's scratch -------------------------------


def test_clean_removes_a_killed_verifys_scratch_only_when_its_lock_is_free(results, tmp_path):
    exp = results / "initcwnd@ci"
    code = ("import sys, time; from pathlib import Path; from tortoiselab.host import determinism as D\n"
            "with D.scratch_folder(Path(sys.argv[1])) as d:\n    print(d, flush=True); time.sleep(60)\n")
    child = subprocess.Popen([sys.executable, "-c", code, str(exp)], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
                             start_new_session=True)
    try:
        scratch = Path(child.stdout.readline().strip())
        assert scratch.parent == exp and (scratch / IN_USE).is_file()
        p = _tortoise("clean", "--results", str(results))  # the verify is alive: its lock is held
        assert p.returncode == 0 and f"left {scratch.name} in place: a verify is using it" in p.stdout, p.stdout
        assert scratch.is_dir()
        os.kill(child.pid, signal.SIGKILL)  # the verify killed: its scratch stays, its lock is free
        child.wait(timeout=10)
        assert scratch.is_dir()
        p = _tortoise("clean", "--results", str(results))
        assert p.returncode == 0 and f"removed {scratch.name} (left by a verify that was killed)" in p.stdout
        assert not scratch.exists() and (exp / A / "run.json").is_file()
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()


def test_clean_leaves_an_unprovable_or_linked_scratch_and_exits_1(results, tmp_path):
    exp = results / "initcwnd@ci"
    (exp / ".verify-123").mkdir()  # no lock in it: nothing proves no verify uses it
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "precious").write_text("keep\n")
    (exp / ".verify-456").symlink_to(tmp_path / "victim")
    p = _tortoise("clean", "--results", str(results))
    assert p.returncode == 1, p.stdout + p.stderr
    assert f"left .verify-123 in place: no {IN_USE} in it proves" in p.stdout
    assert f"left .verify-456 in place: it is a link to {tmp_path / 'victim'}" in p.stdout
    assert "2 left in place for you to remove" in p.stdout
    assert (exp / ".verify-123").is_dir() and (tmp_path / "victim" / "precious").read_text() == "keep\n"
    lines, _ = clean_results(results)
    assert len(lines) == 2


# --- item 5: a failed run's error cites a log its folder holds ---------------------------


class DyingLab:
    """backends.run_task as a guest that runs out of memory: the console
    says so, and the backend's own check raises its LabError."""

    def __init__(self, backend: str) -> None:
        self.backend, self.log = backend, "console.log" if backend == "uml" else "native.log"

    def __call__(self, info, req, work: Path, timeout_s: float, stop=None) -> dict:
        work.mkdir(parents=True)
        (work / self.log).write_text("Out of memory: Killed process 42 (python3)\n")
        return backends._read_result(work, work / self.log, self.backend)


@pytest.mark.parametrize("backend", ["uml", "native"])
def test_a_failed_runs_error_cites_a_log_its_folder_holds(tmp_path, monkeypatch, backend):
    f = tmp_path / "e.yaml"
    f.write_text(experiment_yaml("unit", {"name": "oom"}))
    runs = expand(load(f))
    exp_dir = tmp_path / "results" / "oom"
    exp_dir.mkdir(parents=True)
    lab = DyingLab(backend)
    monkeypatch.setattr(backends, "run_task", lab)
    rec = runner.run_batch(runs, exp_dir, backends.BackendInfo(backend, "virtual", "/k/linux"), tmp_path, tmp_path,
                           {})[0]
    run_dir = exp_dir / runs[0].run_id
    assert not rec["ok"] and f"(see {run_dir / lab.log})" in rec["error"], rec["error"]
    assert "Out of memory" in (run_dir / lab.log).read_text()
    assert "-boot" not in rec["error"] and not list(exp_dir.glob(".*-boot"))
    assert store.read_record(run_dir).error == rec["error"]
    assert verify.check_run(run_dir) == ([], [])  # the copied log is in the manifest


def test_figures_planted_in_the_results_folder_are_never_read(results, tmp_path, monkeypatch):
    """The studies' cache of analysed captures lives in the user's cache,
    by the capture's sha256: a results folder holds no figure that its
    records and manifests do not back. Before: .studies-cache/<run>.flights.json
    in the folder was read as the capture's analysis, whatever it said."""
    from tortoiselab.host.store import captures

    monkeypatch.setenv(captures.CACHE_ENV, str(tmp_path / "cache"))
    exp = results / "initcwnd@ci"
    want = captures.connections(exp / A)  # analysed, and kept by the capture's hash
    (kept,) = (tmp_path / "cache" / "flights").iterdir()
    assert kept.name == captures.cache_name(hashlib.sha256((exp / A / "server.pcap").read_bytes()).hexdigest())
    planted = exp / ".studies-cache" / f"{A}.flights.json"
    planted.parent.mkdir(exist_ok=True)
    planted.write_text(json.dumps([{**want[0], "syn_seen": True, "data_bytes": 1}]))
    assert captures.connections(exp / A) == want
    kept.unlink()  # not in the cache: analysed again, the same
    assert captures.connections(exp / A) == want
    os.mkfifo(tmp_path / "fifo")  # a capture that is no file is refused, not waited on
    (exp / A / "server.pcap").unlink()
    (exp / A / "server.pcap").symlink_to(tmp_path / "fifo")
    with pytest.raises(safefs.LinkRefused):
        captures.connections(exp / A)


