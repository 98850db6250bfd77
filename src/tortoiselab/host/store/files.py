"""The store's writing side: every create, write, truncate, rename, link and
removal of a path in a results folder goes through here (issue 40; the
rule and its test: docs/architecture.md, "The store writes the results
folder", tests/unit/test_one_writer.py).

Each function takes the folder it writes in first (`exp_dir`: an
experiment's folder, results/<experiment>/, whose parent, the results
folder, is trusted and may itself be a link), then a path below it. Every
operation is host/safefs.py's: no link below the results folder is
followed, no FIFO is opened in a file's place, and a whole file is written
to a temporary beside it and renamed over it (docs/faults.md).

The dot entries of an experiment's folder the store owns (LAYOUT) are
named here once; readers and `tortoise clean` use these names.
"""

from __future__ import annotations

import errno
import functools
import inspect
import os
import shutil
import stat
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Callable, ParamSpec, TypeVar

from tortoiselab.host import safefs
from tortoiselab.host.errors import RunnerError
from tortoiselab.spec import regular

P = ParamSpec("P")
T = TypeVar("T")

LAYOUT = {  # an experiment folder's entries besides the run folders and runs.parquet
    "experiment.yaml": "the experiment file as first run (host/runner.py)",
    "experiment.json": "what the folder's runs are: the expanded experiment's hash (host/versions.py)",
    "report.html": "the HTML report (report/html.py)",
    ".lock": "the runner's flock (host/locks.py)",
    ".setup.lock": "a few seconds' flock for shared steps (host/locks.py)",
    ".claims": "a flock per run being done (host/locks.py)",
    ".lab": "the experiment's pages and PKI, made once (host/assets.py), and trace copies (host/storedtraces.py)",
    ".damaged": "damaged runs moved aside by a resume, kept (host/verify.py)",
    ".killed": "failed runs whose lab was killed from outside, moved aside by the next run, kept (host/verify.py)",
    ".slurm": "Slurm submissions and their jobs (host/slurm.py)",
    ".<run_id>.tmp-<tag>": "a run in progress, lent to the lab as its work folder (host/runner.py)",
    ".verify-<pid>": "the reruns of a determinism check or an audit (host/determinism.py)",
}
# left by older versions and read by nobody: `tortoise clean` removes them
# (.studies-cache: analysed captures, kept in the user's cache since issue 35)
OBSOLETE = (".studies-cache",)


class NotWritable(RunnerError):
    """A results folder the store cannot write: on a read-only filesystem,
    or not this user's to write (issue 50: OSError tracebacks before)."""


