"""File operations inside a results folder that never follow a link.

A results folder may come from elsewhere (copied, unpacked, edited), and
the runner and `tortoise clean` act in it with the user's rights (root in
the course VM). A link planted there (.lock -> ~/.bashrc, experiment.yaml
-> /etc/x, a run folder -> /elsewhere) must not turn a write, a truncate, a
rename or a removal into one outside the folder. So every such operation
goes through here:

  - `root` is the trusted folder (the results folder, or an experiment's
    folder's parent); it may itself be a link (results -> /scratch/...).
  - every component of the path below root is opened with O_NOFOLLOW
    (a directory file descriptor per step, so a component cannot be
    swapped for a link between a check and the use), and the last one too;
  - a link anywhere below root is refused with LinkRefused, which names
    it, where it points and the fix (remove it, or use another --results);
  - every file is opened non-blocking, and a reader reads only a regular
    file (read_bytes_regular): a FIFO planted as run.json or runs.parquet
    is refused with NotRegular (naming it and the fix), never waited on;
  - a reader reads no more than a file's bound (spec/bounds.READ_BOUNDS),
    checked by fstat on its descriptor before a byte is read (TooLarge):
    a sparse run.json of 1.5 GB costs a stat, not 28 s and 3.2 GB.

docs/faults.md lists the attacks this answers.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from tortoiselab.host.errors import RunnerError
from tortoiselab.spec import bounds, regular

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MODES = {"r": os.O_RDONLY, "rb": os.O_RDONLY, "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
         "wb": os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "a+": os.O_RDWR | os.O_CREAT | os.O_APPEND,
         "x": os.O_WRONLY | os.O_CREAT | os.O_EXCL, "xb": os.O_WRONLY | os.O_CREAT | os.O_EXCL}


class LinkRefused(RunnerError):
    """A link inside a results folder, where nothing follows links."""


def is_link(path: Path) -> bool:
    return os.path.islink(path)


def target(link: Path) -> str:
    """Where a link points, as written in it ('?' if unreadable)."""
    try:
        return os.readlink(link)
    except OSError:
        return "?"


def describe(link: Path) -> str:
    return f"{link} (a link to {target(link)})"


def refusal(links: list[Path], doing: str) -> LinkRefused:
    names = ", ".join(describe(p) for p in links)
    return LinkRefused(f"{doing + ': ' if doing else ''}{names} {'is a link' if len(links) == 1 else 'are links'}, and nothing in a "
                       "results folder follows links (docs/faults.md); remove "
                       f"{'it' if len(links) == 1 else 'them'} (rm {' '.join(str(p) for p in links)}) "
                       "or use another --results")


def _parts(path: Path, root: Path) -> list[str]:
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    if rel == "." or rel.startswith(".." + os.sep) or rel == "..":
        raise ValueError(f"{path} is not below {root}")
    return rel.split(os.sep)


@contextmanager
def parent_fd(path: Path, root: Path, doing: str = "") -> Iterator[int]:
    """A descriptor of path's folder, reached from root one component at a
    time without following a link; LinkRefused names the first link met."""
    parts = _parts(path, root)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        here = Path(root)
        for part in parts[:-1]:
            here = here / part
            try:
                nfd = os.open(part, DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and is_link(here):
                    raise refusal([here], doing) from None
                raise
            os.close(fd)
            fd = nfd
        yield fd
    finally:
        os.close(fd)


def _refuse_if_link(fd: int, name: str, path: Path, doing: str) -> None:
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise refusal([path], doing)


def open_fd(path: Path, flags: int, root: Path, mode: int = 0o644, doing: str = "") -> int:
    """os.open(path, flags) with no link followed below root."""
    path = Path(path)
    with parent_fd(path, root, doing) as fd:
        try:
            # O_NONBLOCK: a FIFO planted in a file's place cannot hang the opener
            return os.open(path.name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode, dir_fd=fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                _refuse_if_link(fd, path.name, path, doing)
            raise


def open_file(path: Path, mode: str, root: Path, doing: str = "", encoding: str | None = None) -> IO:
    """open(path, mode) for mode in MODES, with no link followed below root."""
    fd = open_fd(path, MODES[mode], root, doing=doing)
    return os.fdopen(fd, mode.replace("x", "w") if "x" in mode else mode,
                     encoding=None if "b" in mode else (encoding or "utf-8"))


def read_text(path: Path, root: Path, doing: str = "") -> str:
    """A regular file's text (read_bytes_regular: no link, no FIFO)."""
    return read_bytes_regular(path, root, doing).decode("utf-8")


