"""The emulated path: what the WAN hop between client and server does.

A path is data, checked before anything starts: a negative RTT, a loss
rate above 100 %, a zero rate or an unknown algorithm is refused with the
name of the field and what to write instead (docs/architecture.md, "Style").

Loss is random (Bernoulli) unless a mean burst length is given: then each
direction's loss comes from the Simple Gilbert model with that mean loss
rate and mean burst (spec/lossmodel.py, docs/paths.md).
"""

from __future__ import annotations

import math

from pydantic import (ConfigDict, Field, ValidationError,
                      ValidationInfo, field_validator, model_validator)

from tortoiselab.spec.algorithms import STOCK_ALGORITHMS
from tortoiselab.spec.lossmodel import GilbertElliott, feasibility_problem, gilbert
from tortoiselab.spec.trace import MIN_SEGMENT_MS, Trace
from tortoiselab.spec.yamlfile import excerpt
from tortoiselab.spec.strictnum import NumbersModel

# Ethernet frame of a full-size segment: 1500-byte IP packet + 14-byte header.
FRAME_BYTES = 1514


def stock_algorithm(name: str) -> str:
    """name if it is a stock algorithm, else ValueError listing them (for a
    validator of a host's algorithm that must not be one of our modules)."""
    if name not in STOCK_ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; give one of {', '.join(STOCK_ALGORITHMS)}")
    return name

# The least non-zero values netem holds to within 1 % of what was asked
# (docs/inputs.md, "What netem can hold"): tc takes a rate in Mbit/s to six
# decimals and netem keeps whole bytes per second (1e-9 Mbit/s is 0 bytes/s:
# no limit at all); loss to six decimals of a percent (netem: a 32-bit
# probability); delays and jitter in whole nanoseconds (guest/commands.py,
# tools/netem_seed.py). A non-zero value below them is refused.
MIN_RATE_MBIT = 0.001  # 125 bytes/s: whole bytes are within 0.8 %
MIN_LOSS_PCT = 0.0001  # tc's six decimals are within 0.5 %
MIN_TIME_MS = 0.001  # 1 microsecond (rtt_ms: 500 ns each way)
NETEM_MAX_LIMIT = 2**32 - 1  # netem counts its packets in a u32


class PathError(ValueError):
    """A path specification that cannot be emulated; the message says why."""