def _writes(fn: Callable[P, T]) -> Callable[P, T]:
    """fn, one of the store's writers, with EROFS and EACCES named: the
    path, what was being done and the fix, instead of a traceback."""
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def named(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        except OSError as exc:
            if exc.errno not in (errno.EROFS, errno.EACCES):
                raise
            given = sig.bind_partial(*args, **kwargs).arguments
            folder = Path(given.get("exp_dir") or given.get("results") or Path(given["path"]).parent)
            where, doing = given.get("path") or given.get("dst") or folder, given.get("doing") or ""
            why = ("is on a read-only filesystem" if exc.errno == errno.EROFS
                   else f"is not writable by this user (uid {os.getuid()})")
            raise NotWritable(f"{doing + ': ' if doing else ''}cannot write {where}: the folder {why}, and this "
                              "command writes there (a lock, a table, a report); nothing more was written. Make "
                              "it writable (mount it read-write, or run as its owner), or copy it where you can "
                              f"write (cp -a {folder} <a folder of yours>) and give the copy") from None
    return named


def inside(folder: Path, path: Path) -> bool:
    """path is folder or below it (by name, no link resolved)."""
    a, b = os.path.abspath(folder), os.path.abspath(path)
    return b == a or b.startswith(a.rstrip(os.sep) + os.sep)


def _root(exp_dir: Path, path: Path) -> Path:
    """The trusted folder a path of exp_dir is reached from: exp_dir's parent
    (so exp_dir itself is never a link followed). ValueError if path is
    not exp_dir or below it."""
    if not inside(exp_dir, path):
        raise ValueError(f"{path} is not in {exp_dir}")
    return Path(exp_dir).parent


@_writes
def ensure_folder(exp_dir: Path, doing: str = "") -> Path:
    """exp_dir made if missing (the results folder above it too); a link in
    its place is refused (safefs.LinkRefused)."""
    exp_dir = Path(exp_dir)
    exp_dir.parent.mkdir(parents=True, exist_ok=True)  # the results folder: the user's, trusted
    safefs.mkdir(exp_dir, exp_dir.parent, exist_ok=True, doing=doing or f"results folder {exp_dir}")
    return exp_dir


@_writes
def make_dir(exp_dir: Path, path: Path, exist_ok: bool = False, doing: str = "") -> Path:
    """One folder below exp_dir (its parent must exist)."""
    safefs.mkdir(path, _root(exp_dir, path), exist_ok=exist_ok, doing=doing)
    return Path(path)


@_writes
def make_dirs(exp_dir: Path, path: Path, doing: str = "") -> Path:
    """path and every missing folder between exp_dir's parent and it."""
    safefs.makedirs(path, _root(exp_dir, path), doing=doing)
    return Path(path)


@_writes
def fresh_dir(exp_dir: Path, path: Path, doing: str = "") -> Path:
    """path as a new empty folder (whatever was there removed, a link refused)."""
    remove(exp_dir, path, doing)
    return make_dir(exp_dir, path, doing=doing)


@_writes
def remove(exp_dir: Path, path: Path, doing: str = "", quiet: bool = False) -> bool:
    """path (a folder or file) removed, True if it was there; a link in its
    place or above it is refused, not removed. quiet: nothing raised (a
    clean-up after an error, which must not hide it)."""
    try:
        return safefs.rmtree(path, _root(exp_dir, path), doing)
    except (OSError, *safefs.REFUSED):
        if not quiet:
            raise
        return False


@_writes
def replace(exp_dir: Path, src: Path, dst: Path, doing: str = "") -> None:
    """src renamed over dst, both below exp_dir, a link at either refused."""
    safefs.replace(src, dst, _root(exp_dir, dst), doing)


@_writes
def chmod(exp_dir: Path, path: Path, mode: int, doing: str = "") -> None:
    """path's mode set, through a descriptor that followed no link."""
    fd = safefs.open_fd(path, os.O_RDONLY, _root(exp_dir, path), doing=doing)
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _data(data: str | bytes) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data


@_writes
def write_new(exp_dir: Path, path: Path, data: str | bytes, doing: str = "") -> Path:
    """A new file (FileExistsError if anything is there; a link is refused),
    for a folder being made that is renamed into place whole afterwards."""
    safefs.write_bytes(path, _data(data), _root(exp_dir, path), doing, exclusive=True)
    return Path(path)


@_writes
def write_file(exp_dir: Path, path: Path, data: str | bytes, doing: str = "") -> Path:
    """path written whole: a temporary beside it (.<name>.tmp-<pid>), then
    renamed over it, so a reader sees the old file or the new one."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    remove(exp_dir, tmp, doing)
    try:
        write_new(exp_dir, tmp, data, doing)
        replace(exp_dir, tmp, path, doing)
    finally:
        remove(exp_dir, tmp, doing, quiet=True)
    return path


@_writes
def write_once(exp_dir: Path, path: Path, data: str | bytes, doing: str = "") -> bool:
    """path written whole if there is none (never over a file, a link or
    another runner's, by a hard link of a temporary); True if written."""
    path = Path(path)
    root = _root(exp_dir, path)
    tmp = path.with_name(f".{path.name}.new-{os.getpid()}")  # not .*.tmp-*: the runs' work (host/locks.py)
    remove(exp_dir, tmp, doing)
    write_new(exp_dir, tmp, data, doing)
    try:
        with safefs.parent_fd(path, root, doing) as fd:
            os.link(tmp.name, path.name, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
        return True
    except FileExistsError:
        return False
    finally:
        remove(exp_dir, tmp, doing, quiet=True)


@_writes
def open_new(exp_dir: Path, path: Path, binary: bool = False, doing: str = "") -> IO:
    """A new file open for writing (FileExistsError if anything is there)."""
    return safefs.open_file(path, "xb" if binary else "x", _root(exp_dir, path), doing=doing)


@_writes
def open_lock(exp_dir: Path, path: Path, doing: str) -> IO:
    """A lock or claim file opened "a+", never through a link, nor when it
    has a second name (a hard link, which O_NOFOLLOW does not see):
    truncating it would truncate the other file, and a .setup.lock that is
    .lock under another name would wait on the runner's own flock for ever.
    Nor when it is not a regular file: a FIFO or socket in its place is
    named with the `rm` fix (issue 50: "File or stream is not seekable")."""
    try:
        fd = safefs.open_fd(path, safefs.MODES["a+"], _root(exp_dir, path), doing=doing)
    except OSError as exc:
        if exc.errno not in (errno.ENXIO, errno.EISDIR):  # a socket, a folder
            raise
        raise safefs.not_regular(path, safefs.kind_of(os.lstat(path).st_mode), doing) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise safefs.not_regular(path, safefs.kind_of(st.st_mode), doing)
    fh = os.fdopen(fd, "a+", encoding="utf-8")
    names = st.st_nlink
    if names != 1:
        fh.close()
        raise safefs.LinkRefused(f"{doing}: {path} has {names} names (a hard link to another file), and nothing in a "
                                 "results folder writes or locks a file that has another name (docs/faults.md); "
                                 f"remove it (rm {path}): the runner makes it anew")
    return fh


@_writes
def move_in(exp_dir: Path, src: Path, dst: Path, doing: str = "") -> None:
    """A file from elsewhere (the lab's work folder) renamed to dst below
    exp_dir; a link at dst or above it is refused."""
    with safefs.parent_fd(dst, _root(exp_dir, dst), doing) as fd:
        try:
            if stat.S_ISLNK(os.stat(Path(dst).name, dir_fd=fd, follow_symlinks=False).st_mode):
                raise safefs.refusal([Path(dst)], doing)
        except FileNotFoundError:
            pass
        os.replace(os.path.abspath(src), Path(dst).name, dst_dir_fd=fd)


@_writes
def copy_in(exp_dir: Path, src: Path, dst: Path, doing: str = "") -> bool:
    """A regular file from elsewhere (a lab's log) copied to dst below
    exp_dir (replacing a file there, refusing a link); False (nothing copied) when src is missing, a link or not a
    regular file."""
    try:
        fd, _ = regular.open_fd(src, nofollow=True)  # spec/regular.py: non-blocking, a regular file only
    except regular.NotRegularFile:
        return False
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENXIO):
            return False
        raise
    with os.fdopen(fd, "rb") as fh, safefs.open_file(dst, "wb", _root(exp_dir, dst), doing=doing) as out:
        shutil.copyfileobj(fh, out)
    return True


@_writes
def link_tree(exp_dir: Path, src: Path, dst: Path) -> None:
    """dst (new, below exp_dir) as a copy of the folder src (a run of
    another folder) whose files are hard links (copies across file systems)."""
    make_dir(exp_dir, dst, doing=f"copying {src}")

    def link(s: str, d: str) -> None:
        try:
            os.link(s, d, follow_symlinks=False)
        except OSError:
            shutil.copy2(s, d, follow_symlinks=False)
    shutil.copytree(src, dst, copy_function=link, symlinks=True, dirs_exist_ok=True)


@_writes
def move_aside(exp_dir: Path, run_id: str, into: str, now: datetime | None = None) -> Path:
    """Rename <exp>/<run_id> to <exp>/<into>/<run_id>-<utc>/ (kept, never
    deleted), by file descriptors that follow no link: an `into` that is a
    link is refused."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%S%fZ")
    exp_fd = os.open(exp_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            os.mkdir(into, 0o755, dir_fd=exp_fd)
        except FileExistsError:
            pass
        try:
            dam_fd = os.open(into, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=exp_fd)
        except OSError as exc:
            raise RunnerError(f"results: {Path(exp_dir) / into} is not a folder ({exc.strerror}; a link?): "
                              f"remove it (it is not the runner's), then run again") from None
        try:
            os.rename(run_id, f"{run_id}-{stamp}", src_dir_fd=exp_fd, dst_dir_fd=dam_fd)
        finally:
            os.close(dam_fd)
    finally:
        os.close(exp_fd)
    return Path(exp_dir) / into / f"{run_id}-{stamp}"


@_writes
def write_results_file(results: Path, name: str, data: str | bytes, doing: str = "") -> Path:
    """results/<name> (a file of the results folder itself, beside the
    experiments' folders: judged claims, the population sensitivity)
    written whole, with no link followed below results."""
    out, tmp = Path(results) / name, Path(results) / f".{name}.tmp-{os.getpid()}"
    safefs.rmtree(tmp, results, doing)
    try:
        safefs.write_bytes(tmp, _data(data), results, doing, exclusive=True)
        safefs.replace(tmp, out, results, doing)
    finally:
        if os.path.lexists(tmp):
            safefs.rmtree(tmp, results, doing)
    return out


@_writes
def write_elsewhere(path: Path, data: str | bytes, doing: str = "") -> Path:
    """A file outside any results folder (a report the user sent elsewhere
    with --out) written whole the same way: neither it nor its temporary
    is a link followed."""
    return write_results_file(Path(path).parent, Path(path).name, data, doing)
