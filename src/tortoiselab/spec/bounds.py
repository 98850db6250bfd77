"""How large an experiment may be, checked before anything is built
(docs/inputs.md): the number of runs of a sweep, counted from the lengths
of its axes without building the sweep, and the length of an experiment's
name in every place it goes. Pure functions of a checked
Experiment (spec/experiment.py); each problem names the field, the limit
and the fix.

The sweep's cap is what the runner can finish: one machine runs about 800
to 2,500 runs an hour (a boot per run, or batches of 8: docs/kernel-7.3.md;
populations 1,200-1,400: docs/population.md), about 1,600 on the whole, so
100,000 runs are some 60 hours (2.5 days) of one machine, or of N machines
with --shard i/N. The shipped experiments have 9,600 at most.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Iterator
from typing import Any

MAX_RUNS = 100_000
RUNS_PER_HOUR = 1_600  # measured, see the module's doc

# The lab CA's common name is "Tortoise Lab CA <folder name>" and its RSA
# root's "... RSA" (web/pki.py make_pki); X.509 allows 64 characters for a
# common name (RFC 5280, ub-common-name). The folder name is <name> or
# <name>@<grid>: at most 64 - 16 - 4 = 44 characters.
CN_MAX = 64
CA_LABEL, RSA_SUFFIX = "Tortoise Lab CA ", " RSA"
MAX_FOLDER_NAME = CN_MAX - len(CA_LABEL) - len(RSA_SUFFIX)

# exclusions counted exactly by inclusion-exclusion up to this many (2^k
# subsets at most), else by walking the excluded axes' product up to
# ENUMERATE_MAX points; beyond both the count is the sweep's product (an
# upper bound)
EXACT_EXCLUSIONS = 12
ENUMERATE_MAX = 100_000
# what the exclusions cost before a run is counted or built: the points of
# the sweep before them (each walked once, tested against the exclusions) and
# the exclusions themselves (the shipped experiments: 2,700 points and 52
# exclusions at most)
MAX_SWEEP_POINTS = 100_000
MAX_EXCLUSIONS = 1_000
# each point is tested once per set of axes the exclusions name (about 0.2 us
# a test): at most this many tests, some 0.5 s (the shipped: 124 points x 1 set at most)
MAX_EXCLUSION_TESTS = 2_000_000


def _frozen(value: Any) -> Any:
    """A hashable stand-in for a YAML value, equal (==) where the values are:
    lists as tuples, mappings and sets as frozensets."""
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return frozenset((k, _frozen(v)) for k, v in value.items())
    if isinstance(value, set):
        return frozenset(value)
    return value


def _classes(values: list[Any]) -> tuple[list[int], dict[Any, int]]:
    """(each value's class, the class of each distinct value): the index of
    the first value equal to it, so that equal values test alike."""
    first: dict[Any, int] = {}
    return [first.setdefault(_frozen(v), i) for i, v in enumerate(values)], first


def _excluded_test(keys: list[str], classes: dict[str, tuple[list[int], dict[Any, int]]],
                   exclude: list[dict[str, Any]]) -> Callable[[tuple[int, ...]], bool]:
    """Whether a point, given as the classes of its values on `keys`, matches
    an exclusion (as `all(point.get(k) == v)` would): one set lookup per
    set of axes the exclusions name, not one test per exclusion. A key that
    is no axis is None at every point (expand reports the key)."""
    shapes: dict[tuple[int, ...], set[Any]] = {}
    for ex in exclude:
        if any(k not in classes and v is not None for k, v in ex.items()):
            continue  # None never equals the value: no point matches
        named = sorted((keys.index(k), classes[k][1].get(_frozen(v), -1)) for k, v in ex.items() if k in classes)
        if any(c < 0 for _, c in named):
            continue  # a value the axis does not have
        shape = tuple(i for i, _ in named)
        shapes.setdefault(shape, set()).add(tuple(c for _, c in named))
    if () in shapes:
        return lambda point: True  # an exclusion that names no axis drops every point
    tests = [(operator.itemgetter(*shape), wanted if len(shape) > 1 else {c for (c,) in wanted})
             for shape, wanted in shapes.items()]
    return lambda point: any(get(point) in wanted for get, wanted in tests)


def _subset_count(sweep: dict[str, list[Any]], constraints: list[dict[str, Any]]) -> int:
    """Points of the sweep that match every exclusion of `constraints`."""
    merged: dict[str, list[Any]] = {}
    for ex in constraints:
        for k, v in ex.items():
            merged.setdefault(k, []).append(v)
    n = 1
    for k, size in ((k, len(vals)) for k, vals in sweep.items()):
        if k not in merged:
            n *= size
            continue
        n *= sum(1 for val in sweep[k] if all(val == w for w in merged[k]))
        if n == 0:
            return 0
    # a key that is no axis: a point has None there (expand reports the key)
    return n if all(all(w is None for w in ws) for k, ws in merged.items() if k not in sweep) else 0


def _walk(sweep: dict[str, list[Any]], exclude: list[dict[str, Any]]) -> Iterator[tuple[int, ...]]:
    """The indices of the sweep's points the exclusions leave, in the
    sweep's order, one at a time."""
    keys = list(sweep)
    classes = {k: _classes(sweep[k]) for k in keys}
    excluded = _excluded_test(keys, classes, exclude)
    indices = itertools.product(*(range(len(sweep[k])) for k in keys))
    for index, point in zip(indices, itertools.product(*(classes[k][0] for k in keys))):
        if not excluded(point):
            yield index


def sweep_points(sweep: dict[str, list[Any]], exclude: list[dict[str, Any]]) -> tuple[int, bool]:
    """(points of the sweep left by the exclusions, whether that is exact):
    the product of the axes' lengths, less the excluded points, counted
    without building the sweep. Exact by inclusion-exclusion over up to
    EXACT_EXCLUSIONS exclusions, or by walking the excluded axes alone (up to
    ENUMERATE_MAX of their points); otherwise the product, an upper bound."""
    total = math.prod(len(v) for v in sweep.values())
    if not all(exclude):
        return 0, True  # an empty exclusion drops every point (expand says so)
    live = list(exclude)
    if not live:
        return total, True
    if len(live) <= EXACT_EXCLUSIONS:
        n = 0
        for size in range(len(live) + 1):
            for subset in itertools.combinations(live, size):
                n += (-1) ** size * _subset_count(sweep, list(subset))
        return n, True
    axes = sorted({k for ex in live for k in ex if k in sweep})
    sub = math.prod(len(sweep[k]) for k in axes)
    if sub > ENUMERATE_MAX:
        return total, False
    left = sum(1 for _ in _walk({k: sweep[k] for k in axes}, live))
    return left * (total // sub if sub else 0), True


def _users(exp: Any) -> int:
    """The most users a point draws (1 without a population)."""
    values = [exp.population.get("users")] if exp.population else []
    for key, vals in exp.sweep.items():
        fields = key.split("+")
        if "population.users" in fields:
            i = fields.index("population.users")
            values += [v[i] if len(fields) > 1 and isinstance(v, list) and len(v) > i else v for v in vals]
    if "population.market" in exp.sweep and not values:
        return 1
    ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool) and v >= 1]
    return max(ints, default=1)


