"""Bounded inputs (issue 35, item 5; spec/bounds.py, spec/pathspec.py,
spec/trace.py): a sweep counted without being built and refused above what
the runner can finish, rates and times netem can hold, traces bounded by
size and lines before they are read, names that fit the lab CA's
certificate name. Each refusal names the field, the limit and the fix."""

from __future__ import annotations

import itertools
import json
import os
import resource
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID
from hypothesis import given, settings
from hypothesis import strategies as st

from tortoiselab.guest.commands import netem, netem_seed
from tortoiselab.project import PKG_DIR
from tortoiselab.spec.experiment import ExperimentError, expand, load
from tortoiselab.spec.pathspec import PathError, PathSpec, parse_path
from tortoiselab.spec.trace import Trace
from tortoiselab.tools.netem_seed import netem_options
from tortoiselab.web.pki import make_pki

SRC = PKG_DIR.parent  # the child runs the code under test
MAX_TRACE_LINES, MAX_TRACE_BYTES = 1_000_000, 16 * 1024 * 1024  # spec/trace.py's


def _bounds():
    """spec/bounds.py, imported by the tests that use it alone (the others
    run, and fail, against the code before it existed)."""
    from tortoiselab.spec import bounds
    return bounds


def _write(tmp_path: Path, text: str, name: str = "e.yaml") -> Path:
    f = tmp_path / name
    f.write_text(text)
    return f


# --- the sweep's size --------------------------------------------------------

def _brute(sweep: dict, exclude: list) -> int:
    keys = list(sweep)
    pts = [dict(zip(keys, c)) for c in itertools.product(*(sweep[k] for k in keys))] or [{}]
    return sum(1 for p in pts if not any(all(p.get(k) == v for k, v in ex.items()) for ex in exclude))


_axes = st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.lists(st.integers(0, 3), min_size=1, max_size=4),
                        max_size=4)


@settings(max_examples=300, deadline=None)
@given(_axes, st.data())
def test_the_sweep_is_counted_as_expand_would_build_it(sweep, data):
    keys = st.sampled_from([*sweep, "z"]) if sweep else st.just("z")
    exclude = data.draw(st.lists(st.dictionaries(keys, st.integers(0, 3), min_size=1, max_size=3), max_size=16))
    n, exact = _bounds().sweep_points(sweep, exclude)
    if exact:
        assert n == _brute(sweep, exclude)
    else:
        assert n >= _brute(sweep, exclude)


def test_a_billion_points_are_counted_at_once():
    sweep = {"a": list(range(1000)), "b": list(range(1000)), "c": list(range(1000))}
    bounds = _bounds()
    assert bounds.sweep_points(sweep, []) == (10**9, True)
    assert bounds.sweep_points(sweep, [{"a": 1}, {"b": 2}]) == (10**9 - 2 * 10**6 + 1000, True)
    many = [{"a": i} for i in range(bounds.EXACT_EXCLUSIONS + 2)]  # past inclusion-exclusion: axis a walked alone
    assert bounds.sweep_points(sweep, many) == (10**9 - len(many) * 10**6, True)
    assert bounds.sweep_points(sweep, many + [{"b": 1, "c": 2}]) == (10**9, False)  # a, b, c: too many to walk


BIG = ("name: big\npath: {loss_pct: 0}\nsweep:\n"
       "  path.rtt_ms: [" + ", ".join(str(i) for i in range(1, 1001)) + "]\n"
       "  path.rate_mbit: [" + ", ".join(str(i) for i in range(1, 1001)) + "]\n"
       "  client.cache_hit_ratio: [" + ", ".join(str(i / 1000) for i in range(1000)) + "]\n")
# the child's own peak: VmHWM, the high-water mark of the memory it exec'd into
# (getrusage's ru_maxrss keeps the forking pytest's, folded in at exec)
_MEASURE = """
import json, sys, time
from tortoiselab.cli import main
t = time.monotonic()
rc = main(sys.argv[1:])
seconds = time.monotonic() - t
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"rc": rc, "seconds": seconds, "peak_mb": int(hwm.split()[1]) / 1024}))
"""


