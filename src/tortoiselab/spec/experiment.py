"""Experiments as data: a YAML file, checked by pydantic models that forbid
unknown keys, expanded into runs.

    name: quick
    repetitions: 2
    seed: 1
    path: {rtt_ms: 200, loss_pct: 1, rate_mbit: 10}     # or {region: india-mobile-2017}
    server: {cc: cubic, initcwnd_pkts: 10}
    client: {page: feed.html}
    sweep:
      server.cc: [cubic, hybla]
    exclude:
      - {server.cc: hybla, path.loss_pct: 0}
    grids:                                  # named smaller (or other) sweeps
      ci: {repetitions: 1, sweep: {server.cc: [cubic, hybla]}}

Linked axes: a sweep key that joins fields with "+" takes a list of value
lists and varies those fields together (one point per list), e.g.
``path.rtt_ms+path.loss_pct: [[100, 0], [100, 2], [20, 0]]`` -- a list of
conditions rather than their cross product.

Grids: `tortoise run FILE --grid NAME` runs the file with the grid's
repetitions / sweep / exclude / path / server / client in place of the
file's own (sweep and exclude replace the file's, a grid with its own sweep
drops the file's exclude; path, server and client are merged over it) into
results/<name>@<grid>; without --grid the file's own sweep runs into
results/<name>. Every grid is validated with the file.

Populations (docs/population.md): ``population: {market: india-mobile-2017,
users: 60, seed: 1}`` (sweepable as ``population.market``) draws the
users of a market of topologies/populations.yaml; each point runs once per
user, the user's path and client host in place of path (which must be left
out), the draw recorded as the run's config.population, and every arm of a
user shares its netem seed (paired by user, whatever ``paired`` says).

Maps (docs/maps.md): ``maps: {hybla: {compare: server.cc, control: htcp,
arms: [hybla], rtt_ms: [...], loss_pct: [...]}}`` (spec/maps.py) each
become a grid named ``map-<name>`` (results/<name>@map-<name>), whose
loss-free points run once (``exact_repetitions``).

Every point of the sweep is a complete configuration and is validated as
one, so `tortoise validate` reports every error with its path in the file
(e.g. ``sweep.server.cc[1]``) before anything starts.
"""

from __future__ import annotations

import copy
import hashlib
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, ValidationError, create_model, field_validator, model_validator

from tortoiselab.spec.bounds import MAX_FOLDER_NAME, name_problems, points as sweep_points, size_problem
from tortoiselab.spec.browsercfg import browser_problems
from tortoiselab.spec.hostspec import REGION_HOST
from tortoiselab.spec.idform import id_form
from tortoiselab.spec.maps import MapCfg, as_grid, draws_nothing, grid_name, map_name
from tortoiselab.spec.pathspec import PathSpec, describe_errors
from tortoiselab.spec.population import PopulationCfg, PopulationError, user_configs
from tortoiselab.spec.regionfiles import load_regions, profile_path
from tortoiselab.spec.sweep import canonical as _canonical, relocate as _relocate, set_value as _set, where as sweep_where
from tortoiselab.spec.topologies import TopologyCfg
from tortoiselab.spec.topology import TopologyError
from tortoiselab.spec.sides import ClientCfg, ServerCfg
from tortoiselab.spec.yamlfile import YamlFileError, read_yaml
from tortoiselab.spec.strictnum import NumbersModel
from tortoiselab.spec import cols


class ExperimentError(ValueError):
    """Every problem of an experiment file, one per line, each with its path."""


class _PathCfgBase(NumbersModel):
    """An experiment's path: a region profile and/or explicit values; PathCfg
    adds every PathSpec field, optional, so a new PathSpec field is a path
    setting at once. The values are checked as a PathSpec by resolve()."""

    model_config = ConfigDict(extra="forbid")
    region: str | None = None
    addon: str | None = None

    def resolve(self) -> PathSpec:
        """A region profile (topologies/regions.yaml) with explicit values on
        top, or the explicit values alone."""
        explicit = {k: v for k, v in self.model_dump().items() if k not in ("region", "addon") and v is not None}
        if self.region is None:
            if self.addon is not None:
                raise ValueError("addon needs a region")
            return PathSpec(**explicit)
        base = profile_path(self.region, self.addon)
        return PathSpec(**{**base.model_dump(), **explicit})


