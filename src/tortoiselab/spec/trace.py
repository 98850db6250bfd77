"""Capacity traces in mahimahi's format, and the rate schedule that replays them.

A trace file has one line per delivery opportunity: an integer number of
milliseconds from the trace's start at which one 1500-byte packet may leave
the bottleneck queue; several packets in one millisecond repeat the line.
Timestamps never decrease, and the file loops: when it ends, it starts
again, shifted by its last timestamp (mahimahi's mm-link, Netravali et al.,
"Mahimahi: Accurate Record-and-Replay for HTTP", USENIX ATC 2015, and its
link_queue). An opportunity no packet uses is lost.

Like mm-link, the parser refuses an empty line, a line that is not a whole
number, a timestamp smaller than the one before, a file without any line,
and a trace that lasts no time (its last timestamp 0); the error names the
field the trace was given for (``path.trace_down``), the file and the line,
never the line's content (a file named by a results folder is no one's to
print: docs/faults.md).

Where a trace's bytes come from: while a results folder is read (its
experiment.yaml, its records), a trace is the project's shipped trace or
the copy the runner stored with the folder's runs (<exp>/.lab/traces/, by
sha256), never a file the folder names elsewhere on the machine. The reader
says so by `from_source(...)` with the folder's TraceSource
(host/storedtraces.py); a path the user gives on the command line or in
the experiment file the user runs is read where it is (docs/traces.md,
"Traces of a stored experiment").

The lab replays a trace as a piecewise-constant rate (docs/traces.md): each
segment ends on an opportunity, lasts at least ``min_segment_ms`` and
carries the bytes of the opportunities inside it, so no segment has rate 0
and a segment's bytes are the trace's bytes over it.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from tortoiselab.project import REPO_DIR
from tortoiselab.spec.strictnum import NumbersModel

PACKET_BYTES = 1500  # one delivery opportunity: a full-size IP packet
FRAME_BYTES = PACKET_BYTES + 14  # the same packet in its Ethernet frame, as the lab's links count it
TRACE_DIR = REPO_DIR / "topologies" / "traces"  # the traces the project ships (tortoiselab.spec.tracegen)
MIN_SEGMENT_MS = 10
# the largest trace the lab reads (docs/inputs.md, "Traces"), checked before
# the file is read whole: a million opportunities is 25 minutes at 8 Mbit/s
# (public cellular traces hold a few hundred thousand); a million lines take
# 120 MB while parsed, 36 MB kept, on the host and in the lab guest (1 GB)
MAX_TRACE_LINES = 1_000_000
MAX_TRACE_BYTES = 16 * 1024 * 1024
# an outage: longer than this without a delivery opportunity. Linux's least
# retransmission timeout (TCP_RTO_MIN, HZ/5: 200 ms) is the shortest time a
# TCP sender waits before it takes a silent path for lost, so a longer gap
# can cost a timeout and a restart from one segment (RFC 6298 5.5)
OUTAGE_MS = 200
RATE_BIN_MS = 1000  # the bins of a trace's min and max rate (its median is of 1-s bins too: tracegen)


class TraceError(ValueError):
    """A trace file that cannot be replayed; the message names the line."""


def parse_mahimahi(text: str) -> tuple[int, ...]:
    """The opportunities of a mahimahi trace, in milliseconds; TraceError
    naming the first bad line (1-based). A final newline is optional."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise TraceError("the file is empty; a trace needs at least one line (a timestamp in ms)")
    out: list[int] = []
    for n, raw in enumerate(lines, 1):
        line = raw.removesuffix("\r")
        if not line.strip():
            raise TraceError(f"line {n}: empty line; every line is one timestamp in whole milliseconds")
        word = line.strip()
        if not word.isascii() or not word.isdigit():  # its content is not quoted (see the module's doc)
            raise TraceError(f"line {n}: not a whole number of milliseconds (0 or more); every line is one "
                             "timestamp in whole milliseconds")
        ms = int(word)
        if out and ms < out[-1]:
            raise TraceError(f"line {n}: a timestamp smaller than line {n - 1}'s; timestamps must not decrease")
        out.append(ms)
    if out[-1] == 0:
        raise TraceError(f"line {len(out)}: the trace lasts no time (last timestamp 0); "
                         "the file loops after its last timestamp, which must be 1 ms or more")
    return tuple(out)