def _limit_memory() -> None:  # the child: 1 GB of address space at most (the unfixed code took it all)
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def _measured(tmp_path: Path, text: str, command: str, timeout_s: int) -> tuple[subprocess.CompletedProcess, dict]:
    """`tortoise <command>` on an experiment file of this text, in a child
    under _limit_memory: the process and its measure (_MEASURE's rc,
    seconds, peak_mb); `run` with --results tmp_path/results."""
    f = _write(tmp_path, text)
    argv = [str(f)] + (["--results", str(tmp_path / "results")] if command == "run" else [])
    p = subprocess.run([sys.executable, "-c", _MEASURE, command, *argv], capture_output=True, text=True,
                       timeout=timeout_s, preexec_fn=_limit_memory, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(SRC)})
    assert p.stdout, p.stderr[-2000:]
    return p, json.loads(p.stdout.splitlines()[-1])


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_sweep_of_a_billion_points_is_refused_in_a_second_and_200_mb(tmp_path, command):
    """Seen: 10^6 points, validate still running after 60 s at 1.2 GB;
    10^9: MemoryError under ulimit -v 3G, without it the machine's memory."""
    p, out = _measured(tmp_path, BIG, command, timeout_s=120)
    assert out["rc"] == 2
    assert "sweep: 1,000,000,000 runs (1000 x 1000 x 1000 values x 1 repetitions)" in p.stderr
    assert "at most 100,000 runs" in p.stderr and "give fewer values or repetitions" in p.stderr
    assert out["seconds"] < 1.0, out
    assert out["peak_mb"] < 200, out
    assert not (tmp_path / "results").exists()  # run: nothing made


def test_the_refusal_says_the_cap_why_and_the_fix(tmp_path):
    f = _write(tmp_path, "name: wide\nrepetitions: 100\npath: {loss_pct: 0}\n"
                         "sweep: {path.rtt_ms: [" + ", ".join(str(i) for i in range(1, 1002)) + "]}\n")
    with pytest.raises(ExperimentError) as e:
        load(f)
    assert str(e.value) == (
        "sweep: 100,100 runs (1001 values x 100 repetitions), about 63 hours at the ~1,600 runs an hour one machine "
        "runs; at most 100,000 runs (about 62 hours) are accepted: give fewer values or repetitions, or a smaller "
        "grid (grids:, tortoise run --grid NAME)")
    _write(tmp_path, f.read_text().replace("repetitions: 100", "repetitions: 99"))
    assert len(expand(load(f))) == 1001 * 99  # under the cap: every run


def test_a_grid_too_large_is_named(tmp_path):
    f = _write(tmp_path, "name: g\npath: {loss_pct: 0}\nsweep: {server.cc: [cubic, reno]}\n"
                         "grids: {huge: {repetitions: 10000, sweep: {path.rtt_ms: [10, 20, 30, 40, 50, 60, 70, 80, "
                         "90, 100, 110]}}}\n")
    with pytest.raises(ExperimentError, match=r"^grids\.huge: sweep: 110,000 runs \(11 values x 10000 repetitions\)"):
        load(f)


def test_exclusions_are_counted_not_built(tmp_path):
    f = _write(tmp_path, "name: ex\npath: {loss_pct: 0}\nrepetitions: 100\n"
                         "sweep: {path.rtt_ms: [" + ", ".join(str(i) for i in range(1, 1011)) + "]}\n"
                         "exclude: [" + ", ".join(f"{{path.rtt_ms: {i}}}" for i in range(1, 11)) + "]\n")
    assert len(expand(load(f))) == 100_000  # 1010 - 10 points x 100: at the cap exactly



# the audit's files (issue 35, session 8): a small file whose exclusions cut a
# huge product to the cap; before, the whole product was built, then filtered
def _axis(key: str, values) -> str:
    return f"  {key}: [" + ", ".join(str(v) for v in values) + "]\n"


EXCL = ("name: excl\nclient: {page: tiny.html}\nsweep:\n" + _axis("path.rtt_ms", range(20, 120))
        + _axis("path.rate_mbit", range(1, 101)) + _axis("path.loss_pct", [i / 100 for i in range(1000)])
        + _axis("path.jitter_ms", range(100)) + "exclude:\n"
        + "".join(f"  - {{path.rtt_ms: {i}}}\n" for i in range(21, 120))
        + "".join(f"  - {{path.rate_mbit: {i}}}\n" for i in range(2, 101)))  # 10^9 points, 100,000 left
EXCL3 = ("name: excl3\nclient: {page: tiny.html}\nsweep:\n" + _axis("path.rtt_ms", range(20, 25))
         + _axis("path.rate_mbit", range(1, 6)) + _axis("path.jitter_ms", range(4))
         + _axis("path.loss_pct", [i / 1000 for i in range(1000)]) + _axis("path.queue_pkts", range(100, 200))
         + "exclude:\n" + "".join(f"  - {{path.rtt_ms: {i}}}\n" for i in range(21, 25))
         + "".join(f"  - {{path.rate_mbit: {i}}}\n" for i in range(2, 6))
         + "".join(f"  - {{path.jitter_ms: {i}}}\n" for i in range(1, 4)))  # 10^7 points, 100,000 left