def write_text(path: Path, text: str, root: Path, doing: str = "", exclusive: bool = False) -> None:
    with open_file(path, "x" if exclusive else "w", root, doing) as fh:
        fh.write(text)


def write_bytes(path: Path, data: bytes, root: Path, doing: str = "", exclusive: bool = False) -> None:
    with open_file(path, "xb" if exclusive else "wb", root, doing) as fh:
        fh.write(data)


def mkdir(path: Path, root: Path, exist_ok: bool = False, doing: str = "") -> None:
    """One folder (its parent must exist); an existing link in its place is refused."""
    path = Path(path)
    with parent_fd(path, root, doing) as fd:
        try:
            os.mkdir(path.name, 0o777, dir_fd=fd)
        except FileExistsError:
            _refuse_if_link(fd, path.name, path, doing)
            if not exist_ok:
                raise


def makedirs(path: Path, root: Path, doing: str = "") -> None:
    """path and every missing folder between root and it, refusing links."""
    here = Path(root)
    for part in _parts(path, root):
        here = here / part
        mkdir(here, root, exist_ok=True, doing=doing)


def rmtree(path: Path, root: Path, doing: str = "") -> bool:
    """Remove a folder or file (False: there was none). A link in its place
    or above it is refused (LinkRefused), not removed: its owner should
    see it. Links inside the folder are removed as links (shutil.rmtree
    never follows them)."""
    path = Path(path)
    with parent_fd(path, root, doing) as fd:
        try:
            st = os.stat(path.name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if stat.S_ISLNK(st.st_mode):
            raise refusal([path], doing)
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(path.name, dir_fd=fd)
        else:
            os.unlink(path.name, dir_fd=fd)
        return True


def replace(src: Path, dst: Path, root: Path, doing: str = "") -> None:
    """os.replace(src, dst) (both below root), refusing a link at either."""
    src, dst = Path(src), Path(dst)
    with parent_fd(src, root, doing) as sfd, parent_fd(dst, root, doing) as dfd:
        _refuse_if_link(sfd, src.name, src, doing)
        _refuse_if_link(dfd, dst.name, dst, doing)
        os.replace(src.name, dst.name, src_dir_fd=sfd, dst_dir_fd=dfd)


def links_in(folder: Path, subfolders: tuple[str, ...] = ()) -> list[Path]:
    """The links among folder's entries and those of its subfolders named
    (not followed: a subfolder that is a link is listed, not entered)."""
    folder = Path(folder)
    out: list[Path] = []
    for d in (folder, *(folder / s for s in subfolders)):
        if d != folder and (is_link(d) or not d.is_dir()):
            continue
        try:
            with os.scandir(d) as it:
                out += [Path(e.path) for e in it if e.is_symlink()]
        except FileNotFoundError:
            continue
    return sorted(out)


def refuse_links(exp_dir: Path, doing: str) -> None:
    """Refuse an experiment folder that is a link or holds links where the
    runner writes (its entries, .claims/, .lab/), naming every one."""
    exp_dir = Path(exp_dir)
    if is_link(exp_dir):
        raise refusal([exp_dir], doing)
    links = links_in(exp_dir, (".claims", ".lab"))
    if links:
        raise refusal(links, doing)


# --- reading: never through a link, never a FIFO or device ---------------------------

READ_FLAGS = regular.FLAGS | os.O_NOFOLLOW
kind_of = regular.kind_of  # "a FIFO", "a socket", ... (spec/regular.py)


class NotRegular(RunnerError):
    """A file a reader opens in a results folder that is not a regular file
    (a FIFO would block the reader for ever, a device is no record)."""


def not_regular(path: Path, kind: str, doing: str) -> NotRegular:
    return NotRegular(f"{doing + ': ' if doing else ''}{path} is {kind}, not a regular file, and a results folder's "
                      f"readers open regular files only (docs/faults.md); remove it (rm {path}) or use another "
                      "--results")


class TooLarge(RunnerError):
    """A file a reader opens in a results folder that is larger than its
    bound (spec/bounds.READ_BOUNDS) or than its manifest says: refused by
    fstat before one byte of it is read or hashed. `what` says what is too
    large, without the file's name or the fix."""

    def __init__(self, message: str, what: str = ""):
        super().__init__(message)
        self.what = what or message


def too_large(path: Path, size: int, bound: int, doing: str = "", why: str = "", fix: str = "") -> TooLarge:
    """The refusal of a file of `size` bytes above `bound` (why: what the
    bound is, e.g. "its manifest records"; by default a reader's bound)."""
    what = (f"{bounds.size_words(size)}, above the {bounds.size_words(bound)} "
            f"{why or 'a reader reads of such a file'}: not read (docs/inputs.md, \"Files a reader reads\")")
    return TooLarge(f"{doing + ': ' if doing else ''}{path} has {what}; "
                    f"{fix or f'move it out of the folder (mv {path} SOMEWHERE) or use another --results'}", what)


def open_regular(path: Path, root: Path | None = None, doing: str = "", max_bytes: int | None = None,
                 fix: str = "") -> int:
    """A read-only descriptor of path if it is a regular file of at most
    max_bytes bytes (default: spec/bounds.read_bound of its name), reached
    from root (default: its own folder) with no link followed and opened
    non-blocking (a FIFO in its place cannot hang the reader). A link is
    refused (LinkRefused), anything else that is not a regular file too
    (NotRegular), a larger file by fstat before a byte is read (TooLarge,
    its fix `fix` if given); a missing file raises FileNotFoundError. The
    caller closes it."""
    path = Path(path)
    root = Path(root) if root is not None else path.parent
    with parent_fd(path, root, doing) as dfd:
        try:
            fd, st = regular.open_fd(path.name, nofollow=True, dir_fd=dfd)
        except regular.NotRegularFile as exc:
            raise not_regular(path, exc.kind, doing) from None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                _refuse_if_link(dfd, path.name, path, doing)
            if exc.errno == errno.ENXIO:  # a socket (or a FIFO's peer gone): not a file
                raise not_regular(path, kind_of(os.stat(path.name, dir_fd=dfd, follow_symlinks=False).st_mode),
                                  doing) from None
            raise
    bound = bounds.read_bound(path.name) if max_bytes is None else max_bytes
    if st.st_size > bound:
        os.close(fd)
        raise too_large(path, st.st_size, bound, doing, fix=fix)
    return fd


def read_bytes_regular(path: Path, root: Path | None = None, doing: str = "", limit: int | None = None,
                       max_bytes: int | None = None) -> bytes:
    """path's bytes if it is a regular file of at most max_bytes (default:
    spec/bounds.read_bound of its name), opened as open_regular opens it
    (LinkRefused, NotRegular, TooLarge; FileNotFoundError). limit: read at
    most this many bytes."""
    bound = bounds.read_bound(Path(path).name) if max_bytes is None else max_bytes
    cap = bound if limit is None else min(limit, bound)
    with os.fdopen(open_regular(path, root, doing, bound), "rb") as fh:
        return regular.read(fh, cap)  # never past the bound, also of a file grown since fstat


def read_text_regular(path: Path, root: Path | None = None, doing: str = "") -> str:
    """read_bytes_regular as UTF-8 text (bytes that are not UTF-8 replaced)."""
    return read_bytes_regular(path, root, doing).decode("utf-8", errors="replace")


def check_regular(path: Path, doing: str = "") -> None:
    """Refuse path (by lstat, for a reader that must open it by name: the
    YAML loader) if it is a link or not a regular file; a missing path passes."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise refusal([Path(path)], doing)
    if not stat.S_ISREG(st.st_mode):
        raise not_regular(Path(path), kind_of(st.st_mode), doing)


REFUSED = (LinkRefused, NotRegular, TooLarge)  # what a reader of a results folder refuses