class TraceSource(Protocol):
    """Where the traces of a stored experiment come from (a results folder's
    copies: host/storedtraces.FolderTraces). Shipped traces never ask it."""

    def reference(self, ref: str) -> dict:
        """The trace (file as recorded, name, sha256) that `ref`, a
        reference the stored experiment holds, named when the runs ran;
        TraceError if the folder cannot say."""
        ...

    def data(self, sha256: str) -> tuple[bytes, str]:
        """(the bytes of the stored copy whose sha256 is given, a label
        naming where it is); TraceError if there is none."""
        ...


_SOURCE: ContextVar[TraceSource | None] = ContextVar("trace_source", default=None)
_SEEN: ContextVar[dict[str, dict] | None] = ContextVar("traces_seen", default=None)


@contextmanager
def from_source(source: TraceSource) -> Iterator[None]:
    """Inside: every trace that is not shipped is read from `source`, never
    from the file it names (a results folder read as untrusted input;
    docs/faults.md). A context variable rather than a parameter: the models
    validate traces again wherever a path is rebuilt (PathSpec(**fields) in
    a region's, a CDN's or a topology's path), deep below the reader."""
    token = _SOURCE.set(source)
    try:
        yield
    finally:
        _SOURCE.reset(token)


@contextmanager
def seen() -> Iterator[dict[str, dict]]:
    """Inside: every trace reference validated (a path or a shipped name, as
    the file writes it) is recorded with the trace it named: reference ->
    {"file", "name", "sha256"} (the runner stores copies of them with the
    folder: host/storedtraces.store_copies)."""
    refs: dict[str, dict] = {}
    token = _SEEN.set(refs)
    try:
        yield refs
    finally:
        _SEEN.reset(token)


SHIPPED_PREFIX = "topologies/traces/"  # a shipped trace's recorded file: relative to the repository


def shipped_file(recorded: str) -> Path | None:
    """The shipped trace a recorded file names (topologies/traces/<name>,
    <name> one of shipped_traces()), else None; by name alone, so a recorded
    path never reaches outside the project's traces."""
    name = recorded.removeprefix(SHIPPED_PREFIX)
    if recorded.startswith(SHIPPED_PREFIX) and name in shipped_traces():
        return TRACE_DIR / name
    return None


def find_trace_file(ref: str | Path) -> Path:
    """A trace given by path, or by the name of a shipped trace
    (topologies/traces/<name>)."""
    p = Path(ref).expanduser()
    if p.is_file():
        return p.resolve()
    shipped = TRACE_DIR / str(ref)
    if "/" not in str(ref) and shipped.is_file():
        return shipped
    if p.exists():
        raise TraceError(f"{str(ref)!r} is not a file")
    raise TraceError(f"no trace file {str(ref)!r} (neither a path nor a trace in {TRACE_DIR}: "
                     f"{', '.join(shipped_traces()) or 'none'})")


def shipped_traces() -> list[str]:
    return sorted(p.name for p in TRACE_DIR.glob("*.*") if p.suffix in (".down", ".up"))


def _too_large(what: str) -> TraceError:
    return TraceError(f"{what}; a trace may have at most {MAX_TRACE_LINES:,} lines and {MAX_TRACE_BYTES:,} bytes "
                      f"(docs/traces.md): keep its first part, e.g. head -n {MAX_TRACE_LINES} FILE > SHORTER "
                      "(the trace loops)")


@functools.lru_cache(maxsize=32)
def _read(file: str, mtime_ns: int, size: int) -> tuple[str, tuple[int, ...]]:
    if size > MAX_TRACE_BYTES:  # refused by its size, before it is read
        raise _too_large(f"{file!r} has {size:,} bytes")
    with open(file, "rb") as fh:
        data = fh.read(MAX_TRACE_BYTES + 1)  # a file that grew since: never more
    return parse_trace_bytes(data, file)


def parse_trace_bytes(data: bytes, label: str) -> tuple[str, tuple[int, ...]]:
    """(sha256, opportunities) of a trace's bytes, bounded as a file is
    (MAX_TRACE_BYTES, MAX_TRACE_LINES); TraceError naming `label` and the
    line, never quoting it."""
    if len(data) > MAX_TRACE_BYTES:
        raise _too_large(f"{label!r} has more than {MAX_TRACE_BYTES:,} bytes")
    lines = data.count(b"\n") + (not data.endswith(b"\n") and bool(data))
    if lines > MAX_TRACE_LINES:  # counted before the lines are split and parsed
        raise _too_large(f"{label!r} has {lines:,} lines")
    sha = hashlib.sha256(data).hexdigest()
    try:
        return sha, _parse_cached(sha, data)
    except TraceError as exc:
        raise TraceError(f"{label}: {exc}") from None


