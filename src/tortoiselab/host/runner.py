"""Run an experiment: every pending run of its sweep, in batches of runs
that share a lab boot (one load per run, host/batches.py), each
run stored as soon as its load is done, so that nothing completed is ever
lost or overwritten.

results/<experiment>/     (locks and claims: host/locks.py; records: host/store/; every write: host/store/files.py)
  .lab/site, .lab/pki     pages and the lab PKI, made once per experiment
  <run_id>/               a completed run (renamed into place as a whole)
    run.json              config, metadata, summary, fidelity: the record
    page.har, server.pcap, client.pcap, commands.log, console.log
    connections.json      server.pcap's connections, parsed once in the guest (analysis/conntable.py)
  .<run_id>.tmp-<pid>-<thread>/       a run in progress (or interrupted: redone next time)
  .<run_id>.tmp-<pid>-<thread>-boot/  a batch's lab (under its first run's claim)
  runs.parquet            one row per completed run, rebuilt from the folders
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable, Iterator

from tortoiselab.analysis import storemeasures, whole
from tortoiselab.analysis.conntable import TABLE
from tortoiselab.analysis.parsers import parse_nghttp_stats
from tortoiselab.host import backends, batches, guestpaths, labcpu, manifests, pageload, reuse, safefs, setaside, store, \
    storedtraces
from tortoiselab.host.checks import (check_browser_tools, check_guest_paths, check_kernel_paths, check_manifest_urls,
                                    check_site_urls)
from tortoiselab.host.citelogs import cite_stored
from tortoiselab.host.errors import RunnerError
from tortoiselab.host.labcheck import checked_assets
from tortoiselab.host.sites import stage_for_experiment
from tortoiselab.host.locks import claim, clean_stale, experiment_lock, note, setup_lock
from tortoiselab.host.provenance import run_seeds, tool_versions
from tortoiselab.host.batches import DEFAULT_BATCH, Batch, BatchWork, batch_id, jobs_for
from tortoiselab.host.store import files
from tortoiselab.host.stopping import LabInterrupted, RunInterrupted, Stopped, stop_message, wind_down
from tortoiselab.host.versions import one_experiment
from tortoiselab.spec import cols, trace
from tortoiselab.spec.experiment import RunSpec


class ResultsFull(RunnerError):
    """The results folder's filesystem is full: the runner stops, every run
    stored so far is kept, the rest stay pending."""


# fault injection (tests/integration/test_faults.py): seconds to wait with a
# run's record written but not yet renamed into place
FAULT_PAUSE_ENV = "TORTOISE_FAULT_PAUSE_BEFORE_STORE_S"
MIN_FREE_BYTES = 1 << 20
# how often the runner looks for a load the lab has finished, to store its
# run (a few stat calls); the last run is stored during the lab's teardown
STORE_POLL_S = 0.1


def run_one(run: RunSpec, exp_dir: Path, info: backends.BackendInfo, site: Path, pki: Path,
            versions: dict, timeout_s: float = backends.LONG_TASK_TIMEOUT_S,
            stop: threading.Event | None = None) -> dict:
    """One run in its own lab boot (a batch of one)."""
    return run_batch([run], exp_dir, info, site, pki, versions, timeout_s, stop)[0]


def run_batch(runs: list[RunSpec], exp_dir: Path, info: backends.BackendInfo, site: Path, pki: Path,
              versions: dict, timeout_s: float = backends.LONG_TASK_TIMEOUT_S,
              stop: threading.Event | None = None,
              on_stored: Callable[[dict], None] | None = None,
              batch: Batch | None = None, replay: Iterable[str] = ()) -> list[dict]:
    """The first loads of a batch (host/batches.py; None: the runs are the
    batch) in one lab boot, each run written to a temporary folder and
    renamed into place as soon as its load is done, while the lab goes on
    with the next; the runs in `replay` are loaded and not stored (so that
    the runs after them see the same predecessors as in the whole batch).
    A load that fails fails its run only; if the lab itself dies, the runs
    it finished are kept, the first run not stored fails with the lab's
    error and the rest get a boot of their own, their predecessors replayed."""
    batch = batch or Batch(batch_id([r.run_id for r in runs]), tuple(runs))
    replay = set(replay)
    mine = [r for r in runs if r.run_id not in replay]
    if not mine:
        return []
    tag = f"{os.getpid() % 10**7:07d}-{threading.get_ident() % 100000:05d}"  # fixed length (docs/determinism.md)
    st = _BatchStore(runs, batch, replay, exp_dir, info, site, pki, versions, on_stored, tag)
    tmps, boot_dir, work, stored = st.tmps, st.boot_dir, st.work, st.stored
    for d in (*tmps.values(), boot_dir):  # never through a link (host/store/files.py)
        files.remove(exp_dir, d, doing=f"run {runs[0].run_id}")
    try:
        for run in mine:
            files.make_dir(exp_dir, tmps[run.run_id], doing=f"run {run.run_id}")
            files.write_new(exp_dir, tmps[run.run_id] / "config.json",
                            json.dumps(run.as_dict(), indent=1, sort_keys=True), doing=f"run {run.run_id}")
        files.make_dir(exp_dir, boot_dir, doing=f"run {mine[0].run_id}")  # lent to the lab: its work folder
        req = pageload.run_request(runs, site, pki, members=batch.runs)
        st.t_start = time.time()  # the host's wall clock, as the guest reads it (guest/clock.HostWall)
        with labcpu.MarkSampler(work) if info.backend == "uml" else nullcontext() as st.sampler:
            lab_error = _run_lab(info, req, work, timeout_s * len(runs), while_waiting=st.store_finished, stop=stop)
            st.store_finished()
    except ResultsFull:  # from storing a run (the lab is over by now): none of the batch's work is left
        for d in (*tmps.values(), boot_dir):
            files.remove(exp_dir, d, quiet=True)
        raise
    except OSError as exc:
        _refuse_if_full(exp_dir, mine[0], boot_dir, exc, also=tmps.values())
        raise
    rest = [r for r in mine if r.run_id not in stored]
    if rest:
        _fail_first(rest, lab_error, stop, exp_dir, tmps, boot_dir, work, stored, on_stored)
    files.remove(exp_dir, boot_dir, quiet=True)
    for r in rest[1:]:
        files.remove(exp_dir, tmps[r.run_id], quiet=True)
    out = [stored[r.run_id] for r in runs if r.run_id in stored]
    if len(rest) > 1:  # the lab died on the way: the runs after the one it was on get a boot of their own,
        again = {r.run_id for r in rest[1:]}  # where the runs before them are replayed
        loads = runs[:max(i for i, r in enumerate(runs) if r.run_id in again) + 1]
        out += run_batch(loads, exp_dir, info, site, pki, versions, timeout_s, stop, on_stored, batch,
                         replay={r.run_id for r in loads} - again)
    return out


@dataclass
class _BatchStore:
    """One boot's runs as their loads end: each finished load (the guest's
    load-NNN/result.json) stored into place, or, for a replayed run, compared
    with its stored record; the state run_batch keeps while the lab runs."""

    runs: list[RunSpec]
    batch: Batch
    replay: set[str]
    exp_dir: Path
    info: backends.BackendInfo
    site: Path
    pki: Path
    versions: dict
    on_stored: Callable[[dict], None] | None
    tag: str
    stored: dict[str, dict] = field(default_factory=dict)
    replayed: dict[str, bool | None] = field(default_factory=dict)  # run id -> reproduced its record (None: unknown)
    boot: dict = field(default_factory=dict)  # boot.json, read once: the guest writes it before the first load
    t_start: float = 0.0  # the host's wall clock when the lab started
    sampler: labcpu.MarkSampler | None = None
    t_last: float = field(default_factory=time.monotonic)  # when the batch last stored a run
    started: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat())

    def __post_init__(self) -> None:
        mine = [r for r in self.runs if r.run_id not in self.replay]
        self.tmps = {r.run_id: self.exp_dir / f".{r.run_id}.tmp-{self.tag}" for r in mine}
        self.boot_dir = self.exp_dir / f".{mine[0].run_id}.tmp-{self.tag}-boot"  # its claim: the first stored run's
        self.work = self.boot_dir / "lab"

    def store_finished(self) -> None:
        for i, run in enumerate(self.runs):
            done = self.work / f"load-{i:03d}" / "result.json"
            if run.run_id in self.stored or run.run_id in self.replayed or not done.exists():
                continue
            ld = guestpaths.host_paths(json.loads(done.read_text(encoding="utf-8")), self.work, self.info.backend)
            if run.run_id in self.replay:
                self.replayed[run.run_id] = batches.replay_reproduced(self.exp_dir / run.run_id, ld)
                continue
            self.boot = self.boot or json.loads((self.work / "boot.json").read_text(encoding="utf-8"))
            t_store = time.time()
            rec = _record_of_load(run, i, self.batch, self.boot, ld, self.info, self.site, self.pki, self.versions,
                                  self.tmps[run.run_id], self.work)
            rec["meta"]["batch"].update(replayed=[r.run_id for r in self.runs[:i] if r.run_id in self.replay],
                                        replays_differing=[r for r, same in self.replayed.items() if same is False])
            rec["meta"].update(_timing_meta(i, self.boot, ld, self.t_start, t_store, self.sampler))
            rec["meta"].update({"wall_seconds": round(time.monotonic() - self.t_last, 3),  # since the last store
                                "started": self.started})
            self.t_last, self.started = time.monotonic(), rec["meta"]["ended"]
            if (why := store.record_problem(rec)) is not None:  # stored as failed, named, not a traceback
                rec = _failed_record(run, f"lab: the load's result makes no run record: {why}")
            _store(run, self.exp_dir, self.tmps[run.run_id], rec, self.work)
            self.stored[run.run_id] = rec
            if self.on_stored:
                self.on_stored(rec)


def _timing_meta(i: int, boot: dict, ld: dict, t_start: float, t_store: float, sampler) -> dict:
    """A stored load's phases (boot, topology, services, load, collect,
    store) and the lab's CPU over its load (labcpu, docs/speed.md)."""
    phases = phases_of_load(i, boot.get("wall") or {}, ld.get("wall") or {}, t_start)
    phases["store"] = round(time.time() - t_store, 3)
    return {"phases": phases, "load_cpu": sampler.load(ld.get("wall") or {}) if sampler else None}