@pytest.mark.parametrize("text,points", [(EXCL, "1,000,000,000 points (100 x 100 x 1000 x 100 values)"),
                                         (EXCL3, "10,000,000 points (5 x 5 x 4 x 1000 x 100 values)")])
@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_huge_sweep_cut_by_exclusions_is_refused_in_a_second_and_200_mb(tmp_path, command, text, points):
    """Seen: the 10^9-point file (12 KB) passed the cap (100,000 runs,
    counted after the exclusions) and was then built whole: MemoryError at
    2.95 GB after 11.6 s under ulimit -v 3000000; the 10^7 one took 101 s
    and 2.0 GB."""
    p, out = _measured(tmp_path, text, command, timeout_s=300)
    assert out["rc"] == 2, p.stderr[-2000:]
    assert f"sweep: {points} before the exclusions; at most 100,000 are accepted with an exclude: list" in p.stderr
    assert "give the sweep's axes fewer values, or split it into grids" in p.stderr
    assert out["seconds"] < 1.0, out
    assert out["peak_mb"] < 200, out
    assert not (tmp_path / "results").exists()


def test_too_many_exclusions_are_refused(tmp_path):
    """Seen: 100 exclusions took 16 s to count, 30,000 would take hours."""
    f = _write(tmp_path, "name: many\npath: {loss_pct: 0}\nsweep:\n" + _axis("path.rtt_ms", range(1, 1002))
               + "exclude:\n" + "".join(f"  - {{path.rtt_ms: {i}}}\n" for i in range(1, 1002)))
    with pytest.raises(ExperimentError) as e:
        load(f)
    assert str(e.value) == (
        "exclude: 1,001 exclusions; at most 1,000 are accepted (each is tested at every point of the sweep): leave "
        "values out of the sweep's axes instead, or name fewer axes in an exclusion ({server.cc: hybla} drops "
        "every hybla point)")


def test_exclusions_over_many_sets_of_axes_are_refused(tmp_path):
    """Each set of axes the exclusions name is one test at every point
    (measured: 1,000 sets at 59,139 points took 14 s to walk)."""
    keys = ["path.rtt_ms", "path.rate_mbit", "path.jitter_ms", "path.queue_pkts", "client.cache_hit_ratio"]
    sweep = "".join(_axis(k, [i / 10 for i in range(10)] if k.startswith("client") else range(1, 11))
                    for k in keys)  # 100,000 points
    shapes = [c for r in range(1, 6) for c in itertools.combinations(keys, r)]  # 31 sets of axes
    f = _write(tmp_path, "name: shapes\npath: {loss_pct: 0}\nsweep:\n" + sweep + "exclude:\n"
               + "".join("  - {" + ", ".join(f"{k}: 1" for k in c) + "}\n" for c in shapes))
    with pytest.raises(ExperimentError) as e:
        load(f)
    assert str(e.value) == (
        "exclude: the exclusions name 31 different sets of axes, each tested at every one of the sweep's 100,000 "
        "points: 3,100,000 tests, at most 2,000,000 are accepted: name the same axes in every exclusion (e.g. each "
        "{server.cc: ..., path.loss_pct: ...}), or give the sweep's axes fewer values")


class _Sweep:  # what spec/bounds.points reads of an experiment (a pure function of these)
    def __init__(self, sweep: dict, exclude: list) -> None:
        self.sweep, self.exclude, self.population, self.repetitions = sweep, exclude, None, 1


_values = st.one_of(st.integers(0, 3), st.sampled_from([1.0, True, None, "x"]),
                    st.lists(st.integers(0, 2), max_size=2), st.dictionaries(st.sampled_from("pq"), st.integers(0, 1),
                                                                             max_size=1))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.lists(_values, min_size=1, max_size=4), max_size=4),
       st.data())
def test_what_is_built_is_what_was_counted(sweep, data):
    """The points expand walks (one at a time) are the sweep's product less
    the exclusions, tested as == tests them, in the product's order; their
    number is the count the cap was checked against."""
    keys = st.sampled_from([*sweep, "z"]) if sweep else st.just("z")
    exclude = data.draw(st.lists(st.dictionaries(keys, _values, min_size=1, max_size=3), max_size=16))
    bounds = _bounds()
    built = list(bounds.points(_Sweep(sweep, exclude), []))
    names = list(sweep)
    product = [dict(zip(names, c)) for c in itertools.product(*(sweep[k] for k in names))]
    assert built == [p for p in product if not any(all(p.get(k) == v for k, v in ex.items()) for ex in exclude)]
    n, exact = bounds.sweep_points(sweep, exclude)
    assert n == len(built) if exact else n >= len(built)


