"""Host side of page loads: send a list of loads to the lab, get back each
load's summary, HAR, capture and per-connection handshake figures."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Sequence

from pydantic import ValidationError

from tortoiselab.analysis import napkin
from tortoiselab.host import backends, safefs
from tortoiselab.host.probe import trace_folders
from tortoiselab.spec import cols
from tortoiselab.spec.experiment import ClientCfg, RunSpec, ServerCfg
from tortoiselab.spec.pathspec import PathSpec, describe_errors
from tortoiselab.spec.requests import LoadClient, LoadSpec, PageLoadRequest, www_url
from tortoiselab.spec.topologies import TopologyCfg


def run_loads(loads: Sequence[LoadSpec | dict], path: PathSpec, backend: str = "uml", clock: str = "virtual",
              work: Path | None = None, seed: int = 1,
              timeout_s: float = backends.LONG_TASK_TIMEOUT_S, imported_dir: Path | None = None) -> dict:
    """Every load in one lab boot; a load is a LoadSpec or its fields as a
    dict (label, server, client: a full URL in client.url). imported_dir:
    an imported site staged by host/sites.stage, served instead of the
    generated one (docs/your-own-site.md)."""
    req = PageLoadRequest(path=path, seed=seed, loads=[LoadSpec.model_validate(ld) for ld in loads],
                          imported_dir=None if imported_dir is None else str(imported_dir),
                          ro_paths=[] if imported_dir is None else [str(imported_dir)])
    info = backends.choose(backend, clock, sorted({ld.server.cc for ld in req.loads}))
    work = work or Path(tempfile.mkdtemp(prefix="tortoise-pageload-"))
    result = backends.run_task(info, req, work, timeout_s=timeout_s)
    return {"backend": info.backend, "clock": info.clock, "work": str(work), **result["task"]}


def load_client(client: dict, seed: int, page: str | None = None) -> LoadClient:
    """An experiment's client settings (a ClientCfg dump: its values as the
    run's config holds them) as a load runs them, with the loader's seed:
    its url, a path on www, resolved to the full URL (a full URL is kept);
    page: an imported site's page (client.site), its URL."""
    url = page or client.get("url")
    return LoadClient(**{**client, "url": url if url is None or "://" in url else www_url(url), "seed": seed})


def imported_dir(site: Path, name: str) -> Path:
    """Where an experiment's imported site `name` is staged: beside its
    generated site in .lab (host/sites.stage_for_experiment)."""
    return Path(site).parent / "imported" / name


def site_page(site: Path, name: str | None) -> str | None:
    """The page URL of the experiment's imported site `name` (None: none)."""
    if name is None:
        return None
    doc = json.loads(safefs.read_bytes_regular(imported_dir(site, name) / "site.json", max_bytes=64 << 20))
    return doc["page"]


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


# a batch's later loads (docs/determinism.md): each starts a whole number of
# LOAD_SPACING_S after the first, so the kernel's timer wheel (granularities
# up to 512 jiffies at level 3: 5.12 s at HZ=100, 2.048 s at 250, 0.512 s at
# 1000) rounds its timers as for the first; at least LOAD_SETTLE_S after the
# previous load ended, past Linux's fixed 60-s TIME_WAIT, so no socket of an
# earlier run is left. Virtual time: the wait costs almost nothing.
LOAD_SPACING_S = 40.96
LOAD_SETTLE_S = 61.0


def boot_key(run: RunSpec) -> str:
    """What one lab boot fixes for every run it holds: our modules'
    parameters (loaded at boot). Runs with the same key can share a boot;
    their paths, seeds, server and client settings are per load. The
    topology (its graph and cross traffic) is built at boot too."""
    server = run.settings.server
    site = run.settings.client.site  # an imported site is served by the boot's Apache
    if "topology" not in run.config and site is None:  # wan: the key as it always was
        return json.dumps(server.module_params, sort_keys=True)
    if site is None:
        return json.dumps([server.module_params, run.config["topology"]], sort_keys=True)
    return json.dumps([server.module_params, run.config.get("topology"), site], sort_keys=True)


