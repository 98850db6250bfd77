"""The studies' data model: a seed's claim, the number we measure for it,
the verdict that number earns, and how numbers are written. Pure data, no
I/O (the package's public face is listed in tortoiselab/studies/__init__.py;
the labs that use it: labs/README.md)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Callable

import pandas as pd

# One rule, read off the interval of the claim's own test at the family's level (docs/statistics.md):
# agree = excludes 0 in the claimed direction and overlaps the claimed range; larger / smaller than
# claimed = excludes 0 in the claimed direction, beside the claimed range; disagree = excludes the
# claimed effect and is not on the claimed side (or significant the other way); inconclusive = holds
# both 0 and the claimed effect; not testable here = a tie by construction or a quantity the lab does
# not model; no data = the runs are not there. Power is shown for planning; it decides no label.
VERDICTS = ("agree", "larger than claimed", "smaller than claimed", "disagree", "inconclusive",
            "not testable here", "no data")
ALPHA = 0.05
POWER_TARGET = 0.8
# where a claim's runs come from: one emulated path per condition, simulated users drawn from a
# market's population, or a real browser (the coalescing study's grid "browser")
SETUPS = ("single path", "population", "browser")
# the seed studies' texts by number (the project's briefing; not part of this repository)
SEEDS = {"000": "000_b39140e4a526c7fb.txt", "004": "004_af7825aa4075c162.txt", "001": "001_9b56024ed5a96aa8.txt",
         "002": "002_156489580aaffd1b.txt", "003": "003_65993476e458b2ec.txt"}

Judge = Callable[["Measurement"], tuple[str, str]]


class NoData(Exception):
    """The claim's runs are not (all) there; the verdict is "no data"."""


def fmt(x: float | None, unit: str) -> str:
    """A number as the verdicts write it: 0-2 decimals by size, a sign on
    percentages, the unit after it; "-" for no number."""
    if x is None or not math.isfinite(x):
        return "-"
    digits = 0 if abs(x) >= 100 else (1 if abs(x) >= 1 else 2)
    sign = "+" if unit == "%" and x > 0 else ""
    return f"{sign}{x:.{digits}f}{' ' + unit if unit else ''}"


@dataclass(frozen=True)
class Measurement:
    """Our number: value with its interval (the inversion of the test named
    in `detail` at `level`, 1 - level confidence; NaN when it has none),
    the raw p-value of that test (None when no test applies), n = pairs or
    runs behind it.

    For power and ties (studies.power, registry.evaluate): n_control and
    n_arm, the runs of each arm behind the test (0: n); control and arm,
    the paired values the test ran on, and statistic ("ratio": the
    Hodges-Lehmann median per-pair change, Wilcoxon; "p90": the paired p90
    ratio, permutation test; "p90-groups": two independent groups), so the
    interval can be recomputed at the family's level (measure.at_level) and
    the power for a claimed effect simulated; tie, non-empty when every
    pair is identical (the reason, in words). Filled in by evaluate:
    p_family (Bonferroni over the study's `family` primary tests), level
    (ALPHA / family), power (for the judge's claimed effect at that level;
    for planning, it decides no label) and power_raw (at ALPHA). A
    measurement built from another keeps them with
    dataclasses.replace(m, detail=...)."""

    value: float
    low: float = math.nan
    high: float = math.nan
    p_value: float | None = None
    n: int = 0
    unit: str = "%"
    detail: str = ""
    n_control: int = 0
    n_arm: int = 0
    control: tuple[float, ...] = field(default=(), repr=False, compare=False)
    arm: tuple[float, ...] = field(default=(), repr=False, compare=False)
    statistic: str = ""
    tie: str = ""
    p_family: float | None = None
    power: float | None = None
    power_raw: float | None = None
    family: int = 1
    failed: int = 0  # runs of the claim's selection that failed (in no pair)
    exact_repeats: bool = False  # loss-free runs that repeat exactly, counted once: repetitions add no pairs
    level: float | None = None  # the alpha the interval is at (1 - level confidence; ALPHA / family)
    min_p: float | None = None  # the smallest p the test can give at this n
    untestable: str = ""  # non-empty: the lab cannot test this (the reason, and what would make it testable)
    # a composite row ("every one of these comparisons ..."): its parts, (name, Measurement), each judged by the
    # claim's rule at the family's level (registry.deciding picks the one shown), and what they are, in words
    parts: tuple = field(default=(), repr=False, compare=False)
    composite: str = ""
    # what n counts, as the row prints it: "pairs" (one condition and seed in both arms), "users" (a simulated
    # user in both arms), "groups" (two independent groups: n is the smaller), "conditions" (exact runs, one
    # pair per condition), "runs", "connections", ...
    n_what: str = "pairs"
    part: str = ""  # a composite row's deciding part (registry.deciding), by name

    @property
    def p(self) -> float | None:
        """The family-adjusted p (Bonferroni: min(1, p x family)) where the
        study's family set it, else the raw one."""
        return self.p_family if self.p_family is not None else self.p_value

    def significant(self) -> bool:
        """The interval excludes 0 (an interval from the test's inversion
        at the family's level does so exactly when p < that level)."""
        if math.isnan(self.low) and math.isnan(self.high):
            return self.p is not None and math.isfinite(self.p) and self.p < ALPHA
        return not (self.low <= 0 <= self.high)

    def text(self) -> str:
        """The number in words: "-4.1 % [-6.0, -2.2], p = 0.002 (n = 12 pairs)"."""
        if self.value is None or not math.isfinite(self.value):
            return "no value"
        bound = lambda x: fmt(x, "") if math.isfinite(x) else ("-inf" if x < 0 else "+inf")  # noqa: E731
        ci = f" [{bound(self.low)}, {bound(self.high)}]" if not math.isnan(self.low) else ""
        p = f", p = {self.p_value:.2g}" if self.p_value is not None and math.isfinite(self.p_value) else ""
        return f"{fmt(self.value, self.unit)}{ci}{p} (n = {self.n} {self.n_what})"


