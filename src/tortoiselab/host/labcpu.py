"""The host CPU a uml lab's page load costs: the floor of the lab's speed
(docs/speed.md).

On the virtual clock the guest's own accounting cannot say it: the guest's
clock stands still while it computes (docs/determinism.md, "How time passes
on the virtual clock"), and its /proc/stat and every process's utime and
stime stay at zero over any amount of work. So the cost is read on the host,
where the wall clock pays it: the UML kernel process (the guest kernel:
TCP, netem, Open vSwitch's datapath, the handling of every guest system
call) and its children, one host process per guest address space
(`uml-userspace`: the guest processes' own code), the ones that ended
counted in the kernel process's cutime and cstime.

A sampler thread reads them each time the guest takes a host-clock mark
(guest/clock.HostWall creates a file in the work folder's `.wall`; the
sampler wakes on it through inotify), so that a load's interval between
two marks gets its CPU, by group: the guest kernel, the guest processes
that ended within it (the loader, its Python start included), those started
in the load's set-up (Apache, dnsmasq, the two tcpdumps), those standing
since before it (Open vSwitch's daemons, Mininet's shells, the lab task's
own Python) and those started within it and still alive at its end. A
host process is not mapped to its guest process: the groups come from when
each appeared. Nothing of this reaches the guest: its runs are unchanged.
"""

from __future__ import annotations

import ctypes
import os
import select
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
WALL_DIR = ".wall"  # guest/clock.HostWall's folder in the lab's work folder
IN_CREATE = 0x100
EVENT_HEAD = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (inotify(7))
MATCH_S = 2e-6  # a mark as the guest read it vs its file's mtime as the host reads it
WAIT_S = 1.0  # how long a record waits for the sampler to have read a mark


@dataclass(frozen=True)
class Proc:
    """One host process's CPU at a reading."""
    pid: int
    start_ticks: int  # field 22: with the pid, which process this is
    ppid: int
    cpu_ns: int  # its threads' time on a CPU (schedstat), user and system
    ended_children_ns: int  # its reaped children's utime + stime (cutime + cstime)


@dataclass(frozen=True)
class Snapshot:
    """The lab's host processes at one guest mark."""
    mark: float  # the mark, host wall seconds (the .wall file's mtime)
    read_at: float  # when the sampler read them, host wall seconds
    kernel: Proc  # the UML kernel process
    children: tuple[Proc, ...]  # its children alive (or not yet reaped) at the reading


def stat_fields(text: str) -> list[str]:
    """/proc/<pid>/stat's fields from the state (field 3) on. The command
    name (field 2) may hold spaces and parentheses: the fields follow its
    last ')' (proc(5))."""
    if ")" not in text:
        raise ValueError(f"not a /proc/<pid>/stat line: {text[:80]!r}")
    return text.rsplit(")", 1)[1].split()


