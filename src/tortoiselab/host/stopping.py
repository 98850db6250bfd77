"""Stopping the runner promptly and truthfully (SIGINT, or SIGTERM, which
cli.py turns into the same KeyboardInterrupt): issue 35 item 7,
docs/faults.md "Interrupts".

The signal reaches the runner's main thread only; each batch's lab is
waited for in a thread of its own (host/runner.py). The main thread sets a
stop event; every lab wait looks at it (wait_unless_stopped) and ends its
lab by its recorded process group (host/backends.kill_group); each batch
stores whole the runs whose load the guest had finished (load-NNN/result.json,
written atomically at the end of the load) and drops the rest, which stay
pending; the main thread waits for the batches (wind_down), rebuilds
runs.parquet and raises Stopped with what was ended and what was stored
(stop_message)."""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures

from tortoiselab.host.errors import RunnerError
from tortoiselab.spec import cols

# how soon a lab notices that its runner is being stopped
STOP_POLL_S = 0.2
# how long the main thread waits for the batches to end their labs and store
# what they finished (kill_group takes up to 5 s per group, then SIGKILL)
WIND_DOWN_S = 60.0


class LabInterrupted(RuntimeError):
    """The runner is being stopped: the lab was ended (its recorded process
    group) before it finished, or never started."""


class RunInterrupted(RunnerError):
    """The runner was stopped while these runs' lab ran: nothing of them is
    stored, they stay pending (run_ids)."""

    def __init__(self, message: str, run_ids: list[str]) -> None:
        super().__init__(message)
        self.run_ids = list(run_ids)


class Stopped(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped `tortoise run`: the labs under way were
    ended, what they finished is stored, runs.parquet rebuilt; the message
    says which runs (cli.py prints it, exit 128 + the signal's number)."""

    def __init__(self, message: str, signal_name: str) -> None:
        super().__init__(message)
        self.signal_name = signal_name


SIGNALS = {"SIGINT": 2, "SIGTERM": 15}

# A lab that ends by a signal the runner did not send (a `kill` from a shell,
# the OOM killer, a shutdown): not a fault of the run it was on. That run is
# stored as failed saying so (backends.LabKilled), and the next `tortoise run`
# moves it aside (kept) and does it again (setaside.move_killed_aside;
# docs/faults.md). A crash signal (SIGSEGV, SIGABRT, ...) is the lab's own:
# named, not redone.
FROM_OUTSIDE = ("SIGHUP", "SIGINT", "SIGKILL", "SIGTERM")
KILLED_FROM_OUTSIDE = re.compile(r"^lab: the lab was ended by (SIG[A-Z0-9]+) \(signal [0-9]+\) from outside the runner")


def lab_signal(returncode: int | None) -> signal.Signals | None:
    """The signal that ended a lab, from its guard's exit status: -N when
    the guard itself was killed, 128 + N when it reports its child's
    (tools/lab_guard.py); None for an exit of its own."""
    if returncode is None or 0 <= returncode <= 128:
        return None
    try:
        return signal.Signals(-returncode if returncode < 0 else returncode - 128)
    except ValueError:
        return None


def ended_by(sig: signal.Signals) -> str:
    """The start of a LabError's message for a lab that sig ended: for a
    signal from outside, the words killed_from_outside looks for."""
    if sig.name in FROM_OUTSIDE:
        return (f"the lab was ended by {sig.name} (signal {sig.value}) from outside the runner (a kill, the OOM "
                "killer, a shutdown): not a fault of this run, and the next `tortoise run` does it again")
    return f"the lab was ended by {sig.name} (signal {sig.value}): it crashed"


def killed_from_outside(error: str | None) -> str | None:
    """The signal's name if a failed run's stored error says its lab was
    ended from outside the runner (ended_by, after "lab: "), else None."""
    m = KILLED_FROM_OUTSIDE.match(error or "")
    return m.group(1) if m else None


def interrupted(exc: KeyboardInterrupt) -> tuple[str, int]:
    """What the CLI prints when a signal stopped a command, and its exit
    code, 128 + the signal's number (130 SIGINT, 143 SIGTERM). cli.py
    raises SIGTERM as KeyboardInterrupt("SIGTERM"); Python's own for SIGINT
    has no text. Another command's lab ended with its wait
    (host/backends._wait_or_kill)."""
    name = getattr(exc, "signal_name", None) or (str(exc) if str(exc) in SIGNALS else "SIGINT")
    return (str(exc) if isinstance(exc, Stopped) else f"interrupted by {name}"), 128 + SIGNALS[name]


def wait_unless_stopped(p: subprocess.Popen, timeout_s: float, stop: threading.Event | None) -> None:
    """p.wait(timeout_s), looking at `stop` every STOP_POLL_S; LabInterrupted
    once it is set (the caller kills the group)."""
    if stop is None:
        p.wait(timeout=timeout_s)
        return
    deadline = time.monotonic() + timeout_s
    while not stop.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            raise subprocess.TimeoutExpired(p.args, timeout_s)
        try:
            p.wait(timeout=min(STOP_POLL_S, left))
            return
        except subprocess.TimeoutExpired:
            continue
    raise LabInterrupted("the runner is being stopped (SIGINT or SIGTERM): the lab was ended")


def wind_down(pool: ThreadPoolExecutor, futs: list[Future], stop: threading.Event,
              timeout_s: float = WIND_DOWN_S) -> tuple[list[str], list[str]]:
    """Set `stop`, cancel the batches not yet started and wait for the
    running ones to end their labs; (ids of the runs whose lab was ended,
    errors of batches that failed otherwise). A second signal meanwhile
    does not cut the wait short: the labs are being ended already."""
    stop.set()
    pool.shutdown(wait=False, cancel_futures=True)
    # the batches cancelled in the queue never start, and concurrent.futures.wait never counts such a
    # future as done (it waits for a worker to pick it up): waiting for them took the whole limit
    running = [f for f in futs if not f.cancelled()]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if not wait_futures(running, timeout=max(0.0, deadline - time.monotonic())).not_done:
                break
        except KeyboardInterrupt:
            continue
    ended, errors = [], []
    for f in futs:
        exc = None if f.cancelled() or not f.done() else f.exception()
        if isinstance(exc, RunInterrupted):
            ended += exc.run_ids
        elif exc is not None:
            errors.append(f"{type(exc).__name__}: {exc}")
    return ended, errors


def stop_message(signal_name: str, ended: list[str], stored: list[dict], not_started: int, complete: int,
                 total: int, table: str, errors: list[str] = ()) -> str:
    """What `tortoise run` says when a signal stopped it."""
    def ids(xs: list[str]) -> str:
        return ", ".join(xs[:8]) + (f" and {len(xs) - 8} more" if len(xs) > 8 else "")

    parts = [f"stopped by {signal_name}"]
    parts.append(f"ended the lab of {len(ended)} run{'s' if len(ended) != 1 else ''} under way ({ids(ended)}): "
                 "not stored, still pending" if ended else "no lab was under way")
    if not_started:
        parts.append(f"{not_started} pending run{'s' if not_started != 1 else ''} not started")
    failed = [r[cols.RUN_ID] for r in stored if not r.get(cols.OK)]
    parts.append(f"stored {len(stored)} run{'s' if len(stored) != 1 else ''} in this invocation"
                 + (f" ({ids([r['run_id'] for r in stored])}" + (f"; failed: {ids(failed)}" if failed else "") + ")"
                    if stored else ""))
    parts.append(f"{table}: {complete} of {total} runs complete")
    parts += [f"error: {e}" for e in errors]
    return "; ".join(parts) + "; run the same command again to do the rest"
