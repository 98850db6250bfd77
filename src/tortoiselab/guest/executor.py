"""One place where lab commands run: every argv is logged with its time,
exit code and where it ran (the guest's root namespace or a Mininet host).
Writes of kernel settings through sysfs are logged the same way."""

from __future__ import annotations

import shlex
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class CommandError(RuntimeError):
    pass


@dataclass
class Executor:
    log_path: Path | None = None
    records: list[dict] = field(default_factory=list)

    def record(self, where: str, argv: list[str], rc: int, out: str, err: str, t0: float) -> None:
        """Log a step done without a subprocess (e.g. a file written), as run() logs its commands."""
        rec = {"t": round(t0, 6), "where": where, "argv": argv, "rc": rc,
               "seconds": round(time.monotonic() - t0, 6)}
        if rc != 0:
            rec["stderr"] = err[-2000:]
        self.records.append(rec)
        if self.log_path is not None:
            with open(self.log_path, "a") as fh:
                # the guest's monotonic time at the start and the duration: on the
                # virtual clock a timeline that repeats exactly (docs/determinism.md)
                fh.write(f"{t0:.6f} +{rec['seconds']:.6f} [{where}] rc={rc} {shlex.join(argv)}\n")
                if rc != 0 and err:
                    fh.write("    " + err.strip().replace("\n", "\n    ") + "\n")

    def run(self, argv: list[str], host: Any = None, check: bool = True, timeout: float = 120) -> str:
        """Run argv in the guest's root namespace (host=None) or in a Mininet
        host's namespaces; return stdout."""
        rc, out, err = self.capture(argv, host, timeout)
        if check and rc != 0:
            raise CommandError(f"[{host.name if host else 'root'}] {shlex.join(argv)} exited {rc}: "
                               f"{err.strip()[-500:]}")
        return out

    def capture(self, argv: list[str], host: Any = None, timeout: float = 120) -> tuple[int, str, str]:
        """Run argv as run() does, never raising on its exit code: (exit code,
        stdout, stderr). A command still running after timeout s is killed;
        what it printed is kept and its stderr says so."""
        t0 = time.monotonic()
        if host is None:
            where = "root"
            try:
                p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
                out, err, rc = p.stdout, p.stderr, p.returncode
            except subprocess.TimeoutExpired as exc:
                out, err, rc = _text(exc.stdout), _text(exc.stderr) + f"\n(timed out after {timeout} s)", -9
        else:
            where = host.name
            proc = host.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
                err += f"\n(timed out after {timeout} s)"
            rc = proc.returncode
        self.record(where, argv, rc, out, err, t0)
        return rc, out, err

    def write(self, path: Path, value: str, where: str = "root") -> tuple[int, str]:
        """Write value into a file (a sysfs setting), logged as the step
        ["write", path, value]; never raises on the kernel's refusal:
        (0, "") or (errno, the error's text)."""
        t0 = time.monotonic()
        try:
            Path(path).write_text(value)
            rc, err = 0, ""
        except OSError as exc:
            rc, err = exc.errno or 1, str(exc)
        self.record(where, ["write", str(path), value], rc, "", err, t0)
        return rc, err

    def start(self, argv: list[str], host: Any) -> subprocess.Popen:
        """Start a long-running argv in a Mininet host; the caller waits."""
        self.record(host.name, argv, 0, "", "", time.monotonic())
        return host.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _text(b: bytes | str | None) -> str:
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
