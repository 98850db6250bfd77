"""The guest's clock: absolute sleeps that line runs up on the virtual clock.

On the virtual clock (UML's time-travel) every run must reach the same
instants: a relative sleep carries whatever the steps before it cost, an
absolute deadline does not (docs/determinism.md).
"""

from __future__ import annotations

import ctypes
import functools
import math
import time
from pathlib import Path

_CLOCK_MONOTONIC = 1
_TIMER_ABSTIME = 1
_EINTR = 4


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def sleep_until_monotonic(t_s: float) -> None:
    """Sleep until CLOCK_MONOTONIC reads t_s (an absolute deadline,
    clock_nanosleep TIMER_ABSTIME); at once if it has passed. On the virtual
    clock every later event then happens at the same instant in every run,
    whatever the boot cost: boot took a few microseconds more or less from
    run to run (docs/determinism.md), and a relative sleep carried that on."""
    ns = int(round(t_s * 1e9))
    ts = _Timespec(ns // 10**9, ns % 10**9)
    while True:  # restart after a signal
        rc = _libc().clock_nanosleep(_CLOCK_MONOTONIC, _TIMER_ABSTIME, ctypes.byref(ts), None)
        if rc != _EINTR:
            return


def align_to_grid(step_s: float = 0.5) -> float:
    """Sleep until the next multiple of step_s (at least step_s/2 away) of
    the monotonic clock: two runs that drifted apart by microseconds meet
    again at the same instant (docs/determinism.md); returns that instant."""
    target = next_grid_point(step_s)
    sleep_until_monotonic(target)
    return target


def next_grid_point(step_s: float = 0.5) -> float:
    """The instant align_to_grid would sleep until, without sleeping."""
    return math.ceil((time.monotonic() + step_s / 2) / step_s) * step_s


def uptime_s() -> float:
    """The guest kernel's uptime: on the virtual clock, the simulated time."""
    return float(Path("/proc/uptime").read_text(encoding="utf-8").split()[0])


class HostWall:
    """The host's wall clock, read from inside the guest for the time budget
    only (which phase of a run costs the machine what; `make bench`), never
    for the lab's own timing. Each reading creates a new file in a folder of
    the work folder (hostfs): the host stamps it with its own time, and the
    guest reads that back. The same readings in every run, so the virtual
    clock is not disturbed differently from run to run."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.folder.mkdir()
        self.n = 0

    def now(self) -> float:
        self.n += 1
        f = self.folder / str(self.n)
        f.touch()
        return f.stat().st_mtime_ns / 1e9
