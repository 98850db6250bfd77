"""`tortoise probe`: boot the lab, report what it is, and measure one path
against its configuration."""

from __future__ import annotations

import json
import math
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from tortoiselab.host import backends, labkernel
from tortoiselab.analysis.fidelity import (Check, cross_checks, format_table, ge_loss_checks, jitter_checks, loss_check,
                                           order_check, rate_check, rtt_check, trace_check)
from tortoiselab.spec.ccparams import OUR_MODULES
from tortoiselab.spec.pathspec import STOCK_ALGORITHMS, PathSpec, check_algorithm
from tortoiselab.spec.crosstraffic import CrossParams
from tortoiselab.spec.requests import TRACE_WARMUP_S, CcCheckRequest, ProbeMeasure, ProbeRequest, TraceWindow
from tortoiselab.spec.topologies import TopologyCfg


def known_algorithms() -> list[str]:
    return [*STOCK_ALGORITHMS, *OUR_MODULES]


# slow start and the loss-recovery it ends in take a few RTTs; the rate is
# read after this much of the bulk transfer (scaled up for long RTTs)
RATE_WARMUP_RTTS = 12


@dataclass
class ProbeReport:
    backend: str
    clock: str
    kernel_release: str
    algorithms: list[str]
    switch: str
    path: dict
    cc: str
    checks: list[Check] = field(default_factory=list)
    modules: dict = field(default_factory=dict)  # our modules' parameters as the kernel reports them
    wall_s: float = 0.0
    sim_s: float = 0.0
    work: str = ""
    uml_userspace: str | None = None  # uml: seccomp | ptrace (host/umlcmd.uml_userspace)
    topology: dict = field(default_factory=lambda: {"name": "wan"})  # TopologyCfg dump
    cross: dict | None = None  # what shared the bottleneck and the bytes each flow moved
    links: dict = field(default_factory=dict)  # each traced direction's trace and buffer (traced_links)
    trace_window: dict | None = None  # the part of the trace replayed and checked (spec/requests.py TraceWindow)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def as_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k != "checks"}
        d["checks"] = [c.as_dict() for c in self.checks]
        d["ok"] = self.ok  # not a column: the probe's verdict
        return d

    def text(self) -> str:
        p = self.path
        head = [
            f"backend          {self.backend}",
            f"clock            {self.clock}",
            f"kernel release   {self.kernel_release}",
            *([f"uml userspace    {self.uml_userspace}"] if self.uml_userspace else []),
            f"switch           {self.switch}",
            f"topology         {describe_topology(self.topology)}",
            *[f"cross flow       {f['id']:<8} {f['kind']:<4} {f['cc']:<8} {f['bytes']:>12} bytes"
              for f in (self.cross or {}).get("flows", [])[:12]],
            f"algorithms       {' '.join(sorted(self.algorithms))} ({len(self.algorithms)})",
            f"path             {describe_path(PathSpec(**p))}; server cc {self.cc}",
            *[line for d in ("down", "up") if (t := p.get(f"trace_{d}"))
              for line in trace_lines(d, t, self.links.get(d))],
            *([window_line(self.trace_window, p)] if self.trace_window else []),
            f"time             {self.sim_s:.3f} s in the lab, {self.wall_s:.1f} s wall",
            *[f"module           tcp_{alg}: " + " ".join(f"{k}={v}" for k, v in ps.items())
              for alg, ps in sorted(self.modules.items())],
            "",
        ]
        return "\n".join(head) + format_table(self.checks) + (
            "\n\nfidelity: all within tolerance" if self.ok else "\n\nfidelity: OUT OF TOLERANCE")


def describe_topology(topology: dict) -> str:
    """dumbbell,clients=2,bulk_flows=1: the topology as --topology takes it."""
    return ",".join([topology["name"], *(f"{k}={v}" for k, v in topology.items() if k != "name")])


def describe_path(path: PathSpec) -> str:
    """The probe's one-line summary of a path: as before for a symmetric
    path with random loss, each direction's figures where they differ; a
    traced direction by its trace, mean rate and buffer (the rate and queue
    it overrides are not the link's)."""
    def loss(pct: float, burst: float | None) -> str:
        return f"{pct} %" + (f" in bursts of {burst:g} pkts" if burst is not None and pct > 0 else "")
    down, up = loss(path.loss_pct, path.burst_down_pkts), loss(path.loss_up, path.burst_up_pkts)
    traced = path.trace_down is not None or path.trace_up is not None
    text = f"rtt {path.rtt_ms} ms, " + (", ".join(describe_link(path, d) for d in ("down", "up")) if traced
                                         else f"rate {path.rate_mbit} Mbit/s")
    if path.rate_up != path.rate_mbit and not traced:
        text += f" down, {path.rate_up} Mbit/s up"
    text += f", loss {down} per direction" if down == up else f", loss {down} down, {up} up"
    if path.jitter_ms > 0:
        text += f", jitter {path.jitter_ms} ms"
    return text if traced else text + f", queue {path.queue()} pkts"