@dataclass(frozen=True)
class Claim:
    """One claim of a seed: its words (text, from seed_file), the experiment
    whose runs measure it, how (measure: runs -> Measurement) and the rule
    that judges the number (judge: Measurement -> (verdict, why); rule: the
    judge in words). loader: measure only the runs of this client.loader
    (None: every run; loaders are never pooled where a claim names one);
    grid: read this grid of the experiment whatever grid the report reads
    (None: the report's; e.g. "browser", whose runs no other grid has);
    setup: which set-up the runs come from, one of SETUPS ("single path":
    one emulated path per condition, "population": simulated users of a
    market, "browser": Chromium; a claim on grid "browser" is "browser"
    unless set)."""

    id: str
    study: str
    seed_file: str
    text: str
    experiment: str
    metric: str
    rule: str
    measure: Callable[[pd.DataFrame], Measurement]
    judge: Judge
    loader: str | None = None
    grid: str | None = None
    setup: str = "single path"
    sentence: str = ""  # the seed sentence this reads (claims of one sentence share it); "" = the claim's id
    primary: bool = True  # the sentence's primary reading (headline, family); False: a variant beside it
    variant: str = ""  # what a variant varies, in words ("rich paths", "over users", "Chromium", ...)
    untestable: str = ""  # why the lab cannot test the claim, and what would make it testable

    def __post_init__(self):
        if self.setup not in SETUPS:
            raise ValueError(f"claim {self.id}: setup {self.setup!r}: write one of {', '.join(SETUPS)}")
        if self.grid == "browser" and self.setup == "single path":
            object.__setattr__(self, "setup", "browser")
        if not self.sentence:
            object.__setattr__(self, "sentence", self.id)
        if not self.primary and not self.variant:
            raise ValueError(f"claim {self.id}: a variant says what it varies (variant=...)")


def claim(study: str, cid: str, seed: str, text: str, experiment: str, metric: str,
          measure: Callable[[pd.DataFrame], Measurement], judge_rule: tuple[Judge, str],
          loader: str | None = None, grid: str | None = None, setup: str | None = None,
          sentence: str = "", variant: str = "", untestable: str = "") -> Claim:
    """A Claim with id "<study>.<cid>", from a (judge, rule) pair as the
    judges of tortoiselab.studies.measure return them; setup None: "browser"
    on grid "browser", else "single path". sentence: the id (without the
    study) of the sentence's primary claim, for a variant (which then says
    what it varies in `variant`); untestable: why the lab cannot test it."""
    judge, rule = judge_rule
    if setup is None:
        setup = "browser" if grid == "browser" else "single path"
    if sentence and not variant:
        raise ValueError(f"claim {study}.{cid}: a variant of {sentence} says what it varies (variant=...)")
    return Claim(f"{study}.{cid}", study, seed, text, experiment, metric, rule, measure, judge, loader, grid, setup,
                 sentence=f"{study}.{sentence}" if sentence else "", primary=not sentence, variant=variant,
                 untestable=untestable)


@dataclass(frozen=True)
class Study:
    """A seed study: its seed files, the experiment files that measure it
    (repo-relative), its claims, its notebook and its lab handout (both
    repo-relative files)."""

    id: str
    title: str
    seed_files: tuple[str, ...]
    experiments: tuple[str, ...]
    claims: tuple[Claim, ...]
    notebook: str
    lab: str


@dataclass
class Verdict:
    """A claim judged on the results: the measurement flattened (value, low,
    high, p_value: None when there is none), measured = the number in
    words, verdict in VERDICTS and why; p_family (Bonferroni over the
    study's `family` primary tests), power (for effect, the claimed effect
    in words, at ALPHA / family) and power_raw (at ALPHA), n per arm and
    the claim's setup; grid, the grid whose runs it read; the claim's
    sentence, primary reading or variant; settle_n, the pairs that would
    settle an inconclusive claim."""

    study: str
    claim_id: str
    seed_file: str
    claim: str
    experiment: str
    metric: str
    value: float | None
    low: float | None
    high: float | None
    p_value: float | None
    n: int
    unit: str
    measured: str
    verdict: str
    why: str
    rule: str
    detail: str = ""
    p_family: float | None = None
    power: float | None = None
    power_raw: float | None = None
    family: int = 1
    effect: str = ""
    n_control: int = 0
    n_arm: int = 0
    setup: str = "single path"
    grid: str = ""  # the grid whose runs it read (evaluate)
    sentence: str = ""  # the seed sentence's primary claim id (itself for a primary)
    primary: bool = True
    variant: str = ""
    level: float | None = None  # the alpha the interval is at (ALPHA / family)
    min_p: float | None = None  # the smallest p the test could give at this n
    settle_n: int | None = None  # pairs `tortoise plan` says would settle an inconclusive claim (None: > N_MAX or unknown)
    failed: int = 0  # failed runs of the claim's selection (they count in no pair)
    untestable: str = ""
    changed: str = ""  # non-empty: the claim changed after its runs had been judged (registration)
    n_what: str = "pairs"  # what n counts (Measurement.n_what)

    def as_dict(self) -> dict:
        return asdict(self)
