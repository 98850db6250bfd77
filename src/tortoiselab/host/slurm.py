"""A sweep on a Slurm cluster, as an ordinary user: the pending runs go out
as one job array (sbatch --array), each array task running one shard of the
sweep (`tortoise run FILE --shard i/K --backend uml --jobs 1`) on its node
and writing into the same results folder with the runner's atomic, claimed,
resumable per-run writes. Slurm schedules; we only submit and look.

Assumptions (checked where we can, before anything is submitted):
  - the results folder is on a filesystem every node mounts at the same path
    (NFS, Lustre, GPFS, BeeGFS, CephFS ...) and that honours flock across
    nodes (NFSv4; Lustre mounted with -o flock), since the per-run claims are
    flocks. A tmpfs is certainly not shared: we warn.
  - the project, its venv and the lab kernel (`make setup kernel`, with
    TORTOISE_CACHE on shared storage) are at the same paths on every node; an
    array task on a node that lacks them stops at once with a clear message;
  - so is the sites folder when runs name an imported site (client.site):
    each is checked whole before the job goes, and every task gets its path
    as --sites (docs/your-own-site.md).

results/<exp>/.slurm/
  jobs.json                 one entry per submission: job id, K, run ids, ...
  <utc stamp>/job.sh        the batch script; experiment.yaml, the file it ran
  <utc stamp>/logs/         %A_%a.out per array task
  <utc stamp>/task-<i>.rc   exit code of array task i (absent if it was killed)
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from tortoiselab.host import backends, labkernel, safefs
from tortoiselab.spec.experiment import expand, load, run_order
from tortoiselab.host.errors import RunnerError
from tortoiselab.host.locks import probe_claim, setup_lock
from tortoiselab.host.batches import DEFAULT_BATCH, fixed_batches, selected
from tortoiselab.host.sites import load_site
from tortoiselab.host.store import completed, files, rebuild_table
from tortoiselab.host.storedtraces import folder_traces
from tortoiselab.host.versions import one_experiment
from tortoiselab.project import REPO_DIR

MAX_TASKS = 1000  # Slurm's default MaxArraySize is 1001 (indices 0..1000)
NOT_SHARED_FS = {"tmpfs", "ramfs", "devtmpfs"}
NETWORK_FS = {"nfs", "nfs4", "lustre", "gpfs", "beegfs", "cephfs", "ceph", "glusterfs", "fuse.glusterfs",
              "panfs", "wekafs", "fuse.sshfs", "cifs", "smb3", "9p", "virtiofs"}
QUEUED = {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "RESV_DEL_HOLD", "SUSPENDED"}
RUNNING = {"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING", "RESIZING"}
FAILED = {"FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE",
          "REVOKED", "SPECIAL_EXIT"}
TIME_RE = re.compile(r"^(\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d+|\d+-\d+:\d{1,2}|\d+-\d+:\d{1,2}:\d{1,2})$")
MEM_RE = re.compile(r"^\d+[KMGT]?$")
PARTITION_RE = re.compile(r"^[A-Za-z0-9_.\-]+(,[A-Za-z0-9_.\-]+)*$")
SLURM_OPTIONS = ("partition", "array_parallelism", "time", "mem", "wait")


def check_options(partition: str | None, parallelism: int | None, time_limit: str | None,
                  mem: str | None) -> None:
    """Every option, before anything is written or submitted."""
    if parallelism is not None and parallelism < 1:
        raise RunnerError(f"array-parallelism: at most this many array tasks run at once; give 1 or more, "
                          f"not {parallelism}")
    if partition is not None and not PARTITION_RE.fullmatch(partition):
        raise RunnerError(f"partition: {partition!r} is not a partition name (letters, digits, _ . -; "
                          "several with commas); `sinfo -s` lists them")
    if time_limit is not None and not TIME_RE.fullmatch(time_limit):
        raise RunnerError(f"time: {time_limit!r} is not a Slurm time limit; write minutes (30), MM:SS, "
                          "HH:MM:SS or D-HH[:MM[:SS]], e.g. --time 2:00:00")
    if mem is not None and not MEM_RE.fullmatch(mem):
        raise RunnerError(f"mem: {mem!r} is not a Slurm memory size; write a number with K, M, G or T, "
                          "e.g. --mem 2G (the UML guest alone has 1G)")


def refuse_slurm_options(a) -> None:
    """Slurm's options mean nothing to the local executor: say so."""
    given = [o for o in SLURM_OPTIONS if getattr(a, o, None) not in (None, False)]
    if given:
        raise RunnerError(f"{given[0].replace('_', '-')}: only with --executor slurm")