def describe_link(path: PathSpec, direction: str) -> str:
    """One direction's bottleneck: its trace (mean rate) and the buffer
    the lab gives it (PathSpec.trace_queue), or its rate and queue."""
    trace = path.trace(direction)
    if trace is None:
        rate = path.rate_mbit if direction == "down" else path.rate_up
        return f"{direction} {rate} Mbit/s, queue {path.queue()} pkts"
    return (f"{direction} trace {trace.name} (mean {trace.mean_rate_bps() / 1e6:.3f} Mbit/s), "
            f"buffer {path.trace_queue(direction)} pkts")


def traced_links(path: PathSpec) -> dict:
    """Each traced direction's figures (Trace.describe: length, mean, 1-s
    min and max, outages) and its buffer in packets, for the report."""
    return {d: {**t.describe(), "buffer_pkts": path.trace_queue(d)}
            for d in ("down", "up") if (t := path.trace(d)) is not None}


def trace_lines(direction: str, trace: dict, link: dict | None) -> list[str]:
    """The header's lines for a traced direction: the file, then (with its
    figures) the rates and buffer, and its outages."""
    head = f"trace {direction:<10} {trace['name']} ({trace['file']}, sha256 {trace['sha256'][:12]})"
    if not link:
        return [head]
    o = link["outages"]
    gaps = (f"{o['count']}, {o['total_ms'] / 1e3:g} s in all, longest {o['longest_ms'] / 1e3:g} s"
            + "".join(f"; {a / 1e3:g}-{b / 1e3:g} s" for a, b in o["intervals_ms"][:3])
            + ("; ..." if o["count"] > 3 else "") if o["count"] else "none")
    return [f"{head}: {link['length_s']:g} s, mean {link['mean_mbit']:g} Mbit/s, {link['rate_bin_ms'] / 1e3:g}-s "
            f"bins {link['min_mbit']:g} to {link['max_mbit']:g} Mbit/s; buffer {link['buffer_pkts']} pkts",
            f"outages {direction:<8} {gaps} (no delivery opportunity for over {o['threshold_ms']} ms; "
            "reported, not loss)"]


def window_line(window: dict, path: dict) -> str:
    """The header's line for the part of the trace replayed, and which
    direction the fidelity table checks against it."""
    checked = ("checked: down (the bulk transfer loads the downlink; the uplink carries its ACKs)"
               if path.get("trace_down") else "not checked: the bulk transfer loads the untraced downlink")
    return f"trace replay     {TraceWindow(**window).describe()}; {checked}"


def evaluate(path: PathSpec, task: dict, measure: ProbeMeasure | None = None,
             topology: TopologyCfg | None = None, cc: str = "cubic") -> list[Check]:
    """Turn the lab's raw measurements into the fidelity table. A figure
    from a measurement that is not whole (fewer pings or probes sent than
    asked for, no bytes moved) is marked out of tolerance with the reason."""
    m = measure or ProbeMeasure()
    ping = task["ping"]
    bulk = task["bulk"]
    if path.jitter_ms > 0:  # the minimum RTT is no base RTT: the mean, and the jitter itself
        rtt_rows = jitter_checks(_untraced(path), ping.get("rtts_ms", []), ping["transmitted"])
    else:
        rtt_rows = [rtt_check(_untraced(path), ping.get("min_ms"), ping["received"], ping["transmitted"])]
    checks = [_whole(c, ping["transmitted"], m.ping_count, "pings") for c in rtt_rows]
    if path.trace_down is None:
        goodput = bulk["client"]["bytes"] * 8 / bulk["client"]["seconds"] if bulk["client"]["seconds"] else None
        warm = max(2.0, RATE_WARMUP_RTTS * path.rtt_ms / 1e3)
        rate = rate_check(path, [tuple(s) for s in bulk["samples"]], warm, goodput)
        checks.append(rate if bulk["client"]["bytes"] else
                      replace(rate, ok=False, note="the bulk transfer moved no bytes"))
    else:
        checks += _trace_checks(path, task["trace"])
    if "backhaul" in task:  # pop: the second leg, against the topology's backhaul path
        checks += _backhaul_checks((topology or TopologyCfg()).params().backhaul_path(), task["backhaul"], m)
    if "cross" in task:
        params = (topology or TopologyCfg()).params()
        fair = None
        if isinstance(params, CrossParams) and params.web_loads_per_s == 0 and params.bulk_cc == cc:
            fair = 100 * params.bulk_flows / (params.bulk_flows + 1)
        checks += cross_checks(task["cross"], bulk, fair)
    for direction, configured in (("down", path.loss_down_pct), ("up", path.loss_up)):
        probes = task[f"loss_{direction}"]
        checks += [_whole(c, probes["sent"], m.loss_probes, "probes") for c in loss_rows(path, direction, probes)]
    if path.jitter_ms > 0:
        checks += [order_check(d, task[f"loss_{d}"].get("reordered")) for d in ("down", "up")]
    return checks


