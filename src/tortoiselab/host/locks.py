"""Who may work on a results folder, and what interrupted work left.

results/<experiment>/
  .lock                   held by the one runner of this experiment (flock), or
                          shared by the shards of its sweep (--shard i/N)
  .setup.lock             held for seconds: lab assets, cleaning, runs.parquet
  .claims/<run_id>.lock   held while a run is done (flock); its lines are the
                          run's attempts: "start <host> <pid> <utc>", "done <utc>"
  .<run_id>.tmp-<pid>/    a run in progress (or interrupted: redone next time);
                          its lab/uml.pgid and lab/uml.proc.json name the lab's
                          process group and what proves it is ours (host/procid.py)

All locks are flocks: the kernel (or NFS's lock manager) releases them when
their holder dies, so a SIGKILL leaves no stale lock. None of these files
is opened through a link: the store opens them (host/store/files.py, on
host/safefs.py), so a planted .lock -> ~/.bashrc is refused, not truncated.
"""

from __future__ import annotations

import fcntl
import os
import re
import socket
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from tortoiselab.host import procid, safefs
from tortoiselab.host.errors import RunnerError
from tortoiselab.host.store import files

# beside uml.pgid in a lab's work folder: what proves the group is ours (host/procid.py)
PROC_RECORD = "uml.proc.json"


def _open_lock(path: Path, exp_dir: Path, doing: str):
    """A lock or claim file, opened by the store (store/files.open_lock:
    never through a link, never a file with a second name)."""
    return files.open_lock(exp_dir, path, doing)


@contextmanager
def experiment_lock(exp_dir: Path, shared: bool = False) -> Iterator[None]:
    """One runner per experiment: an exclusive flock on .lock (released by
    the kernel if the runner dies, so a SIGKILL leaves no stale lock). The
    shards of a sweep (--shard i/N) hold it shared: they run side by side
    (per-run claims keep them apart), while a plain runner or `tortoise
    clean` refuses as long as any shard runs, and the other way round."""
    files.ensure_folder(exp_dir)
    fh = _open_lock(exp_dir / ".lock", exp_dir, f"locking {exp_dir}")
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
    files.ensure_folder(exp_dir)
    with _open_lock(exp_dir / ".setup.lock", exp_dir, f"locking {exp_dir}") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# <exp>/.verify-<pid>/: the reruns of `tortoise run --verify-determinism` and `grade --audit`
# (host/determinism.scratch_folder), made under setup_lock with an flock on IN_USE held
# for the scratch's lifetime: clean removes one only when that lock is free
VERIFY_SCRATCH = re.compile(r"^\.verify-[0-9]+$")
IN_USE = ".in-use.lock"


@contextmanager
def held_scratch(exp_dir: Path, d: Path, doing: str) -> Iterator[Path]:
    """Make folder d (FileExistsError if it is there) and hold an exclusive
    flock on d/.in-use.lock for the block: made under exp_dir's setup_lock,
    so `tortoise clean` (which looks under it) finds such a folder either
    locked by a live verify or free, and never half made."""
    with setup_lock(exp_dir):
        files.make_dir(d.parent, d, doing=doing)  # d.parent: exp_dir, or a caller's own folder
        fh = files.open_new(d.parent, d / IN_USE, doing=doing)
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)  # new and ours: never blocks
    try:
        yield d
    finally:
        fh.close()  # the kernel releases the flock (also when the process is killed)


def _clean_scratch(exp_dir: Path, d: Path) -> str:
    """Remove a .verify-<pid> scratch whose in-use lock is free (its verify
    was killed); else leave it and say why."""
    root, lock = exp_dir.parent, d / IN_USE
    if safefs.is_link(d) or not d.is_dir():
        return (f"left {d.name} in place: it is {'a link to ' + safefs.target(d) if safefs.is_link(d) else 'no folder'}"
                f", which clean never follows or removes; remove it yourself (rm {d})")
    if not os.path.lexists(lock):
        return (f"left {d.name} in place: no {IN_USE} in it proves that no verify uses it (made before such locks); "
                f"once no `tortoise run --verify-determinism` or `tortoise grade --audit` runs, rm -r {d}")
    try:  # a regular file only (a FIFO cannot hang clean), no link followed
        fd = safefs.open_regular(lock, root, doing=f"looking at {d}")
    except (safefs.LinkRefused, safefs.NotRegular) as exc:
        return f"left {d.name} in place: {exc}"
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return f"left {d.name} in place: a verify is using it ({IN_USE} is held)"
        files.remove(exp_dir, d, doing=f"cleaning {d}")  # links inside are removed as links
        return f"removed {d.name} (left by a verify that was killed)"
    finally:
        os.close(fd)


def _clean_obsolete(exp_dir: Path) -> list[str]:
    """Remove what older versions left and nothing reads (files.OBSOLETE:
    .studies-cache, whose analysed captures live in the user's cache since
    issue 35); a link in its place is left and named."""
    out = []
    for name in files.OBSOLETE:
        d = exp_dir / name
        if safefs.is_link(d):
            out.append(f"left {name} in place: it is a link to {safefs.target(d)}, which clean never follows or "
                       f"removes; remove it yourself (rm {d})")
        elif files.remove(exp_dir, d, doing=f"cleaning {d}"):
            out.append(f"removed {name} (left by an older version; nothing reads it)")
    return out


IN_USE_NOTES = ("its run is under way", "a verify is using it")  # left in place rightly: nothing to do


