"""Run an experiment: every pending run of its sweep, each in its own lab
boot, stored so that nothing completed is ever lost or overwritten.

results/<experiment>/
  .lock                   held by the one runner of this experiment (flock), or
                          shared by the shards of its sweep (--shard i/N)
  .setup.lock             held for seconds: lab assets, cleaning, runs.parquet
  .claims/<run_id>.lock   held while a run is done (flock); its lines are the
                          run's attempts: "start <host> <pid> <utc>", "done <utc>"
  .lab/site, .lab/pki     pages and the lab PKI, made once per experiment
  <run_id>/               a completed run (renamed into place as a whole)
    run.json              config, metadata, summary, fidelity: the record
    page.har, server.pcap, client.pcap, commands.log, console.log
  .<run_id>.tmp-<pid>/    a run in progress (or interrupted: redone next time)
  runs.parquet            one row per completed run, rebuilt from the folders
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

from tortoiselab.host import backends, pageload
from tortoiselab.host.determinism import run_seeds
from tortoiselab.spec.experiment import RunSpec, expand, load, run_order
from tortoiselab.analysis.fidelity import rtt_check


class RunnerError(RuntimeError):
    pass


@contextmanager
def experiment_lock(exp_dir: Path, shared: bool = False) -> Iterator[None]:
    """One runner per experiment: an exclusive flock on .lock (released by
    the kernel if the runner dies, so a SIGKILL leaves no stale lock). The
    shards of a sweep (--shard i/N) hold it shared: they run side by side
    (per-run claims keep them apart), while a plain runner or `tortoise
    clean` refuses as long as any shard runs, and the other way round."""
    exp_dir.mkdir(parents=True, exist_ok=True)
    fh = open(exp_dir / ".lock", "a+")
    try:
        fcntl.flock(fh, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        holder = fh.read().strip()
        fh.close()
        raise RunnerError(f"another runner is working on {exp_dir} ({holder or 'shards of its sweep'}); "
                          "wait for it or stop it first") from None
    if not shared:
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        fh.flush()
    try:
        yield
    finally:
        if not shared:
            fh.truncate(0)
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


@contextmanager
def setup_lock(exp_dir: Path) -> Iterator[None]:
    """The few steps concurrent shards share, one at a time: cleaning,
    making the lab assets, rebuilding runs.parquet (seconds each)."""
    exp_dir.mkdir(parents=True, exist_ok=True)
    with open(exp_dir / ".setup.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def parse_shard(spec: str) -> tuple[int, int]:
    """'i/N' -> (i, N), 1 <= i <= N."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", spec or "")
    if not m:
        raise RunnerError(f"shard: give i/N, the i-th of N slices of the sweep (e.g. --shard 2/3), not {spec!r}")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1:
        raise RunnerError(f"shard: N (the number of slices) must be at least 1, got {spec!r}; e.g. --shard 1/4")
    if not 1 <= i <= n:
        raise RunnerError(f"shard: i must be between 1 and N={n}, got {i} in {spec!r}; e.g. --shard 1/{n}")
    return i, n


def shard_slice(run_ids: list[str], shard: tuple[int, int]) -> list[str]:
    """Slice i of N holds the runs at positions i-1, i-1+N, ... of run_ids
    (the sweep in its expansion order, or a run list the Slurm executor
    froze at submission). The slices differ in size by one at most, and a
    run's slice depends on the list alone, not on what is pending: N runners
    that each work out what is pending at a different moment still split
    the sweep disjointly, and their union is the whole list."""
    i, n = shard
    return run_ids[i - 1::n]


def read_run_list(path: Path, sweep_ids: list[str]) -> list[str]:
    """A run list (--runs-file): one run id per line, each of this sweep."""
    try:
        ids = [ln.strip() for ln in Path(path).read_text().splitlines() if ln.strip()]
    except OSError as e:
        raise RunnerError(f"runs-file: cannot read {path}: {e.strerror}") from None
    known = set(sweep_ids)
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise RunnerError(f"runs-file: {len(unknown)} run id(s) of {path} are not in this sweep (first: "
                          f"{unknown[0]}); list ids from the same experiment file and grid")
    if len(set(ids)) != len(ids):
        raise RunnerError(f"runs-file: {path} lists a run id twice; give each run once")
    return ids