def loss_rows(path: PathSpec, direction: str, probes: dict) -> list[Check]:
    """A direction's loss rows: the probes the path lost against its
    configured loss (random, or bursty: rate and mean burst with intervals
    for correlated losses). On a traced link the probes its buffer dropped
    (a queue overflowing: the link stalled or the probes outran it) are
    counted apart, never as the path's loss; the note says which is which.
    Bursty loss cannot be told from such drops probe by probe, so its rows
    fail when there were any."""
    configured = path.loss_down_pct if direction == "down" else path.loss_up
    sent, received = probes["sent"], probes["received"]
    queued = min(probes.get("buffer_drops") or 0, sent - received)
    model = path.loss_model(direction)
    if model is not None and configured > 0:
        rows = ge_loss_checks(direction, model, sent, probes.get("lost_seqs", []))
        if queued:
            why = f"{queued} of the lost probes were dropped by the traced link's buffer, not by the loss model"
            rows = [replace(c, ok=False, note=f"{why}: not a measurement of it; {c.note}") for c in rows]
    else:
        rows = [loss_check(direction, configured, sent, received + queued)]
    if "buffer_drops" not in probes:
        return rows
    where = (f"netem dropped {probes.get('netem_drops')} probes (the path's random loss, counted above), the traced "
             f"link's buffer {queued} (a queue overflow, not counted as loss); probes every "
             f"{probes.get('interval_ms')} ms, the link at its trace's mean rate")
    return [replace(rows[0], note=f"{rows[0].note}; {where}"), *rows[1:]]


def _backhaul_checks(path: PathSpec, rec: dict, m: ProbeMeasure) -> list[Check]:
    """pop's backhaul: its base RTT (PoP to origin pings) and its rate (a
    bulk transfer origin -> PoP, the backhaul's counters), as for the WAN."""
    ping, bulk = rec["ping"], rec["bulk"]
    rtt = rtt_check(path, ping.get("min_ms"), ping["received"], ping["transmitted"])
    warm = max(2.0, RATE_WARMUP_RTTS * path.rtt_ms / 1e3)
    rate = rate_check(path, [tuple(s) for s in bulk["samples"]], warm)
    return [_whole(replace(rtt, quantity="backhaul RTT"), ping["transmitted"], m.ping_count, "pings"),
            replace(rate, quantity="backhaul rate")]


def _untraced(path: PathSpec) -> PathSpec:
    """The path as the ping saw it: a traced link is a token bucket (HTB,
    docs/traces.md) that an idle link has filled, so a ping frame leaves at
    once, without netem's serialization: an infinite rate for rtt_check."""
    rates = {f"rate_{'' if d == 'down' else 'up_'}mbit": math.inf for d in ("down", "up") if path.trace(d)}
    return path.model_copy(update=rates)


def _trace_checks(path: PathSpec, rec: dict) -> list[Check]:
    """The downlink's replayed trace against the trace over the trace window
    the lab replayed (the probe's bulk transfer saturates the downlink
    only; the replay started TRACE_WARMUP_S of trace time before the
    window), the packets the links' buffers dropped meanwhile, and any
    replay error."""
    window = TraceWindow(**rec["window"])
    until_s = TRACE_WARMUP_S + (window.end_ms - window.start_ms) / 1e3
    check = trace_check("down", path.trace_down, [tuple(s) for s in rec["samples"].get("down", [])],
                        rec["bin_ms"], TRACE_WARMUP_S, until_s, offset_ms=rec["replay_from_ms"],
                        ack_trace=path.trace_up)
    drops = ", ".join(f"{d} {n['buffer']}" + (f" (and netem's delay line {n['netem']})" if n["netem"] else "")
                      for d, n in rec["drops"].items())
    check = replace(check, note=f"{check.note}; {rec['changes']} rate changes, latest "
                                f"{rec['late_max_ns'] / 1e3:.0f} us after its instant; packets the buffers dropped "
                                f"meanwhile (the transfer fills them; not loss): {drops}")
    if rec["errors"]:
        check = replace(check, ok=False, note=f"replay errors: {'; '.join(rec['errors'][:3])}; {check.note}")
    return [check]