def test_a_shipped_experiment_with_exclusions_expands_to_the_runs_it_counts():
    bounds = _bounds()
    f = Path(__file__).resolve().parents[2] / "experiments" / "tortoise.yaml"  # 52 exclusions in its grids
    for grid in ["reduced", "powered"]:
        e = load(f, grid=grid)
        assert len(e.exclude) > bounds.EXACT_EXCLUSIONS  # counted by the walk
        assert bounds.run_count(e) == (len(expand(e)), True)

# --- names -------------------------------------------------------------------

def test_a_name_longer_than_the_ca_can_carry_is_refused(tmp_path):
    """Seen: a 64-character name (validate allowed 64) failed deep in
    web/pki.py: "Attribute's length must be >= 1 and <= 64, but it was 80"."""
    name = "n" * 45
    f = _write(tmp_path, f"name: {name}\npath: {{loss_pct: 0}}\n")
    with pytest.raises(ExperimentError) as e:
        load(f)
    assert str(e.value) == (
        "name: 'nnnnnnnnnnnnnnnnnnnn'... is 45 characters; at most 44 fit every place it goes (the lab CA's "
        "certificate name 'Tortoise Lab CA ' + name + ' RSA', 64 characters at most by X.509); give a shorter name")
    f.write_text(f"name: {name[:40]}\npath: {{loss_pct: 0}}\ngrids: {{ci: {{}}, reduced: {{}}}}\n")
    with pytest.raises(ExperimentError) as e:
        load(f)
    assert str(e.value) == (
        f"grids.reduced: its folder '{name[:40]}@reduced' is 48 characters; at most 44 fit the lab CA's certificate "
        "name ('Tortoise Lab CA ' + name@grid + ' RSA', 64 characters by X.509); give a shorter name or grid name")


def test_the_longest_name_fits_the_lab_ca(tmp_path):
    """The limit is the PKI's: a folder name of 44 characters makes every
    certificate, the RSA root's name included, and its CA's name is the
    label spec/bounds.py counts with."""
    bounds = _bounds()
    folder = "x" * 40 + "@ci1"
    assert len(folder) == bounds.MAX_FOLDER_NAME == 44
    pki = make_pki(tmp_path / "pki", seed_name=folder, variants=("shared", "shared-rsa"))
    for ca, suffix in ((pki["ca"], ""), (pki["variants"]["shared-rsa"]["ca"], bounds.RSA_SUFFIX)):
        cert = x509.load_pem_x509_certificate(Path(ca).read_bytes())
        cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
        assert cn == f"{bounds.CA_LABEL}{folder}{suffix}"
    assert len(cn) == bounds.CN_MAX
    f = _write(tmp_path, f"name: {'x' * 40}\npath: {{loss_pct: 0}}\ngrids: {{ci1: {{}}}}\n")
    assert load(f, grid="ci1").name == folder


# --- what netem can hold -------------------------------------------------------

@pytest.mark.parametrize("fields,message", [
    ({"rate_mbit": 1e-9}, "path.rate_mbit: Input should be greater than or equal to 0.001 (got 1e-09); give the "
                          "bottleneck rate in Mbit/s, 0.001 (1 kbit/s, the least netem holds to 1 %: it keeps whole "
                          "bytes per second) to 100000, e.g. rate_mbit: 10"),
    ({"rate_up_mbit": 0.0005}, "path.rate_up_mbit: Input should be greater than or equal to 0.001 (got 0.0005); "
                               "give the uplink rate in Mbit/s, 0.001 to 100000, or leave it out for rate_mbit"),
    ({"loss_pct": 1e-9}, "path.loss_pct: Value error, 1e-09% is below what netem can hold (tc takes loss to six "
                         "decimals of a percent: below 0.0001% it is more than 1 % off, or 0); give 0 or at least "
                         "0.0001 (got 1e-09); give loss in percent, 0 or 0.0001 to 100, e.g. loss_pct: 1 for 1 %"),
    ({"rtt_ms": 1e-7}, "path.rtt_ms: Value error, 1e-07 ms is below what netem can hold (netem keeps delays in whole "
                       "nanoseconds: below 0.001 ms it is more than 1 % off, or 0); give 0 or at least 0.001 "
                       "(got 1e-07); give the round-trip time in milliseconds, 0 or 0.001 to 10000, e.g. rtt_ms: 200"),
    ({"jitter_ms": 1e-6}, "path.jitter_ms: Value error, 1e-06 ms is below what netem can hold (netem keeps delays in "
                          "whole nanoseconds: below 0.001 ms it is more than 1 % off, or 0); give 0 or at least 0.001 "
                          "(got 1e-06); give jitter in milliseconds, 0 or 0.001 up to the one-way delay (rtt_ms / 2)"),
])
def test_values_netem_would_round_away_are_refused(fields, message):
    """Seen: rate_mbit 1e-9 gave netem `rate 0mbit` (no limit); the run was
    stored ok with a floor of 2.8e11 ms."""
    with pytest.raises(PathError) as e:
        parse_path(fields)
    assert str(e.value) == message