# PathSpec's fields without their defaults and bounds: None means "from the
# region, else PathSpec's default", and PathSpec checks the values in resolve()
PathCfg = create_model(
    "PathCfg", __base__=_PathCfgBase, __module__=__name__,
    **{name: (f.annotation | None, Field(None, description=f.description))
       for name, f in PathSpec.model_fields.items()})


class RunConfig(NumbersModel):
    """One point of a sweep: everything a run needs."""

    model_config = ConfigDict(extra="forbid")
    path: PathCfg = Field(default_factory=PathCfg)
    server: ServerCfg = Field(default_factory=ServerCfg)
    client: ClientCfg = Field(default_factory=ClientCfg)
    topology: TopologyCfg | None = Field(None, description="topologies/<name>.py and its parameters; "
                                         "None: wan (left out of the run's config, so run ids stay)")

    @model_validator(mode="after")
    def _browser(self) -> "RunConfig":
        problems = browser_problems(self.server, self.client)
        if problems:
            raise ValueError("; ".join(problems))
        return self


def _check_axes(v: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """Each axis names <section>.<field> (joined by "+" for linked axes,
    whose values are lists with one value per field)."""
    models = {"path": PathCfg, "server": ServerCfg, "client": ClientCfg, "population": PopulationCfg}
    for key, values in v.items():
        fields = key.split("+")
        for f in fields:
            section, _, name = f.partition(".")
            model = models.get(section)
            if section == "topology" and name:
                continue  # checked by the topology's own parameters at every point
            if model is None or name not in model.model_fields:
                raise ValueError(f"sweep axis {key!r}: write <path|server|client>.<field>, e.g. server.cc, "
                                 "population.<field> or topology.<parameter>"
                                 + (" (linked axes join fields with +)" if len(fields) > 1 else ""))
        if len(set(fields)) != len(fields):
            raise ValueError(f"sweep axis {key!r}: a field appears twice")
        if not isinstance(values, list) or not values:
            raise ValueError(f"sweep axis {key!r}: give a list of at least one value")
        if len(fields) > 1:
            for i, val in enumerate(values):
                if not isinstance(val, list) or len(val) != len(fields):
                    raise ValueError(f"sweep axis {key!r}[{i}]: a linked axis takes lists of {len(fields)} "
                                     f"values (one per field), got {val!r}")
    return v


EXACT_REPETITIONS = ("repetitions of a point whose run draws no random number (spec/maps.py draws_nothing: no loss, "
                     "no jitter, no random cross traffic), which the virtual clock repeats exactly; none: repetitions")


class Grid(NumbersModel):
    """A named alternative sweep of an experiment (e.g. ci, reduced)."""

    model_config = ConfigDict(extra="forbid")
    description: str = ""
    repetitions: int | None = Field(None, ge=1, le=10000)
    exact_repetitions: int | None = Field(None, ge=1, le=10000, description=EXACT_REPETITIONS)
    sweep: dict[str, list[Any]] | None = None
    exclude: list[dict[str, Any]] | None = None
    path: dict[str, Any] = Field(default_factory=dict)
    server: dict[str, Any] = Field(default_factory=dict)
    client: dict[str, Any] = Field(default_factory=dict)
    topology: dict[str, Any] = Field(default_factory=dict)
    population: dict[str, Any] = Field(default_factory=dict)
    claims: list[str] | None = None  # study.claim-id: the claims a grid of part of the sweep is powered for

    @field_validator("sweep")
    @classmethod
    def _axes(cls, v: dict[str, list[Any]] | None) -> dict[str, list[Any]] | None:
        return v if v is None else _check_axes(v)

    @field_validator("claims")
    @classmethod
    def _claim_ids(cls, v: list[str] | None) -> list[str] | None:
        bad = [c for c in v or [] if not re.fullmatch(r"[a-z0-9_]+\.[a-z0-9][a-z0-9_\-]*", str(c))]
        if bad:
            raise ValueError(f"claims: {bad[0]!r} is not a claim id; write study.claim-id, e.g. cubic_plus.initcwnd-little-role")
        return v


GRID_NAME = r"^[a-z0-9][a-z0-9_\-]{0,31}$"


class Experiment(NumbersModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_\-]{0,63}$")  # a grid adds @<grid> (apply_grid)
    description: str = ""
    repetitions: int = Field(1, ge=1, le=10000)
    exact_repetitions: int | None = Field(None, ge=1, le=10000, description=EXACT_REPETITIONS)
    seed: int = Field(1, ge=0, lt=2**63)
    paired: bool = Field(False, description="arms share seeds per repetition (common random numbers)")
    path: dict[str, Any] = Field(default_factory=dict)
    server: dict[str, Any] = Field(default_factory=dict)
    client: dict[str, Any] = Field(default_factory=dict)
    topology: dict[str, Any] = Field(default_factory=dict, description="topologies/<name>.py: {name: dumbbell, "
                                     "clients: 2, bulk_flows: 1, ...}; none: wan (docs/topologies.md)")
    population: dict[str, Any] = Field(default_factory=dict, description="{market: india-mobile-2017, users: 60, "
                                       "seed: 1}: a run per drawn user and arm (docs/population.md)")
    sweep: dict[str, list[Any]] = Field(default_factory=dict)
    exclude: list[dict[str, Any]] = Field(default_factory=list)
    grids: dict[str, Grid] = Field(default_factory=dict, description="named sweeps: tortoise run --grid NAME")
    maps: dict[str, MapCfg] = Field(default_factory=dict, description="sensitivity maps: tortoise map FILE "
                                    "(grids map-<name>, docs/maps.md)")

    @field_validator("sweep")
    @classmethod
    def _axes(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        return _check_axes(v)

    @field_validator("grids")
    @classmethod
    def _grid_names(cls, v: dict[str, Grid]) -> dict[str, Grid]:
        for name in v:
            if not re.fullmatch(GRID_NAME, name):
                raise ValueError(f"grid name {name!r}: lower-case letters, digits, - and _, e.g. reduced")
        return v

    @model_validator(mode="after")
    def _map_names(self) -> "Experiment":
        for name in self.maps:
            if not re.fullmatch(GRID_NAME, grid_name(name)):
                raise ValueError(f"maps: map name {name!r}: lower-case letters, digits, - and _, e.g. hybla")
            if grid_name(name) in self.grids:
                raise ValueError(f"maps.{name}: its grid {grid_name(name)!r} is also under grids:; rename one")
        return self


@dataclass(frozen=True)
class RunSpec:
    experiment: str
    run_id: str
    point: dict[str, Any]  # the sweep values of this run
    repetition: int
    seed: int
    config: dict  # the id form (spec/idform.py): what the run id hashes and its record keeps
    path: PathSpec  # the path resolved
    settings: "RunConfig"  # the run's configuration, typed: what the host reads

    def as_dict(self) -> dict:
        return {"experiment": self.experiment, cols.RUN_ID: self.run_id, "point": self.point,
                "repetition": self.repetition, "seed": self.seed, "config": self.config,
                "path": self.path.model_dump()}


def apply_grid(exp: Experiment, grid: str | None) -> Experiment:
    """The experiment as the grid runs it, named <name>@<grid> (its results
    folder); grid None: the file's own sweep, unchanged."""
    if grid is None:
        return exp
    if map_name(grid) in exp.maps:  # a map: its grid (spec/maps.py), arms always paired by seed
        try:
            g = Grid(**as_grid(exp.maps[map_name(grid)]))
        except ValidationError as exc:  # e.g. compare names no field
            lines = describe_errors(exc).replace("sweep: ", "compare: ").splitlines()
            raise ExperimentError("\n".join(f"maps.{map_name(grid)}: {line}" for line in lines)) from None
        return _with_grid(exp.model_copy(update={"paired": True, "maps": {}}), grid, g)
    if grid not in exp.grids:
        have = ", ".join([*sorted(exp.grids), *map(grid_name, exp.maps)]) or "none"
        raise ExperimentError(f"grid: {exp.name} has no grid {grid!r} (its grids: {have}); "
                              "add it under grids: or leave --grid out for the full sweep")
    return _with_grid(exp, grid, exp.grids[grid])


def _with_grid(exp: Experiment, grid: str, g: Grid) -> Experiment:
    """exp with grid `g` (named `grid`) in place of its own sweep."""
    merged = {sec: {**getattr(exp, sec), **getattr(g, sec)} for sec in ("path", "server", "client", "topology",
                                                                        "population")}
    return exp.model_copy(update={
        "name": f"{exp.name.split('@')[0]}@{grid}", "grids": {},
        "repetitions": g.repetitions if g.repetitions is not None else exp.repetitions,
        "exact_repetitions": g.exact_repetitions if g.exact_repetitions is not None else exp.exact_repetitions,
        "sweep": g.sweep if g.sweep is not None else exp.sweep,
        # the file's exclusions name the file's sweep: a grid with a sweep of its own starts without them
        "exclude": g.exclude if g.exclude is not None else (exp.exclude if g.sweep is None else []), **merged})


def load(path: Path, grid: str | None = None) -> Experiment:
    """Parse and check one experiment file and every grid it defines; raise
    ExperimentError listing every problem with its path in the file. With
    `grid`, return the experiment as that grid runs it (apply_grid)."""
    try:
        raw = read_yaml(Path(path), "experiment file")
    except YamlFileError as exc:
        raise ExperimentError(str(exc)) from None
    if not isinstance(raw, dict):
        raise ExperimentError(f"{path}: the file must be a mapping with name, path, server, client, ...")
    try:
        exp = Experiment(**raw)
    except ValidationError as exc:
        raise ExperimentError(describe_errors(exc, hints=_HINTS)) from None
    # spec/bounds.py: names, and sizes before any grid is expanded
    grids = [None, *exp.grids, *map(grid_name, exp.maps)]
    too_large = [p for g in grids if (p := size_problem(apply_grid(exp, g), f"{_where(g)}: " * bool(g)))]
    errors = name_problems(exp) + too_large
    for g in grids if not too_large else []:
        try:
            expand(apply_grid(exp, g))  # every point of every grid and map must be valid too
        except ExperimentError as exc:
            errors.extend(str(exc).splitlines() if g is None else
                          [f"{_where(g)}: {line}" for line in str(exc).splitlines()])
    if errors:
        raise ExperimentError("\n".join(errors))
    return apply_grid(exp, grid)


_HINTS = {("name",): f"give the experiment a name of lower-case letters, digits, - and _, at most {MAX_FOLDER_NAME} "
                     "characters (its results go to results/<name>), e.g. name: quick"}


def _where(grid: str) -> str:
    """Where a grid or map stands in the file: grids.<name> or maps.<name>."""
    return f"maps.{map_name(grid)}" if map_name(grid) else f"grids.{grid}"


def _points(exp: Experiment) -> list[dict[str, Any]]:  # the sweep's points (spec/bounds.py: none above the cap)
    return list(sweep_points(exp, []))


def expand(exp: Experiment) -> list[RunSpec]:
    """Sweep points x repetitions, each validated as a complete run; ids are
    a hash of the resolved configuration and the repetition."""
    errors: list[str] = []
    runs: list[RunSpec] = []
    for i, ex in enumerate(exp.exclude):
        if not ex:
            errors.append(f"exclude[{i}]: an empty exclusion would drop every run; give the axis values to "
                          "leave out, e.g. {server.cc: hybla, path.loss_pct: 0}")
        for k in ex:
            if k not in exp.sweep:
                errors.append(f"exclude: {k!r} is not a sweep axis ({', '.join(exp.sweep) or 'none'})")
    points = sweep_points(exp, errors)  # made as they are used; none when too large (spec/bounds.py)
    n_points = 0
    for n_points, point in enumerate(points, 1):
        base = {"path": copy.deepcopy(exp.path), "server": copy.deepcopy(exp.server),
                "client": copy.deepcopy(exp.client)}
        if exp.topology:
            base["topology"] = copy.deepcopy(exp.topology)
        if exp.population:
            base["population"] = copy.deepcopy(exp.population)
        for k, v in point.items():
            _set(base, k, v)
        where = sweep_where(exp.sweep, point)
        pop = base.pop("population", None)
        try:
            users = user_configs(pop, base) if pop else [(base, None)]
        except PopulationError as exc:
            errors.extend(_relocate(str(exc), point, where))
            continue
        for user_base, user in users:
            made = _configure(user_base, point, where, errors)
            if made is None:
                continue
            conf, resolved, cfg = made
            if user is not None:  # the user's draw, recorded; its index in the point, for pairing
                conf["population"] = user
            run_point = {**point, "population.user": user["user"]} if user else point
            exact = exp.exact_repetitions is not None and draws_nothing(resolved, conf)
            for rep in range(exp.exact_repetitions if exact else exp.repetitions):
                run_id = hashlib.sha256(_canonical({"config": conf, "repetition": rep, "seed": exp.seed})
                                        .encode()).hexdigest()[:12]
                seed_key = ({"user": {k: user[k] for k in ("market", "seed", "user")}, "rep": rep} if user
                            else {"rep": rep} if exp.paired else {"config": conf, "rep": rep})
                seed = int(hashlib.sha256(_canonical({"seed": exp.seed, **seed_key}).encode()).hexdigest()[:15], 16)
                runs.append(RunSpec(exp.name, run_id, run_point, rep, seed, conf, resolved, cfg))
    if not n_points and not errors:
        errors.append("exclude: the exclusions leave no point of the sweep to run; remove one")
    if errors:
        raise ExperimentError("\n".join(dict.fromkeys(errors)))
    return runs


def _configure(base: dict, point: dict[str, Any], where: str,
               errors: list[str]) -> tuple[dict, PathSpec, RunConfig] | None:
    """A configuration checked as a run: (its id form, the path resolved, the
    configuration), or None, errors appended."""
    if "topology" in base and (problems := TopologyCfg.problems(base["topology"])):
        errors.extend(_relocate("\n".join(problems), point, where))
        return None
    try:
        cfg = RunConfig(**base)
        cfg.client = _region_host(cfg, base["client"])
    except ValidationError as exc:
        errors.extend(_relocate(describe_errors(exc), point, where))
        return None
    except ValueError as exc:  # client.host: region without a region's host
        errors.extend(_relocate(str(exc), point, where))
        return None
    try:
        resolved = cfg.path.resolve()
        if cfg.topology is not None:
            resolved = cfg.topology.apply(resolved)  # a cellular last mile's traces and buffer
    except ValidationError as exc:  # the path's values, checked as a PathSpec
        errors.extend(_relocate(describe_errors(exc, prefix="path"), point, where))
        return None
    except TopologyError as exc:  # a path field the topology sets
        errors.append(str(exc))
        return None
    except ValueError as exc:  # region lookups
        msg = str(exc)
        errors.append(msg if msg.startswith("path.") else f"path.region: {msg}")
        return None
    return id_form(cfg.model_dump(), resolved.model_dump()), resolved, cfg  # spec/idform.py: what the id hashes


def _region_host(cfg: RunConfig, client: dict[str, Any]) -> ClientCfg:
    """`client.host: region`: the host the path's region profile names
    (topologies/regions.yaml `host:`), its values under the fields given;
    `client` is the client section as written (validated again as written,
    so its values dump as a named host's would)."""
    if cfg.client.host != REGION_HOST:
        return cfg.client
    if cfg.path.region is None:
        raise ValueError("client.host: region takes the host of the path's region profile; give path.region "
                         "or name a host, e.g. client.host: desktop")
    profile = load_regions().profile(cfg.path.region)
    if profile.host is None:
        raise ValueError(f"client.host: the region profile {cfg.path.region!r} names no host; name one, "
                         "e.g. client.host: desktop")
    try:
        return ClientCfg(**{**client, "host": profile.host})
    except ValidationError as exc:
        raise ValueError(describe_errors(exc, prefix="client")) from None


def run_order(exp: Experiment, runs: list[RunSpec]) -> list[RunSpec]:
    """Randomized order from the experiment's seed, so that slow drifts of
    the machine do not line up with one arm."""
    order = sorted(runs, key=lambda r: r.run_id)
    random.Random(exp.seed).shuffle(order)
    return order
