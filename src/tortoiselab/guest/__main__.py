"""Entry point inside the lab: `python -m tortoiselab.guest REQUEST.json`.

Reads the request the host wrote into the run's work folder as its task's
typed model (spec/requests.py), runs the task and writes result.json next
to it (temp file + rename). Exit code 0 when the task ran, 1 when the
request was refused (the bad fields named) or the task raised (the error
and traceback are in result.json).
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

from tortoiselab.guest.clock import HostWall
from tortoiselab.guest.executor import Executor
from tortoiselab.guest.net import LabContext
from tortoiselab.guest.record import code_digest, write_json_atomic
from tortoiselab.guest.tasks import run_task
from tortoiselab.spec.requests import read_request


def run(req_path: Path) -> tuple[dict, int]:
    """The task of one request file: (result, exit code)."""
    work = req_path.parent
    ex = Executor(log_path=work / "commands.log")
    try:
        req = read_request(req_path.read_bytes())
        ctx = LabContext(ex=ex, work=work, private_ovs=req.private_ovs, switch=req.switch, seed=req.seed,
                         wall=HostWall(work / ".wall"))
        result, rc = {"ok": True, **run_task(ctx, req)}, 0
    except Exception as exc:  # reported to the host, which raises it there
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        rc = 1
    result["commands"] = ex.records
    result["code_digest"] = code_digest()
    return result, rc


def main(argv: list[str]) -> int:
    req_path = Path(argv[1])
    result, rc = run(req_path)
    write_json_atomic(req_path.parent / "result.json", result)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
