"""Host side of page loads: send a list of loads to the lab, get back each
load's summary, HAR, capture and per-connection handshake figures."""

from __future__ import annotations

import tempfile
from pathlib import Path

from tortoiselab.host import backends
from tortoiselab.spec.experiment import RunSpec
from tortoiselab.spec.pathspec import PathSpec


def run_loads(loads: list[dict], path: PathSpec, backend: str = "uml", clock: str = "virtual",
              work: Path | None = None, seed: int = 1, timeout_s: float = 1800) -> dict:
    ccs = sorted({ld["server"].get("cc", "cubic") for ld in loads})
    info = backends.choose(backend, clock, ccs)
    work = work or Path(tempfile.mkdtemp(prefix="tortoise-pageload-"))
    req = {"task": "pageload", "path": path.model_dump(), "seed": seed, "loads": loads}
    result = backends.run_task(info, req, work, timeout_s=timeout_s)
    return {"backend": info.backend, "clock": info.clock, "work": str(work), **result["task"]}


def run_request(run: RunSpec, site: Path, pki: Path) -> dict:
    """The lab request of one run of an experiment: its path, seed, module
    parameters and its one load, with the experiment's site and PKI."""
    c, s = run.config["client"], run.config["server"]
    client = {k: v for k, v in c.items() if v is not None}
    if c.get("url"):
        client["url"] = "https://www.lab.test/" + c["url"].lstrip("/")
    client["seed"] = run.seed
    return {"task": "pageload", "path": run.path.model_dump(), "seed": run.seed,
            "site_dir": str(site), "pki_dir": str(pki), "ro_paths": [str(site.parent)],
            "module_params": {alg: {k: str(v) for k, v in ps.items()} for alg, ps in s["module_params"].items()},
            "loads": [{"label": run.run_id, "server": s, "client": client}]}
