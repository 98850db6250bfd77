"""Where a lab task executes: `native` (the host kernel, needs root) or `uml`
(the lab kernel as an ordinary process, no root), on a real or a virtual
clock. `auto` picks native only where the host can emulate.

Both take a typed request (spec/requests.py) and a work folder, and return
the guest's result.json as a dict. The uml backend records the UML process group it
started and kills exactly that group on timeout or interrupt.
"""

from __future__ import annotations

import compileall
import gzip
import json
import mmap
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tortoiselab.host import workfolder
from tortoiselab.host.cpus import cpu_slot, pinned
from tortoiselab.host.guestpaths import guest_request, host_paths
from tortoiselab.host.procid import LAB_GUARD
from tortoiselab.host.procid import dumps as proc_dumps
from tortoiselab.host.procid import kill_group, launched
from tortoiselab.host.procid import record as proc_record
from tortoiselab.host.stopping import LabInterrupted, wait_unless_stopped
from tortoiselab.project import PKG_DIR, REPO_DIR
from tortoiselab.spec.pathspec import STOCK_ALGORITHMS
from tortoiselab.spec.requests import LabRequest

GUEST_INIT = PKG_DIR / "guest" / "init.sh"
NO_HOST_ENTROPY = PKG_DIR / "tools" / "no_host_entropy.py"
# the guard's own watchdog fires this long after the host's, which names the
# timeout in the run's error; the guard's matters when the runner is gone
GUARD_SLACK_S = 30.0
NATIVE_GRACE_S = 20.0  # native: the lab task tears down the host's network on SIGTERM

# kernel config symbol -> registered name (net/ipv4/Kconfig)
CONFIG_TO_ALGO = {
    "BIC": "bic", "CUBIC": "cubic", "WESTWOOD": "westwood", "HTCP": "htcp", "HSTCP": "highspeed",
    "HYBLA": "hybla", "VEGAS": "vegas", "NV": "nv", "SCALABLE": "scalable", "LP": "lp",
    "VENO": "veno", "YEAH": "yeah", "ILLINOIS": "illinois", "DCTCP": "dctcp", "CDG": "cdg",
    "BBR": "bbr",
}


# Where the guest's wall clock starts on the virtual clock: 2030-01-01T00:00:00Z
# (UML's time-travel-start, in ns). Left to itself UML starts it at the host's
# time of boot, so HTTP Date headers (whose HPACK length depends on the
# digits), the sub-microsecond phase of capture timestamps and every timer
# aligned to wall-clock seconds differed between two runs (docs/determinism.md).
# The lab PKI's validity window contains it.
VIRTUAL_EPOCH_S = 1893456000


# the watchdog: wall time a lab boot may take before it is killed; tasks
# that run many transfers or loads in one boot get the long one
TASK_TIMEOUT_S = 900.0
LONG_TASK_TIMEOUT_S = 1800.0


class LabError(RuntimeError):
    """The lab could not run a task; the message says what to do."""


@dataclass(frozen=True)
class BackendInfo:
    backend: str  # native | uml
    clock: str  # real | virtual
    kernel: str | None = None  # path of the UML kernel binary
    # our modules for that kernel, as choose() found them once (modules_known;
    # modules_dir None: none built), so that each lab boot need not ask
    # kernel/build-uml.sh again (a bash run of ~20 ms)
    modules_dir: str | None = None
    modules_known: bool = False


