"""Where region profiles come from (spec/regions.py says what one is): the
shipped ``topologies/regions.yaml``, then the user's files, listed in
``$TORTOISE_REGIONS`` (os.pathsep-separated), else
``~/.config/tortoiselab/regions.yaml`` if it exists. A later file may add
profiles and add-ons, never replace one: a name defined twice is an error
naming both files. A file is read once per content (a cache keyed by its
sha256), through the bounded read (spec/regular.py).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import ValidationError

from tortoiselab.project import REPO_DIR
from tortoiselab.spec import regular
from tortoiselab.spec.pathspec import PathSpec
from tortoiselab.spec.regions import Addon, Profile, RegionError, Regions
from tortoiselab.spec.yamlfile import MAX_BYTES, YamlFileError, excerpt, read_yaml

ENV_VAR = "TORTOISE_REGIONS"
DEFAULT_FILE = REPO_DIR / "topologies" / "regions.yaml"
USER_FILE = Path(".config") / "tortoiselab" / "regions.yaml"  # under $HOME


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
