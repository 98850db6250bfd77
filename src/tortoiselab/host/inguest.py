"""A command run as root inside the UML lab guest (the guest task
`command`, guest/tasks/command.py).

The lab kernel is itself a root Linux with netem, every algorithm and our
modules, so `tortoise run --backend native` can run there: the native
backend tested on the lab kernel on a host whose own kernel cannot emulate
(tests/integration/test_native_in_guest.py, docs/architecture.md). The
guest sees the host's tree read-only and writes only into the work folder,
which is the command's working directory: give it relative paths (an
experiment file copied there, `--results results`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from tortoiselab.host import backends
from tortoiselab.spec.requests import CommandRequest

# the host's watchdog: the command's own timeout plus the guest's boot, our
# modules, Open vSwitch (started after 10.5 s of uptime) and its power-off
BOOT_SLACK_S = 120.0


def tortoise_argv(*args: str) -> list[str]:
    """The tortoise CLI as the guest starts it: this venv's Python (the
    guest's root is the host's tree, the venv included)."""
    return [sys.executable, "-m", "tortoiselab.cli", *args]


def run_in_guest(argv: list[str], work: Path, clock: str = "real", timeout_s: float = 600.0,
                 seed: int = 1, switch: str = "ovs") -> dict:
    """Boot the UML lab kernel on `clock`, run argv as root in it with work
    as its working directory and return the task's result: exit_code (-9:
    killed at timeout_s), timed_out, seconds, log (the command's output,
    work/command.log) and tail. A command that fails is returned, not
    raised; a lab that cannot boot raises backends.LabError. work may have
    been used before: what the lab left there is replaced, the command's own
    files stay (host/workfolder.py; a folder whose lab still runs, or with
    a link where the lab writes, raises workfolder.WorkFolderError)."""
    work = Path(work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    # the guest's Apache (www-data) serves a site the command may make under it
    work.chmod(0o755)
    info = backends.choose("uml", clock, [])
    req = CommandRequest(argv=list(argv), timeout_s=timeout_s, seed=seed, switch=switch)
    return backends.run_task(info, req, work, timeout_s=timeout_s + BOOT_SLACK_S)["task"]
