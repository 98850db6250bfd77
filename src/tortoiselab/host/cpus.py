"""Which host CPU a uml lab runs on: one per lab, machine-wide.

A UML guest has one CPU, and its host threads hand the CPU to each other
at every guest system call and context switch. Spread over two CPUs of a
virtual machine, each hand-over wakes a halted virtual CPU: quick.yaml at
--jobs 1 took 24 s of wall time unpinned and 8 s pinned (bench/speed.py,
docs/kernel-7.3.md). The virtual clock does not see it: pinned runs are
identical to unpinned ones.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

CPU_LOCKS = Path(tempfile.gettempdir()) / "tortoiselab-cpus"  # one flock per host CPU (cpu_slot)


@contextmanager
def cpu_slot(locks: Path = CPU_LOCKS) -> Iterator[int | None]:
    """A host CPU (of this process's affinity) that no other uml lab on this
    machine holds, for one boot: an flock per CPU in a shared folder, so
    that labs of other runners, shards and users spread over the CPUs too.
    None when every CPU is held or the folder cannot be used: the lab then
    runs unpinned, as before."""
    cpus = sorted(os.sched_getaffinity(0))
    try:
        locks.mkdir(mode=0o1777, exist_ok=True)
        if locks.stat().st_uid == os.geteuid():
            locks.chmod(0o1777)  # sticky and open to all: every user's labs share it
    except OSError:
        yield None
        return
    start = os.getpid() % len(cpus)
    for cpu in cpus[start:] + cpus[:start]:
        try:
            fd = os.open(locks / f"cpu{cpu}", os.O_RDONLY | os.O_CREAT, 0o644)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        try:
            yield cpu
        finally:
            os.close(fd)
        return
    yield None


def pinned(argv: list[str], cpu: int | None) -> list[str]:
    """argv on one host CPU (taskset; the processes it starts inherit it).
    A UML guest has one CPU, and its host threads hand the CPU to each other
    at every guest system call and context switch: spread over two CPUs of
    a virtual machine each hand-over wakes a halted virtual CPU, and the
    same quick.yaml took 24 s of wall time instead of 8 (bench/speed.py,
    docs/kernel-7.3.md). The virtual clock does not see it."""
    # a path: the lab guard starts its program with execv (no PATH search)
    return argv if cpu is None else [shutil.which("taskset") or "/usr/bin/taskset", "-c", str(cpu), *argv]