def run_count(exp: Any) -> tuple[int, bool]:
    """(runs of the experiment, exact or an upper bound): points x users x
    repetitions, from the sweep's axes alone."""
    points, exact = sweep_points(exp.sweep, exp.exclude)
    users = _users(exp)
    fixed_users = not any("population.users" in k.split("+") for k in exp.sweep)
    return points * users * exp.repetitions, exact and fixed_users


def exclusion_problem(exp: Any, where: str = "") -> str | None:
    """Why the exclusions would cost too much to apply, with the fix: more
    than MAX_EXCLUSIONS of them, or a sweep of more than MAX_SWEEP_POINTS
    points before them (each point is walked to leave the excluded ones out);
    None if neither."""
    if len(exp.exclude) > MAX_EXCLUSIONS:
        return (f"{where}exclude: {len(exp.exclude):,} exclusions; at most {MAX_EXCLUSIONS:,} are accepted (each "
                "is tested at every point of the sweep): leave values out of the sweep's axes instead, or name "
                "fewer axes in an exclusion ({server.cc: hybla} drops every hybla point)")
    total = math.prod(len(v) for v in exp.sweep.values())
    if exp.exclude and total > MAX_SWEEP_POINTS:
        axes = " x ".join(str(len(v)) for v in exp.sweep.values())
        return (f"{where}sweep: {total:,} points ({axes} values) before the exclusions; at most "
                f"{MAX_SWEEP_POINTS:,} are accepted with an exclude: list (every point is walked to leave the "
                "excluded ones out): give the sweep's axes fewer values, or split it into grids (grids:, "
                "tortoise run --grid NAME)")
    shapes = len({frozenset(ex) for ex in exp.exclude})
    if total * shapes > MAX_EXCLUSION_TESTS:
        return (f"{where}exclude: the exclusions name {shapes:,} different sets of axes, each tested at every one "
                f"of the sweep's {total:,} points: {total * shapes:,} tests, at most {MAX_EXCLUSION_TESTS:,} are "
                "accepted: name the same axes in every exclusion (e.g. each {server.cc: ..., path.loss_pct: ...}), "
                "or give the sweep's axes fewer values")
    return None


