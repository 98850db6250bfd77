"""Task `probe`: measure one path against its configuration."""

from __future__ import annotations

import time

from tortoiselab.analysis.parsers import parse_qdisc_drops
from tortoiselab.guest import commands as C
from tortoiselab.guest.clock import sleep_until_monotonic
from tortoiselab.guest.cross import cross_traffic
from tortoiselab.guest.net import LabContext, PathLab, mininet_path
from tortoiselab.spec.crosstraffic import CrossParams
from tortoiselab.spec.requests import ProbeRequest
from tortoiselab.spec.topologies import TopologyCfg

LOSS_PORTS = {"down": 5002, "up": 5003}
TRACE_BIN_MS = 100  # the bins a replayed trace is compared in (analysis/fidelity.py trace_check)
TRACE_LEAD_S = 0.2  # the replay starts this long after it is set up, on a whole millisecond
BACKHAUL_PORT = 5004
LINK_BUFFER, NETEM = "11:", "1:"  # a traced link's pfifo and the netem in front of it (guest/commands.py)


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
        lab.legs = params.legs  # the CDN set-up: the last mile and the PoP leg (spec/cdn.py)
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
        out["loss_down"] = _loss(lab, req, "down")
        out["loss_up"] = _loss(lab, req, "up")
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
    millisecond just ahead) over the trace window (spec/requests.py
    TraceWindow: the whole trace unless asked otherwise), the traced links'
    counters read every TRACE_BIN_MS from t0 by the replay's own thread,
    and the packets each link's buffer dropped meanwhile."""
    window = req.measure.trace_window(req.path)
    t0 = round(time.monotonic() + TRACE_LEAD_S, 3)
    before = _drops(lab)
    with lab.replay(req.path, t0, sample_ms=TRACE_BIN_MS, offset_ms=window.replay_from_ms) as rep:
        bulk = lab.bulk(window.bulk_seconds(), ss_at_s=1.0)
    after = _drops(lab)
    direction = {lab.down_dev: "down", lab.up_dev: "up"}
    return bulk, {"t0_s": t0, "bin_ms": TRACE_BIN_MS, "changes": rep.stats.changes,
                  "late_max_ns": rep.stats.late_max_ns, "errors": rep.stats.errors,
                  "window": window.model_dump(), "replay_from_ms": window.replay_from_ms,
                  "drops": {d: {"buffer": after[d][0] - before[d][0], "netem": after[d][1] - before[d][1]}
                            for d in before},
                  "samples": {direction[dev]: s for dev, s in rep.stats.samples.items()}}


def _drops(lab: PathLab) -> dict[str, tuple[int, int]]:
    """Per traced direction: (packets its link's buffer dropped, packets
    netem in front of it dropped itself: its random loss, and its own
    limit's overflow) so far, from `tc -s qdisc`; netem's count holds its
    child's too, which is taken off."""
    out = {}
    for dev, d in ((lab.down_dev, "down"), (lab.up_dev, "up")):
        if dev in lab.traced_devs:
            q = parse_qdisc_drops(lab.ex.run(C.qdisc_show(dev)))
            buffer = q.get(LINK_BUFFER, ("", 0))[1]
            out[d] = (buffer, q.get(NETEM, ("", 0))[1] - q.get("10:", ("", 0))[1])
    return out


def _loss(lab: PathLab, req: ProbeRequest, direction: str) -> dict:
    """One-way loss probes in a direction (loss on), paced as
    ProbeMeasure.loss_interval says; on a traced link, the probes its
    buffer dropped (not the path's loss) and those netem dropped."""
    sender, receiver = (lab.server, lab.client) if direction == "down" else (lab.client, lab.server)
    interval = req.measure.loss_interval(req.path, direction)
    before = _drops(lab).get(direction)
    out = lab.udp_loss(sender, receiver, req.measure.loss_probes, interval, port=LOSS_PORTS[direction])
    out["interval_ms"] = interval
    if before is not None:
        after = _drops(lab)[direction]
        out["buffer_drops"], out["netem_drops"] = after[0] - before[0], after[1] - before[1]
    return out
