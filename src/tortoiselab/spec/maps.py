"""Sensitivity maps as data: an experiment file's `maps:` section, each map
one comparison (a control and its arms) over a grid of RTT x loss (and
optionally one more axis, e.g. the object size), which becomes an ordinary
grid of the file named ``map-<name>`` (results/<name>@map-<map>), so the
runner, the store, resume and reuse treat it as any other sweep
(docs/maps.md).

    maps:
      hybla:
        description: where Linux Hybla's first window beats H-TCP's 10
        compare: server.cc
        control: htcp
        arms: [hybla]
        metric: content_download_ms
        better: lower
        client: {page: base.html}
        path: {rate_mbit: 10, jitter_ms: 0}
        rtt_ms: [25, 50, 100, 200, 300]
        loss_pct: [0, 1]
        repetitions: 8
        regions: [india-desktop-2017, china-desktop-2017]
        markets: [india-desktop-2017]

A cell whose path draws no random number (no loss either way, no jitter,
no random cross traffic) runs once: on the virtual clock a repetition would
repeat it to the microsecond (docs/determinism.md); a lossy cell runs
`repetitions` times, arms paired by seed. Pure: no processes, no files but
the region and population files the markers are checked against.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from tortoiselab.spec import cols
from tortoiselab.spec.population import market
from tortoiselab.spec.regionfiles import load_regions
from tortoiselab.spec.strictnum import NumbersModel

MAP_PREFIX = "map-"  # a map's grid: map-<name>, its results folder <experiment>@map-<name>
RTT_AXIS = cols.RTT
LOSS_AXIS = "path.loss_pct+path.loss_up_pct"  # loss both ways: a region's own loss_up_pct does not linger
MIN_LOSSY_REPETITIONS = 6  # below 6 pairs the paired test cannot reach p < 0.05 (sign-flip: 2/2^5 = 0.0625)
OWN_FIELDS = (cols.RTT, cols.LOSS, cols.LOSS_UP)


class MapCfg(NumbersModel):
    """One sensitivity map of an experiment file (`maps.<name>`)."""

    model_config = ConfigDict(extra="forbid")
    description: str = ""
    compare: str = Field(description="the sweep axis the arms differ in, e.g. server.cc, or a linked axis "
                                     "such as server.cc+server.module_params")
    control: Any = Field(description="the control's value of `compare` (a list for a linked axis)")
    arms: list[Any] = Field(min_length=1, description="the arms' values of `compare`, each drawn against the control")
    metric: str = Field(cols.PLT, description="a column of runs.parquet, e.g. plt_ms, content_download_ms")
    better: Literal["lower", "higher"] = Field("lower", description="the side of the metric the claim says the "
                                                                     "arm reaches")
    claimed_pct: tuple[float, float] | None = Field(None, description="the claimed change in %, (low, high); "
                                                                       "none: a direction claim")
    tie_pct: float = Field(0.5, ge=0, le=50, description="an exact cell whose change is within +-tie_pct % "
                                                          "is a tie (the arms' loads differ by the lab's own "
                                                          "microseconds, not by a window)")
    rtt_ms: list[float] = Field(min_length=1, description="the map's RTT axis (path.rtt_ms)")
    loss_pct: list[float] = Field(min_length=1, description="the map's loss axis, both directions")
    size: dict[str, list[Any]] | None = Field(None, description="one more axis, e.g. {client.page: [small.html, "
                                                                 "large.html]}: a panel per value")
    repetitions: int = Field(8, le=200, description="repetitions of a lossy cell (a loss-free one runs once)")
    path: dict[str, Any] = Field(default_factory=dict)
    server: dict[str, Any] = Field(default_factory=dict)
    client: dict[str, Any] = Field(default_factory=dict)
    topology: dict[str, Any] = Field(default_factory=dict)
    regions: list[str] = Field(default_factory=list, description="region profiles (topologies/regions.yaml) "
                                                                 "marked at their RTT and loss")
    markets: list[str] = Field(default_factory=list, description="markets (topologies/populations.yaml) whose "
                                                                 "drawn users are marked")
    users: int = Field(30, ge=1, le=1000, description="users drawn per market for the markers")
    users_seed: int = Field(1, ge=0, lt=2 ** 63, description="the seed of the marked users' draws")

    @field_validator("rtt_ms", "loss_pct")
    @classmethod
    def _ascending(cls, v: list[float]) -> list[float]:
        if any(b <= a for a, b in zip(v, v[1:])):
            raise ValueError(f"give distinct values in ascending order, e.g. [25, 50, 100]; got {v}")
        return v

    @field_validator("repetitions")
    @classmethod
    def _testable(cls, v: int) -> int:
        if v < MIN_LOSSY_REPETITIONS:
            raise ValueError(f"give at least {MIN_LOSSY_REPETITIONS}: with {v} pairs a lossy cell's paired test "
                             f"cannot reach p < 0.05 (the exact sign-flip test's smallest p is 2/2^{v})")
        return v

    @field_validator("regions")
    @classmethod
    def _known_regions(cls, v: list[str]) -> list[str]:
        for i, name in enumerate(v):
            load_regions().profile(name, field=f"regions[{i}]")
        return v

    @field_validator("markets")
    @classmethod
    def _known_markets(cls, v: list[str]) -> list[str]:
        for i, name in enumerate(v):
            market(name, field=f"markets[{i}]")
        return v

    @field_validator("size")
    @classmethod
    def _one_axis(cls, v: dict[str, list[Any]] | None) -> dict[str, list[Any]] | None:
        if v is not None and len(v) != 1:
            raise ValueError("give one axis (a linked axis joins fields with +), e.g. {client.page: "
                             "[small.html, large.html]}")
        return v

    @model_validator(mode="after")
    def _axes_apart(self) -> "MapCfg":
        own = set(OWN_FIELDS)
        for what, key in (("compare", self.compare), *(("size", k) for k in self.size or {})):
            if own & set(key.split("+")):
                raise ValueError(f"{what}: {key!r} is one of the map's own axes (rtt_ms, loss_pct); compare "
                                 "another field, e.g. server.cc")
        if self.size and set(self.compare.split("+")) & set(next(iter(self.size)).split("+")):
            raise ValueError("size: its axis shares a field with compare; give the size another field")
        for arm in self.arms:
            if arm == self.control:
                raise ValueError(f"arms: {arm!r} is the control; give the values compared with it")
        if len({repr(a) for a in self.arms}) != len(self.arms):
            raise ValueError("arms: a value appears twice")
        if self.claimed_pct is not None and self.claimed_pct[0] > self.claimed_pct[1]:
            raise ValueError("claimed_pct: give (low, high) with low <= high, e.g. [-7, -5]")
        return self

    def values(self) -> list[Any]:
        """The compare axis's values: the control first, then the arms."""
        return [self.control, *self.arms]