class PathSpec(NumbersModel):
    """One emulated path: symmetric delay (RTT/2 each way), loss per direction,
    a bottleneck rate and the queue in front of it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rtt_ms: float = Field(200.0, ge=0, le=10_000, description="base round-trip time, split evenly over both directions")
    loss_pct: float = Field(1.0, ge=0, le=100, description="random loss per direction, percent")
    loss_up_pct: float | None = Field(None, ge=0, le=100, description="client-to-server loss if it differs from loss_pct")
    rate_mbit: float = Field(10.0, ge=MIN_RATE_MBIT, le=100_000,
                             description="bottleneck rate, Mbit/s (server to client)")
    rate_up_mbit: float | None = Field(None, ge=MIN_RATE_MBIT, le=100_000,
                                       description="client-to-server rate if it differs from rate_mbit")
    loss_burst_pkts: float | None = Field(
        None, ge=1, le=1_000_000,
        description="mean loss-burst length, packets: bursty (Gilbert) loss with loss_pct as its mean rate; "
                    "none: independent losses")
    loss_burst_up_pkts: float | None = Field(
        None, ge=1, le=1_000_000, validate_default=True,
        description="client-to-server mean loss-burst length if it differs from loss_burst_pkts")
    jitter_ms: float = Field(0.0, ge=0, le=10_000,
                             description="delay variation per direction (netem jitter, normal distribution, "
                                         "standard deviation); at most the one-way delay rtt_ms / 2")
    queue_pkts: int | None = Field(
        None, ge=1, le=1_000_000,
        description="bottleneck queue in packets; default one bandwidth-delay product",
    )
    # capacity traces (docs/traces.md): a mahimahi file, by path or shipped name
    trace_down: Trace | None = Field(None, description="server-to-client capacity trace (mahimahi format): "
                                                       "a file, or a name in topologies/traces")
    trace_up: Trace | None = Field(None, description="client-to-server capacity trace (mahimahi format)")
    trace_queue_ms: float | None = Field(
        None, gt=0, le=60_000, description="a traced link's buffer in ms at the trace's mean rate; "
        "default queue_pkts, else one BDP at the trace's mean rate")

    @field_validator("rtt_ms", "loss_pct", "rate_mbit", "jitter_ms")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("must be a finite number")
        return v

    @field_validator("rtt_ms", "jitter_ms", "loss_pct", "loss_up_pct")
    @classmethod
    def _netem_holds_it(cls, v: float | None, info: ValidationInfo) -> float | None:
        """A non-zero value netem would round to 0 (or far off) is refused."""
        least, unit, what = ((MIN_LOSS_PCT, "%", "tc takes loss to six decimals of a percent")
                             if info.field_name.startswith("loss") else
                             (MIN_TIME_MS, " ms", "netem keeps delays in whole nanoseconds"))
        if v is not None and 0 < v < least:
            raise ValueError(f"{v:g}{unit} is below what netem can hold ({what}: below {least:g}{unit} it is more "
                             f"than 1 % off, or 0); give 0 or at least {least:g}")
        return v

    @field_validator("jitter_ms")
    @classmethod
    def _jitter_within_the_delay(cls, v: float, info: ValidationInfo) -> float:
        """A normal delay draw below zero is sent at once (netem clamps it),
        so the emulated distribution is no longer the one asked for; above
        one standard deviation of the one-way delay that is 16 % of packets."""
        rtt = info.data.get("rtt_ms")
        if rtt is not None and v > rtt / 2:
            raise ValueError(f"{v:g} ms of jitter on a one-way delay of {rtt / 2:g} ms would cut off the "
                             f"delays below zero; give jitter_ms at most {rtt / 2:g} (rtt_ms / 2) or raise rtt_ms")
        return v

    @field_validator("loss_burst_pkts", "loss_burst_up_pkts")
    @classmethod
    def _burst_makes_the_loss(cls, v: float | None, info: ValidationInfo) -> float | None:
        """The Simple Gilbert model must be able to make the direction's loss
        rate with its burst length (p = r L / (1 - L) <= 1)."""
        d = info.data
        if v is not None and not math.isfinite(v):
            raise ValueError("must be a finite number")
        if "loss_pct" not in d or "loss_up_pct" not in d:
            return v  # a loss field failed: its own error says so
        if info.field_name == "loss_burst_pkts":
            checks = [(d["loss_pct"], v, "loss_pct")]
        else:
            checks = [(d["loss_pct"] if d["loss_up_pct"] is None else d["loss_up_pct"],
                       d.get("loss_burst_pkts") if v is None else v,
                       "loss_pct" if d["loss_up_pct"] is None else "loss_up_pct")]
        for loss, burst, loss_field in checks:
            problem = None if burst is None else feasibility_problem(loss, burst, loss_field)
            if not problem and burst is not None and loss > 0 and gilbert(loss, burst).p_pct < MIN_LOSS_PCT:
                problem = (f"a mean loss of {loss:g} % in bursts of {burst:g} packets starts a burst with a chance "
                           f"of {100 * loss / 100 / burst / (1 - loss / 100):.2g} % per packet, below the "
                           f"{MIN_LOSS_PCT:g} % tc can give netem; raise {loss_field} or shorten the bursts")
            if problem and info.field_name == "loss_burst_up_pkts" and v is None:
                problem = (f"the uplink takes loss_burst_pkts ({burst:g}) unless loss_burst_up_pkts is given: "
                           + problem + " (or give loss_burst_up_pkts)")
            if problem:
                raise ValueError(problem)
        return v

    @model_validator(mode="after")
    def _limit_fits(self) -> "PathSpec":
        """netem's limit (its delay line and the queue) in a u32: only a
        trace that bunches a great many packets can pass it."""
        traced = [self.trace_netem_limit_pkts(d) for d in ("down", "up") if self.trace(d) is not None
                  and self._trace_limit_bound(d) > NETEM_MAX_LIMIT]  # the exact limit only where it may not fit
        limit = max([self.netem_limit_pkts(), self.netem_limit_pkts(self.rate_up), *traced])
        if limit > NETEM_MAX_LIMIT:
            raise ValueError(f"netem would have to hold {limit:,} packets (its delay line and the queue), more than "
                             f"the {NETEM_MAX_LIMIT:,} it counts; lower rtt_ms, jitter_ms or the queue, or give a "
                             "trace whose fastest 10 ms are slower")
        return self

    def _trace_limit_bound(self, direction: str) -> float:
        """trace_netem_limit_pkts at most: every packet of the trace in its shortest segment."""
        trace = self.trace(direction)
        assert trace is not None
        peak_Bps = len(trace.times_ms) * FRAME_BYTES * 1000 / min(MIN_SEGMENT_MS, trace.period_ms)
        line = 2 * peak_Bps * (self.one_way_ms + 4 * self.jitter_ms) / 1e3 / FRAME_BYTES
        return line + self.trace_queue(direction) + 9

    @property
    def one_way_ms(self) -> float:
        return self.rtt_ms / 2.0

    @property
    def rate_up(self) -> float:
        return self.rate_mbit if self.rate_up_mbit is None else self.rate_up_mbit

    @property
    def loss_down_pct(self) -> float:
        return self.loss_pct

    @property
    def loss_up(self) -> float:
        return self.loss_pct if self.loss_up_pct is None else self.loss_up_pct

    @property
    def burst_down_pkts(self) -> float | None:
        return self.loss_burst_pkts

    @property
    def burst_up_pkts(self) -> float | None:
        return self.loss_burst_pkts if self.loss_burst_up_pkts is None else self.loss_burst_up_pkts

    def loss_model(self, direction: str) -> GilbertElliott | None:
        """The Gilbert model of one direction ("down" or "up"), None for
        independent (Bernoulli) losses."""
        loss, burst = ((self.loss_down_pct, self.burst_down_pkts) if direction == "down"
                       else (self.loss_up, self.burst_up_pkts))
        return None if burst is None else gilbert(loss, burst)

    def bdp_pkts(self) -> int:
        """Bandwidth-delay product of the full RTT in full-size frames (>= 2)."""
        bdp_bytes = self.rate_mbit * 1e6 / 8 * self.rtt_ms / 1e3
        return max(2, math.ceil(bdp_bytes / FRAME_BYTES))

    def queue(self) -> int:
        """Packets that may wait at the bottleneck: as given, else one BDP."""
        return self.queue_pkts if self.queue_pkts is not None else self.bdp_pkts()

    def trace(self, direction: str) -> Trace | None:
        """The capacity trace of a direction ("down" or "up"), if any."""
        return self.trace_down if direction == "down" else self.trace_up

    def trace_queue(self, direction: str) -> int:
        """Packets the buffer of a traced direction holds (bufferbloat):
        trace_queue_ms at the trace's mean rate, else queue_pkts, else one
        BDP at the trace's mean rate."""
        trace = self.trace(direction)
        assert trace is not None
        frames_per_ms = trace.mean_rate_bps() / 8 / 1e3 / (FRAME_BYTES - 14)
        if self.trace_queue_ms is not None:
            return max(2, math.ceil(frames_per_ms * self.trace_queue_ms - 1e-9))
        if self.queue_pkts is not None:
            return self.queue_pkts
        return max(2, math.ceil(frames_per_ms * self.rtt_ms - 1e-9))

    def trace_netem_limit_pkts(self, direction: str) -> int:
        """netem's limit in front of a traced link: it counts the packets on
        its delay line and those waiting in the link's queue (its child), so
        it holds the delay line at twice the trace's fastest segment (slow
        start sends at twice the rate it receives) plus the queue: the
        packets are dropped by the link's queue, never by netem."""
        trace = self.trace(direction)
        assert trace is not None
        peak_Bps = max(s.frame_rate_Bps() for s in trace.segments())
        line = 2 * peak_Bps * (self.one_way_ms + 4 * self.jitter_ms) / 1e3 / FRAME_BYTES
        return math.ceil(line) + self.trace_queue(direction) + 8

    def netem_limit_pkts(self, rate_mbit: float | None = None) -> int:
        """netem counts every packet it holds, the ones in flight on the delay
        line as well as the queue: limit = one-way delay line + queue.
        (netem's default of 1000 packets would cap a long fat path.)"""
        rate = self.rate_mbit if rate_mbit is None else rate_mbit
        line_bytes = rate * 1e6 / 8 * (self.one_way_ms + 4 * self.jitter_ms) / 1e3
        return math.ceil(line_bytes / FRAME_BYTES) + self.queue() + 8


