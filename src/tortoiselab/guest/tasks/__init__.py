"""The lab's tasks, by the name a request gives (`task`): each takes the
lab context and its typed request (spec/requests.py) and returns what it
measured. run_task sets the lab up around a task: our modules, Open
vSwitch, the start-up alignment (docs/determinism.md)."""

from __future__ import annotations

import os
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable

from tortoiselab.guest.clock import sleep_until_monotonic, uptime_s
from tortoiselab.guest.modules import available_algorithms, host_modules, load_modules, requested_algorithms
from tortoiselab.guest.net import OVS_MIN_UPTIME_S, LabContext, private_ovs
from tortoiselab.guest.record import write_json_atomic
from tortoiselab.guest.tasks import cc_check, command, loss_response, module_check, pageload, probe
from tortoiselab.spec.requests import LabRequest

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")

TASKS: dict[str, Callable[[LabContext, Any], dict]] = {
    "probe": probe.run, "cc_check": cc_check.run, "loss_response": loss_response.run,
    "module_check": module_check.run, "pageload": pageload.run, "command": command.run,
}


def run_task(ctx: LabContext, req: LabRequest) -> dict:
    task = TASKS[req.task]  # type: ignore[attr-defined]  # every request model has its task
    result = {"kernel_release": os.uname().release, "uptime_start_s": uptime_s(),
              "wall": {"task_start": _wall(ctx)}}
    if ctx.private_ovs:  # uml: a draw from the guest's CRNG; the same in every boot of a run when seeded
        result["boot_id"] = BOOT_ID.read_text(encoding="utf-8").strip()
    with ExitStack() as stack:
        if req.modules_dir:  # uml: the guest's own kernel, ours to change
            result["modules"] = load_modules(ctx.ex, req.modules_dir, req.module_params)
        elif req.backend == "native":  # the host's kernel: restored afterwards
            result["modules"] = stack.enter_context(
                host_modules(ctx.ex, requested_algorithms(req), req.module_params))
        result.update({"available_cc": available_algorithms(), "switch": ctx.switch})
        if ctx.switch == "ovs" and ctx.private_ovs:
            stack.enter_context(private_ovs(ctx.ex, ctx.seed))
        elif ctx.private_ovs and req.clock == "virtual":  # uml, Linux bridge: the same alignment point
            sleep_until_monotonic(OVS_MIN_UPTIME_S)
        # what the boot is, for a host that stores a batch's loads as they finish
        result["wall"]["boot_ready"] = _wall(ctx)
        write_json_atomic(ctx.work / "boot.json", result)
        result["task"] = task(ctx, req)
    result["uptime_end_s"] = uptime_s()
    return result


def _wall(ctx: LabContext) -> float | None:
    return ctx.wall.now() if ctx.wall is not None else None
