"""What the guest hands back: JSON files written whole (temp file + rename),
so that the host, which may read them while the lab still runs (a batch's
finished loads, host/runner.py), never sees half of one; and the digest of
the lab code that produced them."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

from tortoiselab.project import PKG_DIR, REPO_DIR


def write_json_atomic(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
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