def _fail_first(rest: list[RunSpec], lab_error: Exception | None, stop: threading.Event | None, exp_dir: Path,
                tmps: dict[str, Path], boot_dir: Path, work: Path, stored: dict[str, dict],
                on_stored: Callable[[dict], None] | None) -> None:
    """After a boot that left runs unstored: the first of them stored as
    failed with the lab's error (into `stored`); RunInterrupted, storing
    nothing, when the runner is being stopped; ResultsFull for want of space."""
    # a lab that died because the runner is being stopped (Ctrl-C, or a
    # scheduler's SIGTERM to every process of the job) fails no run:
    # store nothing more, so that the rest are done again next time
    if lab_error is not None and stop is not None and stop.wait(0.5):
        for d in (*(tmps[r.run_id] for r in rest), boot_dir):
            files.remove(exp_dir, d, quiet=True)
        raise RunInterrupted(f"run {rest[0].run_id}: interrupted", [r.run_id for r in rest]) from lab_error
    # a lab that failed for want of space is not a failed run either
    _refuse_if_full(exp_dir, rest[0], boot_dir, also=tmps.values())
    why = f"lab: {lab_error}" if lab_error is not None else "lab: the lab wrote no result for this run's load"
    rec = _failed_record(rest[0], cite_stored(why, boot_dir, tmps[rest[0].run_id], exp_dir / rest[0].run_id))
    _store(rest[0], exp_dir, tmps[rest[0].run_id], rec, work)
    stored[rest[0].run_id] = rec
    if on_stored:
        on_stored(rec)


