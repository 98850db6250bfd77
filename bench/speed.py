"""Where a page-load run's time goes, and what batches and the 7.3 lab kernel
buy (issue 20), as figures.

experiments/quick.yaml (6 runs: the feed page over 200 ms, 1 %, 10 Mbit/s,
cubic and hybla) end to end with `tortoise run`, once per configuration:
lab kernel 6.12 (UML in ptrace mode) and 7.3 (seccomp mode where the host
allows it), a boot per run (--batch 1) and one boot for several (the
runner's default batch), --jobs 1 and 2. Per configuration: wall time,
runs/hour, the total simulated page-load time over the wall time, the CPU
time per run (the runner and everything it started), and a per-phase table
from the host-clock marks every run records (meta.phases; host/runner.py
phases_of_load): boot, topology, services, wait, load, capture, collect,
store, and the rest of the wall time (teardown, the runner's own work).
Beside it the floor (docs/speed.md): the lab's host CPU over each load's
interval (meta.load_cpu, host/labcpu.py) per simulated second of the
loads, i.e. the wall seconds per simulated second if nothing but the loads
ran, against the wall seconds per simulated second each configuration took.
A configuration may name its clock (series:batch:jobs:real): on the real
clock as on the virtual one our loader runs in one process per boot, each
load in it, without a Python start (client/loadserver.py).

    .venv/bin/python bench/speed.py [--configs 6.12:1:1,7.3:d:d,7.3:8:1:real] [--rounds 3] [--out DIR]
                                    [--before OTHER-CHECKOUT-VENV/bin/python]
                                    [--experiment experiments/tortoise.yaml --grid reduced]

--experiment and --grid bench another sweep than quick.yaml (a study's
reduced grid, say) the same way. The first table gives, beside runs/hour
and the simulated page-load time over the wall (the real-time ratio), how
many times its floor the configuration's wall per simulated second was
(`x floor`, the floor table's last column).

A batch or jobs of `d` leaves the runner's default (`tortoise run` with no
--batch or --jobs: the configuration a user gets). --before runs every
configuration a second time with another checkout's interpreter, in the
same rounds (before and after a change, in the same weather).

The configurations run in turn, round after round (--rounds), and each
figure is the median over the rounds: the wall time of this project's
virtual machines drifts by a factor of two over minutes (other guests on
the host), and interleaving puts every configuration in the same weather.
Figures, not assertions; the runs stay in --out for a look.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PHASES = ("boot", "topology", "services", "wait", "load", "capture", "collect", "store")
CPU_GROUPS = ("kernel_s", "ended_s", "set_up_s", "standing_s", "new_s")  # host/labcpu.load_cpu
DEFAULT_CONFIGS = "6.12:1:1,6.12:8:1,7.3:1:1,7.3:8:1,7.3:d:d,7.3:8:1:real"
BASELINE = "issue 20's baseline (6.12, a boot per run, before this change): 191 s wall for these 6 runs, " \
           "113 runs/hour, 16.5 CPU-s per run"


def kernel_ready(series: str) -> None:
    """Build (or find in the cache) the lab kernel of a series."""
    subprocess.run(["bash", str(REPO / "kernel" / "build-uml.sh")], check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "TORTOISE_KERNEL_SERIES": series})


def run_config(series: str, batch: str, jobs: str, out: Path, clock: str = "virtual",
               python: str = sys.executable, label: str = "",
               experiment: Path = REPO / "experiments" / "quick.yaml", grid: str | None = None) -> dict:
    """An experiment (quick.yaml) once with `python -m tortoiselab.cli run`
    (another interpreter: another checkout, e.g. the code before a change);
    batch and jobs "d" leave the runner's defaults."""
    results = out / f"k{series}-b{batch}-j{jobs}-{clock}{label.replace(' ', '-')}-{time.time_ns()}"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    opts = [*(["--batch", batch] if batch != "d" else []), *(["--jobs", jobs] if jobs != "d" else [])]
    opts += ["--grid", grid] if grid else []
    p = subprocess.run([python, "-m", "tortoiselab.cli", "run", str(experiment),
                        "--results", str(results), *opts, "--backend", "uml", "--clock", clock],
                       capture_output=True, text=True, env={**os.environ, "TORTOISE_KERNEL_SERIES": series})
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    recs = [json.loads(f.read_text()) for f in sorted(results.glob("*/*/run.json"))]
    ok = [r for r in recs if r["ok"]]
    phases = {k: sum(r["meta"].get("phases", {}).get(k, 0.0) for r in recs) for k in PHASES}
    said = re.search(r"runs/hour, jobs (\d+)\)", p.stdout)  # what the runner chose when left to its default
    jobs_used = int(said.group(1)) if said else (int(jobs) if jobs != "d" else 1)
    return {"config": f"{series} batch {batch} jobs {jobs}" + (f" {clock}" if clock != "virtual" else "") + label,
            "jobs": jobs_used, "load_cpu": load_cpu_sums(ok), "rc": p.returncode, "runs": len(recs), "ok": len(ok),
            "wall": wall, "cpu": cpu, "load_sim": sum(r["meta"].get("load_sim_seconds") or 0 for r in ok),
            "userspace": sorted({str(r["meta"].get("uml_userspace")) for r in recs}), "phases": phases,
            "tail": (p.stdout + p.stderr)[-600:] if p.returncode else ""}


