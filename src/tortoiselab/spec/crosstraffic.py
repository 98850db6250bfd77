"""Cross traffic on a shared bottleneck (the dumbbell topology,
docs/topologies.md): long-lived bulk flows and web-like background page
loads, as data, and their schedule drawn from the run's seed.

- **bulk**: `bulk_flows` TCP flows from xs to xr, each with `bulk_cc`,
  starting `bulk_start_s` after the cross traffic starts and running until
  the measurement ends.
- **web**: background page loads by the clients c2 .. cN from xs, arriving
  as a Poisson process of `web_loads_per_s` (exponential gaps), each a
  transfer of `web_page_bytes` (one connection per load: a page's bytes,
  not its objects), handed to the clients in turn.

The measured load or transfer starts `lead_s` after the cross traffic, so
that the bulk flows are past slow start when it begins.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

from pydantic import Field, ValidationInfo, field_validator

from tortoiselab.spec.pathspec import stock_algorithm
from tortoiselab.spec.topology import TopoParams

CROSS_PORT = 5201  # xs's server for every cross flow


class CrossParams(TopoParams):
    """A shared bottleneck's clients and its cross traffic."""

    clients: int = Field(1, ge=1, le=32, description="clients behind the bottleneck: the measured one and "
                         "clients - 1 that load background pages")
    bulk_flows: int = Field(0, ge=0, le=64, description="long-lived bulk flows xs -> xr")
    bulk_cc: str = Field("cubic", description="the bulk flows' congestion control (a stock algorithm)")
    bulk_start_s: float = Field(0.0, ge=0, le=3600, description="when the bulk flows start, s after the "
                                "cross traffic starts")
    web_loads_per_s: float = Field(0.0, ge=0, le=1000, description="background page loads per second "
                                   "(Poisson arrivals) by clients c2 .. cN; needs clients >= 2")
    web_page_bytes: int = Field(500_000, ge=1, le=10**9, description="bytes of one background page load")
    lead_s: float = Field(5.0, ge=0, le=3600, description="the cross traffic starts this long before the "
                          "measured transfer or page load")

    @field_validator("bulk_cc")
    @classmethod
    def _stock(cls, v: str) -> str:
        return stock_algorithm(v)

    @field_validator("web_loads_per_s")
    @classmethod
    def _web_needs_clients(cls, v: float, info: ValidationInfo) -> float:
        if v > 0 and info.data.get("clients", 2) < 2:
            raise ValueError("background page loads need clients of their own: give clients 2 or more")
        return v

    def active(self) -> bool:
        return self.bulk_flows > 0 or self.web_loads_per_s > 0


@dataclass(frozen=True)
class Flow:
    """One cross flow: who fetches, when (s after the cross traffic
    starts), with which algorithm, how many bytes (None: until stopped)."""

    id: str
    kind: str  # bulk | web
    host: str
    start_s: float
    cc: str
    nbytes: int | None

    def as_dict(self) -> dict:
        return asdict(self)


def schedule(p: CrossParams, seed: int, horizon_s: float) -> list[Flow]:
    """The cross flows that start before horizon_s, from the run's seed:
    the same seed, the same arrivals."""
    flows = [Flow(f"bulk{i}", "bulk", "xr", p.bulk_start_s, p.bulk_cc, None) for i in range(p.bulk_flows)]
    if p.web_loads_per_s > 0:
        rng = random.Random(f"cross-web-{seed}")
        clients = [f"c{i}" for i in range(2, p.clients + 1)]
        t, k = 0.0, 0
        while True:
            t += rng.expovariate(p.web_loads_per_s)
            if t >= horizon_s:
                break
            flows.append(Flow(f"web{k}", "web", clients[k % len(clients)], round(t, 6), "cubic",
                              p.web_page_bytes))
            k += 1
    return flows