_PARSED: dict[str, tuple[int, ...]] = {}  # sha256 -> opportunities: the last few traces parsed


def _parse_cached(sha: str, data: bytes) -> tuple[int, ...]:
    if sha not in _PARSED:
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError:
            text = data.decode("latin-1")  # the parser names the line that is not a number
        times = parse_mahimahi(text)
        while len(_PARSED) >= 8:
            _PARSED.pop(next(iter(_PARSED)), None)
        _PARSED[sha] = times
    return _PARSED[sha]


def read_trace_file(file: Path) -> tuple[str, tuple[int, ...]]:
    """(sha256 of the bytes, opportunities) of a trace file, cached while
    the file is unchanged."""
    try:
        st = file.stat()
        return _read(str(file), st.st_mtime_ns, st.st_size)
    except OSError as exc:
        raise TraceError(f"cannot read {str(file)!r}: {exc.strerror}") from None


class Trace(NumbersModel):
    """A capacity trace: the file (its absolute path), its name and the
    sha256 of its bytes. Given as a string (a path, or a shipped trace's
    name), the file is read and checked at once; given as a dict (a request
    read back in the lab), the file must still have that sha256."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str = Field(description="the trace file: absolute, or relative to the repository (a shipped trace)")
    name: str = Field(description="the file's name, as the run records it")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="sha256 of the file's bytes")
    _times: tuple[int, ...] = PrivateAttr(default=())

    @model_validator(mode="before")
    @classmethod
    def _from_reference(cls, data: object) -> object:
        if isinstance(data, (str, Path)):
            ref, source = str(data), _SOURCE.get()
            if source is not None and not ("/" not in ref and ref in shipped_traces()):
                out = dict(source.reference(ref))  # a stored experiment: never the file it names
            else:
                file = TRACE_DIR / ref if source is not None else find_trace_file(data)
                sha, _ = read_trace_file(file)
                out = {"file": _recorded_name(file), "name": file.name, "sha256": sha}
            refs = _SEEN.get()
            if refs is not None:
                refs[ref] = out
            return out
        return data

    @model_validator(mode="after")
    def _read_file(self) -> "Trace":
        source = _SOURCE.get()
        if source is not None and shipped_file(self.file) is None:
            data, where = source.data(self.sha256)  # the folder's copy, by the sha256 the run recorded
            sha, times = parse_trace_bytes(data, where)
        else:
            sha, times = read_trace_file(self.path if source is None else shipped_file(self.file))
        if sha != self.sha256:
            raise TraceError(f"{self.file!r} changed since the run was set up (sha256 {sha[:12]}..., "
                             f"expected {self.sha256[:12]}...)")
        self._times = times
        return self

    @classmethod
    def from_times(cls, times: tuple[int, ...] | list[int], name: str = "trace") -> "Trace":
        """A trace from its opportunities alone (tests, generators): no file."""
        t = cls.model_construct(file="", name=name, sha256="0" * 64)
        t._times = parse_mahimahi("".join(f"{x}\n" for x in times))
        return t

    @property
    def path(self) -> Path:
        """The file; a shipped trace is recorded relative to the repository."""
        return REPO_DIR / self.file if not Path(self.file).is_absolute() else Path(self.file)

    @property
    def times_ms(self) -> tuple[int, ...]:
        return self._times

    @property
    def period_ms(self) -> int:
        """The trace loops after its last timestamp."""
        return self._times[-1]

    def mean_rate_bps(self) -> float:
        """IP bits per second the trace carries, over one period."""
        return len(self._times) * PACKET_BYTES * 8 / (self.period_ms / 1e3)

    def mean_frame_rate_Bps(self) -> int:
        """Bytes per second of the Ethernet frames that carry the trace's
        packets, over one period (the rate a traced link idles at)."""
        return max(1, round(len(self._times) * FRAME_BYTES * 1000 / self.period_ms))

    def opportunities_between(self, t0_ms: int, t1_ms: int) -> int:
        """Opportunities at instants t with t0 <= t < t1 (ms from the start),
        the trace looped as mahimahi loops it."""
        return _count_before(self._times, t1_ms) - _count_before(self._times, t0_ms)

    def bin_bytes(self, bin_ms: int, n_bins: int) -> list[int]:
        """IP bytes the trace lets through in consecutive bins from its start."""
        return [self.opportunities_between(i * bin_ms, (i + 1) * bin_ms) * PACKET_BYTES for i in range(n_bins)]

    def segments(self, min_ms: int = MIN_SEGMENT_MS) -> list["Segment"]:
        """One period as rate segments (start, end]: see the module's doc."""
        return rate_segments(self._times, min_ms)

    def outages(self, min_ms: int = OUTAGE_MS) -> list[tuple[int, int]]:
        """(start ms, end ms) of every gap of one period longer than min_ms
        between consecutive opportunities: no packet may leave from start
        (exclusive) to end. The period's end is an opportunity (its last
        line), and the file loops, so a gap before the first line is the gap
        from the previous loop's end: it starts at 0 here."""
        out, prev = [], 0
        for t in self._times:
            if t - prev > min_ms:
                out.append((prev, t))
            prev = t
        return out

    def rate_range_mbit(self, bin_ms: int = RATE_BIN_MS) -> tuple[float, float]:
        """(min, max) IP Mbit/s over the whole bin_ms bins of one period
        (one bin of the period if it is shorter)."""
        width = min(bin_ms, self.period_ms)
        rates = [b * 8 / width / 1e3 for b in self.bin_bytes(width, self.period_ms // width)]
        return min(rates), max(rates)

    def describe(self, min_outage_ms: int = OUTAGE_MS) -> dict:
        """The trace in figures (docs/traces.md): its length, mean rate and
        range over 1-s bins, and its outages (count, total, longest, the
        threshold) over one period."""
        low, high = self.rate_range_mbit()
        spans = self.outages(min_outage_ms)
        gaps = [b - a for a, b in spans]
        return {"name": self.name, "length_s": self.period_ms / 1e3,
                "mean_mbit": round(self.mean_rate_bps() / 1e6, 3), "min_mbit": round(low, 3),
                "max_mbit": round(high, 3), "rate_bin_ms": min(RATE_BIN_MS, self.period_ms),
                "outages": {"threshold_ms": min_outage_ms, "count": len(gaps), "total_ms": sum(gaps),
                            "longest_ms": max(gaps, default=0), "intervals_ms": [list(x) for x in spans]}}


def _recorded_name(file: Path) -> str:
    """A shipped trace relative to the repository, so that a run's
    configuration (and its id) does not depend on where the clone is;
    any other file by its absolute path."""
    try:
        return str(file.relative_to(REPO_DIR))
    except ValueError:
        return str(file)


def _count_before(times: tuple[int, ...], t_ms: int) -> int:
    """Opportunities at instants < t_ms of the looped trace: loop k holds
    times[i] + k * period, so a loop ends where the next one starts."""
    if t_ms <= 0:
        return 0
    period = times[-1]
    q, r = divmod(t_ms, period)
    count = bisect.bisect_left(times, r)  # loop q
    if q >= 1:  # loop q - 1 (its last opportunities may reach t_ms), then the whole loops before it
        count += bisect.bisect_left(times, r + period) + (q - 1) * len(times)
    return count


@dataclass(frozen=True)
class Segment:
    """The rate between two opportunities: from start_ms (exclusive) to
    end_ms (inclusive), the bytes of the opportunities in between."""

    start_ms: int
    end_ms: int
    packets: int

    def frame_rate_Bps(self) -> int:
        """Bytes per second of Ethernet frames that carry the segment's
        packets in its time (the lab's links count frames)."""
        return max(1, round(self.packets * FRAME_BYTES * 1000 / (self.end_ms - self.start_ms)))


def rate_segments(times: tuple[int, ...], min_ms: int = MIN_SEGMENT_MS) -> list[Segment]:
    """One period (0, P] of the looped trace as segments that each end on an
    opportunity and last at least min_ms (the last one may be merged to
    reach it). An opportunity at 0 belongs to the end of the previous loop
    (at P), where the looped trace puts it too."""
    period = times[-1]
    counts: dict[int, int] = {}
    for t in times:
        k = t if t > 0 else period
        counts[k] = counts.get(k, 0) + 1
    segs: list[Segment] = []
    start, acc = 0, 0
    for t in sorted(counts):
        acc += counts[t]
        if t - start >= min_ms or t == period:
            segs.append(Segment(start, t, acc))
            start, acc = t, 0
    if len(segs) > 1 and segs[-1].end_ms - segs[-1].start_ms < min_ms:
        last = segs.pop()
        prev = segs.pop()
        segs.append(Segment(prev.start_ms, last.end_ms, prev.packets + last.packets))
    return segs
