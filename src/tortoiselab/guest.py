"""Entry point inside the lab: `python -m tortoiselab.guest REQUEST.json`.

Reads the request the host wrote into the run's work folder, runs the task
and writes result.json next to it (temp file + rename). Exit code 0 when the
task ran, 1 when it raised (the error and traceback are in result.json).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

from .executor import Executor
from .lab import LabContext, run_task


def write_json_atomic(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    req_path = Path(argv[1])
    work = req_path.parent
    req = json.loads(req_path.read_text())
    ex = Executor(log_path=work / "commands.log")
    ctx = LabContext(ex=ex, work=work, private_ovs=req.get("private_ovs", True),
                     switch=req.get("switch", "ovs"), seed=int(req.get("seed", 1)))
    try:
        result = {"ok": True, **run_task(ctx, req)}
        rc = 0
    except Exception as exc:  # reported to the host, which raises it there
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                  "traceback": traceback.format_exc()}
        rc = 1
    result["commands"] = ex.records
    write_json_atomic(work / "result.json", result)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