def parse_path(fields: dict) -> PathSpec:
    """Build a PathSpec, turning pydantic's errors into one PathError whose
    message names each bad field and its allowed range."""
    try:
        return PathSpec(**fields)
    except ValidationError as exc:
        raise PathError(describe_errors(exc, prefix="path")) from None


def describe_errors(exc: ValidationError, prefix: str = "", hints: dict[tuple, str] | None = None) -> str:
    """One line per error: where (prefix.field), what, what was given and
    the fix. `hints` (a field's whole location -> its fix) come before the
    hints by field name."""
    lines = []
    for err in exc.errors():
        loc = ".".join(_loc_part(p) for p in err["loc"])
        where = f"{prefix}.{loc}" if prefix and loc else (prefix or loc or "(top level)")
        got = err.get("input")
        hint = (hints or {}).get(tuple(err["loc"])) or _HINTS.get(str(err["loc"][-1]) if err["loc"] else "", "")
        msg = err["msg"] + ("; remove the key or check its spelling" if err["type"] == "extra_forbidden" else "")
        lines.append(f"{where}: {msg} (got {excerpt(got)}){'; ' + hint if hint else ''}")
    return "\n".join(lines)


def _loc_part(p: object) -> str:
    """A field's name as written, quoted when it is not a plain name (an
    empty or odd key in a user's file)."""
    s = str(p)
    plain = s and (s[0].isalnum() or s[0] == "_") and all(c.isalnum() or c in "_-+@" for c in s)
    return s if plain else repr(s)