def size_problem(exp: Any, where: str = "") -> str | None:
    """Why the experiment is too large to run, with the fix; None if it is
    not. The exclusions' own cost (exclusion_problem) is checked first, so
    that counting the runs is bounded too."""
    problem = exclusion_problem(exp, where)
    if problem:
        return problem
    runs, exact = run_count(exp)
    if runs <= MAX_RUNS:
        return None
    axes = " x ".join(str(len(v)) for v in exp.sweep.values()) or "1"
    users = _users(exp)
    hours = runs / RUNS_PER_HOUR
    return (f"{where}sweep: {'' if exact else 'up to '}{runs:,} runs ({axes} values"
            f"{f' x {users:,} users' if users > 1 else ''} x {exp.repetitions} repetitions"
            f"{', less the exclusions' if exp.exclude else ''}), about {hours:,.0f} hours at the "
            f"~{RUNS_PER_HOUR:,} runs an hour one machine runs; at most {MAX_RUNS:,} runs (about "
            f"{MAX_RUNS / RUNS_PER_HOUR:.0f} hours) are accepted: give fewer values or repetitions, or a smaller "
            "grid (grids:, tortoise run --grid NAME)")


def name_problems(exp: Any) -> list[str]:
    """A name (and <name>@<grid> of each grid) longer than the lab CA's
    certificate name can hold, with the limit and the fix."""
    out = []
    if len(exp.name) > MAX_FOLDER_NAME:
        out.append(f"name: {exp.name[:20]!r}... is {len(exp.name)} characters; at most {MAX_FOLDER_NAME} fit every "
                   f"place it goes (the lab CA's certificate name {CA_LABEL!r} + name + {RSA_SUFFIX!r}, "
                   f"{CN_MAX} characters at most by X.509); give a shorter name")
        return out
    for grid in [*exp.grids, *(f"map-{m}" for m in getattr(exp, "maps", {}))]:  # a map's grid: spec/maps.py
        folder = f"{exp.name}@{grid}"
        if len(folder) > MAX_FOLDER_NAME:
            out.append(f"grids.{grid}: its folder {folder!r} is {len(folder)} characters; at most "
                       f"{MAX_FOLDER_NAME} fit the lab CA's certificate name ({CA_LABEL!r} + name@grid + "
                       f"{RSA_SUFFIX!r}, {CN_MAX} characters by X.509); give a shorter name or grid name")
    return out