def parse_proc(pid: int, stat_text: str, schedstats: list[str], ticks_per_s: int) -> Proc:
    """A Proc from /proc/<pid>/stat and its threads' /proc/<pid>/task/<tid>/schedstat
    texts (their first field: on-CPU nanoseconds, proc(5)); cutime and cstime
    (fields 16, 17) are in clock ticks of ticks_per_s."""
    f = stat_fields(stat_text)
    return Proc(pid=pid, start_ticks=int(f[22 - 3]), ppid=int(f[4 - 3]),
                cpu_ns=sum(int(s.split()[0]) for s in schedstats),
                ended_children_ns=(int(f[16 - 3]) + int(f[17 - 3])) * 10**9 // ticks_per_s)


def read_proc(pid: int, proc: Path = PROC) -> Proc | None:
    """The process's CPU now; None once it is gone."""
    d = proc / str(pid)
    try:
        stat = (d / "stat").read_text(encoding="utf-8")
        sched = [(t / "schedstat").read_text(encoding="utf-8") for t in (d / "task").iterdir()]
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
        return None
    return parse_proc(pid, stat, sched, os.sysconf("SC_CLK_TCK"))


def children_of(pid: int, proc: Path = PROC) -> list[int]:
    """Pids whose parent is pid (a scan of /proc: /proc/<pid>/task/*/children
    needs CONFIG_PROC_CHILDREN, which not every host kernel has)."""
    out = []
    for e in os.scandir(proc):
        if e.name.isdigit():
            try:
                if int(stat_fields((proc / e.name / "stat").read_text(encoding="utf-8"))[4 - 3]) == pid:
                    out.append(int(e.name))
            except (FileNotFoundError, ProcessLookupError, ValueError):
                continue
    return out


def snapshot(kernel_pid: int, mark: float, proc: Path = PROC) -> Snapshot | None:
    """The UML kernel process and its children now; None once it is gone."""
    kernel = read_proc(kernel_pid, proc)
    if kernel is None:
        return None
    kids = tuple(p for p in (read_proc(c, proc) for c in children_of(kernel_pid, proc)) if p is not None)
    return Snapshot(mark=mark, read_at=time.time(), kernel=kernel, children=kids)


def at_mark(snaps: list[Snapshot], mark: float | None) -> Snapshot | None:
    """The snapshot taken at the guest mark `mark` (None: not sampled)."""
    if mark is None:
        return None
    near = [s for s in snaps if abs(s.mark - mark) <= MATCH_S]
    return near[0] if near else None


def load_cpu(snaps: list[Snapshot], set_up: float | None, start: float | None, end: float | None) -> dict:
    """Host CPU seconds of the lab between the marks start and end, by group
    (module docstring): kernel_s, ended_s, set_up_s (started between the
    marks set_up and start, alive at end), standing_s (alive at set_up),
    new_s (started after start, alive at end), total_s; wall_s between the
    marks, and lag_ms: how long after each mark the sampler read it (CPU of
    that lag is counted, at the end, and left out, at the start). A dict with
    `why` alone when a mark was not sampled."""
    s, a, b = at_mark(snaps, set_up), at_mark(snaps, start), at_mark(snaps, end)
    if a is None or b is None or s is None:
        return {"why": "a mark of the load's interval was not sampled (set_up, capture_on, loaded)"}
    if b.kernel.start_ticks != a.kernel.start_ticks:
        return {"why": "the UML kernel process changed within the load"}
    key = lambda p: (p.pid, p.start_ticks)  # noqa: E731
    before, standing = {key(p): p for p in a.children}, {key(p) for p in s.children}
    after = {key(p): p for p in b.children}
    groups = {"standing_s": 0, "set_up_s": 0, "new_s": 0}
    for k, p in after.items():
        group = "standing_s" if k in standing else "set_up_s" if k in before else "new_s"
        groups[group] += p.cpu_ns - (before[k].cpu_ns if k in before else 0)
    # a child reaped in between adds its whole life to the kernel's cutime: its time before start is not the load's
    gone_before_ns = sum(p.cpu_ns for k, p in before.items() if k not in after)
    ended = b.kernel.ended_children_ns - a.kernel.ended_children_ns - gone_before_ns
    out = {"kernel_s": b.kernel.cpu_ns - a.kernel.cpu_ns, "ended_s": ended, **groups}
    out["total_s"] = sum(out.values())
    out = {k: round(v / 1e9, 4) for k, v in out.items()}
    return {**out, "wall_s": round(b.mark - a.mark, 4),
            "lag_ms": [round((a.read_at - a.mark) * 1e3, 2), round((b.read_at - b.mark) * 1e3, 2)]}


def created_names(buf: bytes) -> list[str]:
    """The names in a buffer of inotify events (inotify(7)): each a head
    (wd, mask, cookie, len) and len bytes of NUL-padded name."""
    out, i = [], 0
    while i + EVENT_HEAD.size <= len(buf):
        _wd, mask, _cookie, n = EVENT_HEAD.unpack_from(buf, i)
        name = buf[i + EVENT_HEAD.size:i + EVENT_HEAD.size + n].rstrip(b"\0").decode(errors="replace")
        if mask & IN_CREATE and name:
            out.append(name)
        i += EVENT_HEAD.size + n
    return out


def _inotify(folder: Path) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_CLOEXEC | os.O_NONBLOCK)
    if fd < 0 or libc.inotify_add_watch(fd, str(folder).encode(), IN_CREATE) < 0:
        err = ctypes.get_errno()
        if fd >= 0:
            os.close(fd)
        raise OSError(err, f"inotify on {folder}: {os.strerror(err)}")
    return fd


def uml_kernel_pid(work: Path, proc: Path = PROC) -> int | None:
    """The UML kernel process of the lab in `work`: the only child of its
    guard, whose pid the host wrote to uml.pgid (host/backends.py)."""
    try:
        guard = int((work / "uml.pgid").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    kids = children_of(guard, proc)
    return kids[0] if len(kids) == 1 else None


class MarkSampler:
    """A thread that takes a Snapshot at every guest mark of the lab in
    `work`, from the moment the guest has made its .wall folder until
    stopped; a context manager. `why` says what kept it from sampling."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.snaps: list[Snapshot] = []
        self.why: str | None = None
        self._stop = threading.Event()
        self._wake: tuple[int, int] | None = None  # a pipe: a byte in it wakes the thread's select at once
        self._thread = threading.Thread(target=self._run, name="labcpu", daemon=True)

    def __enter__(self) -> "MarkSampler":
        self._wake = os.pipe()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop the thread at once (not at its select's next timeout: the
        runner's exit waits for it) and close the pipe."""
        self._stop.set()
        assert self._wake is not None
        os.write(self._wake[1], b"x")
        self._thread.join(timeout=5)
        for fd in self._wake:
            os.close(fd)

    def load(self, marks: dict) -> dict:
        """load_cpu over a load's interval (its guest marks set_up,
        capture_on, loaded), waiting up to WAIT_S for the last reading."""
        deadline = time.monotonic() + WAIT_S
        while at_mark(self.snaps, marks.get("loaded")) is None and time.monotonic() < deadline and not self.why:
            time.sleep(0.02)
        out = load_cpu(list(self.snaps), marks.get("set_up"), marks.get("capture_on"), marks.get("loaded"))
        return {**out, "why": self.why} if self.why and "why" not in out else out

    def _run(self) -> None:
        folder = self.work / WALL_DIR
        while not folder.is_dir() and not self._stop.wait(0.02):
            pass
        pid = uml_kernel_pid(self.work)
        if self._stop.is_set() or pid is None:
            self.why = self.why or ("no UML kernel process found" if pid is None else None)
            return
        try:
            fd = _inotify(folder)
        except OSError as exc:
            self.why = str(exc)
            return
        try:
            while not self._stop.is_set():
                if fd not in select.select([fd, self._wake[0]], [], [], 0.2)[0]:
                    continue
                for name in created_names(os.read(fd, 65536)):
                    snap = snapshot(pid, 0.0)
                    try:
                        mark = (folder / name).stat().st_mtime_ns / 1e9
                    except OSError:
                        continue
                    if snap is not None:
                        self.snaps.append(Snapshot(mark, snap.read_at, snap.kernel, snap.children))
        finally:
            os.close(fd)