_HINTS = {
    "rtt_ms": "give the round-trip time in milliseconds, 0 or 0.001 to 10000, e.g. rtt_ms: 200",
    "loss_pct": "give loss in percent, 0 or 0.0001 to 100, e.g. loss_pct: 1 for 1 %",
    "loss_up_pct": "give loss in percent, 0 or 0.0001 to 100",
    "rate_mbit": "give the bottleneck rate in Mbit/s, 0.001 (1 kbit/s, the least netem holds to 1 %: it keeps "
                 "whole bytes per second) to 100000, e.g. rate_mbit: 10",
    "rate_up_mbit": "give the uplink rate in Mbit/s, 0.001 to 100000, or leave it out for rate_mbit",
    "jitter_ms": "give jitter in milliseconds, 0 or 0.001 up to the one-way delay (rtt_ms / 2)",
    "loss_burst_pkts": "give the mean loss-burst length in packets, 1 or more (e.g. loss_burst_pkts: 3), "
                       "or leave it out for independent losses",
    "loss_burst_up_pkts": "give the uplink's mean loss-burst length in packets, 1 or more, "
                          "or leave it out for loss_burst_pkts",
    "queue_pkts": "give the queue in packets (1 or more), or leave it out for one BDP",
    "trace_down": "give a mahimahi trace file (one timestamp in ms per line, not decreasing) "
                  "or the name of a shipped trace, e.g. lte.down",
    "trace_up": "give a mahimahi trace file or the name of a shipped trace, e.g. lte.up",
    "trace_queue_ms": "give the traced link's buffer in milliseconds, greater than 0",
}


def check_algorithm(name: str, available: tuple[str, ...] | list[str], field: str = "cc") -> str:
    """Refuse an algorithm the lab kernel does not have, listing what it has."""
    if name not in available:
        raise PathError(
            f"{field}: unknown congestion control algorithm {name!r}; "
            f"this lab kernel has: {', '.join(sorted(available))}"
        )
    return name