def _run_lab(info: backends.BackendInfo, req, work: Path, timeout_s: float,
             while_waiting: Callable[[], None],
             stop: threading.Event | None = None) -> backends.LabError | LabInterrupted | None:
    """The lab's boot in a thread of its own, calling while_waiting every
    STORE_POLL_S until it ends; the lab's error, or None. Once `stop` is
    set the lab is ended within seconds (host/stopping.py)."""
    with ThreadPoolExecutor(max_workers=1) as lab_thread:
        lab = lab_thread.submit(backends.run_task, info, req, work, timeout_s=timeout_s, stop=stop)
        while True:
            try:
                lab.result(timeout=STORE_POLL_S)
                return None
            except FutureTimeout:
                while_waiting()
            except (backends.LabError, LabInterrupted) as exc:
                return exc


def phases_of_load(index: int, boot: dict, load: dict, started: float) -> dict[str, float]:
    """Where a run's wall time went, in seconds, from the host-clock marks
    the guest took (guest/clock.HostWall): a boot's first run has boot
    (UML, init, modules, OVS) and topology (Mininet, links, netem), a later
    one wait (servers stopped, the idle wait for its start instant); both
    have services (switch tables, caches, sysctls, Apache, dnsmasq, netem
    seeds, tcpdump, tracer), load (to the start instant, then the loader),
    capture (drain, tcpdump stopped) and collect (the capture analysed in
    the guest, settings read, the result written). Missing marks (a failed
    load, an older guest) leave their phases out."""
    def span(a: float | None, b: float | None) -> float | None:
        return round(b - a, 3) if a is not None and b is not None else None

    if index == 0:
        out = {"boot": span(started, boot.get("boot_ready")),
               "topology": span(boot.get("boot_ready"), load.get("topology_ready")),
               "services": span(load.get("topology_ready"), load.get("capture_on"))}
    else:
        out = {"wait": span(load.get("previous_end"), load.get("set_up")),
               "services": span(load.get("set_up"), load.get("capture_on"))}
    out.update({"load": span(load.get("capture_on"), load.get("loaded")),
                "capture": span(load.get("loaded"), load.get("captured")),
                "collect": span(load.get("captured"), load.get("end"))})
    return {k: v for k, v in out.items() if v is not None}


