"""Topologies as pure graphs (no Mininet here); guest/topo.py's GraphTopo
turns one into Mininet's Topo, which the lab (guest/net.py) and `mn
--custom` (topologies/<name>.py) build (docs/topologies.md)."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from tortoiselab.spec.strictnum import NumbersModel


@dataclass(frozen=True)
class Host:
    name: str
    ip: str


@dataclass(frozen=True)
class Graph:
    hosts: tuple[Host, ...]
    switches: tuple[str, ...]
    links: tuple[tuple[str, str], ...]
    wan: tuple[str, str]  # the one link that carries the emulation
    # hosts with a part beyond client, server and dns: "cross_rx" (receives
    # the bulk cross traffic), "cross_tx" (sends it), "web" (background loads)
    roles: tuple[tuple[str, str], ...] = ()
    # a second emulated link (pop: the PoP-to-origin backhaul), shaped by the
    # topology's backhaul_path(); down = away from the client's side
    backhaul: tuple[str, str] | None = None

    def with_role(self, role: str) -> list[str]:
        return [h for h, r in self.roles if r == role]

    def validate(self) -> None:
        names = {h.name for h in self.hosts} | set(self.switches)
        if len({frozenset(link) for link in self.links}) < len(self.links):
            raise ValueError(f"links {self.links}: two links join the same nodes")
        for a, b in self.links:
            if a not in names or b not in names:
                raise ValueError(f"link {a}-{b} names a node that is not in the graph")
        if self.wan not in self.links:
            raise ValueError(f"wan link {self.wan} is not one of the links")
        if self.backhaul is not None and (self.backhaul not in self.links or self.backhaul == self.wan):
            raise ValueError(f"backhaul link {self.backhaul} is not one of the links, or is the wan link")


# client -- s1 -- WAN -- s2 -- server
ONE_PATH = Graph(
    hosts=(Host("client", "10.0.0.1/8"), Host("server", "10.0.0.2/8")),
    switches=("s1", "s2"),
    links=(("client", "s1"), ("s1", "s2"), ("s2", "server")),
    wan=("s1", "s2"),
)


# The web path: as ONE_PATH, plus a DNS server on the server's side of the
# WAN (every lookup pays the path's round trip, like a cold lookup at a far
# authoritative server). The server also answers on a second address
# (SERVER_IP2) for the "two IPs" resolution scenario.
WEB_PATH = Graph(
    hosts=(Host("client", "10.0.0.1/8"), Host("server", "10.0.0.2/8"), Host("dns", "10.0.0.53/8")),
    switches=("s1", "s2"),
    links=(("client", "s1"), ("s1", "s2"), ("s2", "server"), ("s2", "dns")),
    wan=("s1", "s2"),
)
SERVER_IP2 = "10.0.0.3"


# --- topology definitions (spec/topologies/<name>.py) ---------------------
#
# Each holds a parameter model (a TopoParams) and a pure `graph(params,
# web)`; nothing here imports Mininet (docs/topologies.md).


class TopologyError(ValueError):
    """Topology parameters that cannot be built; the message names the field."""


class TopoParams(NumbersModel):
    """A topology's parameters: units in names, unknown keys refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @classmethod
    def from_args(cls, args: tuple, kw: dict, topology: str) -> "TopoParams":
        """The parameters as Mininet's `--topo name,a,b,k=v` passes them
        (positional in field order, strings as typed) or as an experiment
        gives them; TopologyError naming each bad field otherwise."""
        names = list(cls.model_fields)
        if len(args) > len(names):
            raise TopologyError(f"topology {topology}: {len(args)} positional values but only "
                                f"{len(names)} parameters ({', '.join(names)})")
        data = {**dict(zip(names, args)), **kw}
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise TopologyError("\n".join(_describe(exc, topology, cls))) from None

    def path_update(self) -> dict:
        """Path fields this topology sets (a cellular last mile's traces)."""
        return {}

    def backhaul_path(self):
        """The second emulated link's PathSpec (pop), None for one link."""
        return None

    def legs(self, path):
        """(the WAN link's PathSpec, the second emulated link's or None) for
        a run's path: the path and backhaul_path() unless the topology
        splits the path over both links (the dumbbell's CDN: spec/cdn.py)."""
        return path, self.backhaul_path()

    def mn_links(self) -> dict[str, dict]:
        """Mininet TCLink options (mn_shaping) of the graph's emulated links
        under `mn --custom`, by which ("wan", "backhaul"); the lab sets its
        own netem on them instead (guest/net.py)."""
        return {}


# the bottleneck's figures for `mn --custom` (the last parameters of a file
# that has them); in the lab the experiment's path sets the bottleneck, and
# a topology: that gives them is refused (spec/topologies/__init__.py)
MN_ONLY_RTT = Field(200.0, ge=0, le=10_000, json_schema_extra={"mn_only": "rtt_ms"},
                    description="mn --custom only: the bottleneck's round-trip time, ms")
MN_ONLY_RATE = Field(10.0, gt=0, le=1000, json_schema_extra={"mn_only": "rate_mbit"},
                     description="mn --custom only: the bottleneck's rate, Mbit/s")


def mn_shaping(rtt_ms: float, rate_mbit: float) -> dict:
    """TCLink options of an emulated link for Mininet's CLI: half the RTT
    on each of its two interfaces, the rate on both."""
    return {"delay": f"{rtt_ms / 2:g}ms", "bw": rate_mbit}


def _describe(exc: ValidationError, topology: str, model: type[BaseModel]) -> list[str]:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        field = model.model_fields.get(str(err["loc"][0])) if err["loc"] else None
        hint = field.description if field is not None and field.description else ""
        if err["type"] == "extra_forbidden":
            hint = f"{topology} takes: {', '.join(model.model_fields)}"
        msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"topology.{loc}: {msg} (got {err.get('input')!r})" + (f"; {hint}" if hint else ""))
    return lines
