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

Users add profiles in their own files: the files listed in
``$TORTOISE_REGIONS`` (os.pathsep-separated), else
``~/.config/tortoiselab/regions.yaml`` if it exists. A later file may add
profiles and add-ons, never replace one: a name defined twice is an error
naming both files.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import math
import os
import re
from collections.abc import Mapping, Sequence
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

from tortoiselab.spec import cols, regular
from tortoiselab.spec.hostspec import HostError, named_host
from tortoiselab.spec.yamlfile import MAX_BYTES, YamlFileError, excerpt, read_yaml
from tortoiselab.spec.pathspec import FRAME_BYTES, PathError, PathSpec, describe_errors, parse_path

ASSUMPTION = "assumption"
ENV_VAR = "TORTOISE_REGIONS"
from tortoiselab.project import REPO_DIR
from tortoiselab.spec.strictnum import NumbersModel
DEFAULT_FILE = REPO_DIR / "topologies" / "regions.yaml"
USER_FILE = Path(".config") / "tortoiselab" / "regions.yaml"  # under $HOME

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


# --------------------------------------------------------------------------
# Loading




def _describe(exc: ValidationError) -> str:
    """One line per problem, each starting with the dotted location of the
    field; a model validator's "field: problem" lines are put under its
    location (profiles.x.path + rtt_ms: ... -> profiles.x.path.rtt_ms: ...)."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        got = err.get("input")
        shown = "" if err["type"] == "missing" or isinstance(got, (dict, list)) else f" (got {excerpt(got)})"
        if err["type"] == "value_error":
            for line in msg.splitlines():
                if loc and _SUBFIELD_RE.match(line):
                    lines.append(f"  {loc}.{line}")
                else:
                    lines.append(f"  {loc}: {line}{shown}" if loc else f"  {line}{shown}")
            continue
        lines.append(f"  {loc}: {msg}{shown}" if loc else f"  {msg}{shown}")
    return "\n".join(lines)


_SUBFIELD_RE = re.compile(r"^[a-z_][a-z0-9_.]*: ")


def read_regions_file(path: Path) -> Regions:
    """One region file, checked; errors name the file and the field. A
    file whose bytes were parsed before is not parsed again: an experiment
    resolves a profile per sweep point, and parsing the profiles took
    0.16 s each (tortoise.yaml's load and expand: 53 s for 323 reads,
    measured 2026-11-27 on a busy 2-core host). A copy is returned, so no
    caller changes another's."""
    path = Path(path)
    data = _regular_file_bytes(path)
    if data is None:
        return _parse_regions_file(path)  # its error names the file and the fix
    digest = hashlib.sha256(data).hexdigest()
    return _parsed(str(path), digest).model_copy(deep=True)


def _regular_file_bytes(path: Path) -> bytes | None:
    """The file's bytes, or None when it is not a readable regular file
    of at most MAX_BYTES (opened non-blocking: a FIFO cannot hang it; spec/regular.py)."""
    try:
        with regular.opened(path) as (fh, st):
            return None if st.st_size > MAX_BYTES else regular.read(fh, MAX_BYTES + 1)
    except (OSError, regular.NotRegularFile):
        return None


@functools.lru_cache(maxsize=32)
def _parsed(path: str, sha256: str) -> Regions:
    """read_regions_file's cache, keyed by the file's path and content."""
    return _parse_regions_file(Path(path))


def _parse_regions_file(path: Path) -> Regions:
    try:
        data = read_yaml(path, "region file")
    except YamlFileError as exc:
        raise RegionError(str(exc)) from None
    if not isinstance(data, dict):
        raise RegionError(f"{path}: expected a mapping with 'version: 1' and 'profiles:'")
    try:
        regions = Regions.model_validate(data)
    except ValidationError as exc:
        raise RegionError(f"{path}:\n{_describe(exc)}") from None
    regions._files = [path]
    regions._origin = {("profile", n): path for n in regions.profiles}
    regions._origin.update({("addon", n): path for n in regions.addons})
    return regions


def merge_regions(files: Sequence[Path]) -> Regions:
    """Read ``files`` in order; a later file may add profiles and add-ons but
    not redefine one. The same file listed twice is read once."""
    profiles: dict[str, Profile] = {}
    addons: dict[str, Addon] = {}
    origin: dict[tuple[str, str], Path] = {}
    read: list[Path] = []
    seen: set[Path] = set()
    for f in files:
        f = Path(f)
        key = f.resolve()
        if key in seen:
            continue
        seen.add(key)
        part = read_regions_file(f)
        for kind, mine, theirs in (("profile", profiles, part.profiles), ("addon", addons, part.addons)):
            for name, value in theirs.items():
                if name in mine:
                    raise RegionError(
                        f"{f}: {kind} {name!r} is already defined in {origin[(kind, name)]}; "
                        f"a region file may add {kind}s but not replace one: give yours another name"
                    )
                mine[name] = value
                origin[(kind, name)] = f
        read.append(f)
    regions = Regions(version=1, profiles=profiles, addons=addons)
    regions._origin = origin
    regions._files = read
    return regions


