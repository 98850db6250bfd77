"""Region path profiles: named, sourced paths for the emulated WAN hop.

``topologies/regions.yaml`` holds one profile per region and access type
(``india-mobile-2017``, ``us-desktop-2017``, ...), the well-known browser
and WebPageTest presets, and add-ons that lengthen a profile's RTT for a
distant origin. Every value a profile sets has a source: a short citation of
a published measurement (full references in ``topologies/README.md``,
"Sources"), or the bare word ``assumption``.

A profile's buffer may be given in milliseconds (``queue_ms``, at the down
rate); it becomes packets as
``queue_pkts = max(2, ceil(rate_mbit * 1e6 / 8 * queue_ms / 1e3 / 1514))``,
computed exactly (decimal values, no float rounding at the boundary).

Users add profiles in their own files (spec/regionfiles.py: which files,
read and merged); `tortoise regions` prints them (spec/regiontable.py).
"""

from __future__ import annotations

import difflib
import math
import re
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from tortoiselab.spec import cols
from tortoiselab.spec.hostspec import HostError, named_host
from tortoiselab.spec.pathspec import FRAME_BYTES, PathError, PathSpec, describe_errors, parse_path
from tortoiselab.spec.strictnum import NumbersModel

ASSUMPTION = "assumption"

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class RegionError(ValueError):
    """A region file or a region name that cannot be used; the message says
    which field, which file and what to write instead."""


# --------------------------------------------------------------------------
# Sources


def _check_source(value: str) -> str:
    text = value.strip()
    if not text:
        raise ValueError("empty source; give a citation or the word 'assumption'")
    if text != value:
        raise ValueError("source has leading or trailing blanks")
    if text.lower() in {"a", "(a)"} or (text.lower().startswith("assum") and text != ASSUMPTION):
        raise ValueError(
            "write an assumption as the bare word 'assumption' and put its "
            "reasoning under notes"
        )
    return value


Source = Annotated[str, AfterValidator(_check_source)]
"""A short citation (topologies/README.md, "Sources") or the literal ``assumption``."""


def is_assumption(source: str) -> bool:
    return source == ASSUMPTION


# --------------------------------------------------------------------------
# Models


def queue_pkts_from_ms(rate_mbit: float, queue_ms: float) -> int:
    """A buffer of ``queue_ms`` at ``rate_mbit`` in full-size frames (>= 2).

    Exact: the decimal values are used as written, so 6.1 Mbit/s x 300 ms is
    228 750 bytes = 151.09 frames -> 152, with no float error at a boundary.
    """
    rate = Fraction(repr(float(rate_mbit)))
    ms = Fraction(repr(float(queue_ms)))
    bytes_ = rate * 1_000_000 / 8 * ms / 1000
    return max(2, math.ceil(bytes_ / FRAME_BYTES))


