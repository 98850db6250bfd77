"""Task `pageload`: a sequence of page loads in one lab boot, each with its
server settings (cc, initial windows, protocol, TLS, certificate variant)
and client settings (page, loader, coalescing, cache hits, resolution).

One load: set the server up, start the captures, wait for the next grid
point (docs/determinism.md), run one of three loaders (ours, nghttp,
h2load), stop the captures and collect what the lab saw.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
import traceback
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Callable

from tortoiselab.analysis.conntable import TABLE, parse_capture
from tortoiselab.analysis.flights import handshake_summary
from tortoiselab.analysis.parsers import parse_h2load, parse_nghttp_stats
from tortoiselab.guest import commands as C
from tortoiselab.guest import imported, trace
from tortoiselab.guest.cdn import cdn_capture, cdn_node, cdn_result
from tortoiselab.guest.clock import align_to_grid, next_grid_point, sleep_until_monotonic, uptime_s
from tortoiselab.guest.cross import CrossRun, cross_traffic
from tortoiselab.guest.executor import Executor
from tortoiselab.guest.loaderproc import LoaderProcess
from tortoiselab.guest.net import LAB_PREFIX, LabContext, PathLab, mininet_path
from tortoiselab.guest.record import code_digest, write_json_atomic
from tortoiselab.guest.replay import trace_offset_ms
from tortoiselab.guest.webtier import DNS_IP, NameFiles, WebLab, capture, guest_name_files, write_names
from tortoiselab.spec import hostspec
from tortoiselab.spec.browsercfg import warm_view
from tortoiselab.spec.crosstraffic import CrossParams
from tortoiselab.spec.requests import LAB_DOMAIN, LoadSpec, PageLoadRequest
from tortoiselab.spec.topologies import TopologyCfg
from tortoiselab.spec.topology import SERVER_IP2
from tortoiselab.web import pages
from tortoiselab.web import pki as pkimod

SERVER_SYSCTLS = ("net.ipv4.tcp_congestion_control", "net.ipv4.tcp_no_metrics_save",
                  "net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_sack", "net.ipv4.tcp_timestamps",
                  "net.ipv4.tcp_ecn", "net.ipv4.tcp_wmem", "net.ipv4.tcp_rmem", "net.core.default_qdisc",
                  *(k for k in hostspec.READ_BACK if k not in ("net.ipv4.tcp_wmem", "net.ipv4.tcp_rmem")))
LOAD_GRID_S = 0.5  # tcpdump is attached within it; every load starts on a grid point
CAPTURE_DRAIN_S = 1.0  # the last packets reach tcpdump (virtual time: costs nothing)
LOADER_GRACE_S = 60.0  # beyond the loader's own --timeout before the executor kills it
REAL_SETTLE_S = 1.0  # real clock: the quiet gap between a batch's loads
CWND_PORT = 443  # the server's side of the page's connections
DROP_CACHES = Path("/proc/sys/vm/drop_caches")


def run(ctx: LabContext, req: PageLoadRequest) -> dict:
    """One lab boot, one or more loads (a batch: one per run, each with its
    run's path and seeds). Apache and dnsmasq stay up from load to load
    while their settings do not change (guest/webtier.WebLab): a later load
    meets the servers the batch's earlier loads left, always the same ones
    in the same batch (docs/determinism.md, "Batches"). Each load's
    result is written as load-NNN/result.json as soon as it is done (the
    host stores the run then); a load that fails fails alone and the batch
    goes on."""
    site, manifest, pki = _site(req)
    imp = imported.load(req.imported_dir) if req.imported_dir is not None else None
    out: dict = {"manifest": manifest, "loads": []}
    name_files = guest_name_files(ctx.ex, ctx.work) if ctx.private_ovs else None
    topology = req.topology or TopologyCfg()
    graph = topology.graph(web=True)
    with mininet_path(ctx, graph) as lab:
        lab.backhaul_path = topology.params().backhaul_path()  # pop: the PoP-origin leg
        lab.legs = topology.params().legs  # the CDN set-up: the last mile and the PoP leg (spec/cdn.py)
        lab.configure(req.path, server_cc="cubic", loss_on=True)
        origin, cdn = _origin(ctx.ex, lab, topology, graph), cdn_node(ctx.ex, lab, topology, graph)
        out["seeds"] = dict(lab.seeds)  # netem's, per direction, for the request's seed
        _second_server_address(ctx.ex, lab)
        if imp is not None:
            imported.add_addresses(ctx.ex, lab.server, lab.client, imp)
        out["wall_topology_ready"] = _wall(ctx)
        with WebLab(ctx, lab, site, pki, origin, cdn, imp) as web, _loader_process(ctx, lab, req) as loader_proc:
            first: dict | None = None  # the first load's set-up and start instants
            digest: str | None = None  # the lab code that ran: hashed once, after the first load
            for i, load in enumerate(req.loads):
                d = ctx.work / f"load-{i:03d}"
                d.mkdir(exist_ok=True)
                t_set_up = uptime_s()
                marks = {"topology_ready": out["wall_topology_ready"]} if i == 0 else {"previous_end": _wall(ctx)}
                try:
                    target = None
                    primed = _prime_browser(ctx, lab, web, req, load, name_files, d)
                    if primed is not None and not primed["ok"]:  # else a warm view would be measured cold
                        raise RuntimeError(f"the priming load of this warm page view failed: {primed['error']}")
                    if i == 0:
                        t_set_up = uptime_s()
                    else:
                        target = _wait_for_slot(req, first, out["loads"][-1]["sim_end_s"])
                    res = _one_load(ctx, lab, web, loader_proc, req, load, i, name_files, d, target, marks)
                    if primed is not None:
                        res["prime"] = primed
                except Exception as exc:  # this load's run fails, the batch goes on
                    res = {"index": i, "label": load.label, "error": f"{type(exc).__name__}: {exc}"[:2000],
                           "traceback": traceback.format_exc()[-4000:]}
                digest = digest or code_digest()
                marks["end"] = _wall(ctx)
                res.update({"label": load.label, "sim_set_up_s": t_set_up, "sim_end_s": uptime_s(),
                            "code_digest": digest, "wall": marks})
                if first is None and "start_s" in res:
                    first = res
                write_json_atomic(d / "result.json", res)
                out["loads"].append(res)
    return out


def _origin(ex: Executor, lab: PathLab, topology: TopologyCfg, graph) -> object | None:
    """pop: the origin host, with its own algorithm (the backhaul's sender);
    None for a topology without one."""
    names = graph.with_role("origin")
    if not names:
        return None
    origin = lab.nodes[names[0]]
    ex.sysctl({"net.ipv4.tcp_no_metrics_save": 1,
               "net.ipv4.tcp_congestion_control": topology.params().origin_cc}, host=origin)
    return origin


def _wait_for_slot(req: PageLoadRequest, first: dict | None, prev_end: float) -> float | None:
    """Before a later load of a batch: sleep (virtual time, nearly free)
    until its set-up is as far ahead of its start instant as the first
    load's was: servers it starts (its settings differ from the previous
    load's) are then as old at the start as in a run alone (their timers
    fire at the same moments of the load). Returns
    the start instant (None: no spacing, the next grid point). On the real
    clock the spacing would be real waiting (61 s and more per load) for a
    repeatability that clock does not have: a short quiet gap instead, and
    sockets of the previous load may still be in TIME_WAIT."""
    if first is None or req.load_spacing_s <= 0:
        return None
    if req.clock == "real":
        time.sleep(REAL_SETTLE_S)
        return None
    lead = first["start_s"] - first["set_up_s"]
    target = _slot(req, first["start_s"], prev_end + lead)
    sleep_until_monotonic(target - lead)
    return target


def _slot(req: PageLoadRequest, first_start: float, earliest: float) -> float:
    """A later load's start instant: the first load's start plus a whole
    number of load_spacing_s, at least settle_s after `earliest`. The
    kernel's timer wheel rounds a timer's expiry to a granularity that
    depends on the absolute jiffies; a whole number of spacings keeps every
    load at the same phase (docs/determinism.md)."""
    k = max(1, math.ceil((earliest + req.settle_s - first_start) / req.load_spacing_s))
    return first_start + k * req.load_spacing_s


def _site(req: PageLoadRequest) -> tuple[Path, dict, dict]:
    """The site and PKI: the experiment's, made once on the host (runner),
    or made here."""
    if req.site_dir is not None:
        site = Path(req.site_dir)
        manifest = json.loads((site / "manifest.json").read_text(encoding="utf-8"))
        # made on the host, its paths the host's: here the folder may be elsewhere
        pki = pkimod.rebased(json.loads((Path(req.pki_dir) / "pki.json").read_text(encoding="utf-8")), req.pki_dir)
    else:
        site = Path("/tmp/site")
        manifest = pages.generate_site(site, seed=req.site_seed, domain=LAB_DOMAIN)
        pki = pkimod.make_pki(Path("/tmp/pki"), domain=LAB_DOMAIN)
    return site, manifest, pki


def _second_server_address(ex: Executor, lab: PathLab) -> None:
    """The server's second address (the two-ip resolution), with a static
    ARP entry for it on the client."""
    srv = lab.server
    ex.run(C.addr_add(srv.defaultIntf().name, SERVER_IP2), host=srv)
    ex.run(C.neigh_permanent(SERVER_IP2, srv.defaultIntf().MAC(), lab.client.defaultIntf().name), host=lab.client)


def _loader_process(ctx: LabContext, lab: PathLab, req: PageLoadRequest) -> AbstractContextManager:
    """Our loader as one process in the client host, started once per boot
    before the first load's set-up (guest/loaderproc.py), if a load uses it;
    every load runs in it, on either clock (docs/determinism.md, "Our loader
    in one process per boot")."""
    if not any(load.client.loader == "loader" for load in req.loads):
        return nullcontext(None)
    return LoaderProcess(ctx.ex, lab.client)


def _one_load(ctx: LabContext, lab: PathLab, web: WebLab, loader_proc: LoaderProcess | None, req: PageLoadRequest,
              load: LoadSpec, i: int, name_files: NameFiles | None, d: Path, target: float | None,
              marks: dict) -> dict:
    marks["set_up"] = _wall(ctx)
    set_up = time.monotonic()
    lab.forget_macs()
    _forget_files(ctx)
    names = _set_up_server(ctx.ex, lab, web, load, name_files)
    seeds = lab.set_netem(load.path or req.path, loss_on=True, seed=req.seed if load.seed is None else load.seed)
    pcap, cpcap = d / "server.pcap", d / "client.pcap"
    with capture(ctx.ex, lab.server, pcap) as cap, capture(ctx.ex, lab.client, cpcap) as ccap, \
            cdn_capture(ctx.ex, web.cdn, d / "cdn.pcap") as dcap:
        # tcpdump and the tracepoint attached before the first packet (0.25-0.75 s);
        # the load starts on a grid point, at the same instant in every run, and
        # nothing whose cost differs between a boot's first load and a later one
        # (the tracer's first set-up) lies between that instant and the loader
        # (docs/determinism.md)
        with _cwnd_probe(ctx) as tracer:
            marks["capture_on"] = _wall(ctx)
            target, cross = _cross(ctx, lab, req, load, target, d)
            target, replay = _replay(lab, load.path or req.path, target)
            with cross as crossed, replay:
                start = _start_on_time(target)
                t0 = time.monotonic()
                summary, har = LOADERS[load.client.loader](ctx.ex, lab, web, loader_proc, load, names, d)
                # elapsed time of the whole client process (DNS, TCP, TLS, every object):
                # on the virtual clock its own CPU costs nothing, so this is network time
                wall_of_load = time.monotonic() - t0
            if (load.path or req.path).trace_down is not None:  # the floor's place in the trace (docs/traces.md)
                summary["trace_start_ms"] = trace_offset_ms(summary.get("started_at"), start,
                                                            time.time() - time.monotonic())
            marks["loaded"] = _wall(ctx)
        cwnd = _write_cwnd(tracer, d / "cwnd.json")
        time.sleep(CAPTURE_DRAIN_S)
        capstats, ccapstats = cap.stop(), ccap.stop()
    marks["captured"] = _wall(ctx)
    collected = _collect(ctx.ex, lab, pcap)
    cdn = cdn_result(ctx.ex, lab, web.cdn, dcap, d / "cdn.pcap", har, names, collected["connections"])
    return {"index": i, "server": load.server.model_dump(mode="json"), "client": load.client.model_dump(mode="json"),
            "names": names, "summary": summary, "har": har, "seeds": seeds, "set_up_s": set_up, "start_s": start,
            "pcap": str(pcap), "client_pcap": str(cpcap), "capture": capstats, "client_capture": ccapstats,
            **collected, **cdn, "load_seconds": round(wall_of_load, 6), "cwnd": cwnd,
            **({"cross": _cross_result(crossed, start, wall_of_load)} if crossed is not None else {})}


PROFILE_DIR = "browser-profile"  # a warm view's browser profile, in the load's folder, removed after it


def _prime_browser(ctx: LabContext, lab: PathLab, web: WebLab, req: PageLoadRequest, load: LoadSpec,
                   name_files: NameFiles | None, d: Path) -> dict | None:
    """A chromium load of a page view the cache serves (spec/browsercfg.warm_view):
    the page loaded once before, by the same browser profile (--prime: the
    page's objects enter its HTTP cache, the page itself does not), over
    the load's path without loss, before the load's set-up, its capture and
    its seeded netem, so the measured load meets a warm cache, fresh
    servers (stopped after) and netem's draws as a run alone does. Returns
    the priming load's summary; None for every other load."""
    c = load.client
    if c.loader != "chromium" or not warm_view(c.cache_hit_ratio, c.seed):
        return None
    names = _set_up_server(ctx.ex, lab, web, load, name_files)
    lab.set_netem(load.path or req.path, loss_on=False, seed=req.seed if load.seed is None else load.seed)
    argv = _browser_argv(lab, web, load, names, d / "prime.har", d / "prime.json", profile_dir=d / PROFILE_DIR,
                         prime=True)
    rc, _timed_out = ctx.ex.run_to_file(argv, lab.client, d / "prime.log", timeout=c.timeout_s + LOADER_GRACE_S)
    web.stop()
    try:
        primed = json.loads((d / "prime.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        primed = {"ok": False, "error": f"the priming load wrote no summary (exit {rc})"}
    return {k: primed.get(k) for k in ("ok", "error", "requests", "requests_failed", "bytes", "plt_ms")}


def _wall(ctx: LabContext) -> float | None:
    return ctx.wall.now() if ctx.wall is not None else None


def _forget_files(ctx: LabContext) -> None:
    """uml: the guest kernel's page, dentry and inode caches dropped before
    every load: a later load of a batch would otherwise find warm what a run
    alone finds cold (the loader's Python modules, read through hostfs), and
    on the virtual clock a cold lookup costs time (docs/determinism.md)."""
    if ctx.private_ovs:
        os.sync()
        ctx.ex.write(DROP_CACHES, "3")


def _cross(ctx: LabContext, lab: PathLab, req: PageLoadRequest, load: LoadSpec, target: float | None,
           d: Path) -> tuple[float | None, AbstractContextManager[CrossRun | None]]:
    """A shared bottleneck's cross traffic (docs/topologies.md), from
    lead_s before the load's start instant, its arrivals drawn from the
    load's seed; the start moves to the first grid point that leaves the
    lead. Nothing for a topology without cross traffic."""
    params = req.topology.params() if req.topology is not None else None
    if not isinstance(params, CrossParams) or not params.active():
        return target, nullcontext(None)
    earliest = math.ceil((time.monotonic() + params.lead_s + LOAD_GRID_S) / LOAD_GRID_S) * LOAD_GRID_S
    start = max(target, earliest) if target is not None else earliest
    horizon = params.lead_s + load.client.timeout_s
    seed = req.seed if load.seed is None else load.seed
    tx = req.topology.graph(web=True).with_role("cross_tx")[0]
    return start, cross_traffic(ctx.ex, lab.nodes, tx, params, seed, start - params.lead_s, horizon, d)


def _cross_result(crossed: CrossRun, start: float, load_s: float) -> dict:
    """The cross traffic's record, with the page load's window on its clock
    (s after the cross traffic started)."""
    a = round(start - crossed.t0_s, 6)
    return {**crossed.result(), "load_window_s": [a, round(a + load_s, 6)]}


def _replay(lab: PathLab, path, target: float | None) -> tuple[float | None, AbstractContextManager]:
    """A traced path's traces replay from the load's start instant, so that
    every load meets the trace at its beginning (docs/traces.md); a path
    without a trace starts as it always did."""
    if path.trace_down is None and path.trace_up is None:
        return target, nullcontext()
    start = target if target is not None else next_grid_point(LOAD_GRID_S)
    return start, lab.replay(path, start)


def _start_on_time(target: float | None) -> float:
    """The load's start: a batch's later load at its slot (run() slept until
    just before it), any other load on the next half-second grid point;
    returns the instant."""
    if target is None:
        return align_to_grid(LOAD_GRID_S)
    if time.monotonic() > target:
        raise RuntimeError(f"the load's set-up ran past its start instant ({target:.3f} s of uptime): it took "
                           "longer than the first load's")
    sleep_until_monotonic(target)
    return target


def _set_up_server(ex: Executor, lab: PathLab, web: WebLab, load: LoadSpec,
                   name_files: NameFiles | None) -> dict[str, str]:
    """The server's kernel settings, Apache and the names of this load;
    returns the names (hostname -> address)."""
    s, c = load.server, load.client
    lab.set_hosts(c.host_spec(), s.host_spec())
    ex.sysctl({"net.ipv4.tcp_congestion_control": s.cc,
               "net.ipv4.tcp_slow_start_after_idle": int(s.slow_start_after_idle)}, host=lab.server)
    ex.run(C.route_window(LAB_PREFIX, lab.server.defaultIntf().name, s.initcwnd_pkts, s.initrwnd_pkts),
           host=lab.server)
    web.apache(s.protocol, s.tls, s.cert)
    names = web.names(c.resolution)
    web.dns(names)
    if name_files is not None:
        write_names(name_files.hosts, names)
    return names


# --- the loaders: (summary, HAR path or None) --------------------------------

def _our_loader(ex: Executor, lab: PathLab, web: WebLab, loader_proc: LoaderProcess | None, load: LoadSpec,
                names: dict[str, str], d: Path) -> tuple[dict, str | None]:
    s, c = load.server, load.client
    argv = C.page_loader(sys.executable, c.target(), ca=web.ca(s.cert),
                         protocol=c.protocol or s.protocol,
                         cache_hit_ratio=c.cache_hit_ratio, seed=c.seed, timeout_s=c.timeout_s,
                         har=d / "page.har", summary=d / "summary.json",
                         dns_server=DNS_IP if c.dns == "cold" else None,
                         resolve=None if c.dns == "cold" else names,
                         coalescing=c.coalescing, tls=c.tls_client, repeat_after_s=c.repeat_after_idle_s,
                         cache_unit=c.cache_unit, schedule=c.schedule)
    timeout = c.timeout_s + (c.repeat_after_idle_s or 0) + LOADER_GRACE_S
    # argv[:3] is `python -m tortoiselab.client`: the loader process runs the rest
    loader_proc.load(argv[3:], d / "loader.log", timeout=timeout)
    summary = json.loads((d / "summary.json").read_text(encoding="utf-8")) if (d / "summary.json").exists() else \
        {"error": "the loader wrote no summary"}
    return summary, str(d / "page.har")


def _nghttp(ex: Executor, lab: PathLab, web: WebLab, loader_proc: LoaderProcess | None, load: LoadSpec,
            names: dict[str, str], d: Path) -> tuple[dict, str | None]:
    """nghttp resolves through the system resolver: the guest's resolv.conf
    points at the lab's DNS server (webtier.guest_name_files)."""
    rc, text, err = ex.capture(C.nghttp(load.client.target()), lab.client, timeout=load.client.timeout_s)
    st = parse_nghttp_stats(text)
    return {"rc": rc, "plt_ms": st["plt_ms"], "requests": st["requests"],
            "error": (err.strip()[-500:] or None) if rc else None,
            "raw": text[-8000:], "stderr": err[-2000:]}, None


def _h2load(ex: Executor, lab: PathLab, web: WebLab, loader_proc: LoaderProcess | None, load: LoadSpec,
            names: dict[str, str], d: Path) -> tuple[dict, str | None]:
    c = load.client
    rc, text, err = ex.capture(C.h2load(c.target(), c.h2load_requests), lab.client, timeout=c.timeout_s)
    try:
        return {"rc": rc, "error": None, **parse_h2load(text), "raw": text[-4000:]}, None
    except ValueError as exc:
        return {"rc": rc, "error": f"{exc}: {err.strip()[-300:]}", "raw": text[-4000:]}, None


def _chromium(ex: Executor, lab: PathLab, web: WebLab, loader_proc: LoaderProcess | None, load: LoadSpec,
              names: dict[str, str], d: Path) -> tuple[dict, str | None]:
    """Chromium through tortoiselab.browser (docs/browser.md), in a PID
    namespace of its own, the lab CA of the certificate variant trusted in a
    private NSS database, names through the lab's DNS (cold) or the load's
    static map (warm). Bounded twice:
    the loader's own watchdog (its --timeout plus slack), then the
    executor's kill at the timeout plus LOADER_GRACE_S, which ends the
    namespace. Afterwards the guest is searched for browser processes left
    running (uml only: there the guest's processes are the lab's alone)."""
    c = load.client
    profile = d / PROFILE_DIR if (d / PROFILE_DIR).exists() else None  # primed: a warm view
    argv = _browser_argv(lab, web, load, names, d / "page.har", d / "summary.json", fault=c.browser_fault,
                         profile_dir=profile)
    t0 = time.monotonic()
    rc, timed_out = ex.run_to_file(argv, lab.client, d / "browser.log", timeout=c.timeout_s + LOADER_GRACE_S)
    try:
        summary = json.loads((d / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        log = (d / "browser.log").read_text(encoding="utf-8", errors="replace").strip()[-500:]
        why = "killed at the lab's timeout" if timed_out else f"exit {rc}"
        summary = {"loader": "chromium", "ok": False, "requests": 0, "plt_ms": None,
                   "error": f"the browser loader wrote no summary ({why} after {time.monotonic() - t0:.1f} s): {log}"}
    if profile is not None:
        shutil.rmtree(profile, ignore_errors=True)  # the cache's copies of the site: not part of the record
        if summary.get("cache") != "warm" and not summary.get("error"):
            summary["error"] = f"the page view was to be warm, the browser says {summary.get('cache')!r}"
    summary["exit_code"] = rc
    summary["processes_left"] = _browser_processes() if lab.ctx.private_ovs else None
    if summary["processes_left"] and not summary.get("error"):
        summary["error"] = f"browser processes left running after the load: {summary['processes_left']}"
    return summary, str(d / "page.har") if (d / "page.har").exists() else None


def _browser_argv(lab: PathLab, web: WebLab, load: LoadSpec, names: dict[str, str], har: Path, summary: Path,
                  **kw) -> list[str]:
    """The browser loader's argv for this load, names cold or warm as the
    client says (kw: browser_loader's fault, profile_dir, prime); on uml
    first io_uring off: the lab kernel's io_uring mmap broke Chromium's
    pages ("Bad page map", the process stuck); without it Chromium and node
    fall back to plain system calls. The guest's kernel is the lab's alone."""
    c = load.client
    if lab.ctx.private_ovs:
        lab.ex.sysctl({"kernel.io_uring_disabled": 2})
    return C.browser_loader(sys.executable, c.target(), ca=web.ca(load.server.cert),
                            resolve=names, timeout_s=c.timeout_s, har=har, summary=summary, protocol=c.protocol,
                            dns_server=DNS_IP if c.dns == "cold" else None, **kw)


BROWSER_COMMS = ("chromium", "chrome", "node")  # Chromium's processes and Playwright's driver


def _browser_processes() -> list[str]:
    """'pid name' of every Chromium or Playwright process in the guest."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                comm = (p / "comm").read_text(encoding="utf-8").strip()
            except OSError:
                continue
            if comm.startswith(BROWSER_COMMS):
                out.append(f"{p.name} {comm}")
    return out


LOADERS: dict[str, Callable[..., tuple[dict, str | None]]] = {
    "loader": _our_loader, "nghttp": _nghttp, "h2load": _h2load, "chromium": _chromium}


def _collect(ex: Executor, lab: PathLab, pcap: Path) -> dict:
    """After a load: the server capture's connections table, parsed here
    once and kept beside it (TABLE, stored with the run: analysis/conntable.py),
    each connection's handshake figures from it, the server's TCP settings
    and its routes, and the client's host settings as its namespace held
    them (docs/hosts.md)."""
    table, parsed = parse_capture(pcap, CWND_PORT) if pcap.exists() else (None, [])
    if table is not None:
        write_json_atomic(pcap.with_name(TABLE), table)
    conns = [handshake_summary(x) for x in parsed]  # a capture not at the sender splits flights by its series
    sysctls = ex.read_sysctls(SERVER_SYSCTLS, host=lab.server)  # "" for a key the namespace lacks
    client = ex.read_sysctls(hostspec.READ_BACK, host=lab.client)
    route = ex.run(C.route_show(), host=lab.server, check=False).strip()
    return {"connections": conns, "conntable": str(pcap.with_name(TABLE)) if table else None,
            "server_sysctls": sysctls, "server_route": route, "client_sysctls": client}


def _cwnd_probe(ctx: LabContext) -> AbstractContextManager:
    """The server's cwnd at every ACK (tcp:tcp_probe on port 443) in the lab
    guest, whose kernel is the lab's alone; on the native backend tracing is
    host-wide and needs root, so it is left off there."""
    if not ctx.private_ovs or not trace.EVENT.exists():
        return nullcontext(None)
    return trace.tcp_probe(CWND_PORT)


def _write_cwnd(tracer: trace.TraceReader | None, out: Path) -> str | None:
    """cwnd.json: [t s, snd_cwnd, current_ssthresh (guest/trace.py: max(snd_ssthresh,
    3/4 cwnd) outside recovery), srtt us, snd_una, snd_nxt] per
    ACK of the connection with the most samples (the page's main one)."""
    if tracer is None:
        return None
    by_conn: dict[int, list] = {}
    for s in tracer.samples():
        by_conn.setdefault(s.dport, []).append([s.t, s.snd_cwnd, s.current_ssthresh, s.srtt_us, s.snd_una, s.snd_nxt])
    if not by_conn:
        return None
    out.write_text(json.dumps(max(by_conn.values(), key=len)), encoding="utf-8")
    return str(out)
