"""The capacity traces the project ships, generated from a documented model.

``topologies/traces/models.yaml`` holds one model per trace, every value
with its source or the word ``assumption`` (as regions.yaml does); this
module turns a model into a mahimahi trace (spec/trace.py) and writes
``topologies/traces/<name>``:

    python -m tortoiselab.spec.tracegen            # every trace (`make traces`)
    python -m tortoiselab.spec.tracegen --check    # the files are what the models give

The model (docs/traces.md): a Markov-modulated Poisson process, Sprout's
picture of a cellular link (Winstein et al., NSDI 2013). Time runs in 1-ms
steps. The rate is in one of ``levels`` states whose multipliers are
exp(log_sigma * z_i), z_i the normal quantiles at (i + 1/2) / levels, so
the middle level is the median; after each step the chain leaves its level
with probability 1/dwell_ms for a neighbour (up or down alike; the end
levels turn back). With probability 1/(outage_every_s * 1000) per step an
outage starts (rate 0), left with probability 1/outage_ms per step, back to
the level it interrupted. The scale is fitted so that the median of the
per-second mean rates is median_mbit (IP bits, 1500-byte packets); the
opportunities of each millisecond are then a Poisson draw at the scaled
rate, the scale corrected (the same draws again) until that median is
within 1 % of the model's. Only ``random.Random(seed).random()`` (the rate
path) and ``random.Random(seed + 1).random()`` (the draws) are used, whose sequence
Python keeps stable, so a model gives the same bytes everywhere. The last
millisecond always has an opportunity: the file lasts duration_s exactly.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import random
import statistics
import sys
from pathlib import Path

from pydantic import ConfigDict, Field, model_validator

from tortoiselab.spec.trace import PACKET_BYTES, TRACE_DIR, parse_mahimahi
from tortoiselab.spec.yamlfile import read_yaml
from tortoiselab.spec.strictnum import NumbersModel

MODELS_FILE = TRACE_DIR / "models.yaml"
ASSUMPTION = "assumption"


class RateModel(NumbersModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    median_mbit: float = Field(gt=0, le=10_000, description="median of the 1-s throughputs, Mbit/s of IP packets")
    log_sigma: float = Field(ge=0, le=3, description="spread of the rate levels (natural log)")
    levels: int = Field(ge=1, le=99, description="number of rate levels (odd: the middle one is the median)")
    dwell_ms: float = Field(ge=1, description="mean time on one level before a step up or down")
    outage_every_s: float = Field(gt=0, description="mean time between outages")
    outage_ms: float = Field(ge=1, description="mean outage length")
    duration_s: int = Field(ge=1, le=3600, description="the trace's length; it loops")
    seed: int = Field(ge=0, description="seed of the trace's random draws")


class TraceModel(NumbersModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str
    model: RateModel
    sources: dict[str, str]
    notes: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _every_value_has_a_source(self) -> "TraceModel":
        fields = set(RateModel.model_fields)
        if missing := sorted(fields - set(self.sources)):
            raise ValueError(f"sources: no entry for {', '.join(missing)}; cite a source or write 'assumption'")
        if extra := sorted(set(self.sources) - fields):
            raise ValueError(f"sources: {', '.join(extra)} is not a model value")
        if odd := sorted(k for k, v in self.sources.items() if v.strip().lower().startswith("assum") and v != ASSUMPTION):
            raise ValueError(f"sources: write the bare word 'assumption' for {', '.join(odd)}")
        return self


class TraceModels(NumbersModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = Field(1, ge=1, le=1)
    traces: dict[str, TraceModel]


def load_models(path: Path = MODELS_FILE) -> TraceModels:
    return TraceModels.model_validate(read_yaml(path, "trace models file"))


def level_multipliers(m: RateModel) -> list[float]:
    nd = statistics.NormalDist()
    return [math.exp(m.log_sigma * nd.inv_cdf((i + 0.5) / m.levels)) for i in range(m.levels)]


def rate_path(m: RateModel, rng: random.Random) -> list[float]:
    """The unscaled rate multiplier of every millisecond (0 in an outage)."""
    mult = level_multipliers(m)
    level, outage = m.levels // 2, False
    p_leave, p_outage, p_back = 1 / m.dwell_ms, 1 / (m.outage_every_s * 1000), 1 / m.outage_ms
    out = []
    for _ in range(m.duration_s * 1000):
        out.append(0.0 if outage else mult[level])
        if outage:
            outage = rng.random() >= p_back
        elif rng.random() < p_outage:
            outage = True
        elif rng.random() < p_leave and m.levels > 1:
            step = 1 if rng.random() < 0.5 else -1
            level = min(max(level + step, 0), m.levels - 1) if 0 < level < m.levels - 1 else \
                (1 if level == 0 else m.levels - 2)
    return out


def _poisson(lam: float, rng: random.Random) -> int:
    """Knuth's product method: fine for the few packets a millisecond holds."""
    if lam <= 0:
        return 0
    limit, k, p = math.exp(-lam), 0, rng.random()
    while p > limit:
        k += 1
        p *= rng.random()
    return k