def test_a_burst_netem_cannot_start_is_refused():
    with pytest.raises(PathError, match=r"^path\.loss_burst_pkts: Value error, a mean loss of 0\.0001 % in bursts of "
                                        r"3 packets starts a burst with a chance of 3\.3e-05 % per packet, below the "
                                        r"0\.0001 % tc can give netem; raise loss_pct or shorten the bursts"):
        parse_path({"loss_pct": 0.0001, "loss_burst_pkts": 3})


def test_the_least_values_reach_netem_as_asked():
    p = PathSpec(rtt_ms=0.001, loss_pct=0.0001, rate_mbit=0.001, jitter_ms=0)
    argv = netem("s1-eth1", p, p.loss_pct)
    assert argv[argv.index("delay") + 1] == "0.0005ms"
    assert argv[argv.index("random") + 1] == "0.0001%"
    assert argv[argv.index("rate") + 1] == "0.001mbit"
    seeded = netem_seed("s1-eth1", p, p.loss_pct, 1, "python3")
    assert seeded[seeded.index("--rate-bps") + 1] == "1000"  # 125 bytes/s: a rate, not 0 (no limit)
    assert seeded[seeded.index("--latency-ns") + 1] == "500"
    opts = netem_options(10, 500, 0, 0.0001, 1000, 1)
    assert (125).to_bytes(4, "little") in opts  # TCA_NETEM_RATE's bytes per second


# --- traces ------------------------------------------------------------------

def test_a_trace_too_large_is_refused_before_it_is_read(tmp_path):
    """Seen: a trace of 10^7 lines (79 MB): validate took 1.4 GB, the guest
    ran out of memory."""
    big = tmp_path / "big.down"
    with open(big, "wb") as fh:  # sparse: 79 MB that take no space
        fh.truncate(78_888_897)
    tracemalloc.start()
    with pytest.raises(PathError) as e:
        parse_path({"trace_down": str(big)})
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 1 << 20  # the file was never read
    assert str(e.value).startswith(
        f"path.trace_down: Value error, '{big}' has 78,888,897 bytes; a trace may have at most 1,000,000 lines and "
        "16,777,216 bytes (docs/traces.md): keep its first part, e.g. head -n 1000000 FILE > SHORTER (the trace loops)")


def test_a_trace_of_too_many_lines_is_refused_before_it_is_parsed(tmp_path):
    many = tmp_path / "many.down"
    many.write_bytes(b"1\n" * MAX_TRACE_LINES + b"2")  # 2 MB, one line too many (the last without a newline)
    assert many.stat().st_size < MAX_TRACE_BYTES
    with pytest.raises(PathError, match=r"^path\.trace_down: Value error, '.*many\.down' has 1,000,001 lines; a trace "
                                        r"may have at most 1,000,000 lines"):
        parse_path({"trace_down": str(many)})
    many.write_bytes(b"1\n" * (MAX_TRACE_LINES - 1) + b"2\n")  # at the limit: read
    assert len(Trace.model_validate(str(many)).times_ms) == MAX_TRACE_LINES


def test_a_netem_limit_past_32_bits_is_refused(tmp_path):
    """A trace that bunches a million packets into 10 ms over a 25-second
    delay line would need a netem limit tc cannot write (a u32)."""
    bunched = tmp_path / "bunched.down"
    bunched.write_bytes(b"10\n" * (MAX_TRACE_LINES - 1) + b"20\n")
    with pytest.raises(PathError, match=r"^path: Value error, netem would have to hold 5,499,995,008 packets \(its "
                                        r"delay line and the queue\), more than the 4,294,967,295 it counts; lower "
                                        r"rtt_ms, jitter_ms or the queue, or give a trace whose fastest 10 ms are "
                                        r"slower"):
        parse_path({"rtt_ms": 10_000, "jitter_ms": 5_000, "trace_down": str(bunched)})
    assert parse_path({"rtt_ms": 100, "trace_down": str(bunched)}).trace_down is not None
