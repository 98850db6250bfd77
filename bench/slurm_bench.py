"""Benchmark: runs/hour of the local executor (--jobs 2) vs Slurm with 2
array tasks at once on this machine (a private single-node cluster, as in
tests/integration/test_slurm.py), and what Slurm costs per array task.
Prints figures; asserts nothing. Needs root, make setup kernel.

    .venv/bin/python bench/slurm_bench.py [--runs 8]

Per-task overhead, three ways: sbatch's own time per task; Slurm's dispatch
of an array of empty tasks (/bin/true) 2 at a time; and a tortoise array task
that finds nothing pending (interpreter, experiment, backend checks, table).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.slurm_cluster import private_cluster  # noqa: E402

TORTOISE = [sys.executable, "-m", "tortoiselab.cli"]
EXP = """name: bench
repetitions: {reps}
seed: 7
path: {{rtt_ms: 20, loss_pct: 0, rate_mbit: 50}}
server: {{cc: cubic, initcwnd_pkts: 10}}
client: {{page: tiny.html}}
sweep:
  server.cc: [cubic, reno]
"""


def timed(argv: list[str], env: dict | None = None) -> float:
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{p.stdout}{p.stderr}")
    return time.monotonic() - t0


def dispatch_seconds(env: dict, work: Path, tasks: int) -> float:
    """Wall time of an array of empty tasks, 2 at a time, submit to over."""
    t0 = time.monotonic()
    p = subprocess.run(["sbatch", "--parsable", f"--array=0-{tasks - 1}%2", f"--output={work}/true_%a.out",
                        "--wrap", "/bin/true"], capture_output=True, text=True, env=env, check=True)
    job = p.stdout.strip().split(";")[0]
    while subprocess.run(["squeue", "-h", "-j", job, "-o", "%i"], capture_output=True, text=True,
                         env=env).stdout.strip():
        time.sleep(0.2)
    return time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=8, help="sweep size (even: 2 algorithms x repetitions)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tortoise-bench-slurm-") as d:
        work = Path(d)
        f = work / "bench.yaml"
        f.write_text(EXP.format(reps=max(1, a.runs // 2)))
        n = 2 * max(1, a.runs // 2)
        local = timed([*TORTOISE, "run", str(f), "--results", str(work / "local"), "--backend", "uml",
                       "--clock", "virtual", "--jobs", "2"])
        with private_cluster(work / "slurm") as env:
            t0 = time.monotonic()
            p = subprocess.run([*TORTOISE, "run", str(f), "--executor", "slurm", "--array-parallelism", "2",
                                "--results", str(work / "slurm-results"), "--wait"], capture_output=True,
                               text=True, env=env)
            on_slurm = time.monotonic() - t0
            if p.returncode != 0:
                sys.exit(f"slurm sweep failed:\n{p.stdout}{p.stderr}")
            sub = next(ln for ln in p.stdout.splitlines() if "submitted job" in ln)
            tasks = int(sub.split(" array tasks")[0].split()[-1])
            sbatch_s = float(sub.split("sbatch took ")[1].split(" s")[0])
            empty = dispatch_seconds(env, work, tasks)
            idle_task = timed([*TORTOISE, "run", str(f), "--shard", f"1/{tasks}", "--backend", "uml",
                               "--clock", "virtual", "--results", str(work / "slurm-results")], env)
        print(f"sweep: {n} runs (tiny.html, 20 ms RTT, virtual clock), 2 labs at a time on "
              f"{subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores")
        print(f"local executor (--jobs 2):           {local:7.1f} s  {n / local * 3600:7.0f} runs/hour")
        print(f"slurm, 2 array tasks at once:        {on_slurm:7.1f} s  {n / on_slurm * 3600:7.0f} runs/hour "
              f"({tasks} tasks)")
        print(f"ratio slurm / local runs/hour:       {local / on_slurm:7.2f}")
        print(f"sbatch per task:                     {sbatch_s / tasks * 1000:7.1f} ms ({sbatch_s:.2f} s for "
              f"{tasks} tasks)")
        print(f"slurm dispatch per empty task:       {empty / tasks * 2:7.2f} s per slot "
              f"({tasks} x /bin/true, 2 at once: {empty:.1f} s)")
        print(f"tortoise task with nothing pending:  {idle_task:7.2f} s")
        print(f"slurm overhead per task, all told:   {(on_slurm - local) * 2 / tasks:7.2f} s per slot "
              "((slurm wall - local wall) x 2 / tasks)")


if __name__ == "__main__":
    main()
