"""The lab kernel's congestion control: which algorithms it has, and our
modules (tcp_*.ko) loaded with a run's parameters.

In the uml guest the kernel is the lab's own: load_modules insmods our
modules for the run. On the native backend it is the host's and outlives
the task: host_modules loads what the task needs and puts everything back.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from pydantic import BaseModel

from tortoiselab.guest import commands as C
from tortoiselab.guest.executor import Executor
from tortoiselab.spec.ccparams import OUR_MODULES

AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")


def available_algorithms() -> list[str]:
    return AVAILABLE.read_text(encoding="utf-8").split()


def param_dir(algorithm: str) -> Path:
    return Path(f"/sys/module/tcp_{algorithm}/parameters")


def module_params_now(algorithm: str) -> dict[str, str]:
    d = param_dir(algorithm)
    return {p.name: p.read_text(encoding="utf-8").strip() for p in sorted(d.iterdir())} if d.is_dir() else {}


def set_module_params(ex: Executor, algorithm: str, params: dict[str, str]) -> dict[str, str]:
    """Write our module's parameters through sysfs (new connections take
    them; live ones keep the snapshot they took at start) and read them back."""
    for k, v in params.items():
        rc, err = ex.write(param_dir(algorithm) / k, str(v))
        if rc:
            raise RuntimeError(f"module parameter {algorithm}.{k}={v} refused by the module: {err}")
    return module_params_now(algorithm)


def load_modules(ex: Executor, modules_dir: str, params: dict[str, dict[str, str]]) -> dict:
    """insmod our congestion control modules (tcp_*.ko) with this run's
    parameters; return {algorithm: parameters as the module reports them}."""
    loaded = {}
    for ko in sorted(Path(modules_dir).glob("tcp_*.ko")):
        alg = ko.stem[len("tcp_"):]
        if alg not in available_algorithms():
            ex.run(C.insmod(str(ko), params.get(alg, {})))
        elif params.get(alg):
            set_module_params(ex, alg, params[alg])
        loaded[alg] = module_params_now(alg)
    return loaded


def requested_algorithms(req: BaseModel) -> set[str]:
    """Every algorithm a typed request names: each `cc` field anywhere in it
    (a probe's, an arm's, a load's server's) and the keys of its module_params."""
    found: set[str] = set(getattr(req, "module_params", {}))

    def walk(o: object) -> None:
        if isinstance(o, BaseModel):
            for name in type(o).model_fields:
                v = getattr(o, name)
                if name == "cc" and isinstance(v, str):
                    found.add(v)
                else:
                    walk(v)
        elif isinstance(o, (list, tuple)):
            for v in o:
                walk(v)

    walk(req)
    return found


@contextmanager
def host_modules(ex: Executor, needed: set[str], params: dict[str, dict[str, str]]) -> Iterator[dict]:
    """Our modules on the native backend, where the kernel is the host's and
    outlives the task: modprobe the ones this task needs that are not loaded
    (DKMS installs them in the VM), set this run's parameters, and on the way
    out put back every value found that the task changed (this run's, or a
    task's own per transfer, as loss_response's arms) and unload only what
    this task loaded. Yields {algorithm: parameters as the module reports them}."""
    loaded_here, before, now = [], {}, {}
    try:
        for alg in sorted(a for a in needed if a in OUR_MODULES):
            if alg not in available_algorithms():
                ex.run(C.modprobe(f"tcp_{alg}"))
                loaded_here.append(alg)
            before[alg] = module_params_now(alg)
            now[alg] = set_module_params(ex, alg, params[alg]) if params.get(alg) else module_params_now(alg)
        yield now
    finally:
        for alg, old in before.items():
            if alg in loaded_here:
                continue
            at_end = module_params_now(alg)
            changed = {k: v for k, v in old.items() if at_end.get(k) != v}
            if changed:
                set_module_params(ex, alg, changed)
        for alg in loaded_here:
            ex.run(C.rmmod(f"tcp_{alg}"), check=False)
