"""When a load starts (docs/determinism.md): on a half-second grid point, or
a batch's later load at a whole number of spacings after the first, with a
shared bottleneck's cross traffic started its lead before the load
(docs/topologies.md) and a traced path's replay from the load's start
(docs/traces.md)."""

from __future__ import annotations

import math
import time
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from tortoiselab.guest.clock import align_to_grid, next_grid_point, sleep_until_monotonic
from tortoiselab.guest.cross import CrossRun, cross_traffic
from tortoiselab.guest.net import LabContext, PathLab
from tortoiselab.spec.crosstraffic import CrossParams
from tortoiselab.spec.requests import LoadSpec, PageLoadRequest


LOAD_GRID_S = 0.5  # tcpdump is attached within it; every load starts on a grid point
REAL_SETTLE_S = 1.0  # real clock: the quiet gap between a batch's loads


def wait_for_slot(req: PageLoadRequest, first: dict | None, prev_end: float) -> float | None:
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


def cross(ctx: LabContext, lab: PathLab, req: PageLoadRequest, load: LoadSpec, target: float | None,
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


def cross_result(crossed: CrossRun, start: float, load_s: float) -> dict:
    """The cross traffic's record, with the page load's window on its clock
    (s after the cross traffic started)."""
    a = round(start - crossed.t0_s, 6)
    return {**crossed.result(), "load_window_s": [a, round(a + load_s, 6)]}


def replay(lab: PathLab, path, target: float | None) -> tuple[float | None, AbstractContextManager]:
    """A traced path's traces replay from the load's start instant, so that
    every load meets the trace at its beginning (docs/traces.md); a path
    without a trace starts as it always did."""
    if path.trace_down is None and path.trace_up is None:
        return target, nullcontext()
    start = target if target is not None else next_grid_point(LOAD_GRID_S)
    return start, lab.replay(path, start)


def start_on_time(target: float | None) -> float:
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
