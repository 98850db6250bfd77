"""Our page loader as one long-lived process in the client host
(tortoiselab.client.forkserver), forked once per load instead of a Python
start per load (in the lab guest the start and the loader's imports cost
more CPU than a load's own work; docs/kernel-7.3.md, "Speed with batches").

A load runs exactly the argv `python -m tortoiselab.client ...` would (the
commands log records it as that argv, marked "(forked)"); it is bounded by
its timeout, after which the child is killed by its pid and the load fails
alone. The server is stopped on the way out, also on error.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tortoiselab.guest.executor import Executor

MODULE = "tortoiselab.client.forkserver"
LOADER_MODULE = "tortoiselab.client"
KILL_WAIT_S = 30.0  # a killed child is reported by its parent within this
STOP_S = 30.0  # the server asked to end (stdin closed)


class ForkLoaderError(RuntimeError):
    pass


class ForkLoader:
    """The fork server in a Mininet host; a context manager."""

    def __init__(self, ex: Executor, host: Any, python: str = sys.executable) -> None:
        self.ex, self.host, self.python = ex, host, python
        self.proc: subprocess.Popen | None = None
        self._buf = b""

    def __enter__(self) -> "ForkLoader":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        argv = [self.python, "-m", MODULE]
        self.ex.record(self.host.name, argv, 0, "", "", time.monotonic())
        self.proc = self.host.popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    bufsize=0)
        self._buf = b""

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

    def load(self, argv: list[str], log: Path, timeout: float) -> int:
        """One load: argv as for `python -m tortoiselab.client` (the loader's
        arguments after the module), its output into log; returns the
        child's exit code (-9 if it was killed at the timeout)."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()  # a server that died with an earlier load does not fail this one
        full = [self.python, "-m", LOADER_MODULE, *argv]
        t0 = time.monotonic()
        deadline = t0 + timeout
        self.proc.stdin.write((json.dumps({"argv": argv, "log": str(log)}) + "\n").encode())
        forked = self._message(deadline)
        if forked is None:
            raise ForkLoaderError(f"the loader's fork server did not fork within {timeout} s")
        pid = forked["pid"]
        done = self._message(deadline)
        note = ""
        if done is None:  # hung: kill it, its parent reports the exit
            os.kill(pid, signal.SIGKILL)
            done = self._message(time.monotonic() + KILL_WAIT_S)
            note = f"(timed out after {timeout} s)"
            if done is None:
                raise ForkLoaderError(f"the loader's child {pid} did not end after SIGKILL")
        rc = int(done["rc"])
        self.ex.record(self.host.name, ["(forked)", *full], rc, "", _tail(log) + note, t0)
        return rc

    def _message(self, deadline: float) -> dict | None:
        """The server's next line as JSON, or None at the deadline."""
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
                err = self.proc.stderr.read().decode(errors="replace").strip()
                raise ForkLoaderError(f"the loader's fork server exited: {err[-500:] or 'no message'}")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        msg = json.loads(line)
        if "error" in msg:
            raise ForkLoaderError(f"the loader's fork server refused the load: {msg['error']}")
        return msg


def _tail(log: Path) -> str:
    """The log's last lines; nothing if it is not a regular file (opening a
    FIFO nobody writes to would block)."""
    try:
        if not log.is_file():
            return ""
        return log.read_text(errors="replace")[-2000:]
    except OSError:
        return ""
