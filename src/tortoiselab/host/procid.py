"""What proves that a recorded process is still the one we started.

A pid or a process group id written into a results folder is only a
number: the folder may have been copied from another machine (every
Vagrant VM is called `vm`), kept across a reboot, or edited, and by then
the number may name any process of this machine. So beside every pid the
host records at launch (record) what identifies that process beyond doubt:

  boot_id   this machine's boot (/proc/sys/kernel/random/boot_id): another
            machine or another boot of this one never has the same
  start     the process's start time in clock ticks since boot (field 22
            of /proc/<pid>/stat): a pid used again later starts later
  cmdline   its command line (for a lab: lab_guard.py and the UML argv
            with its umid)

and before any signal (is_ours, kill_group_if_ours) reads /proc again and
compares all three; on any difference nothing is signalled and the answer
says what was found. docs/faults.md lists the attacks this answers.

A record read back from a results folder is itself untrusted: anyone can
copy a foreign process's boot id, start time and command line out of
/proc into it. So a stale lab is ended only if the live process is also,
by what /proc says and no file can forge, a lab of that very work folder
(is_lab_in: this installation's lab guard, started with HOME set to the
folder, as host/backends.py starts every lab).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from tortoiselab.project import PKG_DIR

PROC = Path("/proc")
LAB_GUARD = PKG_DIR / "tools" / "lab_guard.py"  # the leader of every lab's process group
BOOT_ID = PROC / "sys" / "kernel" / "random" / "boot_id"


def boot_id() -> str:
    return BOOT_ID.read_text(encoding="utf-8").strip()


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat's fields from the state on (field 3 is the first);
    None if there is no such process. The command name (field 2) may hold
    spaces and parentheses: the fields follow its last ')'."""
    try:
        text = (PROC / str(pid) / "stat").read_text(encoding="utf-8")
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text.rsplit(")", 1)[1].split()


def start_ticks(pid: int) -> int | None:
    """The process's start time since boot in clock ticks (field 22), or None."""
    f = _stat_fields(pid)
    return int(f[22 - 3]) if f is not None else None


def pgid(pid: int) -> int | None:
    f = _stat_fields(pid)
    return int(f[5 - 3]) if f is not None else None


def cmdline(pid: int) -> list[str] | None:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return raw.decode(errors="surrogateescape").split("\0")[:-1] if raw else []


def environ(pid: int) -> dict[str, str] | None:
    """The environment pid was started with (None: no such process, or not
    ours to read)."""
    try:
        raw = (PROC / str(pid) / "environ").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    pairs = (item.partition("=") for item in raw.decode(errors="surrogateescape").split("\0") if item)
    return {k: v for k, _, v in pairs}


def is_lab_in(pid: int, work: Path) -> tuple[bool, str]:
    """(True, "") when pid runs this installation's lab guard for the work
    folder `work` (its HOME: host/backends.py sets it to the lab's folder);
    else (False, what was found). Read from /proc alone: a results folder
    cannot forge it."""
    cmd = cmdline(pid)
    if cmd is None:
        return False, f"pid {pid} no longer runs"
    if len(cmd) < 3 or cmd[2] != str(LAB_GUARD):
        return False, f"pid {pid} is not a lab guard ({' '.join(cmd)[:200]!r})"
    home = (environ(pid) or {}).get("HOME")
    if home != str(work):
        return False, f"pid {pid} is the lab of another folder (HOME {home!r}, not {str(work)!r})"
    return True, ""


def record(pid: int) -> dict:
    """What identifies the running process pid: taken at launch, by the
    process that started it (before it can have been reaped)."""
    start = start_ticks(pid)
    if start is None:
        raise ProcessLookupError(f"process {pid} is gone before it could be recorded")
    return {"pid": pid, "boot_id": boot_id(), "start": start, "cmdline": cmdline(pid) or []}


def is_ours(recorded: object, group: bool = False) -> tuple[bool, str]:
    """(True, "") when recorded (a record() of an earlier moment) still
    names the same process on this boot of this machine; group: it must
    also lead its process group. Else (False, what was found)."""
    if not isinstance(recorded, dict) or not isinstance(recorded.get("pid"), int) \
            or isinstance(recorded.get("pid"), bool) or recorded["pid"] <= 1:
        return False, f"the record is not a process record ({str(recorded)[:120]!r})"
    pid = recorded["pid"]
    here = boot_id()
    if recorded.get("boot_id") != here:
        return False, (f"pid {pid} was recorded on another machine or boot (boot id {recorded.get('boot_id')!r}, "
                       f"this one {here!r})")
    start = start_ticks(pid)
    if start is None:
        return False, f"pid {pid} no longer runs"
    if start != recorded.get("start"):
        return False, f"pid {pid} is another process now (started at tick {start}, recorded {recorded.get('start')!r})"
    now = cmdline(pid)
    if now != recorded.get("cmdline"):
        return False, f"pid {pid} runs another command now ({' '.join(now or [])[:200]!r})"
    if group and pgid(pid) != pid:
        return False, f"pid {pid} no longer leads its process group (group {pgid(pid)})"
    return True, ""


def group_may_be_ours(pid: int, started: int | None) -> bool:
    """Whether the group of a process we started (start time `started`,
    read at launch) may still be signalled by its id, its leader perhaps
    reaped by us already: the leader still runs (or is our zombie) with
    that start time, or no process has the pid (then only the group's own
    remaining members can hold that id: Linux does not give a pid anew
    while a process group of that id exists). A process with the pid and
    another start time is someone else's."""
    now = start_ticks(pid)
    return now is None or started is None or now == started


def kill_group_if_ours(recorded: object, sig: int = signal.SIGKILL) -> tuple[bool, str]:
    """Signal the process group the recorded process leads, only if it is
    provably ours (is_ours): (True, what was done) or (False, why not)."""
    ok, why = is_ours(recorded, group=True)
    if not ok:
        return False, why
    pid = recorded["pid"]  # type: ignore[index]
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        return False, f"process group {pid} ended meanwhile"
    return True, f"signalled lab process group {pid} ({signal.Signals(sig).name})"


def launched(p: subprocess.Popen) -> None:
    """Note on a process just started (a lab's group leader) its start time,
    which kill_group compares before each signal."""
    p.tl_started = start_ticks(p.pid)  # type: ignore[attr-defined]


def kill_group(p: subprocess.Popen, quiet: bool = False) -> None:
    """End the process group p leads (SIGTERM, SIGKILL after 5 s), by its id
    only while that id is still our lab's (group_may_be_ours: once
    the leader is reaped, a process that got its pid anew is someone else's)."""
    def ours() -> bool:
        return group_may_be_ours(p.pid, getattr(p, "tl_started", None))

    try:
        if not ours():
            return
        os.killpg(p.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        p.poll()  # reap the group's leader: a zombie still counts as a member
        try:
            if not ours():
                break
            os.killpg(p.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        try:
            if ours():
                os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def dumps(recorded: dict) -> str:
    return json.dumps(recorded, sort_keys=True) + "\n"


def loads(text: str) -> object:
    """A record read back; anything unreadable comes back as the text, which
    is_ours then refuses."""
    try:
        return json.loads(text)
    except ValueError:
        return text
