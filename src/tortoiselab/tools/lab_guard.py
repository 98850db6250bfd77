"""Keep a lab process from outliving the runner that started it.

    python -S lab_guard.py TIMEOUT_S GRACE_S PROGRAM [ARG...]

Started by the host (host/backends.py) as the leader of a new process
group, with its stdin a pipe whose other end only the runner holds. It
starts PROGRAM (the UML lab kernel) in its group and waits. It ends the
whole group with SIGKILL when
  - its stdin reaches end of file: the runner is gone, however it died
    (SIGKILL included: the kernel closes the runner's end of the pipe), or
  - TIMEOUT_S seconds of wall time have passed: the watchdog, which so
    lives on after the runner too;
first with SIGTERM when GRACE_S > 0 (the native backend's lab task then
tears its network down on the host), SIGKILL after GRACE_S seconds;
and when PROGRAM exits by itself it exits with PROGRAM's status, and the
host ends what is left of the group (UML's helper processes) as before.
The UML kernel calls setsid() first thing (arch/um/os-Linux/main.c), so it
leads a process group of its own, whose id is its pid: ending the lab ends
that group too, and a SIGTERM to the guard (the host's kill_group) ends
the lab before the guard goes. Cleanup goes by these two recorded ids alone
(docs/architecture.md, "Style"), and PROGRAM's id only while it is PROGRAM:
once the guard has reaped it, a process of that pid with another start time
(field 22 of /proc/<pid>/stat, recorded at fork) is someone else's, and its
group is left alone (host/procid.py does the same for the host).

Stdlib only and started with -S: it runs for every lab boot.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

def start_ticks(stat_text: str | None) -> int | None:
    """A process's start time in clock ticks since boot (field 22) from its
    /proc/<pid>/stat text (None: no such process). The command name (field
    2) may hold spaces and ')': the fields follow its last ')'."""
    return None if stat_text is None else int(stat_text.rsplit(")", 1)[1].split()[22 - 3])


def still_ours(started: int | None, stat_text: str | None) -> bool:
    """Whether PROGRAM's pid may still be signalled as its group: the
    process is PROGRAM (same start time), or no process has the pid (only
    PROGRAM's own group, outliving it, can then hold that id)."""
    now = start_ticks(stat_text)
    return now is None or now == started


def _stat(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read()
    except (FileNotFoundError, ProcessLookupError):
        return None


CHILD_START: int | None = None  # PROGRAM's start time, read right after the fork


def _signal_lab(child: int, sig: int) -> None:
    """sig to PROGRAM's own group (its pid, once it has called setsid) while
    that pid is still PROGRAM's (still_ours), and to this guard's group."""
    if still_ours(CHILD_START, _stat(child)):
        try:
            os.killpg(child, sig)
        except (ProcessLookupError, PermissionError):
            pass  # not (yet, or no more) a group of its own: this group holds it
    os.killpg(os.getpgrp(), sig)


def _end_group(child: int, grace_s: float) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if grace_s > 0:
        _signal_lab(child, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and os.waitpid(child, os.WNOHANG)[0] == 0:
            time.sleep(0.05)
    _signal_lab(child, signal.SIGKILL)  # this process included; nothing after this runs


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    timeout_s, grace_s, program = float(argv[0]), float(argv[1]), argv[2:]
    if os.getpgrp() != os.getpid():
        print("lab_guard: must lead its own process group (start it with start_new_session)", file=sys.stderr)
        return 2
    child = os.fork()
    if child == 0:
        try:
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # the pipe is the guard's alone
            os.execv(program[0], program)
        finally:
            os._exit(127)
    global CHILD_START
    CHILD_START = start_ticks(_stat(child))  # not reaped yet: it is PROGRAM (or its zombie)
    # the host ends a lab by SIGTERM to this group: take PROGRAM's own group along
    signal.signal(signal.SIGTERM, lambda *_: _end_group(child, grace_s))
    deadline = time.monotonic() + timeout_s
    while True:
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            return code if code >= 0 else 128 - code
        left = deadline - time.monotonic()
        if left <= 0:
            print(f"lab_guard: {timeout_s:.0f} s of wall time passed; ending the lab's process group",
                  file=sys.stderr, flush=True)
            _end_group(child, grace_s)
        ready, _, _ = select.select([sys.stdin], [], [], min(left, 0.2))
        if ready and not os.read(sys.stdin.fileno(), 4096):
            print("lab_guard: the runner is gone; ending the lab's process group", file=sys.stderr, flush=True)
            _end_group(child, grace_s)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
