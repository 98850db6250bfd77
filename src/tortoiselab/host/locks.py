"""Who may work on a results folder, and what interrupted work left.

results/<experiment>/
  .lock                   held by the one runner of this experiment (flock), or
                          shared by the shards of its sweep (--shard i/N)
  .setup.lock             held for seconds: lab assets, cleaning, runs.parquet
  .claims/<run_id>.lock   held while a run is done (flock); its lines are the
                          run's attempts: "start <host> <pid> <utc>", "done <utc>"
  .<run_id>.tmp-<pid>/    a run in progress (or interrupted: redone next time)

All locks are flocks: the kernel (or NFS's lock manager) releases them when
their holder dies, so a SIGKILL leaves no stale lock.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import socket
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from tortoiselab.host.errors import RunnerError



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


def stale_work(exp_dir: Path) -> list[Path]:
    return sorted(exp_dir.glob(".*.tmp-*"))


RUN_TMP = re.compile(r"^\.([0-9a-f]{12})\.tmp-")


def _claim_file(exp_dir: Path, run_id: str) -> Path:
    return exp_dir / ".claims" / f"{run_id}.lock"


def note(fh, what: str) -> None:
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
            m = RUN_TMP.match(tmp.name)
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