def kernel_path() -> Path:
    """The UML lab kernel: $TORTOISE_KERNEL, else the cache kernel/build-uml.sh fills."""
    env = os.environ.get("TORTOISE_KERNEL")
    if env:
        return Path(env)
    out = subprocess.run(["bash", str(REPO_DIR / "kernel" / "build-uml.sh"), "--path"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def modules_path(kernel: Path | None = None) -> Path | None:
    """Our modules built for the lab kernel: $TORTOISE_MODULES; else, for the
    cache's kernel, the folder kernel/build-uml.sh names for the current
    module sources; for a kernel elsewhere ($TORTOISE_KERNEL), a modules-*
    folder beside it. None if there is none."""
    env = os.environ.get("TORTOISE_MODULES")
    if env:
        return Path(env)
    out = subprocess.run(["bash", str(REPO_DIR / "kernel" / "build-uml.sh"), "--modules-path"],
                         capture_output=True, text=True, check=True)
    p = Path(out.stdout.strip())
    if kernel is None or kernel.parent == p.parent:
        return p if (p / "BUILD_OK").exists() else None
    cands = sorted(kernel.parent.glob("modules-*/BUILD_OK"), key=lambda f: f.stat().st_mtime)
    return cands[-1].parent if cands else None


def lab_modules(info: BackendInfo) -> Path | None:
    """Our modules for info's kernel: as choose() found them, else
    modules_path now."""
    if info.modules_known:
        return Path(info.modules_dir) if info.modules_dir else None
    return modules_path(Path(info.kernel) if info.kernel else None)


def kernel_algorithms(kernel: Path) -> list[str]:
    """Algorithms a built lab kernel has, read from the config saved beside it."""
    cfg = kernel.parent / "config"
    algos = ["reno"]
    if cfg.exists():
        for line in cfg.read_text().splitlines():
            if line.startswith("CONFIG_TCP_CONG_") and line.endswith(("=y", "=m")):
                sym = line[len("CONFIG_TCP_CONG_"):].split("=")[0]
                if sym in CONFIG_TO_ALGO:
                    algos.append(CONFIG_TO_ALGO[sym])
    else:
        algos = list(STOCK_ALGORITHMS)
    mods = modules_path(kernel)
    if mods is not None:
        algos += [ko.stem[len("tcp_"):] for ko in sorted(mods.glob("tcp_*.ko"))]
    return algos


def host_kernel_config() -> str | None:
    for p in (Path("/proc/config.gz"), Path(f"/boot/config-{os.uname().release}")):
        try:
            return gzip.decompress(p.read_bytes()).decode() if p.suffix == ".gz" else p.read_text()
        except OSError:
            continue
    return None


def host_can_emulate(algorithms: list[str]) -> tuple[bool, str]:
    """Native needs root, netem in the host kernel and every requested
    algorithm available (built in, or a module present to load)."""
    if os.geteuid() != 0:
        return False, "not root"
    cfg = host_kernel_config()
    if cfg is None:
        return False, "host kernel config not readable (no /proc/config.gz or /boot/config-*)"
    netem = [ln for ln in cfg.splitlines() if ln.startswith("CONFIG_NET_SCH_NETEM=")]
    if not netem:
        return False, "host kernel has no netem (CONFIG_NET_SCH_NETEM)"
    if netem[0].endswith("=m") and not Path(f"/lib/modules/{os.uname().release}").is_dir():
        return False, "netem is a module but the host has no modules for its kernel"
    have = set(Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split())
    for line in cfg.splitlines():
        if line.startswith("CONFIG_TCP_CONG_") and line.endswith("=m"):
            sym = line[len("CONFIG_TCP_CONG_"):].split("=")[0]
            if sym in CONFIG_TO_ALGO and Path(f"/lib/modules/{os.uname().release}").is_dir():
                have.add(CONFIG_TO_ALGO[sym])
    missing = [a for a in algorithms if a not in have and not installed_module(f"tcp_{a}")]
    if missing:
        return False, f"host kernel lacks {', '.join(missing)}"
    return True, "host kernel has netem and the algorithms"


def lab_algorithms() -> list[str]:
    """Every algorithm the lab offers: the stock ones and ours (kernel/modules/)."""
    ours = sorted(c.stem[len("tcp_"):] for c in (REPO_DIR / "kernel" / "modules").glob("tcp_*.c"))
    return [*STOCK_ALGORITHMS, *ours]


def native_ready() -> tuple[bool, str]:
    """Whether `auto` runs every experiment on the native backend here (root,
    netem, every algorithm the lab offers): then `make experiment` needs no
    UML lab kernel, and building one would only cost time (a compile is ten
    times slower in a VM under software emulation, docs/vm.md)."""
    return host_can_emulate(lab_algorithms())


def installed_module(name: str) -> bool:
    """A module the host can load though its config does not name it, e.g.
    our congestion control modules that DKMS built for the VM's kernel."""
    try:
        p = subprocess.run(["modinfo", "-F", "filename", name], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return p.returncode == 0 and bool(p.stdout.strip())


def choose(backend: str, clock: str, algorithms: list[str]) -> BackendInfo:
    """Resolve `auto`; refuse combinations that cannot work, before anything starts."""
    if backend not in ("auto", "native", "uml"):
        raise LabError(f"backend: unknown backend {backend!r}; use auto, native or uml")
    if clock not in ("auto", "real", "virtual"):
        raise LabError(f"clock: unknown clock {clock!r}; use real or virtual")
    if backend == "auto":
        ok, _why = host_can_emulate(algorithms)
        backend = "native" if ok and clock in ("auto", "real") else "uml"
    if backend == "native":
        if clock == "virtual":
            raise LabError("clock: the virtual clock needs the uml backend (use --backend uml or auto)")
        ok, why = host_can_emulate(algorithms)
        if not ok:
            raise LabError(f"backend: native cannot run here ({why}); use --backend uml")
        return BackendInfo("native", "real")
    kernel = kernel_path()
    if not kernel.exists():
        raise LabError(f"the UML lab kernel is not built ({kernel}); run 'make kernel'")
    mods = modules_path(kernel)
    return BackendInfo("uml", "virtual" if clock in ("auto", "virtual") else "real", str(kernel),
                       modules_dir=None if mods is None else str(mods), modules_known=True)


def run_task(info: BackendInfo, request: LabRequest, work: Path, timeout_s: float = TASK_TIMEOUT_S,
             stop: threading.Event | None = None) -> dict:
    """Run one typed lab request (spec/requests.py) on the chosen backend:
    add where it runs (backend, clock, private_ovs, our modules for a uml
    kernel), write it as request.json into work and return the guest's
    result.json. A work folder used before is used again: what the lab left
    there is removed first (host/workfolder.py; WorkFolderError when it
    cannot be). A uml lab runs on a host CPU of its own (host/cpus.py).
    Once `stop` is set the lab is ended within STOP_POLL_S and its process
    group's shutdown (kill_group), or never started: LabInterrupted
    (host/stopping.py)."""
    if stop is not None and stop.is_set():
        raise LabInterrupted("the runner is being stopped: the lab was not started")
    workfolder.prepare(work)  # a folder an earlier boot used: its lab files removed, no link followed
    placed = {"backend": info.backend, "clock": info.clock, "private_ovs": info.backend == "uml"}
    if info.backend == "uml":
        mods = lab_modules(info)
        if mods is not None:
            placed["modules_dir"] = str(mods)
    req = type(request).model_validate({**request.model_dump(), **placed})
    if info.backend == "native":
        (work / "request.json").write_text(req.model_dump_json(indent=1))
        return _run_native(work, timeout_s, stop)
    # the guest reads the run's read-only folders at fixed paths (guest/init.sh)
    ro = plain_paths(list(req.ro_paths))
    (work / "ro_paths").write_text(":".join(ro))
    (work / "request.json").write_text(json.dumps(guest_request(req.model_dump(mode="json"), ro), indent=1))
    return _run_uml(info, req, work, timeout_s, stop)


def _read_result(work: Path, log_hint: Path | None, backend: str) -> dict:
    res = work / "result.json"
    if not res.exists():
        tail = ""
        if log_hint is not None and log_hint.exists():
            tail = "\n".join(log_hint.read_text(errors="replace").splitlines()[-25:])
        raise LabError(f"the lab wrote no result (see {log_hint}):\n{tail}")
    result = json.loads(res.read_text())
    result = host_paths(result, work, backend)  # uml: the guest's fixed work folder, as the host sees it
    if not result.get("ok"):
        raise LabError(f"lab task failed: {result.get('error')}\n{result.get('traceback', '')}")
    return result


def _run_native(work: Path, timeout_s: float, stop: threading.Event | None = None) -> dict:
    log = work / "native.log"
    with open(log, "w") as fh:
        p = subprocess.Popen(guarded([sys.executable, "-m", "tortoiselab.guest", str(work / "request.json")],
                                     timeout_s, NATIVE_GRACE_S),
                             stdin=subprocess.PIPE, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        launched(p)
        _wait_or_kill(p, timeout_s, stop)
    return _read_result(work, log, "native")


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
        return (Path(kernel).parent / SECCOMP_REFUSED_FILE).read_text().strip() or None
    except OSError:
        return None


def _record_seccomp_refusal(kernel: str, why: str) -> None:
    """Remember a refusal for later boots; a read-only kernel folder (a
    kernel installed for users) just means trying seccomp again next time."""
    try:
        (Path(kernel).parent / SECCOMP_REFUSED_FILE).write_text(why + "\n")
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


def _seccomp_refusal(log: Path) -> str | None:
    """The console's line saying the host refused seccomp, if it does."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if SECCOMP_REFUSED in line:
            checks = [ln.strip() for ln in text.splitlines() if "seccomp filters can be installed" in ln]
            return "; ".join([*checks, line.strip()])
    return None


def _compile_package() -> None:
    """Byte-compile the project's package before a guest reads it. The guest
    runs with PYTHONDONTWRITEBYTECODE but reads the host's __pycache__: a
    module with no .pyc costs it failed system calls (1 us of virtual time
    each), so whether the host had imported a module yet would move the run
    (docs/determinism.md). compileall skips every module whose .pyc is up to date, so a call
    after the first costs a stat per file; .pyc files are written
    atomically, so runs side by side need no lock."""
    compileall.compile_dir(str(PKG_DIR), quiet=2)


def _run_uml(info: BackendInfo, req: LabRequest, work: Path, timeout_s: float,
             stop: threading.Event | None = None) -> dict:
    assert info.kernel is not None
    work = Path(work).resolve()  # HOME below: UML panics in make_umid on a relative $HOME/.uml
    # fixed length: the umid is on the guest's command line (docs/determinism.md)
    umid = f"tl-{os.getpid() % 10**7:07d}-{int(time.time() * 1000) % 10**8:08d}"
    _compile_package()
    # on the command line only what every boot of a run shares (the kernel
    # mixes it into its random pool); the run's own folders go in a file (run_task)
    log = work / "console.log"
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(work), "TMPDIR": "/dev/shm"}
    userspace, why = uml_userspace(info.kernel)
    with cpu_slot() as cpu:
        return _boot_uml(info, req, work, timeout_s, cpu, umid, log, env, userspace, why, stop)


def _boot_uml(info: BackendInfo, req: LabRequest, work: Path, timeout_s: float, cpu: int | None, umid: str,
              log: Path, env: dict, userspace: str, why: str, stop: threading.Event | None = None) -> dict:
    """Boot the lab (again in ptrace mode if the host refuses seccomp) and
    read its result."""
    while True:
        argv = pinned(uml_argv(info.kernel, info.clock, umid, extra_ro=[req.modules_dir] if req.modules_dir else [],
                               userspace=userspace), cpu)
        # written before the boot too: a batch's runs are stored while it runs
        (work / "uml_userspace").write_text(f"{userspace}\t{why}\n")
        with open(log, "w") as fh:
            p = subprocess.Popen(guarded(argv, timeout_s, 0), stdin=subprocess.PIPE, stdout=fh,
                                 stderr=subprocess.STDOUT, start_new_session=True, env=env, cwd=work)
            launched(p)
            try:
                try:
                    (work / "uml.pgid").write_text(str(p.pid))
                    # what proves later that this group is the lab (host/locks.clean_stale, host/procid.py)
                    (work / "uml.proc.json").write_text(proc_dumps(proc_record(p.pid)))
                except BaseException:
                    kill_group(p)  # a lab nobody could clean up later does not run
                    raise
                _wait_or_kill(p, timeout_s, stop)
            finally:
                shutil.rmtree(work / ".uml", ignore_errors=True)
        refused = _seccomp_refusal(log) if userspace == "seccomp" else None
        if refused is None:
            break
        # UML stops in its early checks, before the guest runs anything:
        # boot again in ptrace mode (and skip seccomp from now on)
        _record_seccomp_refusal(info.kernel, refused)
        if os.environ.get("TORTOISE_UML_USERSPACE") == "seccomp":
            raise LabError(f"TORTOISE_UML_USERSPACE=seccomp, but the host refused it: {refused}")
        (work / "console-seccomp-refused.log").write_text(log.read_text(errors="replace"))
        userspace, why = "ptrace", f"the host refused seccomp: {refused}"
    (work / "uml_userspace").write_text(f"{userspace}\t{why}\n")
    result = _read_result(work, log, "uml")
    result["uml_userspace"] = userspace
    result["uml_userspace_why"] = why
    return result


def guarded(argv: list[str], timeout_s: float, grace_s: float) -> list[str]:
    """argv under tools/lab_guard.py, the leader of the lab's process group:
    with its stdin a pipe only this process holds, the lab ends when the
    runner dies however it dies, and its own watchdog outlives the runner."""
    return [sys.executable, "-S", str(LAB_GUARD), f"{timeout_s + GUARD_SLACK_S:g}", f"{grace_s:g}", *argv]


def _wait_or_kill(p: subprocess.Popen, timeout_s: float, stop: threading.Event | None = None) -> None:
    """Wait for the lab process; on timeout, interrupt or `stop` kill its
    process group (the one this call started, by its recorded id) and
    re-raise (LabInterrupted for `stop`)."""
    try:
        wait_unless_stopped(p, timeout_s, stop)
    except subprocess.TimeoutExpired:
        kill_group(p)
        raise LabError(f"the lab did not finish within {timeout_s:.0f} s of wall time (watchdog); killed it")
    except BaseException:
        kill_group(p)
        raise
    finally:
        if p.stdin is not None:
            p.stdin.close()  # after the wait: the guard takes end of file for a dead runner
    # UML helper processes can outlive the main one for a moment
    kill_group(p, quiet=True)


def main(argv: list[str]) -> int:
    """`python -m tortoiselab.host.backends native-ready`: exit 0 and say why
    when the native backend runs everything here, else 1 (the Makefile then
    builds the UML lab kernel)."""
    if argv != ["native-ready"]:
        print("usage: python -m tortoiselab.host.backends native-ready", file=sys.stderr)
        return 2
    ok, why = native_ready()
    print(f"native backend {'ready' if ok else 'not usable'}: {why}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
