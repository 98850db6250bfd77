"""One place where lab commands run: every argv is logged with its time,
exit code and where it ran (the guest's root namespace or a Mininet host).
Writes of kernel settings through sysfs are logged the same way."""

from __future__ import annotations

import ctypes
import functools
import os
import shlex
import signal
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator


class CommandError(RuntimeError):
    pass


CLONE_NEWNET = 0x40000000
PROC_SYS = Path("/proc/sys")


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc().setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextmanager
def netns_of(host: Any) -> Iterator[None]:
    """This thread in a Mininet host's network namespace (its shell's, by
    the pid Mininet recorded) and back again, also on error; the guest's
    root namespace for host None. A setting under /proc/sys/net opened
    here is that namespace's."""
    if host is None:
        yield
        return
    with open("/proc/thread-self/ns/net", "rb") as home, open(f"/proc/{host.pid}/ns/net", "rb") as there:
        _setns(there.fileno())
        try:
            yield
        finally:
            _setns(home.fileno())


def sysctl_path(key: str) -> Path:
    return PROC_SYS / key.replace(".", "/")


@dataclass
class Executor:
    log_path: Path | None = None
    records: list[dict] = field(default_factory=list)

    def record(self, where: str, argv: list[str], rc: int, out: str, err: str, t0: float,
               stdin: str | None = None) -> None:
        """Log a step done without a subprocess (e.g. a file written), as run() logs its commands
        (with what it read on stdin, if given: an `ip -batch -` list)."""
        rec = {"t": round(t0, 6), "where": where, "argv": argv, "rc": rc,
               "seconds": round(time.monotonic() - t0, 6)}
        if rc != 0:
            rec["stderr"] = err[-2000:]
        if stdin is not None:
            rec["stdin"] = stdin
        self.records.append(rec)
        if self.log_path is not None:
            with open(self.log_path, "a", encoding="utf-8") as fh:
                # the guest's monotonic time at the start and the duration: on the
                # virtual clock a timeline that repeats exactly (docs/determinism.md)
                fh.write(f"{t0:.6f} +{rec['seconds']:.6f} [{where}] rc={rc} {shlex.join(argv)}\n")
                if stdin:
                    fh.write("    < " + stdin.strip().replace("\n", "\n    < ") + "\n")
                if rc != 0 and err:
                    fh.write("    " + err.strip().replace("\n", "\n    ") + "\n")

    def run(self, argv: list[str], host: Any = None, check: bool = True, timeout: float = 120,
            stdin: str | None = None) -> str:
        """Run argv in the guest's root namespace (host=None) or in a Mininet
        host's namespaces, with stdin's text on its standard input if given;
        return stdout."""
        rc, out, err = self.capture(argv, host, timeout, stdin)
        if check and rc != 0:
            raise CommandError(f"[{host.name if host else 'root'}] {shlex.join(argv)} exited {rc}: "
                               f"{err.strip()[-500:]}")
        return out

    def capture(self, argv: list[str], host: Any = None, timeout: float = 120,
                stdin: str | None = None) -> tuple[int, str, str]:
        """Run argv as run() does, never raising on its exit code: (exit code,
        stdout, stderr). A command still running after timeout s is killed;
        what it printed is kept and its stderr says so."""
        t0 = time.monotonic()
        if host is None:
            where = "root"
            try:
                p = subprocess.run(argv, capture_output=True, timeout=timeout, input=stdin,
                                   encoding="utf-8", errors="replace")
                out, err, rc = p.stdout, p.stderr, p.returncode
            except subprocess.TimeoutExpired as exc:
                out, err, rc = _text(exc.stdout), _text(exc.stderr) + f"\n(timed out after {timeout} s)", -9
        else:
            where = host.name
            pipe = {} if stdin is None else {"stdin": subprocess.PIPE}
            proc = host.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **pipe)
            try:
                out, err = proc.communicate(stdin, timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
                err += f"\n(timed out after {timeout} s)"
            rc = proc.returncode
        self.record(where, argv, rc, out, err, t0, stdin)
        return rc, out, err

    def run_to_file(self, argv: list[str], host: Any, log: Path, timeout: float,
                    kill_wait: float = 30.0, cwd: Path | None = None) -> tuple[int, bool]:
        """Run argv in a Mininet host, or in the guest's root namespace in a
        session of its own (host None, in cwd), with its stdout and stderr
        in the file log, not in pipes: a child it leaves behind (a browser's
        helper stuck in the kernel) cannot hold the call open. Killed
        (SIGKILL; in the root namespace its whole process group) at timeout
        s; returns (exit code, timed out). Logged as run() does."""
        t0 = time.monotonic()
        with open(log, "wb") as fh:
            if host is None:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                        cwd=cwd, start_new_session=True)
            else:
                proc = host.popen(argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT)
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            if host is None:
                os.killpg(proc.pid, signal.SIGKILL)  # the group this call started, by its id
            else:
                proc.kill()
            try:
                proc.wait(timeout=kill_wait)
            except subprocess.TimeoutExpired:
                pass
        rc = proc.returncode if proc.returncode is not None else -9
        tail = Path(log).read_text(encoding="utf-8", errors="replace")[-2000:] if rc else ""
        self.record(host.name if host is not None else "root", argv, rc, "", tail + (f"\n(timed out after {timeout} s)" if timed_out else ""), t0)
        return rc, timed_out

    def write(self, path: Path, value: str, where: str = "root") -> tuple[int, str]:
        """Write value into a file (a sysfs setting), logged as the step
        ["write", path, value]; never raises on the kernel's refusal:
        (0, "") or (errno, the error's text)."""
        t0 = time.monotonic()
        try:
            Path(path).write_text(value, encoding="utf-8")
            rc, err = 0, ""
        except OSError as exc:
            rc, err = exc.errno or 1, str(exc)
        self.record(where, ["write", str(path), value], rc, "", err, t0)
        return rc, err

    def sysctl(self, values: dict[str, Any], host: Any = None) -> None:
        """Kernel settings written to /proc/sys in the host's namespace by
        this process (a sysctl process costs tens of ms in the lab guest),
        each logged as a write; CommandError naming the setting if the
        kernel refuses it."""
        where = host.name if host is not None else "root"
        with netns_of(host):
            for key, value in values.items():
                rc, err = self.write(sysctl_path(key), str(value), where=where)
                if rc:
                    raise CommandError(f"[{where}] {key}={value}: {err}")

    def read_sysctls(self, keys: tuple[str, ...] | list[str], host: Any = None) -> dict[str, str]:
        """Kernel settings read from /proc/sys in the host's namespace, as
        `sysctl -n` prints them (tabs between a vector's values); "" for a
        setting the namespace lacks."""
        out = {}
        with netns_of(host):
            for key in keys:
                try:
                    out[key] = sysctl_path(key).read_text(encoding="utf-8").strip()
                except OSError:
                    out[key] = ""
        return out

    def in_process(self, argv: list[str], fn: Callable[[], object], where: str = "root") -> None:
        """Do in this process what argv would do as one (e.g. a tool's main
        with argv's own arguments: the same step without a Python start,
        which costs tens of ms in the lab guest), logged as argv; raises
        CommandError if fn raises OSError."""
        t0 = time.monotonic()
        try:
            fn()
            rc, err = 0, ""
        except OSError as exc:
            rc, err = exc.errno or 1, str(exc)
        self.record(where, ["(in-process)", *argv], rc, "", err, t0)
        if rc:
            raise CommandError(f"[{where}] {shlex.join(argv)} failed: {err}")

    def start(self, argv: list[str], host: Any, stdin: bool = False) -> subprocess.Popen:
        """Start a long-running argv in a Mininet host; the caller waits
        (stdin: a pipe the caller closes to tell it to finish)."""
        self.record(host.name, argv, 0, "", "", time.monotonic())
        extra = {"stdin": subprocess.PIPE} if stdin else {}
        return host.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **extra)


def _text(b: bytes | str | None) -> str:
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
