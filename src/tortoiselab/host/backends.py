"""Where a lab task executes: `native` (the host kernel, needs root) or `uml`
(the lab kernel as an ordinary process, no root), on a real or a virtual
clock. `auto` picks native only where the host can emulate
(host/hostcheck.py); the lab kernel and its algorithms are found by
host/labkernel.py, its command line made by host/umlcmd.py.

Both take a typed request (spec/requests.py) and a work folder, and return
the guest's result.json as a dict. The uml backend records the UML process group it
started and kills exactly that group on timeout or interrupt.
"""

from __future__ import annotations

import compileall
import json
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
from tortoiselab.host.hostcheck import host_can_emulate
from tortoiselab.host.labkernel import LabError, kernel_path, modules_path
from tortoiselab.host.procid import LAB_GUARD
from tortoiselab.host.procid import dumps as proc_dumps
from tortoiselab.host.procid import kill_group, launched
from tortoiselab.host.procid import record as proc_record
from tortoiselab.host.stopping import LabInterrupted, ended_by, lab_signal, wait_unless_stopped
from tortoiselab.host.umlcmd import plain_paths, record_seccomp_refusal, seccomp_refusal, uml_argv, uml_userspace
from tortoiselab.project import PKG_DIR
from tortoiselab.spec.requests import LabRequest

__all__ = ["LabError", "BackendInfo", "choose", "run_task", "guarded", "lab_modules",
           "TASK_TIMEOUT_S", "LONG_TASK_TIMEOUT_S"]  # LabError: what run_task raises (host/labkernel.py)
# the guard's own watchdog fires this long after the host's, which names the
# timeout in the run's error; the guard's matters when the runner is gone
GUARD_SLACK_S = 30.0
NATIVE_GRACE_S = 20.0  # native: the lab task tears down the host's network on SIGTERM


# the watchdog: wall time a lab boot may take before it is killed; tasks
# that run many transfers or loads in one boot get the long one
TASK_TIMEOUT_S = 900.0
LONG_TASK_TIMEOUT_S = 1800.0


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


def lab_modules(info: BackendInfo) -> Path | None:
    """Our modules for info's kernel: as choose() found them, else
    modules_path now."""
    if info.modules_known:
        return Path(info.modules_dir) if info.modules_dir else None
    return modules_path(Path(info.kernel) if info.kernel else None)


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
        (work / "request.json").write_text(req.model_dump_json(indent=1), encoding="utf-8")
        return _run_native(work, timeout_s, stop)
    # the guest reads the run's read-only folders at fixed paths (guest/init.sh)
    ro = plain_paths(list(req.ro_paths))
    (work / "ro_paths").write_text(":".join(ro), encoding="utf-8")
    (work / "request.json").write_text(json.dumps(guest_request(req.model_dump(mode="json"), ro), indent=1),
                                       encoding="utf-8")
    return _run_uml(info, req, work, timeout_s, stop)


def _read_result(work: Path, log_hint: Path | None, backend: str, returncode: int | None = None) -> dict:
    """The guest's result.json; without one, a LabError saying why: by
    which signal the lab was ended (its guard's exit status), if one did."""
    res = work / "result.json"
    if not res.exists():
        tail = ""
        if log_hint is not None and log_hint.exists():
            tail = "\n".join(log_hint.read_text(encoding="utf-8", errors="replace").splitlines()[-25:])
        sig = lab_signal(returncode)
        if sig is not None:
            raise LabError(f"{ended_by(sig)}; it wrote no result (see {log_hint}):\n{tail}")
        raise LabError(f"the lab wrote no result (see {log_hint}):\n{tail}")
    result = json.loads(res.read_text(encoding="utf-8"))
    result = host_paths(result, work, backend)  # uml: the guest's fixed work folder, as the host sees it
    if not result.get("ok"):  # not a column: the guest's reply
        raise LabError(f"lab task failed: {result.get('error')}\n{result.get('traceback', '')}")
    return result


def _run_native(work: Path, timeout_s: float, stop: threading.Event | None = None) -> dict:
    log = work / "native.log"
    with open(log, "w", encoding="utf-8") as fh:
        p = subprocess.Popen(guarded([sys.executable, "-m", "tortoiselab.guest", str(work / "request.json")],
                                     timeout_s, NATIVE_GRACE_S),
                             stdin=subprocess.PIPE, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        launched(p)
        _wait_or_kill(p, timeout_s, stop)
    return _read_result(work, log, "native", p.returncode)


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
        (work / "uml_userspace").write_text(f"{userspace}\t{why}\n", encoding="utf-8")
        with open(log, "w", encoding="utf-8") as fh:
            p = subprocess.Popen(guarded(argv, timeout_s, 0), stdin=subprocess.PIPE, stdout=fh,
                                 stderr=subprocess.STDOUT, start_new_session=True, env=env, cwd=work)
            launched(p)
            try:
                try:
                    (work / "uml.pgid").write_text(str(p.pid), encoding="utf-8")
                    # what proves later that this group is the lab (host/locks.clean_stale, host/procid.py)
                    (work / "uml.proc.json").write_text(proc_dumps(proc_record(p.pid)), encoding="utf-8")
                except BaseException:
                    kill_group(p)  # a lab nobody could clean up later does not run
                    raise
                _wait_or_kill(p, timeout_s, stop)
            finally:
                shutil.rmtree(work / ".uml", ignore_errors=True)
        refused = seccomp_refusal(log) if userspace == "seccomp" else None
        if refused is None:
            break
        # UML stops in its early checks, before the guest runs anything:
        # boot again in ptrace mode (and skip seccomp from now on)
        record_seccomp_refusal(info.kernel, refused)
        if os.environ.get("TORTOISE_UML_USERSPACE") == "seccomp":
            raise LabError(f"TORTOISE_UML_USERSPACE=seccomp, but the host refused it: {refused}")
        (work / "console-seccomp-refused.log").write_text(log.read_text(encoding="utf-8", errors="replace"),
                                                          encoding="utf-8")
        userspace, why = "ptrace", f"the host refused seccomp: {refused}"
    (work / "uml_userspace").write_text(f"{userspace}\t{why}\n", encoding="utf-8")
    result = _read_result(work, log, "uml", p.returncode)
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