def points(exp: Any, errors: list[str]) -> Iterator[dict[str, Any]]:
    """The sweep's points left by the exclusions, made one at a time in the
    sweep's order as they are consumed, when the experiment is within its
    bounds (size_problem, checked at once); else none, the reason appended
    to errors."""
    problem = size_problem(exp)
    if problem:
        errors.append(problem)
        return iter(())
    keys = list(exp.sweep)
    return ({k: exp.sweep[k][i] for k, i in zip(keys, index)} for index in _walk(exp.sweep, exp.exclude))


# --- what a reader of a results folder reads at most (docs/inputs.md, "Files a reader reads") ---------
#
# A results folder is untrusted input (docs/faults.md): each of its files is
# sized by fstat on the descriptor that would read it, and refused above its
# bound (or, for a run's files, above the size its manifest records) before
# one byte is read or hashed. The bounds are far above what the lab writes
# (tests/data/runs: run.json 7 KB, a run's manifest.json 1 KB, .lab's site
# manifest 77 KB, cwnd.json 64 KB, server.pcap 420 KB at most) and far below
# what a reader can hold: a record is parsed whole into Python objects (some
# 10 times its bytes), a capture is hashed and parsed (snaplen 128: about 150
# bytes a packet, so 1 GiB is some 7 million packets, a 25-minute load at
# 8 Mbit/s is 1.5 million).

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
READ_BOUNDS: dict[str, int] = {
    "run.json": 16 * MiB,  # one run's record (host/store)
    "manifest.json": 16 * MiB,  # a run's manifest (host/verify.py), .lab/site's (web/pages.py)
    "pki.json": 1 * MiB,  # .lab/pki's (web/pki.py)
    "experiment.yaml": 1 * MiB,  # spec/yamlfile.MAX_BYTES
    "experiment.json": 64 * KiB,  # the folder's version: three keys (host/versions.py)
    "runs.parquet": 256 * MiB,  # the runs table, one row per run (host/store)
    "connections.json": 64 * MiB,  # server.pcap's connections table (host/store/captures.py)
    "cwnd.json": 64 * MiB,  # tcp_probe samples, one per ACK (guest/trace.py)
    "page.har": 64 * MiB,  # the load's timeline, no bodies (client/har.py, browser/)
    ".pcap": 1 * GiB,  # captures: server.pcap, client.pcap, cdn.pcap
    ".log": 64 * MiB,  # the lab's logs copied into a failed run's folder (host/citelogs.py)
}
READ_BOUND_OTHER = 64 * MiB  # any other file of a results folder (map.json, figures, ...)

# runs.parquet: the row count and sizes come from its footer (Parquet's
# FileMetaData) before a value is decoded; a table has one row per run
# folder, and up to TABLE_EXTRA_ROWS more are decoded so that `verify` can
# name each (a row without a run record: an edit, a run moved away); the
# columns are host/columns.py's (about 70; a table of another version's
# columns is rebuilt all the same).
TABLE_EXTRA_ROWS = 1_000
TABLE_MAX_COLUMNS = 1_000
TABLE_MAX_UNCOMPRESSED = 1 * GiB  # the footer's uncompressed bytes of all column chunks


def read_bound(name: str) -> int:
    """The most bytes a reader reads of a results folder's file named `name`
    (its last component): READ_BOUNDS by name, else by suffix, else
    READ_BOUND_OTHER."""
    if name in READ_BOUNDS:
        return READ_BOUNDS[name]
    suffix = name[name.rfind("."):] if "." in name else ""
    return READ_BOUNDS.get(suffix, READ_BOUND_OTHER)


def size_words(n: int) -> str:
    """n bytes as a person reads them: '1,572,864,000 bytes (1.5 GiB)'."""
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= size:
            return f"{n:,} bytes ({n / size:.1f} {unit})"
    return f"{n:,} bytes"