def load_cpu_sums(recs: list[dict]) -> dict:
    """Over the runs whose load's CPU was measured: their CPU groups, the
    load phase's wall and the loads' simulated seconds, summed; `runs` how
    many, `unmeasured` why the others were not."""
    ok = [r for r in recs if (r["meta"].get("load_cpu") or {}).get("total_s") is not None]
    out = {k: sum(r["meta"]["load_cpu"][k] for r in ok) for k in (*CPU_GROUPS, "total_s", "wall_s")}
    out["sim_s"] = sum(r["meta"].get("load_sim_seconds") or 0 for r in ok)
    out["lag_ms"] = max((max(r["meta"]["load_cpu"]["lag_ms"]) for r in ok), default=None)
    out["runs"] = len(ok)
    out["unmeasured"] = sorted({(r["meta"].get("load_cpu") or {}).get("why") or "no meta.load_cpu"
                                for r in recs if r not in ok})
    return out


def floor_row(r: dict, cores: int) -> dict:
    """A configuration against its floor: the loads' host CPU per simulated
    second (the floor of one lab), the same divided among the labs that can
    run at once (min(jobs, cores)), the wall seconds per simulated second it
    took and their ratio; None where nothing was measured."""
    c = r["load_cpu"]
    if not c["runs"] or not c["sim_s"] or not r["load_sim"]:
        return {"floor_cpu": None, "floor_wall": None, "wall_per_sim": None, "ratio": None}
    floor_cpu = c["total_s"] / c["sim_s"]
    floor_wall = floor_cpu / max(1, min(r["jobs"], cores))
    wall_per_sim = r["wall"] / r["load_sim"]
    return {"floor_cpu": floor_cpu, "floor_wall": floor_wall, "wall_per_sim": wall_per_sim,
            "ratio": wall_per_sim / floor_wall}


def floor_report(rows: list[dict], cores: int) -> list[str]:
    """The floor table: per configuration, host CPU seconds of the loads by
    group per simulated second, the floor and how far the configuration is
    from it; then what the measurement could not attribute."""
    lines = ["", "the floor: the lab's host CPU over each load's interval (capture on .. loader done; "
                 "host/labcpu.py) per simulated second of the loads",
             "  kernel = UML kernel process (guest kernel: TCP, netem, OVS datapath, system calls); loader = guest "
             "processes ended in the interval (the loader, its Python start included); servers = started in the "
             "load's set-up (Apache, dnsmasq, 2 tcpdump); standing = OVS daemons, shells, the lab task",
             f"{'configuration':<34} {'sim s':>6} {'kernel':>7} {'loader':>7} {'servers':>7} {'standing':>8} "
             f"{'new':>5} {'floor':>6} {'floor/lab':>9} {'wall/sim':>8} {'x floor':>7}  (CPU s per simulated s; "
             f"floor/lab = floor / min(jobs, {cores} cores))"]
    notes = []
    for r in rows:
        c, f = r["load_cpu"], floor_row(r, cores)
        if f["floor_cpu"] is None:
            lines.append(f"{r['config']:<34} not measured: {'; '.join(c['unmeasured']) or 'no ok runs'}")
            continue
        per = {k: c[k] / c["sim_s"] for k in CPU_GROUPS}
        lines.append(f"{r['config']:<34} {c['sim_s']:>6.1f} {per['kernel_s']:>7.4f} {per['ended_s']:>7.4f} "
                     f"{per['set_up_s']:>7.4f} {per['standing_s']:>8.4f} {per['new_s']:>5.3f} {f['floor_cpu']:>6.4f} "
                     f"{f['floor_wall']:>9.4f} {f['wall_per_sim']:>8.4f} {f['ratio']:>7.1f}")
        unattributed = c["wall_s"] - c["total_s"]
        notes.append(f"  {r['config']}: load phase {c['wall_s']:.2f} s wall, {c['total_s']:.2f} s of it lab CPU, "
                     f"{unattributed:.2f} s not (the lab idle or waiting for the host, other processes on its CPU); "
                     f"sampler lag up to {c['lag_ms']} ms per mark; {c['runs']} of {r['runs']} runs measured"
                     + (f" ({'; '.join(c['unmeasured'])})" if c["unmeasured"] else ""))
    return lines + ["not attributed:"] + notes + [
        "  the loader's own work and its Python start are one group (a host process is not mapped to its guest "
        "process); the loader runs in one process per boot (client/loadserver.py), standing from the first load"]


