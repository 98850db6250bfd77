"""The lab's topologies: the files in topologies/ (docs/topologies.md).

Each `topologies/<name>.py` is read as Mininet's `mn --custom` reads it (the
file executed into a fresh namespace), and must define `Params` (a
TopoParams), `graph(params, web)` (a Graph) and `topos = {name: Topo
subclass}`. An experiment names one as ``topology: {name: dumbbell,
clients: 3}``; the default, `wan`, is today's one path.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from tortoiselab.project import REPO_DIR
from tortoiselab.spec.pathspec import PathSpec
from tortoiselab.spec.topology import Graph, TopologyError, TopoParams

TOPOLOGY_DIR = REPO_DIR / "topologies"
DEFAULT = "wan"


@dataclass(frozen=True)
class TopologyFile:
    name: str
    params: type[TopoParams]
    graph: Callable[[TopoParams, bool], Graph]
    topo: type


def names() -> list[str]:
    """The topologies the lab has: every topologies/<name>.py."""
    return sorted(p.stem for p in TOPOLOGY_DIR.glob("*.py") if not p.stem.startswith("_"))


@lru_cache(maxsize=None)
def load(name: str) -> TopologyFile:
    """topologies/<name>.py, executed as `mn --custom` does."""
    if name not in names():
        raise TopologyError(f"topology.name: no topology {name!r}; the lab has: {', '.join(names())} "
                            f"(files in {TOPOLOGY_DIR})")
    file = TOPOLOGY_DIR / f"{name}.py"
    ns: dict[str, Any] = {"__name__": f"tortoiselab_topology_{name}"}
    exec(compile(file.read_text(), str(file), "exec"), ns, ns)  # noqa: S102 - the repository's own file, as mn reads it
    for what in ("Params", "graph", "topos"):
        if what not in ns:
            raise TopologyError(f"{file}: defines no {what} (docs/topologies.md)")
    if name not in ns["topos"]:
        raise TopologyError(f"{file}: its topos dict has no entry {name!r}")
    return TopologyFile(name, ns["Params"], ns["graph"], ns["topos"][name])


class TopologyCfg(BaseModel):
    """An experiment's or a probe's topology: a name and its parameters
    (checked by the file's Params: unknown or ill-typed ones are refused,
    naming the field)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    name: str = Field(DEFAULT, description=f"a file in topologies/: {', '.join(names())}")

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


def parse_topology(text: str) -> TopologyCfg:
    """Mininet's `--topo` syntax: ``dumbbell,2,bulk_flows=3``; positional
    values in the order of the file's parameters."""
    from mininet.util import splitArgs  # noqa: PLC0415 - Mininet's own parser, only for this syntax

    name, args, kw = splitArgs(text)
    p = load(name).params.from_args(tuple(args), kw, name)
    try:
        return TopologyCfg(name=name, **p.model_dump(exclude_defaults=True))
    except ValidationError as exc:  # the lab's own refusals (mn-only fields)
        raise TopologyError("\n".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())) from None
