"""Our page loader as one long-lived process in the client host
(tortoiselab.client.loadserver), each load run in it, instead of a Python
start per load (in the lab guest the start and the loader's imports cost
more CPU than a load's own work; docs/speed.md). One mechanism on both
clocks (docs/determinism.md, "Our loader in one process per boot").

A load runs exactly the argv `python -m tortoiselab.client ...` would (the
commands log records it as that argv, marked "(loadserver)"); it is
bounded by its timeout, after which the process is killed by its pid and
the load fails alone. A load that raised, or left threads running, ends
its process. Whenever the process ended within a load a new one is started
before the load returns, so that the next load finds one ready, as the
first did. The process is stopped on the way out, also on error.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tortoiselab.guest.executor import Executor

MODULE = "tortoiselab.client.loadserver"
LOADER_MODULE = "tortoiselab.client"
MARK = "(loadserver)"  # a load's argv in the commands log follows it
START_S = 120.0  # the process's Python start and imports (a busy guest on the real clock)
STOP_S = 30.0  # the process asked to end (stdin closed)


class LoaderProcessError(RuntimeError):
    pass


class LoaderProcess:
    """The loader process in a Mininet host; a context manager."""

    def __init__(self, ex: Executor, host: Any, python: str = sys.executable) -> None:
        self.ex, self.host, self.python = ex, host, python
        self.proc: subprocess.Popen | None = None
        self._buf = b""

    def __enter__(self) -> "LoaderProcess":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """A new process, returned once it has imported the loader and says
        it is ready."""
        argv = [self.python, "-m", MODULE]
        t0 = time.monotonic()
        self.proc = self.host.popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    bufsize=0)
        self._buf = b""
        ready = self._message(t0 + START_S)
        self.ex.record(self.host.name, argv, 0 if ready else 1, "", "" if ready else f"not ready in {START_S} s", t0)
        if ready is None:
            self.kill()
            raise LoaderProcessError(f"the loader process did not start within {START_S} s")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            proc.stdin.close()
            proc.wait(timeout=STOP_S)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()

    def kill(self) -> None:
        """End the process now (SIGKILL to its pid)."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
        if proc is not None:
            proc.wait()

    def load(self, argv: list[str], log: Path, timeout: float) -> int:
        """One load: argv as for `python -m tortoiselab.client` (the loader's
        arguments after the module), its output into log; returns main's
        exit code (-9: killed at the timeout). Raises LoaderProcessError if
        the process refused the load or ended within it."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()  # a process that ended with an earlier load does not fail this one
        full = [MARK, self.python, "-m", LOADER_MODULE, *argv]
        t0 = time.monotonic()
        try:
            self.proc.stdin.write((json.dumps({"argv": argv, "log": str(log)}) + "\n").encode())
            done = self._message(t0 + timeout)
        except (LoaderProcessError, OSError) as exc:
            self.ex.record(self.host.name, full, 1, "", f"{_tail(log)}{exc}", t0)
            if isinstance(exc, OSError) or self.proc.poll() is not None:  # it ended: a new one for the next load
                self.kill()
                self.start()
            raise LoaderProcessError(str(exc)) from None
        if done is None:  # hung: the process goes, the next load gets a new one
            self.ex.record(self.host.name, full, -9, "", f"{_tail(log)}(timed out after {timeout} s)", t0)
            self.kill()
            self.start()
            return -9
        rc, note = int(done["rc"]), _left_note(done)
        if note:
            with open(log, "a", encoding="utf-8") as fh:
                fh.write(note + "\n")
        self.ex.record(self.host.name, full, rc, "", _tail(log), t0)
        if note:  # rare: a line of its own, so that the commands log shows it whatever rc
            self.ex.record(self.host.name, [MARK, note], 0, "", "", time.monotonic())
        if done.get("restart"):
            self.stop()
            self.start()
        return rc

    def _message(self, deadline: float) -> dict | None:
        """The process's next line as JSON, or None at the deadline."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                self.proc.wait()
                err = self.proc.stderr.read().decode(errors="replace").strip()
                raise LoaderProcessError(f"the loader process exited ({self.proc.returncode}): "
                                         f"{err[-500:] or 'no message'}")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        msg = json.loads(line)
        if "error" in msg:
            raise LoaderProcessError(f"the loader process refused the load: {msg['error']}")
        return msg


def _left_note(done: dict) -> str:
    """A line for the load's log naming what the load left behind in the
    process (undone there) and why the process ends, if it does; '' if
    neither."""
    parts = []
    if done.get("left"):
        parts.append("left behind: " + "; ".join(done["left"]))
    if done.get("restart"):
        parts.append(f"the loader process ends: {done['restart']}")
    return f"[{MODULE}] " + ". ".join(parts) if parts else ""


def _tail(log: Path) -> str:
    """The log's last lines; nothing if it is not a regular file (opening a
    FIFO nobody writes to would block)."""
    try:
        if not log.is_file():
            return ""
        return log.read_text(encoding="utf-8", errors="replace")[-2000:]
    except OSError:
        return ""
