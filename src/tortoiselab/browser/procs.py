"""The processes a browser load started, found by parentage and ended by pid.

Playwright starts Chromium in a process group of its own (so a kill of
ours would miss it), and Chromium's helpers (zygote, renderers, the
network service) are its children. A load records every process below it
from /proc, by parent pid, and ends exactly those: never a process found
by name. In the lab the loader also runs as the first process of a PID
namespace of its own (guest/commands.py browser_loader), so the kernel
ends whatever is left when it exits.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

PROC = Path("/proc")


def _stat(pid: str) -> tuple[int, str] | None:
    """(parent pid, command name) of a process; None if it is gone."""
    try:
        text = (PROC / pid / "stat").read_text(encoding="utf-8")
    except OSError:
        return None
    # the name is in parentheses and may hold spaces or parentheses itself
    comm = text[text.index("(") + 1:text.rindex(")")]
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), comm


def process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command name) of every process visible now."""
    out = {}
    for d in os.listdir(PROC):
        if d.isdigit():
            st = _stat(d)
            if st is not None:
                out[int(d)] = st
    return out


def descendants_in(table: dict[int, tuple[int, str]], root: int) -> list[tuple[int, str]]:
    """Every process below root in a process table, (pid, name), parents
    before children."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], sorted(children.get(root, []))
    while todo:
        pid = todo.pop(0)
        out.append((pid, table[pid][1]))
        todo.extend(sorted(children.get(pid, [])))
    return out


def descendants(root: int) -> list[tuple[int, str]]:
    return descendants_in(process_table(), root)


def end_descendants(root: int, wait_s: float = 5.0) -> list[tuple[int, str]]:
    """SIGKILL every process below root (by the pids found now, repeated
    until none is left or wait_s passed); returns those that were running."""
    found: dict[int, str] = {}
    deadline = time.monotonic() + wait_s
    while True:
        procs = [(p, n) for p, n in descendants(root) if not gone(p)]
        if not procs or time.monotonic() > deadline:
            break
        for pid, name in procs:
            found.setdefault(pid, name)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _reap()
        time.sleep(0.05)
    return sorted(found.items())


def gone(pid: int) -> bool:
    """Whether a process has ended (exited, a zombie not yet reaped, or no more)."""
    try:
        text = (PROC / str(pid) / "stat").read_text(encoding="utf-8")
    except OSError:
        return True
    return text[text.rindex(")") + 2:].split()[0] == "Z"


def _reap() -> None:
    """Collect our own exited children (and, as a PID namespace's first
    process, the orphans the kernel hands us)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
