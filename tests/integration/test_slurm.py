"""The cluster executor on a real Slurm: a private single-node cluster
(Debian's munged, slurmctld, slurmd; configured and started here, stopped by
their pids) runs an 8-run sweep as a job array, 2 tasks at a time. One array
task is cancelled midway; running the same command again submits only the
missing runs. Every run completes exactly once, and the runs table matches
the same sweep run on this machine as three hand-made shards side by side
(--shard 1/3, 2/3, 3/3), whose runs are disjoint and cover the sweep."""

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import TORTOISE, experiment_yaml, group_alive
from tests.slurm_cluster import ClusterError, missing_binaries, private_cluster

pytestmark = pytest.mark.lab

EXP = experiment_yaml("two-arms", {"name": "cluster", "repetitions": 4,
                                   "path": {"rtt_ms": 20, "loss_pct": 0, "rate_mbit": 50},
                                   "sweep.server.cc": ["cubic", "reno"]})
# the same on both executors, to the bit: the configuration and what was counted
EXACT = ["run_id", "experiment", "repetition", "seed", "ok", "error", "path.rtt_ms", "path.loss_pct",
         "path.rate_mbit", "server.cc", "server.initcwnd_pkts", "client.page", "bytes", "connections_opened",
         "backend", "clock", "kernel_release"]
# times on the virtual clock: equal to the microsecond in practice; a tolerance of
# 50 us leaves room for the last digit of guest timer rounding (see the report)
TIMED = ["plt_ms", "plt_from_request_ms", "content_download_ms", "ttfb_ms", "tcp_rtt_ms"]