class RegionPath(NumbersModel):
    """A profile's path: PathSpec's fields, all stated (no silent defaults),
    plus ``queue_ms`` for a buffer given in time."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rtt_ms: float = Field(description="base round-trip time")
    jitter_ms: float = Field(description="delay variation per direction; 0 for none")
    loss_pct: float = Field(description="random loss per direction, percent; 0 for none")
    loss_up_pct: float | None = Field(None, description="client-to-server loss if it differs")
    loss_burst_pkts: float | None = Field(None, description="mean loss-burst length, packets: bursty "
                                                            "(Simple Gilbert) loss; none: independent losses")
    loss_burst_up_pkts: float | None = Field(None, description="client-to-server mean loss-burst length "
                                                               "if it differs")
    rate_mbit: float = Field(description="server-to-client rate, Mbit/s")
    rate_up_mbit: float | None = Field(None, description="client-to-server rate if it differs")
    queue_ms: float | None = Field(None, gt=0, le=60_000,
                                   description="buffer in milliseconds at rate_mbit")
    queue_pkts: int | None = Field(None, description="buffer in packets")

    @field_validator("queue_ms")
    @classmethod
    def _finite_queue(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError("must be a finite number")
        return v

    @model_validator(mode="after")
    def _check(self) -> RegionPath:
        if self.queue_ms is not None and self.queue_pkts is not None:
            raise ValueError("queue_ms: give the buffer as queue_ms or as queue_pkts, not both")
        try:
            PathSpec(**self.pathspec_fields())
        except ValidationError as exc:
            # one "field: problem" line per error; the loader prefixes the location
            raise ValueError(describe_errors(exc)) from None
        return self

    def given(self) -> list[str]:
        """The fields this path sets, in field order."""
        return [k for k in type(self).model_fields if getattr(self, k) is not None]

    def pathspec_fields(self) -> dict[str, Any]:
        fields = {k: getattr(self, k) for k in self.given() if k != "queue_ms"}
        if self.queue_ms is not None:
            fields["queue_pkts"] = queue_pkts_from_ms(self.rate_mbit, self.queue_ms)
        return fields

    def to_pathspec(self) -> PathSpec:
        try:
            return PathSpec(**self.pathspec_fields())
        except ValidationError as exc:
            raise PathError(describe_errors(exc, prefix="path")) from None


PATH_FIELDS = tuple(RegionPath.model_fields)


class Profile(NumbersModel):
    """One named path with a source for every value it sets."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str = Field(min_length=1)
    path: RegionPath
    host: str | None = Field(None, description="the client's host (topologies/hosts.yaml), applied by "
                                               "client.host: region (docs/hosts.md)")
    background_load_pct: float | None = Field(
        None, ge=0, le=100, description="the mean share of the downlink other traffic of the client's network "
        "uses while a page loads, percent; recorded, not yet applied (docs/hosts.md)")
    sources: dict[str, Source]
    notes: dict[str, str] = Field(default_factory=dict,
                                  description="why a value is what it is, by path field")

    @field_validator("host")
    @classmethod
    def _known_host(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                named_host(v)
            except HostError as exc:
                raise ValueError(str(exc)) from None
        return v

    def sourced(self) -> list[str]:
        """The fields that need a source: the path's values, and the background load if given."""
        return self.path.given() + (["background_load_pct"] if self.background_load_pct is not None else [])

    @model_validator(mode="after")
    def _every_value_sourced(self) -> Profile:
        given = self.sourced()
        problems = []
        for k in given:
            if k not in self.sources:
                problems.append(f"sources.{k}: missing; path.{k} needs a citation or the word 'assumption'")
        for k in self.sources:
            if k not in given:
                problems.append(f"sources.{k}: path sets no {k} (it sets {', '.join(given)})")
        for k in self.notes:
            if k not in PATH_FIELDS and k not in given:
                problems.append(f"notes.{k}: not a path field (one of {', '.join(PATH_FIELDS)})")
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def assumptions(self) -> list[str]:
        """The path fields whose source is ``assumption``."""
        return [k for k in self.sourced() if is_assumption(self.sources[k])]

    def to_pathspec(self) -> PathSpec:
        return self.path.to_pathspec()


class Addon(NumbersModel):
    """Extra RTT for an origin far from the client's PoP."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str = ""
    add_rtt_ms: float = Field(gt=0, le=10_000)
    source: Source

    @field_validator("add_rtt_ms")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("must be a finite number")
        return v


class Regions(NumbersModel):
    """The contents of one or more region files."""

    model_config = ConfigDict(extra="forbid")

    version: Literal[1]
    profiles: dict[str, Profile] = Field(default_factory=dict)
    addons: dict[str, Addon] = Field(default_factory=dict)

    # name -> file it came from (filled by the loader)
    _origin: dict[tuple[str, str], Path] = PrivateAttr(default_factory=dict)
    _files: list[Path] = PrivateAttr(default_factory=list)

    @field_validator("profiles", "addons")
    @classmethod
    def _names(cls, v: dict[str, Any]) -> dict[str, Any]:
        for name in v:
            if not _NAME_RE.fullmatch(name):
                raise ValueError(f"name {name!r}: use lowercase letters, digits, '-', '.', '_'")
        return v

    @property
    def files(self) -> list[Path]:
        """The files these profiles were read from, in load order."""
        return list(self._files)

    def origin(self, name: str, kind: str = "profile") -> Path | None:
        return self._origin.get((kind, name))

    def profile(self, name: str, field: str = cols.REGION) -> Profile:
        if name not in self.profiles:
            raise _unknown(field, "region profile", name, list(self.profiles))
        return self.profiles[name]

    def addon(self, name: str, field: str = "path.addon") -> Addon:
        if name not in self.addons:
            raise _unknown(field, "add-on", name, list(self.addons))
        return self.addons[name]

    def path(self, name: str, addon: str | None = None, *,
             field: str = cols.REGION, addon_field: str = "path.addon") -> PathSpec:
        """The PathSpec of profile ``name``, with ``addon``'s RTT added.

        A profile without a buffer keeps the lab default (one BDP), which is
        then one BDP of the lengthened path; a buffer given in ms or packets
        stays as it is."""
        spec = self.profile(name, field).to_pathspec()
        if addon is None:
            return spec
        extra = self.addon(addon, addon_field)
        fields = spec.model_dump(exclude_none=True)
        fields["rtt_ms"] = spec.rtt_ms + extra.add_rtt_ms
        try:
            return parse_path(fields)
        except PathError as exc:
            raise RegionError(f"{addon_field}: {addon!r} on {name!r}: {exc}") from None


def _unknown(field: str, kind: str, name: str, known: list[str]) -> RegionError:
    close = difflib.get_close_matches(name, known, n=len(known) or 1, cutoff=0.6)
    close += [k for k in known if name and name.lower() in k and k not in close]
    ordered = close + sorted(k for k in known if k not in close)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    listing = ", ".join(ordered) if ordered else "(none)"
    return RegionError(f"{field}: unknown {kind} {name!r}{hint}; known: {listing}")
