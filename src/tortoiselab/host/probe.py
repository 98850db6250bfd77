"""`tortoise probe`: boot the lab, report what it is, and measure one path
against its configuration."""

from __future__ import annotations

import json
import math
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from tortoiselab.host import backends
from tortoiselab.analysis.fidelity import (Check, cross_checks, format_table, ge_loss_checks, jitter_checks, loss_check,
                                           order_check, rate_check, rtt_check, trace_check)
from tortoiselab.spec.ccparams import OUR_MODULES
from tortoiselab.spec.pathspec import STOCK_ALGORITHMS, PathSpec, check_algorithm
from tortoiselab.spec.crosstraffic import CrossParams
from tortoiselab.spec.requests import CcCheckRequest, ProbeMeasure, ProbeRequest
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
    uml_userspace: str | None = None  # uml: seccomp | ptrace (backends.uml_userspace)
    topology: dict = field(default_factory=lambda: {"name": "wan"})  # TopologyCfg dump
    cross: dict | None = None  # what shared the bottleneck and the bytes each flow moved

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def as_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k != "checks"}
        d["checks"] = [c.as_dict() for c in self.checks]
        d["ok"] = self.ok
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
            *[f"trace {d:<10} {t['name']} ({t['file']}, sha256 {t['sha256'][:12]})"
              for d in ("down", "up") if (t := p.get(f"trace_{d}"))],
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
    path with random loss, each direction's figures where they differ."""
    def loss(pct: float, burst: float | None) -> str:
        return f"{pct} %" + (f" in bursts of {burst:g} pkts" if burst is not None and pct > 0 else "")
    down, up = loss(path.loss_pct, path.burst_down_pkts), loss(path.loss_up, path.burst_up_pkts)
    text = f"rtt {path.rtt_ms} ms, rate {path.rate_mbit} Mbit/s"
    if path.rate_up != path.rate_mbit:
        text += f" down, {path.rate_up} Mbit/s up"
    text += f", loss {down} per direction" if down == up else f", loss {down} down, {up} up"
    if path.jitter_ms > 0:
        text += f", jitter {path.jitter_ms} ms"
    return text + f", queue {path.queue()} pkts"


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
        checks += _trace_checks(path, task["trace"], m)
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
        model = path.loss_model(direction)
        if model is not None and configured > 0:  # bursty: rate and mean burst, intervals for correlated losses
            rows = ge_loss_checks(direction, model, probes["sent"], probes.get("lost_seqs", []))
        else:
            rows = [loss_check(direction, configured, probes["sent"], probes["received"])]
        checks += [_whole(c, probes["sent"], m.loss_probes, "probes") for c in rows]
    if path.jitter_ms > 0:
        checks += [order_check(d, task[f"loss_{d}"].get("reordered")) for d in ("down", "up")]
    return checks


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


# a replayed trace is compared after the transfer's first second (slow start)
# and up to half a second before its end
TRACE_SKIP_S, TRACE_TAIL_S = 1.0, 0.5


def _trace_checks(path: PathSpec, rec: dict, m: ProbeMeasure) -> list[Check]:
    """The downlink's replayed trace against the trace (the probe's bulk
    transfer saturates the downlink only), and any replay error."""
    check = trace_check("down", path.trace_down, [tuple(s) for s in rec["samples"].get("down", [])],
                        rec["bin_ms"], TRACE_SKIP_S, m.bulk_seconds - TRACE_TAIL_S)
    check = replace(check, note=f"{check.note}; {rec['changes']} rate changes, latest "
                                f"{rec['late_max_ns'] / 1e3:.0f} us after its instant")
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
    info = backends.choose(backend, clock, [cc])
    algos = backends.kernel_algorithms(Path(info.kernel)) if info.kernel else \
        Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    check_algorithm(cc, algos, field="cc")
    if work is None:
        work = Path(tempfile.mkdtemp(prefix="tortoise-probe-"))
    req = ProbeRequest(path=path, cc=cc, switch=switch, seed=seed, module_params=module_params or {},
                       topology=None if topology.name == "wan" else topology,
                       measure=ProbeMeasure.model_validate(measure or {}), ro_paths=trace_folders(path))
    t0 = time.monotonic()
    result = backends.run_task(info, req, work, timeout_s=timeout_s)
    wall = time.monotonic() - t0
    rep = ProbeReport(backend=info.backend, clock=info.clock, kernel_release=result["kernel_release"],
                      algorithms=result["available_cc"], switch=result["switch"], path=path.model_dump(),
                      cc=cc, checks=evaluate(path, result["task"], req.measure, topology, cc), wall_s=wall,
                      topology=topology.model_dump(), cross=result["task"].get("cross"),
                      sim_s=result["uptime_end_s"] - result["uptime_start_s"], work=str(work),
                      modules=result.get("modules", {}), uml_userspace=result.get("uml_userspace"))
    (work / "probe.json").write_text(json.dumps(rep.as_dict(), indent=1))
    return rep


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