def _base_record(run: RunSpec) -> dict:
    return {cols.RUN_ID: run.run_id, "experiment": run.experiment, "repetition": run.repetition,
            "seed": run.seed, "point": run.point, "config": run.config, "path": run.path.model_dump()}


def _failed_record(run: RunSpec, why: str) -> dict:
    now = datetime.now(timezone.utc).isoformat()
    return {**_base_record(run), cols.OK: False, "error": why[:2000],
            "meta": {"started": now, "ended": now, "wall_seconds": 0.0}}


def _record_of_load(run: RunSpec, index: int, batch: Batch, boot: dict, ld: dict, info: backends.BackendInfo,
                    site: Path, pki: Path, versions: dict, tmp: Path, work: Path) -> dict:
    """A run's record from its load's result (load-NNN/result.json) and
    what the boot is (boot.json); the load's files moved into the run folder."""
    record = _base_record(run)
    if ld.get("error"):
        record.update({cols.OK: False, "error": f"lab: load: {ld['error']}"[:2000]})
        meta: dict = {}
    else:
        _refuse_if_full(tmp.parent, run, tmp)  # a capture or HAR cut short for want of space is no measurement
        record.update(_from_lab(run, boot, ld, info, site, pki, versions, tmp))
        meta = record["meta"]
    userspace = (work / "uml_userspace").read_text(encoding="utf-8").split("\t")[0].strip() \
        if (work / "uml_userspace").exists() else None
    first_sim = boot["uptime_start_s"] if index == 0 else ld["sim_set_up_s"]
    meta.update({"uml_userspace": userspace, "sim_seconds": round(ld["sim_end_s"] - first_sim, 6),
                 "batch": {"index": index, "size": len(batch.runs), "runs": batch.run_ids, "id": batch.id,
                           "start_s": ld.get("start_s"),
                           "boot_sim_seconds": round(ld["sim_set_up_s"] - boot["uptime_start_s"], 6)
                           if index == 0 else 0.0},
                 "ended": datetime.now(timezone.utc).isoformat()})
    record["meta"] = meta
    return record