@pytest.fixture
def cluster(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the private Slurm cluster needs root")
    if missing_binaries():
        pytest.fail(f"missing {', '.join(missing_binaries())}: run 'make setup'")
    try:
        with private_cluster(tmp_path / "slurm") as env:
            yield env
    except ClusterError as exc:
        pytest.fail(str(exc))


def _tortoise(args, env, timeout=900):
    return subprocess.run([*TORTOISE, *args], capture_output=True, text=True, env=env, timeout=timeout)


def _wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def _live_run(exp_dir: Path):
    """(run id, uml pgid) of the run whose lab guest booted last and still
    runs, its run not yet stored (a run is stored as soon as its load is
    done, while its lab tears down)."""
    live = []
    for d in exp_dir.glob(".*.tmp-*"):
        pg = d / "lab" / "uml.pgid"
        try:
            pgid = int(pg.read_text())
            if group_alive(pgid) and not (exp_dir / d.name[1:13] / "run.json").exists():
                live.append((pg.stat().st_mtime, d.name[1:13], pgid))
        except (OSError, ValueError):
            continue  # not there yet, or the run just finished
    return max(live)[1:] if live else None


def test_sweep_on_slurm_with_a_cancelled_task(tmp_path, lab_kernel, cluster, monkeypatch):
    from tortoiselab.host import slurm

    for k, v in cluster.items():  # squeue called from this process must find the private cluster too
        monkeypatch.setenv(k, v)

    f = tmp_path / "cluster.yaml"
    f.write_text(EXP)
    results = tmp_path / "on-slurm"
    exp_dir = results / "cluster"
    # --batch 1: a boot per run, so that the 8 runs are 8 array tasks (one to cancel, the rest to finish)
    submit = ["run", str(f), "--executor", "slurm", "--array-parallelism", "2", "--batch", "1", "--results",
              str(results)]

    p = _tortoise(submit, cluster)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "8 of 8 runs in 8 array tasks" in p.stdout
    job = slurm.load_jobs(exp_dir)[0]
    assert job["tasks"] == 8 and len(job["runs"]) == 8

    # midway: a run done and another one's lab up; cancel the array task doing it
    _wait_for(lambda: list(exp_dir.glob("*/run.json")), 600, "a first completed run")
    pattern = rf"slurm job {job['job_id']}: 8 array tasks: (\d+) queued, (\d+) running, (\d+) done, 0 failed"

    def a_task_done():  # a run is stored as soon as its load is done, its task ends after its lab's teardown
        ls = _tortoise(["ls", "--results", str(results)], cluster)
        m = re.search(pattern, ls.stdout)
        assert m and sum(map(int, m.groups())) == 8, ls.stdout
        return int(m[3]) >= 1

    _wait_for(a_task_done, 120, "Slurm to count a finished array task")
    # a run takes a few seconds of wall time from boot to result: cancel its
    # task as soon as its lab is seen (a `tortoise ls` in between let it finish)
    run_id, pgid = _wait_for(lambda: _live_run(exp_dir), 300, "a run with its lab booted")
    runs_txt = (Path(job["dir"]) / "runs.txt").read_text().split()
    assert runs_txt == job["runs"]  # the list the tasks slice, frozen at submission
    task = next(i for i in range(job["tasks"]) if run_id in slurm.task_runs(job, i))  # the task holding it
    subprocess.run(["scancel", f"{job['job_id']}_{task}"], check=True, env=cluster)

    _wait_for(lambda: not slurm.active_jobs(exp_dir), 900, "the first job to be over")
    states = slurm.task_states(job)
    assert states[task] == "CANCELLED", states
    assert not (exp_dir / run_id / "run.json").exists()
    missing = {r for r in job["runs"] if not (exp_dir / r / "run.json").exists()}
    assert run_id in missing
    ls = _tortoise(["ls", "--results", str(results)], cluster)
    assert f"{8 - len(missing)}/8 done" in ls.stdout and "1 failed" in ls.stdout, ls.stdout

    # the same command again: only the missing runs go, and the sweep completes
    p = _tortoise([*submit, "--wait"], cluster)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"{len(missing)} of 8 runs" in p.stdout
    second = slurm.load_jobs(exp_dir)[1]
    assert set(second["runs"]) == missing

    done = sorted(d.name for d in exp_dir.iterdir() if (d / "run.json").exists())
    assert done == sorted(job["runs"])
    for r in done:  # one completed attempt per run, the cancelled one left no second folder
        lines = (exp_dir / ".claims" / f"{r}.lock").read_text().splitlines()
        assert sum(ln.startswith("done ") for ln in lines) == 1, (r, lines)
    assert sum(ln.startswith("start ") for ln in
               (exp_dir / ".claims" / f"{run_id}.lock").read_text().splitlines()) == 2
    assert not list(exp_dir.glob(".*.tmp-*"))
    assert not group_alive(pgid), "the cancelled task's lab still runs"
    p = _tortoise(submit, cluster)
    assert p.returncode == 0 and "nothing to submit" in p.stdout, p.stdout + p.stderr

    # the same sweep on this machine, by hand: --shard 1/3, 2/3 and 3/3 side by side, one folder
    local = tmp_path / "local"
    shards = {k: subprocess.Popen([*TORTOISE, "run", str(f), "--results", str(local), "--backend", "uml",
                                   "--clock", "virtual", "--batch", "1", "--shard", f"{k}/3"], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True) for k in (1, 2, 3)}
    for k, sp in shards.items():
        out, _ = sp.communicate(timeout=900)
        assert sp.returncode == 0, (k, out)
    by_pid = {sp.pid: k for k, sp in shards.items()}
    did = {1: set(), 2: set(), 3: set()}
    for r in job["runs"]:
        starts = [ln.split() for ln in (local / "cluster" / ".claims" / f"{r}.lock").read_text().splitlines()
                  if ln.startswith("start ")]
        assert len(starts) == 1, (r, starts)  # each run done once, by one shard
        did[by_pid[int(starts[0][2])]].add(r)
    from tortoiselab.host import batches as batch_plan
    from tortoiselab.spec.experiment import expand, load, run_order

    ids = [r.run_id for r in expand(load(f))]
    fixed = batch_plan.fixed_batches(run_order(load(f), expand(load(f))), 1)
    for k in (1, 2, 3):  # a shard is whole batches (host/batches.shard_of_batches)
        assert did[k] == set(batch_plan.shard_of_batches(fixed, ids, (k, 3))), did
    assert did[1] | did[2] | did[3] == set(job["runs"])

    import pandas as pd

    a = pd.read_parquet(exp_dir / "runs.parquet").set_index("run_id", drop=False)
    b = pd.read_parquet(local / "cluster" / "runs.parquet").set_index("run_id", drop=False)
    assert sorted(a.index) == sorted(b.index) and len(a) == 8 and a["ok"].all()
    b = b.loc[a.index]
    pd.testing.assert_frame_equal(a[EXACT], b[EXACT])
    for col in TIMED:
        assert a[col].notna().all()
        assert ((a[col] - b[col]).abs() <= 0.05).all(), (col, a[col].tolist(), b[col].tolist())
    rec = json.loads((exp_dir / done[0] / "run.json").read_text())
    assert rec["meta"]["backend"] == "uml" and rec["meta"]["clock"] == "virtual"
