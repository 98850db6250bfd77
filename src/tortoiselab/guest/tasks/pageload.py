"""Task `pageload`: a sequence of page loads in one lab boot, each with its
server settings (cc, initial windows, protocol, TLS, certificate variant)
and client settings (page, loader, coalescing, cache hits, resolution).

One load: set the server up, start the captures, wait for its start
instant (guest/tasks/loadtiming.py, docs/determinism.md), run one of the
loaders (guest/loaders/: ours, nghttp, h2load, Chromium, a warm view primed
first: guest/tasks/priming.py), stop the captures and collect what the lab
saw.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from tortoiselab.analysis.conntable import TABLE, parse_capture
from tortoiselab.analysis.flights import handshake_summary
from tortoiselab.guest import commands as C
from tortoiselab.guest import imported, trace
from tortoiselab.guest.cdn import cdn_capture, cdn_node, cdn_result
from tortoiselab.guest.clock import uptime_s
from tortoiselab.guest.executor import Executor
from tortoiselab.guest.loaderproc import LoaderProcess
from tortoiselab.guest.loaders import LOADERS
from tortoiselab.guest.net import LabContext, PathLab, mininet_path
from tortoiselab.guest.record import code_digest, write_json_atomic
from tortoiselab.guest.replay import trace_offset_ms
from tortoiselab.guest.tasks import loadtiming, priming
from tortoiselab.guest.webtier import NameFiles, WebLab, capture, guest_name_files, set_up_server
from tortoiselab.spec import hostspec
from tortoiselab.spec.measured import LoadSummary
from tortoiselab.spec.requests import LAB_DOMAIN, LoadSpec, PageLoadRequest
from tortoiselab.spec.topologies import TopologyCfg
from tortoiselab.spec.topology import SERVER_IP2
from tortoiselab.web import pages
from tortoiselab.web import pki as pkimod

SERVER_SYSCTLS = ("net.ipv4.tcp_congestion_control", "net.ipv4.tcp_no_metrics_save",
                  "net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_sack", "net.ipv4.tcp_timestamps",
                  "net.ipv4.tcp_ecn", "net.ipv4.tcp_wmem", "net.ipv4.tcp_rmem", "net.core.default_qdisc",
                  *(k for k in hostspec.READ_BACK if k not in ("net.ipv4.tcp_wmem", "net.ipv4.tcp_rmem")))
CAPTURE_DRAIN_S = 1.0  # the last packets reach tcpdump (virtual time: costs nothing)
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
                    primed = priming.prime_browser(ctx, lab, web, req, load, name_files, d)
                    if primed is not None and not primed["ok"]:  # else a warm view would be measured cold
                        raise RuntimeError(f"the priming load of this warm page view failed: {primed['error']}")
                    if i == 0:
                        t_set_up = uptime_s()
                    else:
                        target = loadtiming.wait_for_slot(req, first, out["loads"][-1]["sim_end_s"])
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
    names = set_up_server(ctx.ex, lab, web, load, name_files)
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
            target, cross = loadtiming.cross(ctx, lab, req, load, target, d)
            target, replay = loadtiming.replay(lab, load.path or req.path, target)
            with cross as crossed, replay:
                start = loadtiming.start_on_time(target)
                t0 = time.monotonic()
                summary, har = LOADERS[load.client.loader](ctx.ex, lab, web, loader_proc, load, names, d)
                # elapsed time of the whole client process (DNS, TCP, TLS, every object):
                # on the virtual clock its own CPU costs nothing, so this is network time
                wall_of_load = time.monotonic() - t0
            if (load.path or req.path).trace_down is not None:  # the floor's place in the trace (docs/traces.md)
                summary["trace_start_ms"] = trace_offset_ms(summary.get("started_at"), start,
                                                            time.time() - time.monotonic())
            marks["loaded"] = _wall(ctx)
            LoadSummary.model_validate(summary)  # the host stores what it validates (spec/measured.py)
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
            **({"cross": loadtiming.cross_result(crossed, start, wall_of_load)} if crossed is not None else {})}


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
