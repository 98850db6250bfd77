"""The runner's batch logic with a stand-in for the lab (the real lab is
tests/integration/test_determinism.py and test_faults.py): each run stored
once, as its load's result appears; a load that failed fails its run only;
a lab that dies keeps what it finished, fails the run it was on and boots
again for the rest, the batch's earlier runs replayed; a resume replays a
batch's stored runs. Also the time budget of one load (phases_of_load).
The planning itself: tests/unit/test_batch_plan.py."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.conftest import experiment_yaml
from tortoiselab.host import backends, batches, runner
from tortoiselab.host import cpus as cpus_mod
from tortoiselab.spec.experiment import expand, load

EXP = experiment_yaml("unit", {"name": "batches", "repetitions": 5})


class FakeLab:
    """backends.run_task as the guest behaves: boot.json, then one
    load-NNN/result.json per load as it ends. Each boot fails the load
    named in `fail_load` (its result says why) and dies at the load
    index in `die_at` (no result for it, LabError)."""

    def __init__(self, die_at: list[int | None], fail_load: str | None = None) -> None:
        self.die_at, self.fail_load, self.boots = list(die_at), fail_load, []

    def __call__(self, info, req, work: Path, timeout_s: float, stop=None) -> dict:
        work.mkdir(parents=True)
        self.boots.append([ld.label for ld in req.loads])
        die = self.die_at.pop(0) if self.die_at else None
        (work / "boot.json").write_text(json.dumps({"kernel_release": "x", "uptime_start_s": 1.0, "switch": "ovs"}))
        for i, ld in enumerate(req.loads):
            if i == die:
                raise backends.LabError("the lab died (watchdog)")
            d = work / f"load-{i:03d}"
            d.mkdir()
            why = "the loader wrote no summary" if ld.label == self.fail_load else "not a real lab"
            (d / "result.json").write_text(json.dumps({"index": i, "label": ld.label, "error": why,
                                                       "sim_set_up_s": 2.0 + i, "sim_end_s": 3.0 + i}))
        return {"ok": True, "task": {}}


def _setup(tmp_path, monkeypatch, lab: FakeLab):
    f = tmp_path / "e.yaml"
    f.write_text(EXP)
    runs = expand(load(f))
    exp_dir = tmp_path / "results" / "batches"
    exp_dir.mkdir(parents=True)
    monkeypatch.setattr(backends, "run_task", lab)
    info = backends.BackendInfo("uml", "virtual", "/k/linux")
    return runs, exp_dir, info


def _stored(exp_dir: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in exp_dir.glob("*/run.json")}


def test_every_run_is_stored_once_as_its_load_ends(tmp_path, monkeypatch):
    lab = FakeLab([None], fail_load=None)
    runs, exp_dir, info = _setup(tmp_path, monkeypatch, lab)
    seen = []
    recs = runner.run_batch(runs, exp_dir, info, tmp_path, tmp_path, {}, on_stored=lambda r: seen.append(r["run_id"]))
    assert lab.boots == [[r.run_id for r in runs]]  # one boot
    assert seen == [r.run_id for r in runs] == [r["run_id"] for r in recs]
    stored = _stored(exp_dir)
    assert set(stored) == {r.run_id for r in runs}
    for i, r in enumerate(runs):
        b = stored[r.run_id]["meta"]["batch"]
        assert (b["index"], b["size"], b["runs"]) == (i, len(runs), [x.run_id for x in runs])
    assert not list(exp_dir.glob(".*"))  # no work folder left


def test_a_dying_lab_keeps_what_it_finished_and_boots_again_for_the_rest(tmp_path, monkeypatch):
    lab = FakeLab([2, None])  # the first boot dies on its third load
    runs, exp_dir, info = _setup(tmp_path, monkeypatch, lab)
    recs = runner.run_batch(runs, exp_dir, info, tmp_path, tmp_path, {})
    ids = [r.run_id for r in runs]
    # the rest in a boot of their own, after the batch's first three loaded again (replays, not stored again)
    assert lab.boots == [ids, ids]
    assert [r["run_id"] for r in recs] == ids
    stored = _stored(exp_dir)
    assert set(stored) == set(ids)
    assert "the lab died (watchdog)" in stored[ids[2]]["error"]  # the run it was on
    assert all(stored[i]["error"] == "lab: load: not a real lab" for i in ids[:2] + ids[3:])
    assert [stored[i]["meta"]["batch"]["replayed"] for i in ids[3:]] == [ids[:3], ids[:3]]
    assert all(stored[i]["meta"]["batch"]["index"] == k for k, i in enumerate(ids) if i != ids[2])
    assert not list(exp_dir.glob(".*"))


def test_replays_are_loaded_not_stored(tmp_path, monkeypatch):
    """A batch's later runs alone (a resume, a shard): the boot loads its
    earlier runs first and stores only the later ones, which name their
    batch, their place in it and what was replayed."""
    from tortoiselab.host.batches import Batch, batch_id

    lab = FakeLab([None])
    runs, exp_dir, info = _setup(tmp_path, monkeypatch, lab)
    ids = [r.run_id for r in runs]
    b = Batch(batch_id(ids), tuple(runs))
    seen = []
    recs = runner.run_batch(runs[:4], exp_dir, info, tmp_path, tmp_path, {}, batch=b, replay=ids[:2],
                            on_stored=lambda r: seen.append(r["run_id"]))
    assert lab.boots == [ids[:4]] and seen == ids[2:4] == [r["run_id"] for r in recs]
    stored = _stored(exp_dir)
    assert set(stored) == set(ids[2:4])
    for k in (2, 3):
        m = stored[ids[k]]["meta"]["batch"]
        assert (m["id"], m["index"], m["size"], m["runs"], m["replayed"]) == (b.id, k, 5, ids, ids[:2])
        assert m["replays_differing"] == []  # the fake's loads have no PLT: not known, not differing
    assert not list(exp_dir.glob(".*"))
    assert runner.run_batch(runs[:2], exp_dir, info, tmp_path, tmp_path, {}, batch=b, replay=ids[:2]) == []
    assert len(lab.boots) == 1  # nothing to store: no boot


def test_a_failed_load_fails_its_run_only(tmp_path, monkeypatch):
    runs, exp_dir, info = _setup(tmp_path, monkeypatch, FakeLab([None]))
    lab = FakeLab([None], fail_load=runs[1].run_id)
    monkeypatch.setattr(backends, "run_task", lab)
    runner.run_batch(runs, exp_dir, info, tmp_path, tmp_path, {})
    stored = _stored(exp_dir)
    assert stored[runs[1].run_id]["error"] == "lab: load: the loader wrote no summary"
    assert len(lab.boots) == 1 and len(stored) == len(runs)


def test_an_interrupted_batch_stores_nothing_more(tmp_path, monkeypatch):
    import threading

    lab = FakeLab([1])
    runs, exp_dir, info = _setup(tmp_path, monkeypatch, lab)
    stop = threading.Event()
    stop.set()  # the runner is being stopped (Ctrl-C, a scheduler's SIGTERM)
    with pytest.raises(runner.RunInterrupted):
        runner.run_batch(runs, exp_dir, info, tmp_path, tmp_path, {}, stop=stop)
    assert set(_stored(exp_dir)) == {runs[0].run_id}  # finished before the lab died: kept
    assert not list(exp_dir.glob(".*"))  # the rest stay pending, no work left


def test_phases_of_a_boots_first_load_and_a_later_one():
    boot = {"boot_ready": 12.0}
    first = {"topology_ready": 15.0, "set_up": 15.1, "capture_on": 15.5, "loaded": 16.25, "captured": 16.3,
             "end": 16.4}
    assert runner.phases_of_load(0, boot, first, 10.0) == {
        "boot": 2.0, "topology": 3.0, "services": 0.5, "load": 0.75, "capture": 0.05, "collect": 0.1}
    later = {"previous_end": 16.4, "set_up": 16.6, "capture_on": 17.0, "loaded": 17.5, "captured": 17.55, "end": 17.6}
    assert runner.phases_of_load(1, boot, later, 10.0) == {
        "wait": 0.2, "services": 0.4, "load": 0.5, "capture": 0.05, "collect": 0.05}
    assert runner.phases_of_load(1, {}, {"previous_end": 1.0}, 0.0) == {}  # a load that failed early


def test_a_lab_is_pinned_to_one_cpu_and_labs_side_by_side_to_different_ones(tmp_path):
    import os

    taskset, *rest = cpus_mod.pinned(["python", "-S", "x"], 1)
    assert Path(taskset).is_absolute() and Path(taskset).name == "taskset" and rest == ["-c", "1", "python", "-S", "x"]
    assert cpus_mod.pinned(["python"], None) == ["python"]
    cpus = sorted(os.sched_getaffinity(0))
    locks = tmp_path / "cpus"
    with cpus_mod.cpu_slot(locks) as a:
        assert a in cpus
        with cpus_mod.cpu_slot(locks) as b:  # another lab, here or in another process: another CPU
            assert (b in cpus and b != a) if len(cpus) > 1 else b is None
        with cpus_mod.cpu_slot(locks) as c:  # given back
            assert c == b
    assert locks.stat().st_mode & 0o1777 == 0o1777  # every user's labs share the folder
    (tmp_path / "file").write_text("")
    with cpus_mod.cpu_slot(tmp_path / "file" / "cpus") as d:  # an unusable folder: unpinned, as before
        assert d is None


@pytest.mark.parametrize("clock,asked,boots", [("virtual", None, [3, 2]), ("real", None, [3, 2]),
                                               ("virtual", 3, [3, 2]), ("virtual", 4, [3, 2]),
                                               ("virtual", 1, [1] * 5)])
def test_batches_of_at_most_sixteen_by_default_on_either_clock(tmp_path, monkeypatch, clock, asked, boots):
    """The runner's default: batches of at most DEFAULT_BATCH on both clocks
    (the batch is the unit of reproduction: docs/determinism.md, "Batches"),
    near-equal and at least two (five runs: 3 and 2, not 5); --batch N is
    honoured, --batch 1 boots once per run."""
    f = tmp_path / "e.yaml"
    f.write_text(EXP)
    lab = FakeLab([])
    monkeypatch.setattr(backends, "run_task", lab)
    monkeypatch.setattr(backends, "choose", lambda backend, clk, ccs: backends.BackendInfo("uml", clock, "/k/linux"))
    monkeypatch.setattr(runner, "check_kernel_paths", lambda info: None)
    monkeypatch.setattr(runner, "checked_assets", lambda exp_dir, certs, **_: (tmp_path, tmp_path))
    monkeypatch.setattr(runner, "check_manifest_urls", lambda runs, site: None)
    res = runner.run_experiment(f, tmp_path / "results", backend="uml", clock=clock, jobs=2,
                                **({} if asked is None else {"batch": asked}))
    assert res["done_now"] == 5 and sorted(len(b) for b in lab.boots) == sorted(boots)
    assert batches.default_batch("virtual") == batches.default_batch("real") == batches.DEFAULT_BATCH == 16


def test_a_resumed_sweep_replays_its_batches_first_runs(tmp_path, monkeypatch):
    """--limit stops inside a batch; the next invocation loads the batch
    from its first run again and stores only the runs not stored yet."""
    from tortoiselab.spec.experiment import run_order

    f = tmp_path / "e.yaml"
    f.write_text(EXP)
    lab = FakeLab([])
    monkeypatch.setattr(backends, "run_task", lab)
    monkeypatch.setattr(backends, "choose", lambda backend, clk, ccs: backends.BackendInfo("uml", "virtual", "/k"))
    monkeypatch.setattr(runner, "check_kernel_paths", lambda info: None)
    monkeypatch.setattr(runner, "checked_assets", lambda exp_dir, certs, **_: (tmp_path, tmp_path))
    monkeypatch.setattr(runner, "check_manifest_urls", lambda runs, site: None)
    order = [r.run_id for r in run_order(load(f), expand(load(f)))]
    first = runner.run_experiment(f, tmp_path / "results", backend="uml", clock="virtual", limit=2)
    assert [r["run_id"] for r in first["records"]] == order[:2] and lab.boots == [order[:2]]
    rest = runner.run_experiment(f, tmp_path / "results", backend="uml", clock="virtual", jobs=2)
    # five runs are two batches (3 + 2): the first loaded again from its first run, the second whole
    assert sorted(r["run_id"] for r in rest["records"]) == sorted(order[2:])
    assert sorted(lab.boots[1:]) == sorted([order[:3], order[3:]])
    stored = _stored(tmp_path / "results" / "batches")
    assert {i: stored[i]["meta"]["batch"]["index"] for i in order} == {i: k % 3 for k, i in enumerate(order)}
    assert len({stored[i]["meta"]["batch"]["id"] for i in order}) == 2
    assert stored[order[2]]["meta"]["batch"]["replayed"] == order[:2]
    assert stored[order[4]]["meta"]["batch"]["replayed"] == []


@pytest.mark.parametrize("backend,clock,cpus,jobs", [("uml", "virtual", 2, 2), ("uml", "virtual", 1, 1),
                                                     ("uml", "virtual", 0, 1), ("uml", "real", 8, 1),
                                                     ("native", "real", 8, 1)])
def test_default_jobs_fill_the_cpus_on_the_virtual_clock_only(backend, clock, cpus, jobs):
    """A lab per CPU where the machine's load cannot move a run (the
    virtual clock), one lab elsewhere."""
    assert batches.default_jobs(backend, clock, cpus) == jobs


def test_the_pki_is_made_for_the_certificates_of_every_run_not_only_the_pending(tmp_path, monkeypatch):
    """A run list (or a shard) of the `shared` runs alone still gets the
    PKI of the whole sweep: a later invocation of the other runs finds its
    variants there (host/assets.py)."""
    f = tmp_path / "e.yaml"
    f.write_text(experiment_yaml("unit", {"name": "batches", "repetitions": 1,
                                          "sweep.server.cert": ["shared", "large", "separate-rsa"]}))
    first = expand(load(f))[0]
    assert first.config["server"]["cert"] == "shared"
    (tmp_path / "runs.txt").write_text(first.run_id + "\n")
    asked = []
    monkeypatch.setattr(backends, "run_task", FakeLab([]))
    monkeypatch.setattr(backends, "choose", lambda backend, clk, ccs: backends.BackendInfo("uml", "virtual", "/k"))
    monkeypatch.setattr(runner, "check_kernel_paths", lambda info: None)
    monkeypatch.setattr(runner, "checked_assets", lambda exp_dir, certs, **_: asked.append(set(certs)) or (tmp_path, tmp_path))
    monkeypatch.setattr(runner, "check_manifest_urls", lambda runs, site: None)
    res = runner.run_experiment(f, tmp_path / "results", backend="uml", clock="virtual", runs_file=tmp_path / "runs.txt")
    assert res["done_now"] == 1 and asked == [{"shared", "large", "separate-rsa"}]


def test_a_load_is_stored_soon_after_it_ends_while_the_lab_goes_on(tmp_path, monkeypatch):
    """The runner looks for finished loads every STORE_POLL_S (not every
    half second): the last run of a batch is stored during the lab's
    teardown, not after it (docs/speed.md)."""
    fake = FakeLab([None])

    def slow_teardown(info, req, work, timeout_s, stop=None):
        out = fake(info, req, work, timeout_s, stop)  # every load's result written at once
        written.append(time.monotonic())
        time.sleep(0.6)  # then the teardown
        return out

    written, stored_at = [], []
    runs, exp_dir, _ = _setup(tmp_path, monkeypatch, fake)
    monkeypatch.setattr(backends, "run_task", slow_teardown)
    info = backends.BackendInfo("native", "real")  # no CPU sampler (it would wait for a UML kernel process)
    runner.run_batch(runs[:2], exp_dir, info, tmp_path, tmp_path, {}, on_stored=lambda r: stored_at.append(time.monotonic()))
    assert len(stored_at) == 2 and max(stored_at) - written[0] < 0.3, [t - written[0] for t in stored_at]


@pytest.mark.parametrize("jobs", [0, -2])
def test_jobs_below_one_is_refused_before_anything_is_made(tmp_path, jobs):
    f = tmp_path / "e.yaml"
    f.write_text(EXP)
    with pytest.raises(runner.RunnerError, match=r"jobs: give a whole number >= 1"):
        runner.run_experiment(f, tmp_path / "results", backend="uml", clock="virtual", jobs=jobs)
    assert not (tmp_path / "results").exists()


def test_verify_determinism_takes_the_default_jobs(tmp_path, monkeypatch):
    """--verify-determinism without --jobs (None) reruns with the runner's
    default rather than failing on None (found after --jobs' default
    became the CPUs)."""
    from tortoiselab.host import determinism

    seen = {}
    monkeypatch.setattr(determinism, "sample_runs", lambda exp_dir, ids, n, seed: ids[:1])
    monkeypatch.setattr(determinism.store, "read_record", lambda d: type("R", (), {"meta": type("M", (), {
        "clock": "virtual"})()})())
    monkeypatch.setattr(backends, "choose", lambda backend, clk, ccs: backends.BackendInfo("uml", "virtual", "/k"))
    monkeypatch.setattr(determinism, "rerun_and_compare",
                        lambda exp_dir, chosen, specs, info, work, jobs, on_progress=None: seen.setdefault("jobs",
                                                                                                         jobs) and [])
    f = tmp_path / "e.yaml"
    f.write_text(EXP)
    lab = tmp_path / "results" / "batches" / ".lab"
    lab.mkdir(parents=True)
    (lab / "READY").write_text("ok\n")
    determinism.verify(f, tmp_path / "results", n=1)
    assert seen["jobs"] == batches.default_jobs("uml", "virtual", len(os.sched_getaffinity(0)))


@pytest.mark.parametrize("jobs,error", [(None, "backend: the cluster's array tasks"), (1, "backend: the cluster's"),
                                        (2, "jobs: with --executor slurm")])
def test_slurm_takes_jobs_left_out_as_one_lab_per_task(jobs, error):
    """--jobs left out (None, the runner's default since issue 38) is no
    refusal on the Slurm executor (it failed its integration test); an
    explicit 2 still is. The checks run before anything is submitted: the
    native backend is refused next, which shows the jobs check passed."""
    from argparse import Namespace

    from tortoiselab.host import slurm

    a = Namespace(shard=None, limit=None, runs_file=None, jobs=jobs, backend="native", batch=None)
    with pytest.raises(runner.RunnerError, match=error):
        slurm.cli_run(a)


def test_a_full_filesystem_while_a_run_is_stored_leaves_no_work_folder(tmp_path, monkeypatch):
    """The results filesystem fills up while the batch's second run is
    stored: ResultsFull, the first run kept whole, and nothing of the
    batch's work left, the lab's boot folder (.<id>.tmp-<tag>-boot)
    included (issue 50: it was left, on a 30 MB tmpfs)."""
    import errno

    from tortoiselab.host import store

    runs, exp_dir, info = _setup(tmp_path, monkeypatch, FakeLab([None]))
    write_record, calls = store.write_record, []

    def full_on_second(run_dir, record):
        calls.append(run_dir)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return write_record(run_dir, record)

    monkeypatch.setattr(store, "write_record", full_on_second)
    with pytest.raises(runner.ResultsFull, match="no space left"):
        runner.run_batch(runs, exp_dir, info, tmp_path, tmp_path, {})
    assert set(_stored(exp_dir)) == {runs[0].run_id}
    assert sorted(p.name for p in exp_dir.glob(".*")) == []