def completed(exp_dir: Path, run_id: str) -> bool:
    return (exp_dir / run_id / "run.json").exists()


def stale_work(exp_dir: Path) -> list[Path]:
    return sorted(exp_dir.glob(".*.tmp-*"))


_RUN_TMP = re.compile(r"^\.([0-9a-f]{12})\.tmp-")


def _claim_file(exp_dir: Path, run_id: str) -> Path:
    return exp_dir / ".claims" / f"{run_id}.lock"


def _note(fh, what: str) -> None:
    fh.write(f"{what} {datetime.now(timezone.utc).isoformat()}\n")
    fh.flush()


@contextmanager
def claim(exp_dir: Path, run_id: str) -> Iterator:
    """The right to do one run, for one runner on any node: an exclusive
    flock on .claims/<run_id>.lock, released by the kernel (or NFS's lock
    manager) when the holder dies. It waits rather than skips, since the
    holder is either a runner doing this very run (the caller finds it
    complete afterwards) or a look of a second by clean_stale or ls."""
    f = _claim_file(exp_dir, run_id)
    f.parent.mkdir(exist_ok=True)
    with open(f, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield fh
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextmanager
def probe_claim(exp_dir: Path, run_id: str) -> Iterator[tuple[bool, str]]:
    """(free, last 'start' line) of a run's claim, holding it (shared) in
    the block when free so that no runner starts the run meanwhile."""
    f = _claim_file(exp_dir, run_id)
    if not f.exists():  # never claimed: work of a runner older than claims
        yield True, ""
        return
    with open(f, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False, ""
            return
        try:
            fh.seek(0)
            starts = [ln for ln in fh.read().splitlines() if ln.startswith("start ")]
            yield True, starts[-1] if starts else ""
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def clean_stale(exp_dir: Path, run_ids: set[str] | None = None) -> list[str]:
    """Remove what interrupted runs left: kill the UML process group each one
    recorded (uml.pgid) if it still runs, then delete its folder. Only work
    whose owner is gone is touched (its claim is free), never a live shard's,
    and a process group is killed only if its owner ran on this host (the id
    means nothing on another node). run_ids limits it to those runs (a shard
    cleans its own slice). Completed runs are not touched."""
    done = []
    with setup_lock(exp_dir):
        for tmp in stale_work(exp_dir):
            m = _RUN_TMP.match(tmp.name)
            if m is None:  # lab assets or runs.parquet, made only under setup_lock
                if tmp.is_dir():
                    shutil.rmtree(tmp, ignore_errors=True)
                else:
                    tmp.unlink(missing_ok=True)
                done.append(f"removed {tmp.name}")
                continue
            if run_ids is not None and m.group(1) not in run_ids:
                continue
            with probe_claim(exp_dir, m.group(1)) as (free, last_start):
                if not free:
                    continue
                host = last_start.split()[1] if last_start else socket.gethostname()
                pg = tmp / "lab" / "uml.pgid"
                if pg.exists() and host == socket.gethostname():
                    try:
                        os.killpg(int(pg.read_text()), signal.SIGKILL)
                        done.append(f"killed lab process group {pg.read_text().strip()} of {tmp.name}")
                    except (ProcessLookupError, ValueError):
                        pass
                shutil.rmtree(tmp, ignore_errors=True)
                done.append(f"removed {tmp.name}")
    return done


def lab_assets(exp_dir: Path, seed: int = 1) -> tuple[Path, Path]:
    """Pages and PKI for this experiment, made once (atomic rename)."""
    lab = exp_dir / ".lab"
    if (lab / "READY").exists():
        return lab / "site", lab / "pki"
    from tortoiselab.web import pages, pki

    tmp = exp_dir / f".lab.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    pages.generate_site(tmp / "site", seed=seed, domain="lab.test")
    pki.make_pki(tmp / "pki", domain="lab.test", seed_name=exp_dir.name)
    (tmp / "READY").write_text("ok\n")
    # the pki.json inside names files under tmp: rewrite to the final place
    pj = tmp / "pki" / "pki.json"
    pj.write_text(pj.read_text().replace(str(tmp), str(lab)))
    shutil.rmtree(lab, ignore_errors=True)
    os.rename(tmp, lab)
    os.chmod(lab, 0o755)
    return lab / "site", lab / "pki"


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, timeout=10,
                              cwd=backends.REPO_DIR).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def tool_versions() -> dict:
    """Versions of what runs in the lab (the guest uses the host's binaries)."""
    def first(argv: list[str]) -> str:
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
            return (p.stdout or p.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "not found"

    return {
        "python": sys.version.split()[0],
        "apache2": first(["/usr/sbin/apache2", "-v"]),
        "tcpdump": first(["tcpdump", "--version"]),
        "h2load": first(["h2load", "--version"]),
        "nghttp": first(["nghttp", "--version"]),
        "ovs": first(["ovs-vswitchd", "--version"]),
        "tc": first(["tc", "-V"]),
        "tortoiselab_git": _git("rev-parse", "HEAD"),
        "tortoiselab_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
    }


class RunInterrupted(RunnerError):
    """The runner was stopped while this run's lab ran: nothing is stored,
    the run stays pending."""


def run_one(run: RunSpec, exp_dir: Path, info: backends.BackendInfo, site: Path, pki: Path,
            versions: dict, timeout_s: float = 1800, stop: threading.Event | None = None) -> dict:
    """One run in its own lab boot, written to a temporary folder and renamed
    into place only when complete."""
    # fixed-length digits: the guest sees this path, and on the virtual clock
    # two runs repeat only if what the guest sees is the same (docs/determinism.md)
    tmp = exp_dir / f".{run.run_id}.tmp-{os.getpid() % 10**7:07d}-{threading.get_ident() % 100000:05d}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    (tmp / "config.json").write_text(json.dumps(run.as_dict(), indent=1, sort_keys=True))
    started = datetime.now(timezone.utc).isoformat()
    t0 = time.monotonic()
    record: dict = {"run_id": run.run_id, "experiment": run.experiment, "repetition": run.repetition,
                    "seed": run.seed, "point": run.point, "config": run.config, "path": run.path.model_dump()}
    try:
        res = backends.run_task(info, pageload.run_request(run, site, pki), tmp / "lab", timeout_s=timeout_s)
        ld = res["task"]["loads"][0]
        record["ok"] = not ld["summary"].get("error")
        record["error"] = ld["summary"].get("error")
        record["summary"] = {k: v for k, v in ld["summary"].items() if k not in ("raw",)}
        record["summary"].update(_floor(run, site, pki, record["summary"]))
        record["connections"] = ld["connections"]
        record["capture"] = {"server": ld["capture"], "client": ld["client_capture"]}
        record["meta"] = {
            "backend": info.backend, "clock": info.clock, "kernel_release": res["kernel_release"],
            "switch": res["switch"], "modules": res.get("modules", {}), "server_sysctls": ld["server_sysctls"],
            "server_route": ld["server_route"], "tools": versions,
            "sim_seconds": round(res["uptime_end_s"] - res["uptime_start_s"], 6),
            "load_sim_seconds": ld["load_seconds"],
            "seeds": run_seeds(run.seed, pageload.run_request(run, site, pki)["loads"][0]["client"]["seed"], site,
                               Path(pki).parent.parent.name, res["task"].get("seeds", {}), info.clock),
            "kernel": info.kernel, "code": res.get("code_digest"),  # the lab code that ran (guest.code_digest)
            # uml: the guest kernel's boot id, a draw from its CRNG: equal in two boots of a run
            # exactly when the CRNG followed the run's seed (docs/determinism.md)
            "guest_boot_id": res.get("boot_id"),
        }
        # configured vs measured: the TCP handshake's round trip in the capture
        rtts = [c["tcp_rtt_ms"] for c in ld["connections"] if c.get("tcp_rtt_ms")]
        fid = rtt_check(run.path, min(rtts) if rtts else None, len(rtts), len(ld["connections"]))
        record["fidelity"] = [fid.as_dict()]
        for name, src in (("page.har", ld.get("har")), ("server.pcap", ld.get("pcap")),
                          ("client.pcap", ld.get("client_pcap")), ("cwnd.json", ld.get("cwnd"))):
            if src and Path(src).exists():
                os.replace(src, tmp / name)
    except backends.LabError as exc:
        # a lab that died because the runner is being stopped (Ctrl-C, or a
        # scheduler's SIGTERM to every process of the job) is not a failed run:
        # store nothing, so that the run is done again next time
        if stop is not None and stop.wait(0.5):
            shutil.rmtree(tmp, ignore_errors=True)
            raise RunInterrupted(f"run {run.run_id}: interrupted") from exc
        record["ok"] = False
        record["error"] = f"lab: {exc}"[:2000]
    wall = time.monotonic() - t0
    record.setdefault("meta", {}).update({"started": started, "ended": datetime.now(timezone.utc).isoformat(),
                                          "wall_seconds": round(wall, 3)})
    for name in ("commands.log", "console.log"):
        if (tmp / "lab" / name).exists():
            os.replace(tmp / "lab" / name, tmp / name)
    shutil.rmtree(tmp / "lab", ignore_errors=True)
    (tmp / "run.json").write_text(json.dumps(record, indent=1, sort_keys=True, default=str))
    os.rename(tmp, exp_dir / run.run_id)  # the run appears whole, or not at all
    return record


def _floor(run: RunSpec, site: Path, pki: Path, summary: dict) -> dict:
    """The run's napkin floor and measured PLT / floor (tortoiselab.analysis.napkin),
    from its resolved path and server settings, the page in the site's
    manifest and the size of the server's handshake flight."""
    from tortoiselab.analysis import napkin

    try:
        f = napkin.run_floor(run.config, json.loads((site / "manifest.json").read_text()),
                             json.loads((pki / "pki.json").read_text()), summary.get("cached_urls") or ())
    except (OSError, ValueError, KeyError) as exc:  # a record without a floor beats a lost run
        f = {"floor_ms": None, "why": f"floor not computed: {exc}"[:300]}
    return {"floor_ms": f["floor_ms"], "plt_over_floor": napkin.ratio(summary.get("plt_ms"), f["floor_ms"])
            if f["floor_ms"] else None, "floor_model": f.get("model") or {"why": f.get("why")}}


def _claimed_run(run: RunSpec, exp_dir: Path, *args, stop: threading.Event | None = None) -> dict | None:
    """run_one under the run's claim; None if it was complete by the time
    the claim was ours (done by another runner)."""
    with claim(exp_dir, run.run_id) as fh:
        if completed(exp_dir, run.run_id):
            return None
        _note(fh, f"start {socket.gethostname()} {os.getpid()}")
        rec = run_one(run, exp_dir, *args, stop=stop)
        _note(fh, "done")
        return rec


def run_experiment(exp_file: Path, results: Path = Path("results"), jobs: int = 1, backend: str = "auto",
                   clock: str = "auto", limit: int | None = None,
                   on_progress: Callable[[dict, int, int], None] | None = None, grid: str | None = None,
                   shard: tuple[int, int] | None = None, runs_file: Path | None = None) -> dict:
    """Every pending run (of slice shard=(i, N) only, if given; of the runs
    listed in runs_file only, if given), each under its claim, so that
    shards running side by side never do a run twice."""
    if shard is not None:
        parse_shard(f"{shard[0]}/{shard[1]}")
    exp = load(exp_file, grid=grid)  # a grid runs into results/<name>@<grid>
    sweep = expand(exp)
    ids = [r.run_id for r in sweep]
    if runs_file is not None:
        ids = read_run_list(runs_file, ids)
    if shard is not None:
        ids = shard_slice(ids, shard)
    keep = set(ids)
    runs = run_order(exp, sweep)
    mine = [r for r in runs if r.run_id in keep]
    sliced = shard is not None or runs_file is not None
    exp_dir = Path(results).resolve() / exp.name  # the guest is given absolute paths only
    ccs = sorted({r.config["server"]["cc"] for r in runs})
    info = backends.choose(backend, clock, ccs)
    if info.backend == "native" and jobs > 1:
        raise RunnerError("jobs: runs on the native backend share the host's kernel; use --jobs 1 (or uml)")
    with experiment_lock(exp_dir, shared=sliced):
        cleaned = clean_stale(exp_dir, keep if sliced else None)
        with setup_lock(exp_dir):
            (exp_dir / "experiment.yaml").write_text(Path(exp_file).read_text()) \
                if not (exp_dir / "experiment.yaml").exists() else None
            site, pki = lab_assets(exp_dir)
        pending = [r for r in mine if not completed(exp_dir, r.run_id)]
        if limit is not None:
            pending = pending[:limit]
        versions = tool_versions()
        records, t0 = [], time.monotonic()
        stop = threading.Event()
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futs = {pool.submit(_claimed_run, r, exp_dir, info, site, pki, versions, stop=stop): r
                    for r in pending}
            try:
                for n, fut in enumerate(as_completed(futs), 1):
                    rec = fut.result()
                    if rec is None:  # another runner completed it meanwhile
                        continue
                    records.append(rec)
                    if on_progress:
                        on_progress(rec, n, len(pending))
            except BaseException:  # interrupted: runs under way store nothing, queued ones never start
                stop.set()
                pool.shutdown(wait=False, cancel_futures=True)
                raise
        with setup_lock(exp_dir):
            table = rebuild_table(exp_dir)
    return {"experiment": exp.name, "dir": str(exp_dir), "total": len(runs), "pending": len(pending),
            "done_now": len(records), "failed_now": sum(1 for r in records if not r["ok"]),
            "wall_seconds": round(time.monotonic() - t0, 3), "cleaned": cleaned, "table": str(table),
            "backend": info.backend, "clock": info.clock, "records": records}


# --- the runs table ----------------------------------------------------------

COLUMNS = {
    "run_id": "the run's id: hash of its resolved configuration and repetition",
    "experiment": "experiment name", "repetition": "0-based repetition", "seed": "the run's seed",
    "ok": "the load completed without error", "error": "what failed, if anything",
    "path.rtt_ms": "configured RTT", "path.loss_pct": "configured loss per direction",
    "path.rate_mbit": "configured rate (down)", "path.region": "region profile, if any",
    "server.cc": "server's congestion control", "server.initcwnd_pkts": "server's initial window",
    "server.protocol": "h2 or h1", "server.tls": "TLS version", "server.cert": "certificate variant",
    "client.page": "page", "client.loader": "loader | h2load | nghttp", "client.coalescing": "coalescing on",
    "client.cache_hit_ratio": "cache-hit ratio", "client.resolution": "same-ip | two-ip",
    "plt_ms": "page start (incl. DNS, TCP, TLS) to last byte",
    "floor_ms": "napkin-model floor of the PLT (tortoiselab.analysis.napkin.run_floor)",
    "plt_over_floor": "measured PLT / floor (>= 1)",
    "plt_from_request_ms": "first request sent to last byte",
    "content_download_ms": "first byte of the base HTML to last byte", "ttfb_ms": "time to first byte",
    "connections_opened": "TCP connections the page used", "reuse_ratio": "coalesced share of 2nd-origin requests",
    "bytes": "response body bytes", "throughput_mbit": "h2load throughput",
    "tcp_rtt_ms": "handshake RTT in the server capture", "fidelity_ok": "measured RTT within tolerance",
    "capture_drops": "packets tcpdump's kernel buffer dropped (both sides)",
    "backend": "native | uml", "clock": "real | virtual", "kernel_release": "lab kernel",
    "sim_seconds": "guest time of the run", "wall_seconds": "wall time of the run",
    "started": "UTC start", "ended": "UTC end",
}


def _row(rec: dict) -> dict:
    cfg, s, m = rec.get("config", {}), rec.get("summary", {}) or {}, rec.get("meta", {})
    row = {"run_id": rec["run_id"], "experiment": rec["experiment"], "repetition": rec["repetition"],
           "seed": str(rec["seed"]), "ok": bool(rec.get("ok")), "error": rec.get("error")}
    resolved = cfg.get("path", {}).get("resolved", rec.get("path", {}))
    row.update({"path.rtt_ms": resolved.get("rtt_ms"), "path.loss_pct": resolved.get("loss_pct"),
                "path.rate_mbit": resolved.get("rate_mbit"), "path.region": cfg.get("path", {}).get("region")})
    for sec, keys in (("server", ("cc", "initcwnd_pkts", "protocol", "tls", "cert")),
                      ("client", ("page", "loader", "coalescing", "cache_hit_ratio", "resolution"))):
        for k in keys:
            row[f"{sec}.{k}"] = cfg.get(sec, {}).get(k)
    for k in ("plt_ms", "floor_ms", "plt_over_floor", "plt_from_request_ms", "content_download_ms", "ttfb_ms",
              "connections_opened", "reuse_ratio", "bytes", "throughput_mbit"):
        v = s.get(k)
        row[k] = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    fid = (rec.get("fidelity") or [{}])[0]
    row["tcp_rtt_ms"] = fid.get("measured")
    row["fidelity_ok"] = fid.get("ok")
    caps = rec.get("capture", {})
    drops = [c.get("dropped_by_kernel") for c in caps.values() if isinstance(c, dict)]
    row["capture_drops"] = sum(d for d in drops if d is not None) if drops else None
    for k in ("backend", "clock", "kernel_release", "sim_seconds", "wall_seconds", "started", "ended"):
        row[k] = m.get(k)
    return row


def rebuild_table(exp_dir: Path) -> Path:
    """runs.parquet from the run folders, one row per completed run; the
    same folders give the same table (written atomically)."""
    import pandas as pd

    rows = []
    for rj in sorted(exp_dir.glob("*/run.json")):
        if rj.parent.name.startswith("."):
            continue
        rows.append(_row(json.loads(rj.read_text())))
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    df = df.sort_values("run_id").reset_index(drop=True) if len(df) else df
    out = exp_dir / "runs.parquet"
    tmp = exp_dir / f".runs.parquet.tmp-{os.getpid()}"
    df.to_parquet(tmp, index=False)
    os.replace(tmp, out)
    return out


def list_experiments(results: Path) -> list[dict]:
    from tortoiselab.host import slurm  # imports this module

    out = []
    for d in sorted(p for p in results.glob("*") if p.is_dir() and not p.name.startswith(".")):
        exp_file = d / "experiment.yaml"
        total = None
        if exp_file.exists():
            try:
                total = len(expand(load(exp_file, grid=d.name.partition("@")[2] or None)))
            except Exception:  # noqa: BLE001 - a listing must not fail on one bad file
                total = None
        recs = [json.loads(p.read_text()) for p in d.glob("*/run.json")]
        out.append({"experiment": d.name, "total": total, "done": len(recs),
                    "failed": sum(1 for r in recs if not r.get("ok")), "in_progress": len(stale_work(d)),
                    "running": _running(d), "slurm": slurm.status(d)})
    return out


def _running(exp_dir: Path) -> int:
    """Runs under way: work folders whose claim a live runner holds."""
    n = 0
    for tmp in stale_work(exp_dir):
        m = _RUN_TMP.match(tmp.name)
        if m:
            with probe_claim(exp_dir, m.group(1)) as (free, _):
                n += not free
    return n


def find_run(results: Path, run_id: str) -> Path:
    hits = [p for p in results.glob(f"*/{run_id}*") if (p / "run.json").exists()]
    if not hits:
        raise RunnerError(f"run {run_id!r}: no completed run with that id under {results}")
    if len(hits) > 1:
        raise RunnerError(f"run {run_id!r}: ambiguous, matches {', '.join(p.name for p in hits)}")
    return hits[0]