def _whole(check: Check, done: int, asked: int, what: str) -> Check:
    if done == asked:
        return check
    return replace(check, ok=False, note=f"only {done} of {asked} {what} sent: not a whole measurement; {check.note}")


def trace_folders(path: PathSpec) -> list[str]:
    """The folders of a path's trace files, for the uml guest to see (a
    file under /tmp is hidden by the guest's own /tmp otherwise)."""
    return sorted({str(t.path.parent) for d in ("down", "up") if (t := path.trace(d)) is not None})


def run_probe(path: PathSpec, cc: str = "cubic", backend: str = "auto", clock: str = "auto",
              work: Path | None = None, measure: ProbeMeasure | dict | None = None, switch: str = "ovs",
              timeout_s: float = backends.TASK_TIMEOUT_S, seed: int = 1,
              module_params: dict[str, dict[str, str]] | None = None,
              topology: TopologyCfg | None = None) -> ProbeReport:
    # names no lab kernel has are refused before even looking for a kernel
    check_algorithm(cc, known_algorithms(), field="cc")
    topology = topology or TopologyCfg()
    path = topology.apply(path)  # a cellular last mile's traces and buffer
    measure = probe_measure(path, measure)
    window = measure.trace_window(path)
    info = backends.choose(backend, clock, [cc])
    algos = labkernel.kernel_algorithms(Path(info.kernel)) if info.kernel else \
        Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text(encoding="utf-8").split()
    check_algorithm(cc, algos, field="cc")
    if work is None:
        work = Path(tempfile.mkdtemp(prefix="tortoise-probe-"))
    req = ProbeRequest(path=path, cc=cc, switch=switch, seed=seed, module_params=module_params or {},
                       topology=None if topology.name == "wan" else topology,
                       measure=measure, ro_paths=trace_folders(path))
    t0 = time.monotonic()
    result = backends.run_task(info, req, work, timeout_s=timeout_s)
    wall = time.monotonic() - t0
    rep = ProbeReport(backend=info.backend, clock=info.clock, kernel_release=result["kernel_release"],
                      algorithms=result["available_cc"], switch=result["switch"], path=path.model_dump(),
                      cc=cc, checks=evaluate(path, result["task"], req.measure, topology, cc), wall_s=wall,
                      topology=topology.model_dump(), cross=result["task"].get("cross"),
                      sim_s=result["uptime_end_s"] - result["uptime_start_s"], work=str(work),
                      modules=result.get("modules", {}), uml_userspace=result.get("uml_userspace"),
                      links=traced_links(path), trace_window=window.model_dump() if window else None)
    (work / "probe.json").write_text(json.dumps(rep.as_dict(), indent=1), encoding="utf-8")
    return rep


def probe_measure(path: PathSpec, measure: ProbeMeasure | dict | None) -> ProbeMeasure:
    """The probe's measurement settings, checked against the path: a traced
    path's bulk transfer lasts its trace window (the whole trace unless
    trace_window_s says otherwise), so a bulk_seconds of its own is refused
    (ValueError naming the field and the fix)."""
    m = measure if isinstance(measure, ProbeMeasure) else ProbeMeasure.model_validate(measure or {})
    if (path.trace_down or path.trace_up) is not None and "bulk_seconds" in m.model_fields_set:
        raise ValueError("measure.bulk_seconds (--bulk-seconds): a traced path's transfer replays its trace window, "
                         "the whole trace by default; give measure.trace_window_s (--trace-window START_S END_S) "
                         "for a part of it")
    return m


def run_cc_check(algorithms: list[str] | None = None, backend: str = "auto", clock: str = "auto",
                 work: Path | None = None, path: PathSpec | None = None,
                 timeout_s: float = backends.TASK_TIMEOUT_S) -> dict:
    """Select each algorithm for the server and read back what ss reports."""
    info = backends.choose(backend, clock, algorithms or ["cubic"])
    if work is None:
        work = Path(tempfile.mkdtemp(prefix="tortoise-cc-"))
    req = CcCheckRequest(path=path or PathSpec(rtt_ms=40, loss_pct=0, rate_mbit=20), algorithms=algorithms)
    result = backends.run_task(info, req, work, timeout_s=timeout_s)
    return {"backend": info.backend, "clock": info.clock, "available_cc": result["available_cc"],
            "kernel_release": result.get("kernel_release"), "uml_userspace": result.get("uml_userspace"),
            **result["task"]}
