"""Task `module_check`: our modules load, unload and refuse bad values."""

from __future__ import annotations

import os
from pathlib import Path

from tortoiselab.guest import commands as C
from tortoiselab.guest.executor import Executor
from tortoiselab.guest.modules import available_algorithms, module_params_now, param_dir
from tortoiselab.guest.net import LabContext
from tortoiselab.spec.requests import ModuleCheckRequest

# kernel log lines of our modules (their names and messages)
LOG_WORDS = ("tcp_", "reno_beta", "cubic_plus")


def run(ctx: LabContext, req: ModuleCheckRequest) -> dict:
    """Our modules: listed once loaded, gone after rmmod, back after insmod;
    bad parameter values refused by the module itself (insmod and sysfs),
    with the module's own message in the kernel log."""
    if req.modules_dir is None:
        raise RuntimeError("module_check: the lab has no modules built for its kernel (make kernel)")
    out = {}
    for ko in sorted(Path(req.modules_dir).glob("tcp_*.ko")):
        alg = ko.stem[len("tcp_"):]
        out[alg] = _check_module(ctx.ex, ko, alg, req.bad_params.get(alg, {}))
    _rc, log, _err = ctx.ex.capture(C.kernel_log())
    return {"modules": out, "kernel_log": [ln for ln in log.splitlines() if any(w in ln for w in LOG_WORDS)]}


def _check_module(ex: Executor, ko: Path, alg: str, bad: dict[str, str]) -> dict:
    mod = ko.stem
    r: dict = {"listed_at_start": alg in available_algorithms()}
    r["rmmod_rc"] = ex.capture(C.rmmod(mod))[0]
    r["listed_after_rmmod"] = alg in available_algorithms()
    r["insmod_rc"] = ex.capture(C.insmod(str(ko), {}))[0]
    r["listed_after_insmod"] = alg in available_algorithms()
    r["defaults"] = module_params_now(alg)
    r["bad"] = {}
    for k, v in bad.items():
        ex.capture(C.rmmod(mod))
        rc_ins = ex.capture(C.insmod(str(ko), {k: v}))[0]
        loaded = alg in available_algorithms()
        if not loaded:
            ex.capture(C.insmod(str(ko), {}))
        before = module_params_now(alg).get(k)
        rc, _err = ex.write(param_dir(alg) / k, v)
        sysfs = "accepted" if rc == 0 else f"refused: {os.strerror(rc)}"
        r["bad"][f"{k}={v}"] = {"insmod_rc": rc_ins, "loaded_with_it": loaded, "sysfs": sysfs,
                                "value_kept": module_params_now(alg).get(k) == before}
    return r
