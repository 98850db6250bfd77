"""Host side of page loads: send a list of loads to the lab, get back each
load's summary, HAR, capture and per-connection handshake figures."""

from __future__ import annotations

import tempfile
from pathlib import Path

from tortoiselab.host import backends
from tortoiselab.spec.pathspec import PathSpec


def run_loads(loads: list[dict], path: PathSpec, backend: str = "uml", clock: str = "virtual",
              work: Path | None = None, seed: int = 1, timeout_s: float = 1800) -> dict:
    ccs = sorted({ld["server"].get("cc", "cubic") for ld in loads})
    info = backends.choose(backend, clock, ccs)
    work = work or Path(tempfile.mkdtemp(prefix="tortoise-pageload-"))
    req = {"task": "pageload", "path": path.model_dump(), "seed": seed, "loads": loads}
    result = backends.run_task(info, req, work, timeout_s=timeout_s)
    return {"backend": info.backend, "clock": info.clock, "work": str(work), **result["task"]}