def run_request(runs: Sequence[RunSpec], site: Path, pki: Path,
                members: Sequence[RunSpec] | None = None) -> PageLoadRequest:
    """The lab request of runs of an experiment that share a boot (a batch;
    one run alone is a batch of one): the first run's path and seed set the
    boot up (its CRNG, OVS's entropy), and each load carries its own run's
    path, seed, server and client settings. members: the whole batch when
    runs are its first loads only (a resume, a rerun up to a run: host/batches.py);
    what the boot fixes (read-only folders, the spacing of loads) is the
    whole batch's, so that its first loads run as in the whole batch."""
    members = list(members) if members is not None else list(runs)
    if [r.run_id for r in members[:len(runs)]] != [r.run_id for r in runs]:
        raise ValueError("a batch's loads must be its first runs, in its order")
    if len({boot_key(r) for r in members}) != 1:
        raise ValueError("a batch's runs must share their module parameters (boot_key)")
    first = runs[0]
    server = first.settings.server
    batch = len(members) > 1
    topology = first.config.get("topology")
    name = first.settings.client.site
    page = site_page(site, name)
    return PageLoadRequest(
        path=first.path, seed=first.seed, site_dir=str(site), pki_dir=str(pki),
        imported_dir=None if name is None else str(imported_dir(site, name)),
        topology=None if topology is None else TopologyCfg.model_validate(topology),
        ro_paths=[str(site.parent), *sorted({f for r in members for f in trace_folders(r.path)})],
        module_params={alg: {k: str(v) for k, v in ps.items()} for alg, ps in server.module_params.items()},
        load_spacing_s=LOAD_SPACING_S if batch else 0.0, settle_s=LOAD_SETTLE_S if batch else 0.0,
        loads=[LoadSpec(label=r.run_id, server=r.settings.server,
                        client=load_client(r.settings.client.model_dump(), r.seed, page), seed=r.seed, path=r.path)
               for r in runs])


def floor_fields(run: RunSpec, site: Path, pki: Path, summary: dict, har: str | Path | None = None) -> dict:
    """The run's napkin floor and measured PLT / floor (tortoiselab.analysis.napkin),
    from its resolved path and server settings, the page in the site's
    manifest and the size of the server's handshake flight; for an imported
    site (client.site), from what the load fetched (its HAR, `har`) and the
    staged site (napkin.imported_floor)."""
    try:
        if run.settings.client.site is not None:
            staged = imported_dir(site, run.settings.client.site)
            if har is None:
                raise ValueError("no HAR of the load")
            f = napkin.imported_floor(run.config, *(json.loads(safefs.read_bytes_regular(p, max_bytes=64 << 20))
                                                    for p in (Path(har), staged / "site.json",
                                                              staged / "pki" / "pki.json")),
                                      summary.get("trace_start_ms"))
            return {cols.FLOOR: f[cols.FLOOR], "plt_over_floor": napkin.ratio(summary.get(cols.PLT), f[cols.FLOOR])
                    if f[cols.FLOOR] else None, "floor_model": f.get("model") or {"why": f.get("why")}}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return {cols.FLOOR: None, "plt_over_floor": None, "floor_model": {"why": f"floor not computed: {exc}"[:300]}}
    try:
        f = napkin.run_floor(run.config, json.loads(safefs.read_bytes_regular(site / "manifest.json")),  # no link,
                             json.loads(safefs.read_bytes_regular(pki / "pki.json")),  # no FIFO (host/safefs.py)
                             summary.get("cached_urls") or (), summary.get("trace_start_ms"))
    except (OSError, ValueError, KeyError) as exc:  # a record without a floor beats a lost run
        f = {cols.FLOOR: None, "why": f"floor not computed: {exc}"[:300]}
    return {cols.FLOOR: f[cols.FLOOR], "plt_over_floor": napkin.ratio(summary.get(cols.PLT), f[cols.FLOOR])
            if f[cols.FLOOR] else None, "floor_model": f.get("model") or {"why": f.get("why")}}


def cdn_part(ld: dict) -> tuple[dict | None, list[str]]:
    """A load's CDN host (the CDN set-up, spec/cdn.py) as the run's record
    keeps it (its pcap moved into the run folder as cdn.pcap by the
    runner), and what makes the run not whole: its capture's problems and
    any object answered by a host its name does not resolve to. (None, [])
    for a load without a CDN."""
    cdn = ld.get("cdn")
    if not cdn:
        return None, []
    problems = [f"the CDN set-up served {len(cdn['misplaced'])} objects from the wrong host, e.g. "
                f"{cdn['misplaced'][0]}"] if cdn.get("misplaced") else []
    return {k: v for k, v in cdn.items() if k != "pcap"}, problems