def mount_of(path: Path) -> tuple[str, str]:
    """(mount point, filesystem type) of the mount that holds path."""
    best = ("/", "unknown")
    p = str(path.resolve())
    for line in Path("/proc/mounts").read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        mnt = parts[1].replace("\\040", " ")
        if (p == mnt or p.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best[0]):
            best = (mnt, parts[2])
    return best


def shared_fs_warnings(paths: dict[str, Path]) -> list[str]:
    """What we can tell of whether the nodes will see these folders."""
    out, local = [], []
    for what, p in paths.items():
        mnt, fs = mount_of(p)
        if fs in NOT_SHARED_FS:
            out.append(f"{what} {p} is on {fs} ({mnt}), memory of this machine: other nodes will not see it")
        elif fs not in NETWORK_FS:
            local.append(f"{what} ({fs} {mnt})")
    if local:
        out.append(f"on local filesystems: {', '.join(local)}: fine if the cluster is this machine; other "
                   "nodes need them shared at the same paths")
    return out


def check_lab() -> tuple[Path, Path]:
    """The lab kernel and the venv must already be built (make setup kernel):
    array tasks reuse them, never build them."""
    kernel = labkernel.kernel_path()
    if not kernel.exists():
        raise RunnerError(f"executor: the UML lab kernel is not built ({kernel}); run 'make setup kernel' once, "
                          "with TORTOISE_CACHE on storage every node mounts")
    venv_tortoise = Path(sys.prefix) / "bin" / "tortoise"
    if not venv_tortoise.exists():
        raise RunnerError(f"executor: no tortoise in the venv ({venv_tortoise}); run 'make setup'")
    return kernel, venv_tortoise


def batch_script(sub: Path, exp_file: Path, results: Path, tasks: int, clock: str, grid: str | None,
                 kernel: Path, batch: int = DEFAULT_BATCH, sites: Path | None = None) -> str:
    """The array task: check the node has what it needs, then run its shard
    (whole batches of `batch` runs, host/batches.py); sites: where the
    imported sites its runs name (client.site) are kept, as the submit host
    resolved it (docs/your-own-site.md)."""
    q = shlex.quote
    grid_arg = f" --grid {q(grid)}" if grid else ""
    grid_arg += f" --sites {q(str(sites))}" if sites is not None else ""
    run = (f"{q(sys.executable)} -m tortoiselab.cli run {q(str(exp_file))} --runs-file {q(str(sub / 'runs.txt'))} "
           f"--shard \"$shard\" --backend uml --batch {int(batch)} "
           f"--clock {q(clock)} --jobs 1 --results {q(str(results))}{grid_arg}")
    return f"""#!/bin/bash
# tortoise: one shard of a sweep per array task (written by tortoise run --executor slurm)
set -u
task="${{SLURM_ARRAY_TASK_ID:?not an array task}}"
shard="$((task + 1))/{tasks}"
rc_file={q(str(sub))}/task-$task.rc
fail() {{ echo "tortoise: array task $task on $(hostname): $*" >&2; echo 3 > "$rc_file"; exit 3; }}
[ -d {q(str(REPO_DIR))} ] || fail "no project at {REPO_DIR}: it must be on storage every node mounts"
[ -x {q(sys.executable)} ] || fail "no venv python at {sys.executable}: run 'make setup' where every node sees it"
kernel="${{TORTOISE_KERNEL:-$(bash {q(str(REPO_DIR / 'kernel' / 'build-uml.sh'))} --path)}}"
[ -x "$kernel" ] || fail "no lab kernel at $kernel (built for {kernel} on the submit host): run 'make setup kernel' once with TORTOISE_CACHE on shared storage"
echo "tortoise: array task $task, shard $shard, on $(hostname), kernel $kernel"
{run}
rc=$?
echo "$rc" > "$rc_file"
exit "$rc"
"""


def load_jobs(exp_dir: Path) -> list[dict]:
    f = exp_dir / ".slurm" / "jobs.json"  # neither through a link nor from a FIFO (host/safefs.py)
    return json.loads(safefs.read_bytes_regular(f, exp_dir, doing=f"reading {f}")) if os.path.lexists(f) else []


def _record_job(exp_dir: Path, entry: dict) -> None:
    with setup_lock(exp_dir):
        jobs = load_jobs(exp_dir) + [entry]
        files.write_file(exp_dir, exp_dir / ".slurm" / "jobs.json", json.dumps(jobs, indent=1))


