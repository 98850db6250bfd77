"""Entry point inside the lab: `python -m tortoiselab.guest REQUEST.json`.

Reads the request the host wrote into the run's work folder as its task's
typed model (spec/requests.py), runs the task and writes result.json next
to it (temp file + rename). Exit code 0 when the task ran, 1 when the
request was refused (the bad fields named) or the task raised (the error
and traceback are in result.json).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import traceback
from pathlib import Path

from tortoiselab.guest.executor import Executor
from tortoiselab.guest.net import LabContext
from tortoiselab.guest.tasks import run_task
from tortoiselab.project import PKG_DIR, REPO_DIR
from tortoiselab.spec.requests import read_request


def write_json_atomic(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def code_digest() -> str:
    """sha256 of the lab code this run executed: the project's modules this
    process imported, the loader's and the tools' packages (they run as
    processes of their own), the guest's init and Apache's templates. On the
    virtual clock a run repeats only with the same code: one more clock read
    or failed system call in the guest moves every later packet
    (docs/determinism.md); host-side modules (runner, reports) do not count."""
    pkg, repo = PKG_DIR, REPO_DIR
    files = {Path(m.__file__).resolve() for m in list(sys.modules.values())
             if getattr(m, "__file__", None) and Path(m.__file__).resolve().is_relative_to(pkg)}
    files |= {*pkg.glob("client/*.py"), *pkg.glob("tools/*.py"), pkg / "guest" / "init.sh",
              *(repo / "webroot").glob("*.tmpl")}
    h = hashlib.sha256()
    for f in sorted(f for f in files if f.is_file()):
        h.update(str(f.relative_to(repo)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def run(req_path: Path) -> tuple[dict, int]:
    """The task of one request file: (result, exit code)."""
    work = req_path.parent
    ex = Executor(log_path=work / "commands.log")
    try:
        req = read_request(req_path.read_bytes())
        ctx = LabContext(ex=ex, work=work, private_ovs=req.private_ovs, switch=req.switch, seed=req.seed)
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
