"""Task `command`: one command as root in the lab guest.

run_task has loaded our modules into the guest's kernel and started Open
vSwitch (as a Debian host's openvswitch-switch service would) before this
runs. The command runs in the guest's root namespace, in a session of its
own, with the run's work folder as its working directory (the one place
the guest may write), its output in command.log there; at its timeout its
whole process group is killed. Whatever it leaves behind ends with the
guest, which powers off after the task. This is how the test suite runs
the native backend on the lab kernel (`tortoise run --backend native`
inside the guest, docs/architecture.md).
"""

from __future__ import annotations

import time

from tortoiselab.guest.net import LabContext
from tortoiselab.spec.requests import CommandRequest

LOG = "command.log"
TAIL_CHARS = 4000


def run(ctx: LabContext, req: CommandRequest) -> dict:
    """Run the request's argv; its exit code (-9: killed at the timeout),
    whether it timed out, its wall time and the end of what it printed. A
    command that fails is a result, not an error: the caller judges it."""
    log = ctx.work / LOG
    t0 = time.monotonic()
    rc, timed_out = ctx.ex.run_to_file(req.argv, None, log, timeout=req.timeout_s, kill_wait=10.0, cwd=ctx.work)
    text = log.read_text(encoding="utf-8", errors="replace")
    return {"argv": req.argv, "exit_code": rc, "timed_out": timed_out, "seconds": round(time.monotonic() - t0, 3),
            "log": str(log), "tail": text[-TAIL_CHARS:]}