def _slurm(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise RunnerError(f"executor: {argv[0]} not found; Slurm's client commands must be on PATH "
                          "(Debian: slurm-client)") from None


def _squeue_job(jid: str, attempts: int = 5) -> subprocess.CompletedProcess:
    """squeue for one job's tasks. A job the controller has forgotten
    (MinJobAge) is an error that says so, and then the caller looks elsewhere;
    any other error (seen on a loaded machine: the controller did not answer
    in time) is retried, and raised if it persists, never read as "no task
    queued or running": that would resubmit runs that are still under way."""
    for attempt in range(attempts):
        p = _slurm(["squeue", "-h", "-r", "-t", "all", "-j", jid, "-o", "%i|%T"])
        if p.returncode == 0 or "invalid job id" in p.stderr.lower():
            return p
        time.sleep(1 + attempt)
    raise RunnerError(f"executor: squeue -j {jid} failed {attempts} times: {p.stderr.strip()[-300:]}")


def task_states(job: dict) -> dict[int, str]:
    """State of each array task: squeue (jobs the controller still knows),
    then sacct (if accounting is on), then the exit codes the tasks wrote."""
    states: dict[int, str] = {}
    jid = str(job["job_id"])
    if shutil.which("squeue"):
        p = _squeue_job(jid)
        for line in p.stdout.split() if p.returncode == 0 else []:
            tid, _, state = line.partition("|")
            if tid.startswith(jid + "_") and tid[len(jid) + 1:].isdigit():
                states[int(tid[len(jid) + 1:])] = state
    if len(states) < job["tasks"] and shutil.which("sacct"):
        p = _slurm(["sacct", "-n", "-P", "-X", "-j", jid, "-o", "JobID,State"])
        for line in p.stdout.split() if p.returncode == 0 else []:
            tid, _, state = line.partition("|")
            idx = tid.partition("_")[2]
            if idx.isdigit():
                states.setdefault(int(idx), state.split()[0] if state else "UNKNOWN")
    for i in range(job["tasks"]):
        rc = Path(job["dir"]) / f"task-{i}.rc"
        if i not in states:
            ok = rc.exists() and rc.read_text(encoding="utf-8").strip() == "0"
            states[i] = ("COMPLETED" if ok else "FAILED") if rc.exists() else "UNKNOWN"
    return states


def _kind(state: str) -> str:
    if state in QUEUED:
        return "queued"
    if state in RUNNING:
        return "running"
    if state == "COMPLETED":
        return "done"
    return "failed" if state in FAILED else "unknown"


def task_runs(job: dict, task: int) -> list[str]:
    """The runs array task `task` (from 0) of a recorded job was given: its
    shard of the run list frozen at submission, whole batches of the frozen
    experiment (host/batches.selected, as the task's `tortoise run` works it out)."""
    sub = Path(job["dir"])
    return selected(sub / "experiment.yaml", job.get("grid"), sub / "runs.txt", (task + 1, job["tasks"]),
                    job.get("batch", DEFAULT_BATCH))[2]


def _stored_task_runs(exp_dir: Path, job: dict, task: int) -> list[str]:
    """task_runs of a job the folder records, read as the folder's own: its
    submission folder inside <exp>/.slurm, its traces the project's or the
    folder's copies (host/storedtraces.py); [] when it cannot say (a listing
    must not fail, nor read elsewhere, on one bad record)."""
    sub = Path(str(job.get("dir", "")))
    slurm_dir = Path(os.path.realpath(exp_dir)) / ".slurm"  # the results root above may be a link (trusted)
    if sub.parent != slurm_dir or ".." in sub.parts or any(
            safefs.is_link(p) for p in (slurm_dir, sub, sub / "experiment.yaml", sub / "runs.txt")):
        return []
    try:
        with folder_traces(exp_dir):
            return task_runs(job, task)
    except (ValueError, OSError, RunnerError, *safefs.REFUSED):
        return []


def status(exp_dir: Path) -> dict | None:
    """Array tasks by kind (queued/running/done/failed) of every recorded job,
    and the runs still queued in tasks that have not finished. None if the
    experiment never went to Slurm."""
    jobs = load_jobs(exp_dir)
    if not jobs:
        return None
    out = {"jobs": [], "queued_runs": 0}
    for job in jobs:
        states = task_states(job)
        kinds = {k: 0 for k in ("queued", "running", "done", "failed", "unknown")}
        for s in states.values():
            kinds[_kind(s)] += 1
        active = {i for i, s in states.items() if _kind(s) in ("queued", "running")}
        for i in sorted(active):  # task i runs slice i+1 of the run list frozen at submission
            for rid in _stored_task_runs(exp_dir, job, i):
                if not completed(exp_dir, rid):
                    with probe_claim(exp_dir, rid) as (free, _):
                        out["queued_runs"] += free
        out["jobs"].append({"job_id": job["job_id"], "tasks": job["tasks"], **kinds})
    return out


def active_jobs(exp_dir: Path) -> list[str]:
    """Recorded jobs that still have queued or running tasks."""
    return [str(j["job_id"]) for j in load_jobs(exp_dir)
            if any(_kind(s) in ("queued", "running") for s in task_states(j).values())]


def imported_sites(exp_dir: Path, runs, sites: Path) -> Path | None:
    """The sites folder (resolved: the nodes must find the very same one)
    when runs name an imported site (client.site), each checked whole
    (host/sites.load_site) unless the results folder holds its staged copy
    already (the runner checks that one); None when no run names one.
    RunnerError naming the site and the fix, before a job is submitted."""
    names = sorted({r.settings.client.site for r in runs} - {None})
    if not names:
        return None
    sites = Path(sites).resolve()
    for name in names:
        if not os.path.lexists(exp_dir / ".lab" / "imported" / name):
            load_site(sites, name)
    return sites


def submit(exp_file: Path, results: Path, partition: str | None = None, parallelism: int | None = None,
           time_limit: str | None = None, mem: str | None = None, clock: str = "virtual",
           grid: str | None = None, batch: int = DEFAULT_BATCH, sites: Path = Path("sites")) -> dict:
    """Submit the pending runs of an experiment as one job array; nothing if
    none is pending. Refuses while an earlier job of it is still queued or
    running (re-run the command when it is over: only what is missing goes).
    sites: the imported sites its runs name (client.site), passed on to
    every array task as --sites."""
    check_options(partition, parallelism, time_limit, mem)
    if clock not in ("virtual", "real"):
        raise RunnerError("clock: give virtual or real with --executor slurm (the nodes run the uml backend)")
    exp = load(exp_file, grid=grid)
    runs = expand(exp)
    results = results.resolve()  # the nodes must find the very same folder
    exp_dir = results / exp.name
    safefs.refuse_links(exp_dir, f"results folder {exp_dir}")  # .slurm/ and the rest: no link followed
    site_dir = imported_sites(exp_dir, runs, sites)
    kernel, _ = check_lab()
    if shutil.which("sbatch") is None:
        raise RunnerError("executor: sbatch not found; Slurm's client commands must be on PATH "
                          "(Debian: slurm-client)")
    one_experiment(exp_dir, exp, runs)  # another version of it in the folder: refused before a job (host/versions.py)
    files.ensure_folder(exp_dir)
    warnings = shared_fs_warnings({"results folder": results, "project": REPO_DIR,
                                   "venv": Path(sys.prefix), "lab kernel": kernel,
                                   **({"imported sites": site_dir} if site_dir is not None else {})})
    busy = active_jobs(exp_dir)
    if busy:
        raise RunnerError(f"executor: job {', '.join(busy)} of {exp.name} is still queued or running "
                          f"(tortoise ls --results {results}); wait for it (or scancel it), then run this "
                          "again: only the missing runs are submitted")
    pending = [r.run_id for r in runs if not completed(exp_dir, r.run_id)]
    out = {"experiment": exp.name, "dir": str(exp_dir), "total": len(runs), "pending": len(pending),
           "warnings": warnings, "job_id": None}
    if not pending:
        return out
    # a task's shard is whole batches (host/batches.shard_of_batches): no more tasks than batches to do
    held = {b.id for b in fixed_batches(run_order(exp, runs), batch) if set(b.run_ids) & set(pending)}
    tasks = min(len(held), MAX_TASKS)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    sub = exp_dir / ".slurm" / stamp
    doing = f"submitting {exp.name} to Slurm"  # never through a link (host/store/files.py)
    files.make_dirs(exp_dir, sub / "logs", doing)
    frozen = sub / "experiment.yaml"  # what the tasks run, whatever happens to FILE meanwhile
    files.write_new(exp_dir, frozen, Path(exp_file).read_text(encoding="utf-8"), doing)
    # task i: every tasks-th from i
    files.write_new(exp_dir, sub / "runs.txt", "".join(f"{rid}\n" for rid in pending), doing)
    script = files.write_new(exp_dir, sub / "job.sh",
                             batch_script(sub, frozen, results, tasks, clock, grid, kernel, batch, site_dir), doing)
    throttle = f"%{parallelism}" if parallelism else ""  # none: as many at once as Slurm gives
    argv = ["sbatch", "--parsable", f"--array=0-{tasks - 1}{throttle}", f"--job-name=tortoise-{exp.name}",
            f"--output={sub}/logs/%A_%a.out", f"--chdir={sub}", "--cpus-per-task=1"]
    argv += [f"--partition={partition}"] * bool(partition) + [f"--time={time_limit}"] * bool(time_limit)
    argv += [f"--mem={mem}"] * bool(mem) + [str(script)]
    t0 = time.monotonic()
    p = _slurm(argv)
    if p.returncode != 0:
        raise RunnerError(f"executor: sbatch refused the job: {(p.stderr or p.stdout).strip()}")
    job_id = p.stdout.strip().split(";")[0]
    _record_job(exp_dir, {"job_id": job_id, "submitted": datetime.now(timezone.utc).isoformat(),
                          "tasks": tasks, "parallelism": parallelism, "runs": pending, "dir": str(sub),
                          "argv": argv, "clock": clock, "grid": grid, "batch": batch})
    return {**out, "job_id": job_id, "tasks": tasks, "submit_seconds": round(time.monotonic() - t0, 3),
            "script": str(script)}


def wait(exp_dir: Path, job_id: str, poll_s: float = 2.0, on_change=None) -> dict:
    """Until no task of the job is queued or running; then the runs table."""
    job = next(j for j in load_jobs(exp_dir) if str(j["job_id"]) == str(job_id))
    last = None
    while True:
        states = task_states(job)
        counts = {k: sum(1 for s in states.values() if _kind(s) == k) for k in ("queued", "running", "done",
                                                                               "failed", "unknown")}
        if counts != last and on_change:
            on_change(counts)
        last = counts
        if counts["queued"] + counts["running"] == 0:
            break
        time.sleep(poll_s)
    with setup_lock(exp_dir):
        rebuild_table(exp_dir)
    return counts


def cli_run(a) -> int:
    """`tortoise run FILE --executor slurm ...`."""
    given = [o for o, v in (("shard", a.shard), ("limit", a.limit), ("runs-file", a.runs_file)) if v is not None]
    if given:
        raise RunnerError(f"{given[0]}: not with --executor slurm (it shares the pending runs out over the "
                          "array's tasks itself)")
    if a.jobs not in (None, 1):  # None: not given
        raise RunnerError("jobs: with --executor slurm every array task runs one lab (--jobs 1); "
                          "use --array-parallelism for more at once")
    if a.backend == "native":
        raise RunnerError("backend: the cluster's array tasks run the uml backend (no root); drop --backend native")
    if a.batch is not None and a.batch < 1:
        raise RunnerError(f"batch: must be at least 1 (got {a.batch}); 1 boots the lab once per run")
    res = submit(Path(a.file), Path(a.results), partition=a.partition, parallelism=a.array_parallelism,
                 time_limit=a.time, mem=a.mem, clock="real" if a.clock == "real" else "virtual",
                 grid=getattr(a, "grid", None), batch=a.batch if a.batch is not None else DEFAULT_BATCH,
                 sites=Path(getattr(a, "sites", "sites")))
    for w in res["warnings"]:
        print(f"tortoise: warning: {w}", file=sys.stderr)
    if res["job_id"] is None:
        print(f"{res['experiment']}: all {res['total']} runs complete; nothing to submit ({res['dir']})")
        return 0
    print(f"{res['experiment']}: submitted job {res['job_id']}: {res['pending']} of {res['total']} runs in "
          f"{res['tasks']} array tasks, {a.array_parallelism or 'as many as Slurm gives'} at once "
          f"(sbatch took {res['submit_seconds']:.2f} s)\n  script {res['script']}\n"
          f"  progress: tortoise ls --results {Path(a.results).resolve()}")
    if not a.wait:
        return 0
    counts = wait(Path(res["dir"]), res["job_id"],
                  on_change=lambda c: print("  tasks: " + ", ".join(f"{v} {k}" for k, v in c.items() if v),
                                            flush=True))
    exp_dir = Path(res["dir"])
    missing = [r for r in load_jobs(exp_dir)[-1]["runs"] if not completed(exp_dir, r)]
    print(f"job {res['job_id']} over: {counts['done']} tasks done, {counts['failed'] + counts['unknown']} failed; "
          f"{len(missing)} runs missing" + ("; run the same command again to submit them" if missing else ""))
    return 0 if not missing and counts["failed"] + counts["unknown"] == 0 else 3
