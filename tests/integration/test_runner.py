"""The runner: SIGKILL in the middle of a sweep, run again, and nothing
completed is touched; the runs table loads with pandas and DuckDB."""

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import TORTOISE, experiment_yaml, group_alive, host_state, write_yaml

pytestmark = pytest.mark.lab

EXP = experiment_yaml("two-arms", {"name": "resume", "seed": 5, "path.loss_pct": 0.5,
                                   "sweep.server.cc": ["cubic", "reno"]})


def _snapshot(exp_dir: Path) -> dict:
    out = {}
    for d in exp_dir.iterdir():
        if d.is_dir() and not d.name.startswith(".") and (d / "run.json").exists():
            out[d.name] = {f.name: (f.stat().st_mtime_ns, f.stat().st_size) for f in d.iterdir()}
    return out


def test_sigkill_then_resume(tmp_path, lab_kernel):
    before = host_state()
    f = write_yaml(tmp_path, EXP, "resume.yaml")
    results = tmp_path / "results"
    exp_dir = results / "resume"
    proc = subprocess.Popen([*TORTOISE, "run", str(f), "--results", str(results), "--backend", "uml",
                             "--clock", "virtual"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    # wait for one completed run and the next one under way
    while time.monotonic() < deadline:
        # pathlib's * matches dot names too: a run's work folder holds a run.json before it is stored
        done = [r for r in exp_dir.glob("*/run.json") if not r.parent.name.startswith(".")] \
            if exp_dir.exists() else []
        busy = [d for d in exp_dir.glob(".*.tmp-*") if (d / "lab" / "uml.pgid").exists()] if exp_dir.exists() else []
        if done and busy:
            break
        time.sleep(0.5)
    assert done and busy, "the runner never had a completed and a running run at once"
    pgid = int((busy[0] / "lab" / "uml.pgid").read_text())
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    kept = _snapshot(exp_dir)
    assert len(kept) >= 1

    p = subprocess.run([*TORTOISE, "run", str(f), "--results", str(results), "--backend", "uml",
                        "--clock", "virtual"], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    after = _snapshot(exp_dir)
    for run_id, files in kept.items():  # completed runs untouched: same files, same mtimes
        assert after[run_id] == files
    assert len(after) == 4  # the sweep's size
    assert not list(exp_dir.glob(".*.tmp-*"))  # the interrupted run was cleaned and redone
    # its orphaned lab was killed by its recorded id
    assert not group_alive(pgid), (p.stdout + p.stderr + subprocess.run(
        ["ps", "-o", "pid,ppid,pgid,stat,lstart,args", "-g", str(pgid)], capture_output=True, text=True).stdout)

    import duckdb
    import pandas as pd

    from tortoiselab.host.store import COLUMNS

    df = pd.read_parquet(exp_dir / "runs.parquet")
    assert list(df.columns) == list(COLUMNS)
    assert len(df) == 4 and df["run_id"].is_unique and df["ok"].all()
    assert set(df["server.cc"]) == {"cubic", "reno"}
    rows = duckdb.sql(f"select count(distinct run_id) from read_parquet('{exp_dir / 'runs.parquet'}')").fetchall()
    assert rows == [(4,)]
    rec = json.loads(next(exp_dir.glob("*/run.json")).read_text())
    for key in ("backend", "clock", "kernel_release", "modules", "server_sysctls", "tools", "started", "ended"):
        assert key in rec["meta"], key
    assert rec["meta"]["tools"]["tortoiselab_git"]
    assert {"page.har", "server.pcap", "client.pcap", "run.json", "config.json"} <= {
        x.name for x in (exp_dir / rec["run_id"]).iterdir()}

    c = subprocess.run([*TORTOISE, "clean", "--results", str(results)], capture_output=True, text=True)
    assert c.returncode == 0
    assert host_state() == before