def _from_lab(run: RunSpec, boot: dict, ld: dict, info: backends.BackendInfo, site: Path, pki: Path,
              versions: dict, tmp: Path) -> dict:
    """The record's figures from the load's result; the load's files moved into the run folder."""
    client_seed = ld["client"]["seed"]
    problems = measurement_problems(run, ld["summary"])
    cdn, cdn_problems = pageload.cdn_part(ld)  # the CDN set-up's second server (spec/cdn.py)
    problems += cdn_problems + whole.capture_problems({"server": ld["capture"], "client": ld["client_capture"],
                                                       **({"cdn": cdn["capture"]} if cdn else {})})
    if ld.get("cross") and ld["cross"]["errors"]:  # the bottleneck was not shared as configured
        problems.append(f"cross traffic: {'; '.join(ld['cross']['errors'])}"[:500])
    summary = {k: v for k, v in ld["summary"].items() if k not in ("raw",)}
    summary.update(pageload.floor_fields(run, site, pki, summary, ld.get("har")))
    meta = {
        "backend": info.backend, "clock": info.clock, "kernel_release": boot["kernel_release"],
        "switch": boot["switch"], "modules": boot.get("modules", {}), "server_sysctls": ld["server_sysctls"],
        "client_sysctls": ld.get("client_sysctls", {}),
        "server_route": ld["server_route"], "tools": versions,
        "load_sim_seconds": ld["load_seconds"],
        "seeds": run_seeds(run.seed, client_seed, site, Path(pki).parent.parent.name, ld.get("seeds", {}),
                           info.clock, imported=run.settings.client.site and pageload.imported_dir(
                               site, run.settings.client.site)),
        "kernel": info.kernel, "code": ld.get("code_digest"),  # the lab code that ran (guest code_digest)
        # uml: the guest kernel's boot id, a draw from its CRNG: equal in two boots of a run
        # exactly when the CRNG followed the run's seed (docs/determinism.md); in a batch, the
        # boot's (its first run's seed)
        "guest_boot_id": boot.get("boot_id"),
    }
    # configured vs measured: the TCP handshake's round trip in the capture
    fid, off = storemeasures.path_fidelity(info.clock, run.path, run.config, ld.get("cross"), ld["connections"])
    problems += [off] if off else []
    for name, src in (("page.har", ld.get("har")), ("server.pcap", ld.get("pcap")), (TABLE, ld.get("conntable")),
                      ("client.pcap", ld.get("client_pcap")), ("cwnd.json", ld.get("cwnd")),
                      ("cdn.pcap", (ld.get("cdn") or {}).get("pcap"))):
        if src and Path(src).exists():  # from the lab's work folder into the run's (host/store/files.py)
            files.move_in(tmp.parent, src, tmp / name, doing=f"storing run {run.run_id}")
    summary.update(storemeasures.capture_figures(run.settings.client.loader, tmp))
    return {cols.OK: not problems, "error": "; ".join(problems)[:2000] if problems else None, "summary": summary,
            "cross": ld.get("cross"), "cdn": cdn, "connections": ld["connections"], "capture": {"server": ld["capture"], "client": ld["client_capture"]},
            "meta": meta, "fidelity": [fid.as_dict()]}


def _store(run: RunSpec, exp_dir: Path, tmp: Path, record: dict, work: Path) -> None:
    """The run's folder renamed into place whole, with its record and the
    boot's logs as they are now (in a batch: up to this run's load); on a
    full filesystem nothing of it is left (ResultsFull)."""
    try:
        for name in ("commands.log", "console.log"):
            files.copy_in(exp_dir, work / name, tmp / name, doing=f"storing run {run.run_id}")
        store.write_record(tmp, record)
        manifests.write_manifest(tmp)  # last: every file of the run, its record included
        time.sleep(float(os.environ.get(FAULT_PAUSE_ENV, 0)))
        # the run appears whole, or not at all; never onto a link (host/store/files.py)
        files.replace(exp_dir, tmp, exp_dir / run.run_id, doing=f"storing run {run.run_id}")
    except OSError as exc:
        _refuse_if_full(exp_dir, run, tmp, exc)
        raise


@contextmanager
def space_is_named(exp_dir: Path) -> Iterator[None]:
    """A full filesystem while the runner writes the experiment's own files
    (site, PKI, runs.parquet) is a ResultsFull with the fix, not a traceback."""
    try:
        yield
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise ResultsFull(f"results: no space left on the filesystem of {exp_dir}; free space (or give "
                              "--results on a larger filesystem) and run again: the runs stored so far are kept") \
                from None
        raise


def _refuse_if_full(exp_dir: Path, run: RunSpec, tmp: Path, exc: OSError | None = None,
                    also: Iterable[Path] = ()) -> None:
    """Raise ResultsFull (after removing the run's work, and `also`) when the
    results filesystem is out of space: by the error's errno, or, for a lab
    that failed without saying why, by the space left."""
    full = exc is not None and exc.errno in (errno.ENOSPC, errno.EDQUOT)
    if exc is None:
        try:
            full = shutil.disk_usage(exp_dir).free < MIN_FREE_BYTES
        except OSError:
            full = False
    if full:
        for d in (tmp, *also):
            files.remove(exp_dir, d, quiet=True)
        raise ResultsFull(f"results: no space left on the filesystem of {exp_dir} during run {run.run_id}; "
                          "free space (or give --results on a larger filesystem) and run again: the runs stored "
                          "so far are kept and the rest stay pending") from None