def generate(m: RateModel) -> list[int]:
    """The trace's opportunities (ms), fitted to the model's median: the
    scale from the rate path, then corrected for the Poisson draws (the
    same draws again, from the seed) until the median is within 1 %."""
    mult = rate_path(m, random.Random(m.seed))
    per_s = [sum(mult[i:i + 1000]) / 1000 for i in range(0, len(mult), 1000)]
    target = m.median_mbit
    scale = target * 1e6 / 8 / PACKET_BYTES / 1e3 / statistics.median(per_s)
    best: tuple[float, list[int]] | None = None
    for _ in range(6):
        times = _draw(mult, scale, random.Random(m.seed + 1))
        got = median_mbit(times, m.duration_s)
        if best is None or abs(got - target) < abs(best[0] - target):
            best = (got, times)
        if abs(got - target) <= 0.01 * target:
            break
        scale *= target / got
    return best[1]


def _draw(mult: list[float], scale: float, rng: random.Random) -> list[int]:
    times: list[int] = []
    for ms, x in enumerate(mult, 1):
        times += [ms] * _poisson(scale * x, rng)
    if not times or times[-1] != len(mult):
        times.append(len(mult))  # the file lasts duration_s exactly
    return times


def trace_text(times: list[int]) -> str:
    return "".join(f"{t}\n" for t in times)


def median_mbit(times: tuple[int, ...] | list[int], seconds: int) -> float:
    """Median of the 1-s throughputs of a trace (IP Mbit/s)."""
    counts = [0] * seconds
    for t in times:
        counts[min((t - 1) // 1000, seconds - 1)] += 1
    return statistics.median(counts) * PACKET_BYTES * 8 / 1e6


def write_all(models: TraceModels, folder: Path = TRACE_DIR, check: bool = False) -> list[str]:
    """Write (or, with check, compare) every trace; lines of what was done."""
    out = []
    for name, tm in sorted(models.traces.items()):
        text = trace_text(generate(tm.model))
        parse_mahimahi(text)  # what we ship, the parser takes
        f = folder / name
        sha = hashlib.sha256(text.encode()).hexdigest()
        if check:
            same = f.is_file() and f.read_text(encoding="utf-8") == text
            out.append(f"{name}: {'ok' if same else 'DIFFERS from its model'} ({sha[:12]})")
        else:
            f.write_text(text, encoding="utf-8")
            med = median_mbit(parse_mahimahi(text), tm.model.duration_s)
            out.append(f"{name}: {len(text.splitlines())} opportunities, median {med:.3f} Mbit/s "
                       f"(model {tm.model.median_mbit}), sha256 {sha[:12]}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tortoiselab.spec.tracegen", description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=Path, default=MODELS_FILE)
    ap.add_argument("--out", type=Path, default=TRACE_DIR, help="folder to write the traces into")
    ap.add_argument("--check", action="store_true", help="only compare the files with what the models give")
    a = ap.parse_args(argv)
    lines = write_all(load_models(a.models), a.out, a.check)
    print("\n".join(lines))
    return 1 if any("DIFFERS" in ln for ln in lines) else 0


if __name__ == "__main__":
    sys.exit(main())
