"""Host side of page loads: send a list of loads to the lab, get back each
load's summary, HAR, capture and per-connection handshake figures."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Sequence

from pydantic import ValidationError

from tortoiselab.host import backends
from tortoiselab.spec.experiment import ClientCfg, RunSpec, ServerCfg
from tortoiselab.spec.pathspec import PathSpec, describe_errors
from tortoiselab.spec.requests import LoadClient, LoadSpec, PageLoadRequest, www_url


def run_loads(loads: Sequence[LoadSpec | dict], path: PathSpec, backend: str = "uml", clock: str = "virtual",
              work: Path | None = None, seed: int = 1,
              timeout_s: float = backends.LONG_TASK_TIMEOUT_S) -> dict:
    """Every load in one lab boot; a load is a LoadSpec or its fields as a
    dict (label, server, client: a full URL in client.url)."""
    req = PageLoadRequest(path=path, seed=seed, loads=[LoadSpec.model_validate(ld) for ld in loads])
    info = backends.choose(backend, clock, sorted({ld.server.cc for ld in req.loads}))
    work = work or Path(tempfile.mkdtemp(prefix="tortoise-pageload-"))
    result = backends.run_task(info, req, work, timeout_s=timeout_s)
    return {"backend": info.backend, "clock": info.clock, "work": str(work), **result["task"]}


def load_client(client: dict, seed: int) -> LoadClient:
    """An experiment's client settings (a ClientCfg dump: its values as the
    run's config holds them) as a load runs them, with the loader's seed:
    its url, a path on www, resolved to the full URL (a full URL is kept)."""
    url = client.get("url")
    return LoadClient(**{**client, "url": url if url is None or "://" in url else www_url(url), "seed": seed})


def one_load(label: str, server: dict, client: dict, seed: int) -> LoadSpec:
    """A load from server and client settings as an experiment file names
    them, checked by its models (ServerCfg, ClientCfg); ValueError naming
    each bad field."""
    try:
        s = ServerCfg(**server)
    except ValidationError as exc:
        raise ValueError(describe_errors(exc, prefix="server")) from None
    try:
        c = ClientCfg(**client)
    except ValidationError as exc:
        raise ValueError(describe_errors(exc, prefix="client")) from None
    return LoadSpec(label=label, server=s, client=load_client(c.model_dump(), seed))


def run_request(run: RunSpec, site: Path, pki: Path) -> PageLoadRequest:
    """The lab request of one run of an experiment: its path, seed, module
    parameters and its one load, with the experiment's site and PKI."""
    server = ServerCfg.model_validate(run.config["server"])
    return PageLoadRequest(
        path=run.path, seed=run.seed, site_dir=str(site), pki_dir=str(pki), ro_paths=[str(site.parent)],
        module_params={alg: {k: str(v) for k, v in ps.items()} for alg, ps in server.module_params.items()},
        loads=[LoadSpec(label=run.run_id, server=server, client=load_client(run.config["client"], run.seed))])
