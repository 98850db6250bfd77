"""The lab's topologies: one module each in this package, named here
(docs/topologies.md).

Each `spec/topologies/<name>.py` defines `Params` (a TopoParams) and a pure
`graph(params, web)` (a Graph); nothing here imports Mininet or reads a
checkout. Mininet's CLI reads `topologies/<name>.py`, a thin file whose
`topos` builds the same graph through guest/topo.py. An experiment names
one as ``topology: {name: dumbbell, clients: 3}``; the default, `wan`, is
today's one path.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Callable

from pydantic import ConfigDict, Field, ValidationError, model_validator

from tortoiselab.spec.pathspec import PathSpec
from tortoiselab.spec.topologies import cellular, dumbbell, pop, wan
from tortoiselab.spec.topology import Graph, TopologyError, TopoParams
from tortoiselab.spec.strictnum import NumbersModel

DEFAULT = "wan"
_MODULES: dict[str, ModuleType] = {"cellular": cellular, "dumbbell": dumbbell, "pop": pop, "wan": wan}


@dataclass(frozen=True)
class Topology:
    name: str
    params: type[TopoParams]
    graph: Callable[[TopoParams, bool], Graph]


def names() -> list[str]:
    """The topologies the lab has."""
    return sorted(_MODULES)


def load(name: str) -> Topology:
    """The topology `name` (spec/topologies/<name>.py); TopologyError naming
    the field and the lab's topologies for a name it does not have."""
    if name not in _MODULES:
        raise TopologyError(f"topology.name: no topology {name!r}; the lab has: {', '.join(names())} "
                            f"(docs/topologies.md)")
    return Topology(name, _MODULES[name].Params, _MODULES[name].graph)


class TopologyCfg(NumbersModel):
    """An experiment's or a probe's topology: a name and its parameters
    (checked by the topology's Params: unknown or ill-typed ones are refused,
    naming the field)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    name: str = Field(DEFAULT, description=f"a topology of the lab: {', '.join(names())}")

    @model_validator(mode="before")
    @classmethod
    def _null_is_the_default(cls, data: object) -> object:
        """A parameter given as null takes its default and is left out of
        the run's configuration (a sweep's one-server value of cdn_rtt_ms:
        the same run, and run id, as one that names none)."""
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None or k == "name"}
        return data

    @model_validator(mode="after")
    def _params_valid(self) -> "TopologyCfg":
        self.params()
        return self

    @classmethod
    def problems(cls, data: object) -> list[str]:
        """What is wrong with an experiment's `topology:`, one line per
        field (``topology.clients: ...``); [] when it is valid."""
        if not isinstance(data, dict):
            return [f"topology: give a mapping with name and parameters, e.g. {{name: dumbbell, clients: 2}} "
                    f"(got {data!r})"]
        try:
            cls.model_validate(data)
        except TopologyError as exc:
            return str(exc).splitlines()
        except ValidationError as exc:
            return [e["msg"].removeprefix("Value error, ") for e in exc.errors()]
        return []

    def params(self) -> TopoParams:
        cls = load(self.name).params
        for key in self.model_extra or {}:
            field = cls.model_fields.get(key)
            extra = field.json_schema_extra if field is not None else None
            if isinstance(extra, dict) and "mn_only" in extra:
                raise TopologyError(f"topology.{key}: only for mn --custom; in the lab give path.{extra['mn_only']}")
        return load(self.name).params.from_args((), dict(self.model_extra or {}), self.name)

    def graph(self, web: bool) -> Graph:
        return load(self.name).graph(self.params(), web)

    def apply(self, path: PathSpec) -> PathSpec:
        """The path as this topology runs it (a cellular last mile sets its
        traces and buffer); unchanged for a topology that sets nothing."""
        params = self.params()
        params.legs(path)  # a path the topology cannot split over its links: refused now, naming the field
        update = params.path_update()
        if not update:
            return path
        given = [k for k in update if getattr(path, k) is not None]
        if given:
            takes = ", ".join(load(self.name).params.model_fields)
            raise TopologyError(f"path.{given[0]}: the {self.name} topology sets {', '.join(update)}; leave "
                                f"path.{given[0]} out and set it through the topology ({self.name} takes: {takes})")
        return PathSpec.model_validate({**path.model_dump(exclude_none=True), **update})


def split_topo_arg(text: str) -> tuple[str, list, dict]:
    """Mininet's `--topo` syntax, ``name,a,b,k=v``, split into the name,
    the positional values and the keyword ones, each value an int, else a
    float, else the text as typed (as `mn --topo` passes them to a Topo)."""
    def value(v: str) -> int | float | str:
        for kind in (int, float):
            try:
                return kind(v)
            except ValueError:
                pass
        return v

    name, *parts = text.split(",")
    args = [value(p) for p in parts if "=" not in p]
    kw = {k: value(v) for k, _, v in (p.partition("=") for p in parts if "=" in p)}
    return name, args, kw


def parse_topology(text: str) -> TopologyCfg:
    """Mininet's `--topo` syntax: ``dumbbell,2,bulk_flows=3``; positional
    values in the order of the topology's parameters."""
    name, args, kw = split_topo_arg(text)
    p = load(name).params.from_args(tuple(args), kw, name)
    try:
        return TopologyCfg(name=name, **p.model_dump(exclude_defaults=True))
    except ValidationError as exc:  # the lab's own refusals (mn-only fields)
        raise TopologyError("\n".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())) from None