def measurement_problems(run: RunSpec, summary: dict) -> list[str]:
    """Why this run's load is not a whole measurement (analysis/whole.py);
    empty when every request was answered as it should be."""
    client = run.settings.client
    loader, url = client.loader, client.url
    if loader == "nghttp":  # the statuses are in nghttp's own output
        summary = {**summary, "rows": parse_nghttp_stats(summary.get("raw") or "")["rows"]}
    return whole.load_problems(loader, summary, requests=client.h2load_requests if loader == "h2load"
                               else None, object_bytes=whole.object_bytes_of(url), url=url)


def _claimed_batch(work: BatchWork, exp_dir: Path, *args, stop: threading.Event | None = None,
                   on_stored: Callable[[dict], None] | None = None) -> list[dict]:
    """run_batch of a batch's first loads under the claims of the runs to
    store; a run complete by the time its claim was ours (done by another
    runner) is replayed instead, and the loads end at the last run left."""
    with ExitStack() as claims:
        mine, fhs = set(), {}
        for run in work.loads:
            if run.run_id not in work.store:
                continue
            fh = claims.enter_context(claim(exp_dir, run.run_id))
            if not store.completed(exp_dir, run.run_id):
                note(fh, f"start {socket.gethostname()} {os.getpid()}")
                mine.add(run.run_id)
                fhs[run.run_id] = fh

        def stored(rec: dict) -> None:
            note(fhs[rec[cols.RUN_ID]], "done")
            if on_stored:
                on_stored(rec)

        if not mine:
            return []
        loads = list(work.loads[:max(i for i, r in enumerate(work.loads) if r.run_id in mine) + 1])
        return run_batch(loads, exp_dir, *args, stop=stop, on_stored=stored, batch=work.batch,
                         replay={r.run_id for r in loads} - mine)


def _stopped(signal_name: str, exp_dir: Path, total: int, pending: list[RunSpec], records: list[dict],
             ended: list[str], errors: list[str]) -> Stopped:
    """After wind_down: runs.parquet rebuilt from what is stored, and what
    to tell the user (host/stopping.stop_message)."""
    table = "runs.parquet"
    try:
        with setup_lock(exp_dir), space_is_named(exp_dir):
            store.rebuild_table(exp_dir)
    except Exception as exc:  # the message says so; the stored runs are safe either way
        table = f"runs.parquet NOT rebuilt ({type(exc).__name__}: {exc})"
    accounted = {r[cols.RUN_ID] for r in records} | set(ended)
    not_started = sum(1 for r in pending if r.run_id not in accounted)
    return Stopped(stop_message(signal_name, ended, list(records), not_started, len(store.run_dirs(exp_dir)),
                                total, table, errors), signal_name)


