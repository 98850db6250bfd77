"""The one bounded read of a file that may not be what its name says: opened
read-only and non-blocking (a FIFO in its place cannot hang the reader;
nofollow: a link in its place fails with ELOOP), checked by fstat on that
very descriptor to be a regular file (a device or a folder is no data), and
read in chunks never past a bound (read(n) allocates n bytes first; a file
that grew since its fstat is not read past the bound either).

Its readers: the YAML loader (spec/yamlfile.py), the region file's cache
(spec/regions.py) and, below a results folder, host/safefs.py (which adds
the walk that follows no link) and the manifests' hashing (host/verify.py).
Each says its own words when a file is refused (docs/faults.md,
docs/inputs.md "Files a reader reads").
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
CHUNK = 1 << 20
KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
         (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder"))


def kind_of(mode: int) -> str:
    """What a file of this st_mode is, in words ("a FIFO", ...)."""
    return next((name for test, name in KINDS if test(mode)), "not a regular file")


class NotRegularFile(ValueError):
    """The file opened is not a regular file; `kind` says what it is."""

    def __init__(self, path, mode: int):
        self.path, self.mode, self.kind = path, mode, kind_of(mode)
        super().__init__(f"{path} is {self.kind}, not a regular file")


def open_fd(path, nofollow: bool = False, dir_fd: int | None = None) -> tuple[int, os.stat_result]:
    """(a read-only descriptor of path, its fstat) if path is a regular
    file; NotRegularFile (the descriptor closed) if not; OSError as os.open
    raises it (ELOOP for a link with nofollow). The caller closes it."""
    fd = os.open(path, FLAGS | (os.O_NOFOLLOW if nofollow else 0), dir_fd=dir_fd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotRegularFile(path, st.st_mode)
    return fd, st


@contextmanager
def opened(path, nofollow: bool = False, dir_fd: int | None = None) -> Iterator[tuple[IO[bytes], os.stat_result]]:
    """open_fd as a binary file object, closed on leaving."""
    fd, st = open_fd(path, nofollow, dir_fd)
    with os.fdopen(fd, "rb") as fh:
        yield fh, st


def chunks(fh: IO[bytes], cap: int) -> Iterator[bytes]:
    """fh's bytes in chunks of at most CHUNK, never more than cap in all."""
    n = 0
    while n < cap and (chunk := fh.read(min(CHUNK, cap - n))):
        n += len(chunk)
        yield chunk


def read(fh: IO[bytes], cap: int) -> bytes:
    """At most cap bytes of fh (chunks)."""
    return b"".join(chunks(fh, cap))
