"""Populations of users: per market, the distributions a user's path is
drawn from, and a seeded sampler that turns user i of a market into a path
the lab runs (docs/population.md).

``topologies/populations.yaml`` holds one market per region and access type
(``india-mobile-2017``, ``us-desktop-2017``, ...). Each parameter is a
distribution with its reasons: ``source:`` (a short citation of a published
measurement, full references in topologies/README.md, "Sources") and/or
``assumption:`` (why the value is what it is where no measurement gives
it). At least one of them is required.

A distribution is ``fixed: x``, or a log-normal given by its centre
(``median``, or ``mean``: the published speed figures are means) and its
spread (``p90``, or ``spread`` = p90 / median), optionally clipped to
``[min, max]``; ``zero_share`` makes that share of users draw exactly 0
(loss-free users; median and p90 are then those of the users with loss).

Sampling is pure and reproducible: every value of user i is drawn from a
uniform number hashed from (seed, market, i, parameter), so the same seed
gives the same users byte for byte, user i does not depend on how many
users are drawn (growing N keeps the first users), and adding a parameter
does not change the others' draws. The uplink's rate is drawn at the
downlink's quantile (a fast plan is fast both ways); RTT, rate and loss
are drawn independently. Values are rounded (0.1 ms, 0.001
Mbit/s, 0.001 %) so a user's path reads and hashes the same everywhere.
"""

from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import NormalDist
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from tortoiselab.project import REPO_DIR
from tortoiselab.spec.hostspec import named_host
from tortoiselab.spec.pathspec import PathSpec, describe_errors
from tortoiselab.spec.regionfiles import load_regions
from tortoiselab.spec.regions import queue_pkts_from_ms
from tortoiselab.spec.yamlfile import YamlFileError, read_yaml
from tortoiselab.spec.strictnum import NumbersModel

DEFAULT_FILE = REPO_DIR / "topologies" / "populations.yaml"
Z90 = NormalDist().inv_cdf(0.9)  # 1.2816: a log-normal's p90 is median * exp(Z90 * sigma)
MAX_USERS = 100_000


# a distribution's numbers an assumption can be about (min and max are guards, not a model)
ASSUMABLE = ("fixed", "median", "mean", "p90", "spread", "zero_share")


class PopulationError(ValueError):
    """A population file, market or draw that cannot be used; the message
    names the field and what to write instead."""


