"""Task `probe`: measure one path against its configuration."""

from __future__ import annotations

import time

from tortoiselab.guest.clock import sleep_until_monotonic
from tortoiselab.guest.cross import cross_traffic
from tortoiselab.guest.net import LabContext, PathLab, mininet_path
from tortoiselab.spec.crosstraffic import CrossParams
from tortoiselab.spec.requests import ProbeRequest
from tortoiselab.spec.topologies import TopologyCfg

LOSS_PORTS = {"down": 5002, "up": 5003}
TRACE_BIN_MS = 100  # the bins a replayed trace is compared in (analysis/fidelity.py trace_check)
TRACE_LEAD_S = 0.2
BACKHAUL_PORT = 5004  # the replay starts this long after it is set up, on a whole millisecond


def run(ctx: LabContext, req: ProbeRequest) -> dict:
    """Fidelity probe of one path: base RTT (ping), bottleneck rate (bulk
    TCP transfer with loss switched off, so the sender can fill the link),
    one-way loss each direction (paced UDP probes, loss on). A traced path
    transfers while its traces replay, and the traced links' bytes per bin
    are read (docs/traces.md)."""
    m = req.measure
    topology = req.topology or TopologyCfg()
    graph = topology.graph(web=False)
    params = topology.params()
    with mininet_path(ctx, graph) as lab:
        lab.backhaul_path = params.backhaul_path()
        lab.configure(req.path, server_cc=req.cc, loss_on=False)
        out: dict = {"devices": {"uplink": lab.up_dev, "downlink": lab.down_dev}}
        # RTT: loss off so every ping answers; the delay line is the same
        out["ping"] = lab.ping(m.ping_count, m.ping_interval_s)
        if lab.backhaul_path is not None:
            out["backhaul"] = _backhaul(lab, req, params, graph.with_role("origin")[0])
        if isinstance(params, CrossParams) and params.active():
            out["bulk"], out["cross"] = _bulk_with_cross(lab, req, params, graph.with_role("cross_tx")[0])
        elif not _traced(req):
            out["bulk"] = lab.bulk(m.bulk_seconds, ss_at_s=1.0)
        else:
            out["bulk"], out["trace"] = _bulk_on_trace(lab, req)
        lab.set_netem(req.path, loss_on=True)
        out["loss_down"] = lab.udp_loss(lab.server, lab.client, m.loss_probes, m.loss_interval_ms,
                                        port=LOSS_PORTS["down"])
        out["loss_up"] = lab.udp_loss(lab.client, lab.server, m.loss_probes, m.loss_interval_ms,
                                      port=LOSS_PORTS["up"])
        out["qdisc"] = lab.qdisc_stats()
        out["seeds"] = lab.seeds
    return out


def _traced(req: ProbeRequest) -> bool:
    return req.path.trace_down is not None or req.path.trace_up is not None


def _backhaul(lab: PathLab, req: ProbeRequest, params, origin_name: str) -> dict:
    """pop: the backhaul's base RTT (PoP to origin) and its rate (a bulk
    transfer origin -> PoP with the origin's algorithm, loss off)."""
    origin = lab.nodes[origin_name]
    lab.ex.sysctl({"net.ipv4.tcp_no_metrics_save": 1, "net.ipv4.tcp_congestion_control": params.origin_cc},
                  host=origin)
    m = req.measure
    return {"ping": lab.ping(m.ping_count, m.ping_interval_s, src=lab.server, dst=origin),
            "bulk": lab.bulk(m.bulk_seconds, port=BACKHAUL_PORT, sender=origin, receiver=lab.server,
                             counter_dev=lab.backhaul_devs[1]),
            "devices": {"up": lab.backhaul_devs[0], "down": lab.backhaul_devs[1]}}


def _bulk_with_cross(lab: PathLab, req: ProbeRequest, params: CrossParams, tx: str) -> tuple[dict, dict]:
    """The bulk transfer sharing the bottleneck with the topology's cross
    traffic, which starts params.lead_s before it (on a whole millisecond,
    from the run's seed); the cross flows' bytes every 100 ms."""
    t0 = round(time.monotonic() + TRACE_LEAD_S, 3)
    horizon = params.lead_s + req.measure.bulk_seconds
    with cross_traffic(lab.ex, lab.nodes, tx, params, lab.seed, t0, horizon, lab.ctx.work) as run:
        sleep_until_monotonic(t0 + params.lead_s)
        start = round(time.monotonic() - t0, 6)  # the bulk's samples count from here (s after t0)
        bulk = lab.bulk(req.measure.bulk_seconds, ss_at_s=1.0)
        bulk["start_s"] = start
    return bulk, run.result()


def _bulk_on_trace(lab: PathLab, req: ProbeRequest) -> tuple[dict, dict]:
    """The bulk transfer while the path's traces replay from t0 (a whole
    millisecond just ahead), the traced links' counters read every
    TRACE_BIN_MS from t0 by the replay's own thread."""
    t0 = round(time.monotonic() + TRACE_LEAD_S, 3)
    with lab.replay(req.path, t0, sample_ms=TRACE_BIN_MS) as rep:
        bulk = lab.bulk(req.measure.bulk_seconds, ss_at_s=1.0)
    direction = {lab.down_dev: "down", lab.up_dev: "up"}
    return bulk, {"t0_s": t0, "bin_ms": TRACE_BIN_MS, "changes": rep.stats.changes,
                  "late_max_ns": rep.stats.late_max_ns, "errors": rep.stats.errors,
                  "samples": {direction[dev]: s for dev, s in rep.stats.samples.items()}}