def run_experiment(exp_file: Path, results: Path = Path("results"), jobs: int | None = None, backend: str = "auto",
                   clock: str = "auto", limit: int | None = None,
                   on_progress: Callable[[dict, int, int], None] | None = None, grid: str | None = None,
                   shard: tuple[int, int] | None = None, runs_file: Path | None = None,
                   batch: int | None = None, reuse_from: str | None = None,
                   on_cleaned: Callable[[str], None] | None = None, sites: Path = Path("sites")) -> dict:
    """Every pending run (of slice shard=(i, N) only, if given; of the runs
    listed in runs_file only, if given), each under its claim, so that
    shards running side by side never do a run twice; up to `batch` runs
    share a lab boot (host/batches.py, fixed by the experiment file and
    `batch`; None: default_batch; a batch's earlier runs are replayed where
    only its later ones are pending), `jobs` batches side by side (None:
    default_jobs); with reuse_from, the runs that grid's folder holds first
    (host/reuse.py). on_cleaned is told each line of what the clean of
    interrupted work did and did not do, as soon as it is done."""
    reuse_src = reuse.sources(exp_file, grid, reuse_from, results)[0] if reuse_from else None
    size = DEFAULT_BATCH if batch is None else batch  # default_batch: the same on both clocks
    with trace.seen() as traces:  # the traces the file names, copied into the folder below (host/storedtraces.py)
        exp, sweep, ids, runs, mine, fixed = batches.selected(exp_file, grid, runs_file, shard, size)
    keep = set(ids)
    sliced = shard is not None or runs_file is not None
    exp_dir = Path(results).resolve() / exp.name  # the guest is given absolute paths only
    # a folder that is or holds links is refused before anything is written (host/safefs.py)
    safefs.refuse_links(exp_dir, f"results folder {exp_dir}")
    check_site_urls(runs)
    check_browser_tools(runs)
    ccs = sorted({r.settings.server.cc for r in runs})
    check_guest_paths(exp_dir)
    info = backends.choose(backend, clock, ccs)
    check_kernel_paths(info)
    try:
        jobs = jobs_for(jobs, info.backend, info.clock)
    except ValueError as exc:
        raise RunnerError(str(exc)) from None
    one_experiment(exp_dir, exp, sweep)  # another version of it in the folder: refused here (host/versions.py)
    with experiment_lock(exp_dir, shared=sliced):
        cleaned = clean_stale(exp_dir, keep if sliced else None)
        for line in cleaned if on_cleaned else []:
            on_cleaned(line)  # type: ignore[misc]
        reused = reuse.take(reuse_src, exp_dir, exp.name, ids, backend=info.backend, clock=info.clock) \
            if reuse_src else []
        with setup_lock(exp_dir), space_is_named(exp_dir):
            files.write_once(exp_dir, exp_dir / "experiment.yaml", Path(exp_file).read_text(encoding="utf-8"),
                             doing=f"results folder {exp_dir}")
            # the certificate variants of every run, not only the pending ones (host/assets.py)
            site, pki = checked_assets(exp_dir, certs={r.settings.server.cert for r in runs}, sites_dir=sites)
            # imported sites (client.site) staged beside it, checked against sites/ (docs/your-own-site.md)
            stage_for_experiment(exp_dir, {r.settings.client.site for r in runs} - {None}, sites)
            # in .lab once it is made (a .lab not yet READY is made anew): what a reader reads them from
            storedtraces.store_copies(exp_dir, traces)
        check_manifest_urls(mine, site)
        moved = setaside.move_damaged_aside(exp_dir, [r.run_id for r in mine], sliced)
        killed = setaside.move_killed_aside(exp_dir, [r.run_id for r in mine])  # done again (docs/faults.md)
        by_id = {r.run_id: r for r in mine}
        pending = [by_id[i] for i in batches.in_batch_order(fixed, by_id) if not store.completed(exp_dir, i)]
        if limit is not None:  # a batch's first runs first
            pending = pending[:limit]
        versions = tool_versions()
        records: list[dict] = []
        t0 = time.monotonic()
        stop = threading.Event()
        done_lock = threading.Lock()

        def stored(rec: dict) -> None:  # from the batches' threads, as each run is stored
            with done_lock:
                records.append(rec)
                if on_progress:
                    on_progress(rec, len(records), len(pending))

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futs = [pool.submit(_claimed_batch, b, exp_dir, info, site, pki, versions, stop=stop, on_stored=stored)
                    for b in batches.plan_work(fixed, [r.run_id for r in pending])]
            try:
                for fut in as_completed(futs):
                    fut.result()
            except KeyboardInterrupt as exc:  # SIGINT, or SIGTERM (cli.py): end the labs, keep what they finished
                ended, errors = wind_down(pool, futs, stop)
                raise _stopped(str(exc) or "SIGINT", exp_dir, len(runs), pending, records, ended, errors) from None
            except BaseException:  # a batch failed: its siblings end their labs, queued ones never start
                stop.set()
                pool.shutdown(wait=False, cancel_futures=True)
                raise
        with setup_lock(exp_dir), space_is_named(exp_dir):
            table = store.rebuild_table(exp_dir)
    return {"experiment": exp.name, "dir": str(exp_dir), "total": len(runs), "pending": len(pending),
            "done_now": len(records), "failed_now": sum(1 for r in records if not r[cols.OK]), "reused": len(reused),
            "wall_seconds": round(time.monotonic() - t0, 3), "cleaned": cleaned, "table": str(table),
            "backend": info.backend, "clock": info.clock, "records": records, "moved_aside": moved,
            "killed": killed,
            "jobs": jobs}