class _Reasoned(NumbersModel):
    """A value with why it is what it is: a source, an assumption, or both
    (e.g. a sourced median with an assumed spread)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    source: str | None = Field(None, description="short citation of a published measurement")
    assumption: str | None = Field(None, description="why the value is assumed, where no measurement gives it")

    @model_validator(mode="after")
    def _reasoned(self) -> "_Reasoned":
        for k in ("source", "assumption"):
            v = getattr(self, k)
            if v is not None and not v.strip():
                raise ValueError(f"{k}: empty; give a citation (source) or the reason (assumption)")
        if self.source is None and self.assumption is None:
            raise ValueError("give source: (a citation) or assumption: (the reason for the value), or both")
        return self


class Share(_Reasoned):
    """A share of users, 0 to 1."""

    value: float = Field(ge=0, le=1)


class Dist(_Reasoned):
    """One parameter's distribution over users: fixed, or log-normal from
    (median | mean) and (p90 | spread), clipped to [min, max]; zero_share
    of users draw 0."""

    fixed: float | None = Field(None, ge=0)
    median: float | None = Field(None, gt=0)
    mean: float | None = Field(None, gt=0)
    p90: float | None = Field(None, gt=0)
    spread: float | None = Field(None, gt=1, description="p90 / median")
    min: float | None = Field(None, ge=0)
    max: float | None = Field(None, gt=0)
    zero_share: float = Field(0.0, ge=0, le=1, description="share of users that draw exactly 0")
    assumed: tuple[str, ...] | None = Field(
        None, description="which of its numbers the assumption is about (fixed, median, mean, p90, spread, "
                          "zero_share); needed when a source gives the others; without a source: all of them")

    @field_validator("fixed", "median", "mean", "p90", "spread", "min", "max", "zero_share")
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError("must be a finite number")
        return v

    @model_validator(mode="after")
    def _shape(self) -> "Dist":
        self._check_assumed()
        lognormal = [k for k in ("median", "mean", "p90", "spread") if getattr(self, k) is not None]
        if self.fixed is not None:
            if lognormal:
                raise ValueError(f"fixed: give fixed alone or a log-normal ({', '.join(lognormal)}), not both")
            return self
        if (self.median is None) == (self.mean is None):
            raise ValueError("give one centre, median or mean (or fixed: VALUE)")
        if (self.p90 is None) == (self.spread is None):
            raise ValueError("give one spread, p90 or spread (= p90 / median)")
        if self.p90 is not None and self.median is not None and self.p90 <= self.median:
            raise ValueError(f"p90 {self.p90:g} must be above the median {self.median:g}")
        if self.p90 is not None and self.mean is not None:
            raise ValueError("with mean give spread (= p90 / median), not p90")
        if self.min is not None and self.max is not None and self.min >= self.max:
            raise ValueError(f"min {self.min:g} must be below max {self.max:g}")
        return self

    def _check_assumed(self) -> None:
        if self.assumed is None:
            if self.source is not None and self.assumption is not None:
                raise ValueError("assumed: a source and an assumption: name the numbers the assumption is about, "
                                 "e.g. assumed: [spread]")
            return
        if self.assumption is None:
            raise ValueError("assumed: give assumption: (the reason) for the numbers it names")
        bad = [k for k in self.assumed if k not in ASSUMABLE or getattr(self, k) is None]
        if bad or not self.assumed:
            raise ValueError(f"assumed: {', '.join(bad) or '(empty)'}: name numbers this distribution sets, of "
                             f"{', '.join(ASSUMABLE)}")

    def assumed_fields(self) -> tuple[str, ...]:
        """The numbers that are assumptions: `assumed`, or with no source
        every number set (none with a source only)."""
        if self.assumed is not None:
            return self.assumed
        if self.assumption is None or self.source is not None:
            return ()
        return tuple(k for k in ASSUMABLE if (self.zero_share > 0 if k == "zero_share" else getattr(self, k) is not None))

    @property
    def sigma(self) -> float:
        """The log-normal's sigma (0 for a fixed value)."""
        if self.fixed is not None:
            return 0.0
        ratio = self.spread if self.spread is not None else self.p90 / self.median  # type: ignore[operator]
        return math.log(ratio) / Z90

    @property
    def centre(self) -> float:
        """The median of the users that draw a value (a mean becomes the
        log-normal's median, mean * exp(-sigma^2 / 2))."""
        if self.fixed is not None:
            return self.fixed
        if self.median is not None:
            return self.median
        return self.mean * math.exp(-self.sigma ** 2 / 2)  # type: ignore[operator]

    def quantile(self, u: float) -> float:
        """The value at uniform u in (0, 1), before zero_share and clipping."""
        if self.fixed is not None:
            return self.fixed
        return self.centre * math.exp(self.sigma * NormalDist().inv_cdf(u))

    def draw(self, u_zero: float, u: float) -> float:
        """A user's value from two independent uniforms."""
        if u_zero < self.zero_share:
            return 0.0
        x = self.quantile(u)
        if self.min is not None:
            x = max(x, self.min)
        if self.max is not None:
            x = min(x, self.max)
        return x