def median_row(rows: list[dict]) -> dict:
    """One configuration over its rounds: the round of median wall time,
    every round's outcome kept (runs, ok, failures)."""
    mid = sorted(rows, key=lambda r: r["wall"])[len(rows) // 2]
    return {**mid, "runs": min(r["runs"] for r in rows), "ok": min(r["ok"] for r in rows),
            "tail": "\n".join(r["tail"] for r in rows if r["tail"]),
            "config": f"{mid['config']} ({len(rows)}x)", "jobs": mid["jobs"],
            "walls": [round(r["wall"], 1) for r in rows]}


def report(rows: list[dict]) -> str:
    head = (f"{'configuration':<29} {'runs':>4} {'ok':>3} {'wall s':>7} {'runs/h':>7} {'load/wall':>9} "
            f"{'x floor':>7} {'CPU s/run':>9}  userspace; wall s of every round")
    lines = [head]
    cores = os.cpu_count() or 1
    for r in rows:
        n = max(r["runs"], 1)
        ratio = floor_row(r, cores)["ratio"]
        lines.append(f"{r['config']:<29} {r['runs']:>4} {r['ok']:>3} {r['wall']:>7.1f} "
                     f"{r['runs'] / r['wall'] * 3600:>7.0f} {r['load_sim'] / r['wall']:>9.2f} "
                     f"{'-' if ratio is None else f'{ratio:.1f}':>7} {r['cpu'] / n:>9.2f}"
                     f"  {','.join(r['userspace'])}; {r.get('walls', '')}")
        if r["tail"]:
            lines.append("    FAILED: " + r["tail"].replace("\n", "\n    "))
    lines += ["", "wall seconds per run by phase (host clock; 'rest' = teardown and the runner's own work, "
                  "which overlap between jobs)",
              f"{'configuration':<29} " + " ".join(f"{k:>8}" for k in (*PHASES, "rest"))]
    for r in rows:
        n = max(r["runs"], 1)
        rest = r["wall"] * r["jobs"] - sum(r["phases"].values())
        lines.append(f"{r['config']:<29} " + " ".join(f"{r['phases'][k] / n:>8.2f}" for k in PHASES)
                     + f" {rest / n:>8.2f}")
    lines += floor_report(rows, cores)
    lines += ["", BASELINE]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", default=DEFAULT_CONFIGS,
                    help="comma-separated series:batch:jobs[:clock] (default %(default)s; clock virtual)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds over the configurations (median)")
    ap.add_argument("--out", default=None, help="folder for the runs (default: a new one under /tmp)")
    ap.add_argument("--before", default=None, metavar="PYTHON",
                    help="also run every configuration with this interpreter (a venv of another checkout: the "
                         "code before a change), interleaved, labelled 'before'")
    ap.add_argument("--experiment", default=str(REPO / "experiments" / "quick.yaml"),
                    help="the experiment file to run (default %(default)s)")
    ap.add_argument("--grid", default=None, help="a grid of the experiment (e.g. reduced)")
    a = ap.parse_args()
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="tortoise-speed-"))
    configs = [tuple(c.split(":")) for c in a.configs.split(",")]
    for series in sorted({c[0] for c in configs}):
        kernel_ready(series)
    pythons = [(sys.executable, "")] + ([(a.before, " before")] if a.before else [])
    rounds: dict[tuple, list[dict]] = {(*c, label): [] for c in configs for _py, label in pythons}
    for n in range(a.rounds):
        for c in configs:
            for py, label in pythons:
                row = run_config(c[0], c[1], c[2], out, *(c[3:4] or ["virtual"]), python=py, label=label,
                                 experiment=Path(a.experiment), grid=a.grid)
                rounds[(*c, label)].append(row)
                print(f"  round {n + 1}: {row['config']}: {row['runs']} runs in {row['wall']:.1f} s", flush=True)
    print(report([median_row(rows) for rows in rounds.values()]))
    print(f"runs in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