def user_region_files(environ: Mapping[str, str] | None = None, home: Path | None = None) -> list[Path]:
    """The user's region files: those in $TORTOISE_REGIONS if it is set and
    not empty (each must exist), else ~/.config/tortoiselab/regions.yaml if
    it exists."""
    env = os.environ if environ is None else environ
    value = env.get(ENV_VAR, "")
    if value.strip():
        paths = [Path(p).expanduser() for p in value.split(os.pathsep) if p.strip()]
        for p in paths:
            if not p.is_file():
                raise RegionError(f"{ENV_VAR}: {p}: no such region file")
        return paths
    user = (Path.home() if home is None else Path(home)) / USER_FILE
    return [user] if user.is_file() else []


def load_regions(path: Path | None = None) -> Regions:
    """The region profiles.

    ``path`` given: that file alone. Otherwise the repository's
    ``topologies/regions.yaml`` followed by the user's files
    (:func:`user_region_files`)."""
    if path is not None:
        return merge_regions([Path(path)])
    return merge_regions([DEFAULT_FILE, *user_region_files()])


def profile_path(name: str, addon: str | None = None, *, regions: Regions | None = None) -> PathSpec:
    """The PathSpec of region profile ``name`` (plus add-on ``addon``).
    Loads the profiles with :func:`load_regions` unless ``regions`` is given.
    An unknown name raises :class:`RegionError` naming ``path.region``."""
    regions = load_regions() if regions is None else regions
    return regions.path(name, addon)


# --------------------------------------------------------------------------
# Table (`tortoise regions`)


def _num(v: float) -> str:
    return f"{v:g}"


def _row(name: str, prof: Profile) -> list[str]:
    p = prof.path
    spec = p.to_pathspec()
    rtt = _num(p.rtt_ms) + (f"±{_num(p.jitter_ms)}" if p.jitter_ms else "")
    loss = _num(spec.loss_pct) if spec.loss_up == spec.loss_pct else f"{_num(spec.loss_pct)}/{_num(spec.loss_up)}"
    down_b, up_b = spec.burst_down_pkts, spec.burst_up_pkts
    if down_b is not None or up_b is not None:  # mean loss-burst lengths, packets ("-": random loss)
        b = [("-" if x is None else _num(x)) for x in (down_b, up_b)]
        loss += f" b{b[0]}" if down_b == up_b else f" b{b[0]}/{b[1]}"
    rate = f"{_num(spec.rate_mbit)}/{_num(spec.rate_up)}"
    if p.queue_ms is not None:
        queue = f"{spec.queue()} ({_num(p.queue_ms)} ms)"
    elif p.queue_pkts is not None:
        queue = str(p.queue_pkts)
    else:
        queue = f"{spec.queue()} (BDP)"
    assumed = f"{len(prof.assumptions())}/{len(prof.sourced())}"
    host = (prof.host or "-") + ("" if prof.background_load_pct is None else f" bg{_num(prof.background_load_pct)}%")
    return [name, rtt, loss, rate, queue, host, assumed, prof.description]


def format_regions_table(regions: Regions) -> str:
    """Every profile (name, RTT±jitter, loss down/up, rates down/up, queue in
    packets, assumption-marked values of values set, description), then the
    add-ons and the files read."""
    header = ["profile", "RTT ms", "loss %", "down/up Mbit/s", "queue pkts", "host", "assumed", "description"]
    rows = [_row(n, p) for n, p in regions.profiles.items()]
    out = _align([header, *rows])
    if regions.addons:
        out.append("")
        out += _align([["add-on", "+RTT ms", "source"],
                       *[[n, "+" + _num(a.add_rtt_ms), a.source] for n, a in regions.addons.items()]])
    out.append("")
    out.append(f"{len(rows)} profiles. assumed = values marked 'assumption' / values set; "
               "loss bN = in bursts of N packets on average (Simple Gilbert); "
               "queue (BDP) = no buffer given, one bandwidth-delay product; "
               "host = the client's (topologies/hosts.yaml, applied by client.host: region), "
               "bgN% = background load, recorded, not yet applied.")
    for f in regions.files:
        out.append(f"from {f}")
    return "\n".join(out)


def _align(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in rows]
