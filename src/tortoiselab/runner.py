"""Run an experiment: every pending run of its sweep, each in its own lab
boot, stored so that nothing completed is ever lost or overwritten.

results/<experiment>/
  .lock                   held by the one runner of this experiment (flock)
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
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

from . import backends
from .experiment import Experiment, RunSpec, expand, load, run_order
from .fidelity import rtt_check


class RunnerError(RuntimeError):
    pass


@contextmanager
def experiment_lock(exp_dir: Path) -> Iterator[None]:
    """One runner per experiment: an exclusive flock on .lock (released by
    the kernel if the runner dies, so a SIGKILL leaves no stale lock)."""
    exp_dir.mkdir(parents=True, exist_ok=True)
    fh = open(exp_dir / ".lock", "a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        holder = fh.read().strip()
        fh.close()
        raise RunnerError(f"another runner is working on {exp_dir} ({holder or 'pid unknown'}); "
                          "wait for it or stop it first") from None
    fh.seek(0)
    fh.truncate()
    fh.write(f"pid {os.getpid()}\n")
    fh.flush()
    try:
        yield
    finally:
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


def completed(exp_dir: Path, run_id: str) -> bool:
    return (exp_dir / run_id / "run.json").exists()


def stale_work(exp_dir: Path) -> list[Path]:
    return sorted(exp_dir.glob(".*.tmp-*"))


def clean_stale(exp_dir: Path) -> list[str]:
    """Remove what interrupted runs left: kill the UML process group each one
    recorded (uml.pgid) if it still runs, then delete its folder. Completed
    runs are not touched. Call only while holding the experiment's lock."""
    done = []
    for tmp in stale_work(exp_dir):
        pg = tmp / "lab" / "uml.pgid"
        if pg.exists():
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
    from .web import pages, pki

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


def _load_request(run: RunSpec, site: Path, pki: Path) -> dict:
    c, s = run.config["client"], run.config["server"]
    client = {k: v for k, v in c.items() if v is not None}
    if c.get("url"):
        client["url"] = "https://www.lab.test/" + c["url"].lstrip("/")
    client["seed"] = run.seed
    return {"task": "pageload", "path": run.path.model_dump(), "seed": run.seed,
            "site_dir": str(site), "pki_dir": str(pki), "ro_paths": [str(site.parent)],
            "module_params": {alg: {k: str(v) for k, v in ps.items()} for alg, ps in s["module_params"].items()},
            "loads": [{"label": run.run_id, "server": s, "client": client}]}


def run_one(run: RunSpec, exp_dir: Path, info: backends.BackendInfo, site: Path, pki: Path,
            versions: dict, timeout_s: float = 1800) -> dict:
    """One run in its own lab boot, written to a temporary folder and renamed
    into place only when complete."""
    tmp = exp_dir / f".{run.run_id}.tmp-{os.getpid()}-{threading.get_ident() % 100000}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    (tmp / "config.json").write_text(json.dumps(run.as_dict(), indent=1, sort_keys=True))
    started = datetime.now(timezone.utc).isoformat()
    t0 = time.monotonic()
    record: dict = {"run_id": run.run_id, "experiment": run.experiment, "repetition": run.repetition,
                    "seed": run.seed, "point": run.point, "config": run.config, "path": run.path.model_dump()}
    try:
        res = backends.run_task(info, _load_request(run, site, pki), tmp / "lab", timeout_s=timeout_s)
        ld = res["task"]["loads"][0]
        record["ok"] = not ld["summary"].get("error")
        record["error"] = ld["summary"].get("error")
        record["summary"] = {k: v for k, v in ld["summary"].items() if k not in ("raw",)}
        record["connections"] = ld["connections"]
        record["capture"] = {"server": ld["capture"], "client": ld["client_capture"]}
        record["meta"] = {
            "backend": info.backend, "clock": info.clock, "kernel_release": res["kernel_release"],
            "switch": res["switch"], "modules": res.get("modules", {}), "server_sysctls": ld["server_sysctls"],
            "server_route": ld["server_route"], "tools": versions,
            "sim_seconds": round(res["uptime_end_s"] - res["uptime_start_s"], 6),
            "load_sim_seconds": ld["load_seconds"],
        }
        # configured vs measured: the TCP handshake's round trip in the capture
        rtts = [c["tcp_rtt_ms"] for c in ld["connections"] if c.get("tcp_rtt_ms")]
        fid = rtt_check(run.path, min(rtts) if rtts else None, len(rtts), len(ld["connections"]))
        record["fidelity"] = [fid.as_dict()]
        for name, src in (("page.har", ld.get("har")), ("server.pcap", ld.get("pcap")),
                          ("client.pcap", ld.get("client_pcap"))):
            if src and Path(src).exists():
                os.replace(src, tmp / name)
    except backends.LabError as exc:
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


def run_experiment(exp_file: Path, results: Path = Path("results"), jobs: int = 1, backend: str = "auto",
                   clock: str = "auto", limit: int | None = None,
                   on_progress: Callable[[dict, int, int], None] | None = None) -> dict:
    exp = load(exp_file)
    runs = run_order(exp, expand(exp))
    exp_dir = results / exp.name
    ccs = sorted({r.config["server"]["cc"] for r in runs})
    info = backends.choose(backend, clock, ccs)
    if info.backend == "native" and jobs > 1:
        raise RunnerError("jobs: runs on the native backend share the host's kernel; use --jobs 1 (or uml)")
    with experiment_lock(exp_dir):
        cleaned = clean_stale(exp_dir)
        (exp_dir / "experiment.yaml").write_text(Path(exp_file).read_text()) \
            if not (exp_dir / "experiment.yaml").exists() else None
        pending = [r for r in runs if not completed(exp_dir, r.run_id)]
        if limit is not None:
            pending = pending[:limit]
        site, pki = lab_assets(exp_dir)
        versions = tool_versions()
        records, t0 = [], time.monotonic()
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futs = {pool.submit(run_one, r, exp_dir, info, site, pki, versions): r for r in pending}
            for n, fut in enumerate(as_completed(futs), 1):
                rec = fut.result()
                records.append(rec)
                if on_progress:
                    on_progress(rec, n, len(pending))
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
    for k in ("plt_ms", "plt_from_request_ms", "content_download_ms", "ttfb_ms", "connections_opened",
              "reuse_ratio", "bytes", "throughput_mbit"):
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
    out = []
    for d in sorted(p for p in results.glob("*") if p.is_dir() and not p.name.startswith(".")):
        exp_file = d / "experiment.yaml"
        total = None
        if exp_file.exists():
            try:
                total = len(expand(load(exp_file)))
            except Exception:  # noqa: BLE001 - a listing must not fail on one bad file
                total = None
        recs = [json.loads(p.read_text()) for p in d.glob("*/run.json")]
        out.append({"experiment": d.name, "total": total, "done": len(recs),
                    "failed": sum(1 for r in recs if not r.get("ok")), "in_progress": len(stale_work(d))})
    return out


def find_run(results: Path, run_id: str) -> Path:
    hits = [p for p in results.glob(f"*/{run_id}*") if (p / "run.json").exists()]
    if not hits:
        raise RunnerError(f"run {run_id!r}: no completed run with that id under {results}")
    if len(hits) > 1:
        raise RunnerError(f"run {run_id!r}: ambiguous, matches {', '.join(p.name for p in hits)}")
    return hits[0]
