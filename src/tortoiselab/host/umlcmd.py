"""The UML lab kernel's command line: the host tree as the guest's
read-only root, our init, the virtual clock's epoch, and the userspace mode
(seccomp where the kernel offers it and the host allows it, else ptrace).
Pure but for reading the kernel binary and its refusal record
(docs/determinism.md says why nothing that differs between boots is on it)."""

from __future__ import annotations

import mmap
import os
import sys
from pathlib import Path

from tortoiselab.host.labkernel import LabError
from tortoiselab.project import PKG_DIR, REPO_DIR

GUEST_INIT = PKG_DIR / "guest" / "init.sh"
NO_HOST_ENTROPY = PKG_DIR / "tools" / "no_host_entropy.py"

# Where the guest's wall clock starts on the virtual clock: 2030-01-01T00:00:00Z
# (UML's time-travel-start, in ns). Left to itself UML starts it at the host's
# time of boot, so HTTP Date headers (whose HPACK length depends on the
# digits), the sub-microsecond phase of capture timestamps and every timer
# aligned to wall-clock seconds differed between two runs (docs/determinism.md).
# The lab PKI's validity window contains it.
VIRTUAL_EPOCH_S = 1893456000



def plain_paths(paths: list[str]) -> list[str]:
    """Paths the guest's init gets colon-separated: no ':' or space in them."""
    for p in paths:
        if ":" in p or " " in p:
            raise LabError(f"the path {p!r} contains ':' or a space, which the lab guest's init cannot carry; "
                           "move the project, cache or results to a plain path")
    return paths


def guest_ro_paths(extra: list[str] | None = None) -> list[str]:
    """Host folders the guest reads: the project (editable install) and the
    venv, plus e.g. our modules' folder. The guest re-mounts any of them that
    its own tmpfs mounts hide (a clone under /tmp, say)."""
    return plain_paths([str(REPO_DIR), sys.prefix, *(extra or [])])


def uml_argv(kernel: str, clock: str, umid: str, mem_mb: int = 1024,
             extra_ro: list[str] | None = None, userspace: str = "ptrace") -> list[str]:
    """The UML command line: host tree as read-only root through hostfs, our
    init, the console on stdout; started with the host's getrandom failing
    for it (tools/no_host_entropy.py).

    The kernel mixes its command line into its random pool, so nothing that
    differs between two boots of one run is on it: the work folder is the
    UML process's working directory (the guest's init reads it through the
    host's /proc), the UML control dir (umid, mconsole) is UML's default
    $HOME/.uml with HOME set to the work folder, and the umid is not passed
    on to the kernel (docs/determinism.md)."""
    argv = [sys.executable, "-S", str(NO_HOST_ENTROPY), kernel, f"mem={mem_mb}M", f"umid={umid}",
            "root=/dev/root", "rootfstype=hostfs", "rootflags=/", "ro",
            f"init={GUEST_INIT}", "con=null", "con0=null,fd:1", "quiet",
            f"TL_PYTHON={sys.executable}", f"TL_RO={':'.join(guest_ro_paths(extra_ro))}"]
    if clock == "virtual":
        argv += [f"time-travel-start={VIRTUAL_EPOCH_S * 10**9}", "time-travel=inf-cpu"]
    if userspace == "seccomp":
        # `on`, not `auto`: UML then either runs seccomp or stops at once
        # with SECCOMP_REFUSED, so the mode that ran is known (with `auto`
        # and `quiet` the kernel falls back to ptrace without a word)
        argv.append("seccomp=on")
    return argv


# UML (7.x) runs the guest's processes under a seccomp filter instead of
# ptrace when booted with seccomp=<on|auto|off>: system calls, fork+exec and
# page faults cost the host about half the CPU. A kernel that has the option
# carries its help text; 6.12 has no seccomp mode and must not get the
# parameter (an unknown one would reach init's environment and the kernel's
# command line, which the CRNG mixes in).
SECCOMP_HELP = b"seccomp=<on/auto/off>"
# what a kernel booted with seccomp=on prints (fatal) when the host refuses it
SECCOMP_REFUSED = "SECCOMP userspace requested but not functional"
SECCOMP_REFUSED_FILE = "seccomp-refused"  # beside the kernel binary: why this host refused it


def seccomp_refused(kernel: str) -> str | None:
    """Why this host refused the kernel's seccomp mode, as recorded beside
    the kernel binary when it happened (None: never refused)."""
    try:
        return (Path(kernel).parent / SECCOMP_REFUSED_FILE).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def record_seccomp_refusal(kernel: str, why: str) -> None:
    """Remember a refusal for later boots; a read-only kernel folder (a
    kernel installed for users) just means trying seccomp again next time."""
    try:
        (Path(kernel).parent / SECCOMP_REFUSED_FILE).write_text(why + "\n", encoding="utf-8")
    except OSError:
        pass


def kernel_has_seccomp(kernel: str) -> bool:
    """Whether a UML kernel binary offers the seccomp userspace mode."""
    try:
        with open(kernel, "rb") as fh:
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
                return m.find(SECCOMP_HELP) != -1
    except (OSError, ValueError):
        return False


def uml_userspace(kernel: str) -> tuple[str, str]:
    """How the UML guest's processes will run: ("seccomp" | "ptrace", why).
    TORTOISE_UML_USERSPACE=seccomp|ptrace|auto (default auto: seccomp where
    the kernel offers it and the host has not refused it: seccomp_refused)."""
    want = os.environ.get("TORTOISE_UML_USERSPACE", "auto")
    if want not in ("auto", "seccomp", "ptrace"):
        raise LabError(f"TORTOISE_UML_USERSPACE={want!r}: use auto, seccomp or ptrace")
    if want == "ptrace":
        return "ptrace", "TORTOISE_UML_USERSPACE=ptrace"
    if not kernel_has_seccomp(kernel):
        if want == "seccomp":
            raise LabError(f"TORTOISE_UML_USERSPACE=seccomp, but the kernel {kernel} has no seccomp mode (UML 7.x has)")
        return "ptrace", "the kernel has no seccomp mode"
    refused = seccomp_refused(kernel)
    if refused is not None:
        if want == "seccomp":
            raise LabError(f"TORTOISE_UML_USERSPACE=seccomp, but the host refused it: {refused}")
        return "ptrace", f"the host refused seccomp: {refused}"
    return "seccomp", "the kernel offers it"


def seccomp_refusal(log: Path) -> str | None:
    """The console's line saying the host refused seccomp, if it does."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if SECCOMP_REFUSED in line:
            checks = [ln.strip() for ln in text.splitlines() if "seccomp filters can be installed" in ln]
            return "; ".join([*checks, line.strip()])
    return None