def left_for_you(lines: list[str]) -> list[str]:
    """The lines of `tortoise clean` saying it left something in place that
    needs the user (a link, a folder it cannot prove free): exit 1."""
    return [ln for ln in lines if ": left " in ln and not any(k in ln for k in IN_USE_NOTES)]


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
    files.make_dir(exp_dir, f.parent, exist_ok=True, doing=f"claiming run {run_id}")
    with _open_lock(f, exp_dir, f"claiming run {run_id}") as fh:
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
    if not os.path.lexists(f):  # never claimed: work of a runner older than claims
        yield True, ""
        return
    with _open_lock(f, exp_dir, f"looking at the claim of run {run_id}") as fh:
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


def clean_results(results: Path) -> tuple[list[str], int]:
    """`tortoise clean`: clean_stale in every experiment folder of results,
    each under its lock; (what was and was not done, line by line; the
    number of actions). A folder that is or holds a link where the lock
    goes is left alone and named (host/safefs.py)."""
    lines, n = [], 0
    for d in sorted(p for p in Path(results).glob("*") if p.is_dir()):
        if d.is_symlink():  # never followed
            lines.append(f"{d.name}: left alone: it is a link to {safefs.target(d)}; clean it where it points, "
                         "or remove the link")
            continue
        try:
            with experiment_lock(d):
                for line in clean_stale(d):
                    lines.append(f"{d.name}: {line}")
                    n += not line.startswith(("left ", "did not "))
        except safefs.REFUSED as exc:  # a link, or a FIFO as .lock: named, the other folders go on
            lines.append(f"{d.name}: left alone: {exc}")
    return lines, n


def clean_stale(exp_dir: Path, run_ids: set[str] | None = None) -> list[str]:
    """Remove what interrupted runs left, and say what was and was not done:
    end the lab process group each one recorded if it provably still is
    that lab (host/procid.py: same machine, boot, start time and command
    line; never a group a copied or edited folder names), then delete its
    folder. Only work whose owner is gone is touched (its claim is free),
    never a live shard's. Links are left in place and named, never followed
    or removed (host/safefs.py). run_ids limits it to those runs (a shard
    cleans its own slice). Completed runs are not touched."""
    done = []
    with setup_lock(exp_dir):
        if run_ids is None:  # a shard leaves the scratch of verifies alone
            done += [_clean_scratch(exp_dir, exp_dir / n) for n in sorted(os.listdir(exp_dir))
                     if VERIFY_SCRATCH.fullmatch(n)]
            done += _clean_obsolete(exp_dir)
        for tmp in stale_work(exp_dir):
            m = RUN_TMP.match(tmp.name)
            if m is not None and run_ids is not None and m.group(1) not in run_ids:
                continue
            if safefs.is_link(tmp):
                done.append(f"left {tmp.name} in place: it is a link to {safefs.target(tmp)}, which clean never "
                            f"follows or removes; remove it yourself (rm {tmp})")
                continue
            try:
                if m is None:  # lab assets or runs.parquet, made only under setup_lock
                    files.remove(exp_dir, tmp)
                    done.append(f"removed {tmp.name}")
                    continue
                with probe_claim(exp_dir, m.group(1)) as (free, last_start):
                    if not free:
                        done.append(f"left {tmp.name} in place: its run is under way (claimed by a live runner)")
                        continue
                    host = last_start.split()[1] if last_start else socket.gethostname()
                    try:
                        done += _end_lab(exp_dir, tmp, host)
                    except safefs.REFUSED as exc:  # the folder goes, its links as links
                        done.append(f"did not signal the lab of {tmp.name}: {exc}")
                    files.remove(exp_dir, tmp)
                    done.append(f"removed {tmp.name}")
            except safefs.REFUSED as exc:  # a link, or a FIFO as its claim
                done.append(f"left {tmp.name} in place: {exc}")
    return done


def _end_lab(exp_dir: Path, tmp: Path, host: str) -> list[str]:
    """SIGKILL the lab process group an interrupted run's work folder
    records, if it is provably that lab (procid.kill_group_if_ours); what
    was done, or why nothing was signalled."""
    lab = tmp / "lab"
    pg, rec = lab / "uml.pgid", lab / PROC_RECORD
    if not (os.path.lexists(pg) or os.path.lexists(rec)):
        return []
    # never through a link, never from a FIFO (host/safefs.py)
    named = safefs.read_text_regular(pg, exp_dir.parent).strip() if os.path.lexists(pg) else "?"
    if host != socket.gethostname():
        return [f"did not signal process group {named} of {tmp.name}: its run ran on {host}, not here"]
    if not os.path.lexists(rec):
        return [f"did not signal process group {named} of {tmp.name}: no {PROC_RECORD} proves it is a lab's "
                "(a folder from before such records, or an edited one)"]
    recorded = procid.loads(safefs.read_text_regular(rec, exp_dir.parent))
    if isinstance(recorded, dict) and named not in ("?", str(recorded.get("pid"))):
        return [f"did not signal process group {named} of {tmp.name}: uml.pgid and {PROC_RECORD} disagree "
                f"(pid {recorded.get('pid')})"]
    # the record is the folder's word; the live process must also be, by /proc alone, this folder's lab
    work = Path(os.path.realpath(exp_dir)) / tmp.name / "lab"
    is_lab, why = procid.is_lab_in(recorded["pid"], work) if isinstance(recorded, dict) \
        and isinstance(recorded.get("pid"), int) else (False, "the record names no pid")
    ok, why = procid.kill_group_if_ours(recorded) if is_lab else (False, why)
    if ok:
        return [f"killed lab process group {recorded['pid']} of {tmp.name}"]  # type: ignore[index]
    return [f"did not signal process group {named} of {tmp.name}: {why}"]