def grid_name(name: str) -> str:
    """The grid (and the results folder's @-suffix) of map `name`."""
    return f"{MAP_PREFIX}{name}"


def map_name(grid: str | None) -> str | None:
    """The map a grid name stands for (map-<name>), else None."""
    return grid[len(MAP_PREFIX):] if grid and grid.startswith(MAP_PREFIX) else None


def as_grid(m: MapCfg) -> dict[str, Any]:
    """The map as the fields of an experiment's grid (spec/experiment.py
    Grid): the compare axis, RTT, loss (both ways) and the size axis swept;
    repetitions for lossy cells, one run for an exact one."""
    sweep: dict[str, list[Any]] = {m.compare: m.values(), RTT_AXIS: list(m.rtt_ms),
                                   LOSS_AXIS: [[x, x] for x in m.loss_pct], **(m.size or {})}
    return {"description": m.description or f"sensitivity map of {m.compare}", "repetitions": m.repetitions,
            "exact_repetitions": 1, "sweep": sweep, "exclude": [], "path": dict(m.path),
            "server": dict(m.server), "client": dict(m.client), "topology": dict(m.topology)}


def draws_nothing(path: Any, conf: dict[str, Any]) -> bool:
    """True when a run's resolved path (a PathSpec) and configuration draw
    no random number in the lab: no loss either way, no jitter, and no
    random cross traffic (a topology's background web loads arrive by a
    Poisson process); such a run repeats exactly on the virtual clock."""
    topo = conf.get("topology") or {}
    return (path.loss_down_pct == 0 and path.loss_up == 0 and path.jitter_ms == 0
            and not topo.get("web_loads_per_s"))