class Market(NumbersModel):
    """A market's users: one access type and host, and a distribution for
    each path parameter and for the connection a page load finds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str = Field(min_length=1)
    region: str | None = Field(None, description="the regions.yaml profile whose median path this market spreads")
    access: Literal["desktop", "mobile"]
    host: str = Field(description="the client's host (topologies/hosts.yaml)")
    rtt_ms: Dist
    jitter_ms: Dist = Field(description="capped at the user's rtt_ms / 2 (PathSpec's bound)")
    rate_mbit: Dist
    rate_up_mbit: Dist
    loss_pct: Dist
    loss_up_pct: Dist | None = Field(None, description="none: the uplink loses as the downlink (the same draw)")
    bursty_share: Share = Field(description="share of users with loss whose loss comes in bursts (Simple Gilbert)")
    loss_burst_pkts: Dist | None = Field(None, description="mean loss-burst length of the bursty users, packets")
    queue_ms: Dist | None = Field(None, description="buffer in ms at the user's down rate; none: one BDP")
    warm_share: Share = Field(description="share of page loads on a connection left open by the previous load")
    idle_s: Dist = Field(description="a warm load's idle gap since the previous load, s")

    @field_validator("host")
    @classmethod
    def _known_host(cls, v: str) -> str:
        named_host(v)  # HostError is a ValueError: pydantic reports it under the field
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "Market":
        if self.bursty_share.value > 0 and self.loss_burst_pkts is None:
            raise ValueError("loss_burst_pkts: bursty_share is above 0; give the mean burst length, "
                             "e.g. {fixed: 3, assumption: ...}")
        if self.loss_burst_pkts is not None and self.loss_burst_pkts.draw(1.0, 1e-9) < 1:
            raise ValueError("loss_burst_pkts: a mean burst length is at least 1 packet; set min: 1")
        if self.loss_pct.max is None or self.loss_pct.max > 50:
            raise ValueError("loss_pct: give max (at most 50 %), so every draw is a loss a burst can make")
        if self.idle_s.max is None or self.idle_s.max >= 30:
            raise ValueError("idle_s: give max below 30 s, the server's KeepAliveTimeout "
                             "(webroot/httpd.conf.tmpl): a longer gap finds the connection closed")
        for k in ("rtt_ms", "rate_mbit", "rate_up_mbit"):
            d = getattr(self, k)
            if d.zero_share > 0 or (d.fixed is not None and d.fixed <= 0) or (d.fixed is None and d.min is None):
                raise ValueError(f"{k}: every user needs a value above 0: give min: (above 0), no zero_share")
        return self


class Populations(NumbersModel):
    model_config = ConfigDict(extra="forbid")
    version: Literal[1]
    markets: dict[str, Market]


def load_populations(path: Path | None = None) -> Populations:
    """topologies/populations.yaml (or `path`), checked; errors name the
    file and the field. Read once per version of the file (an experiment
    names its market at every point of its sweep)."""
    path = DEFAULT_FILE if path is None else Path(path)
    try:
        st = path.stat()
    except OSError:
        return _read_populations(path)  # read_yaml says what is wrong
    return _cached_populations(str(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=16)
def _cached_populations(path: str, mtime_ns: int, size: int) -> Populations:
    return _read_populations(Path(path))


def _read_populations(path: Path) -> Populations:
    try:
        raw = read_yaml(path, "population file")
    except YamlFileError as exc:
        raise PopulationError(str(exc)) from None
    try:
        pops = Populations.model_validate(raw)
    except ValidationError as exc:
        raise PopulationError(f"{path}:\n{describe_errors(exc)}") from None
    regions = load_regions()
    for name, m in pops.markets.items():
        if m.region is not None and m.region not in regions.profiles:
            raise PopulationError(f"{path}: markets.{name}.region: unknown region profile {m.region!r} "
                                  "(topologies/regions.yaml)")
    return pops


def market(name: str, pops: Populations | None = None, field: str = "population.market") -> Market:
    """One market; an unknown name raises PopulationError naming `field`
    and listing the markets."""
    pops = load_populations() if pops is None else pops
    if name not in pops.markets:
        where = f"{field}: " if field else ""
        raise PopulationError(f"{where}unknown market {name!r} (topologies/populations.yaml); "
                              f"known: {', '.join(pops.markets)}")
    return pops.markets[name]


# --------------------------------------------------------------------------
# Sampling


def uniform(seed: int, market_name: str, user: int, key: str) -> float:
    """A uniform number in (0, 1) from (seed, market, user, key): 52 bits
    of SHA-256, never 0 or 1."""
    h = hashlib.sha256(f"{seed}|{market_name}|{user}|{key}".encode()).digest()
    return (int.from_bytes(h[:7], "big") >> 4) / 2 ** 52 + 2 ** -53


@dataclass(frozen=True)
class User:
    """One drawn user: the path the lab runs, the host, and the connection
    the measured load finds (warm: a second load after idle_s on the
    connection the first left open)."""

    market: str
    index: int
    seed: int
    access: str
    host: str
    warm: bool
    idle_s: float | None
    path: PathSpec
    vary: str = ""

    def record(self) -> dict[str, Any]:
        """What a run records of its user (config.population); `vary` (the
        market's changed numbers, vary_name) only when the market was varied,
        so the run ids of an unvaried market stay as they were."""
        return {"market": self.market, "user": self.index, "seed": self.seed, "access": self.access,
                "host": self.host, "warm": self.warm, "idle_s": self.idle_s, **({"vary": self.vary} if self.vary else {})}

    def path_fields(self) -> dict[str, Any]:
        """The path as an experiment's path section takes it (set fields only)."""
        return self.path.model_dump(exclude_none=True)

    def client_fields(self) -> dict[str, Any]:
        """The client settings the user fixes: its host, and for a warm
        load the idle gap before the measured (second) load."""
        return {"host": self.host, **({"repeat_after_idle_s": self.idle_s} if self.warm else {})}


def _r(x: float, digits: int) -> float:
    return round(x, digits) + 0.0  # -0.0 -> 0.0


def draw_user(m: Market, name: str, seed: int, index: int, connections: str = "mix") -> User:
    """User `index` of market `name` (m its distributions) under `seed`.
    connections: mix (warm with the market's warm_share), cold, or warm."""
    def u(key: str) -> float:
        return uniform(seed, name, index, key)

    def d(key: str, dist: Dist, digits: int, at: str | None = None) -> float:
        """key's value; `at`: at the quantile of that parameter's draw (comonotone)."""
        return _r(dist.draw(u(key + ".zero"), u(at or key)), digits)

    rtt = d("rtt_ms", m.rtt_ms, 1)
    fields: dict[str, Any] = {
        "rtt_ms": rtt, "jitter_ms": min(d("jitter_ms", m.jitter_ms, 1), _r(math.floor(rtt * 5) / 10, 1)),
        "rate_mbit": d("rate_mbit", m.rate_mbit, 3), "rate_up_mbit": d("rate_up_mbit", m.rate_up_mbit, 3, at="rate_mbit"),
        "loss_pct": d("loss_pct", m.loss_pct, 3)}
    if m.loss_up_pct is not None:
        fields["loss_up_pct"] = d("loss_up_pct", m.loss_up_pct, 3)
    lossy = fields["loss_pct"] > 0 or fields.get("loss_up_pct", 0) > 0
    if lossy and m.loss_burst_pkts is not None and u("bursty") < m.bursty_share.value:
        fields["loss_burst_pkts"] = d("loss_burst_pkts", m.loss_burst_pkts, 2)
    if m.queue_ms is not None:
        fields["queue_pkts"] = queue_pkts_from_ms(fields["rate_mbit"], d("queue_ms", m.queue_ms, 1))
    warm = {"mix": u("warm") < m.warm_share.value, "cold": False, "warm": True}[connections]
    idle = d("idle_s", m.idle_s, 1) if warm else None
    try:
        path = PathSpec(**fields)
    except ValidationError as exc:  # a market whose clipping lets a draw out of PathSpec's ranges
        raise PopulationError(f"population.market: {name} user {index} drew a path the lab cannot run: "
                              f"{describe_errors(exc, prefix='path')}; narrow the market's min/max") from None
    return User(name, index, seed, m.access, m.host, warm, idle, path)


def draw_users(name: str, users: int, seed: int, connections: str = "mix",
               pops: Populations | None = None, vary: dict[str, float] | None = None) -> list[User]:
    """Users 0 .. users-1 of market `name` (its numbers changed by `vary`,
    vary_market): draw_user for each. A varied market draws each user from
    the same uniforms as the market itself, so user i differs only where
    the change moves it (common random numbers across settings)."""
    m = vary_market(market(name, pops), vary or {})
    label = vary_name(vary or {})
    return [replace(draw_user(m, name, seed, i, connections), vary=label) for i in range(users)]


def vary_name(vary: dict[str, float]) -> str:
    """A varied market's label: "param.field=value, ..." sorted ("" for none)."""
    return ", ".join(f"{k}={v:g}" for k, v in sorted(vary.items()))


def vary_market(m: Market, vary: dict[str, float], field: str = "population.vary") -> Market:
    """The market with some numbers changed: keys "param.field" (a
    distribution's number, e.g. rate_mbit.spread, loss_pct.zero_share,
    jitter_ms.fixed; a share's value, e.g. warm_share.value), checked as the
    file is. PopulationError naming `field` and the key otherwise."""
    raw = m.model_dump(exclude_none=True)
    for key, value in vary.items():
        param, _, name = key.partition(".")
        sub = raw.get(param)
        allowed = ("value",) if isinstance(getattr(m, param, None), Share) else ASSUMABLE
        if not isinstance(sub, dict) or name not in allowed:
            raise PopulationError(f"{field}.{key}: write <parameter>.<number> of the market, e.g. "
                                  f"rate_mbit.spread or warm_share.value ({name or '(none)'} is not one of "
                                  f"{', '.join(allowed) if isinstance(sub, dict) else 'its parameters'})")
        if name in ("p90", "spread"):  # the spread is given one way
            other = "spread" if name == "p90" else "p90"
            sub.pop(other, None)
            sub["assumed"] = tuple(name if k == other else k for k in sub.get("assumed") or ()) or None
        if name in ("median", "mean") and name not in sub:
            raise PopulationError(f"{field}.{key}: this distribution's centre is "
                                  f"{'mean' if name == 'median' else 'median'}; vary that")
        sub[name] = value
    try:
        return Market.model_validate(raw)
    except ValidationError as exc:
        raise PopulationError(describe_errors(exc, prefix=field)) from None


class PopulationCfg(NumbersModel):
    """An experiment's population (spec/experiment.py): which market, how
    many users, the seed of their draws, and which connections the measured
    loads find. Each user is a run per arm; arms share the user."""

    model_config = ConfigDict(extra="forbid")
    market: str = Field(description="a market of topologies/populations.yaml, e.g. india-mobile-2017")
    users: int = Field(ge=1, le=MAX_USERS, description="users drawn (0 .. users-1)")
    seed: int = Field(1, ge=0, lt=2 ** 63, description="the draws' seed: the same seed, the same users")
    connections: Literal["mix", "cold", "warm"] = Field(
        "mix", description="mix: warm with the market's warm_share; cold: every load opens its connections; "
                           "warm: every load on a connection left open")
    vary: dict[str, float] = Field(default_factory=dict, description="the market's numbers changed for a "
                                   "sensitivity run, e.g. {rate_mbit.spread: 2} (vary_market)")

    @field_validator("market")
    @classmethod
    def _known(cls, v: str) -> str:
        market(v, field="")
        return v

    @model_validator(mode="after")
    def _varies(self) -> "PopulationCfg":
        vary_market(market(self.market, field=""), self.vary, "vary")
        return self

    def draw(self) -> list[User]:
        return draw_users(self.market, self.users, self.seed, self.connections, vary=self.vary)


# client settings a population's user fixes (User.client_fields)
USER_CLIENT = ("host", "repeat_after_idle_s")


def user_configs(pop: dict[str, Any], base: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """An experiment point's population (its `population` section) as one
    configuration per user: `base` (the point's path, server, client, ...)
    with the user's drawn path and client settings, and what the run
    records of the user (User.record). PopulationError, one line per
    problem naming its field, when the population or the point cannot be
    used: a population draws the path and the client's host itself."""
    try:
        cfg = PopulationCfg(**pop)
    except ValidationError as exc:
        raise PopulationError(describe_errors(exc, prefix="population")) from None
    problems = [f"path.{k}: a population draws each user's path (topologies/populations.yaml); leave path "
                "out of an experiment with a population" for k in base.get("path", {})]
    problems += [f"client.{k}: a population's users set it (the access type's host, a warm load's idle gap); "
                 "leave it out" for k in USER_CLIENT if k in base.get("client", {})]
    if problems:
        raise PopulationError("\n".join(problems))
    return [({**base, "path": u.path_fields(), "client": {**base.get("client", {}), **u.client_fields()}},
             u.record()) for u in cfg.draw()]
