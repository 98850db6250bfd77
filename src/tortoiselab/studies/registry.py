"""The studies, and every claim of one judged on its results: STUDIES,
evaluate and verdict_frame, as the notebooks, `tortoise report
--reproduction` and the labs use them (labs/README.md lists the studies
with their labs and notebooks). One multiple-comparison policy: each
study's family is its primary claims with a test (one per seed sentence;
variants, ties by construction and untestable claims left out), and every
claim of the study is read off its test's interval at ALPHA / m
(Bonferroni: simultaneous intervals, which Holm does not give); the
adjusted p is min(1, p x m). Power for the claimed effect is shown for
planning, with the pairs that would settle an inconclusive claim; it
decides no label (docs/statistics.md)."""

from __future__ import annotations

import dataclasses
import functools
import math
from pathlib import Path

import numpy as np
import pandas as pd

from tortoiselab.analysis import sizecheck
from tortoiselab.studies.claims import coalescing, cubic_plus, initcwnd, reno, tortoise
from tortoiselab.studies.data import (current_points, experiment_name, load_runs, of_loader, report_grids,
                                     study_folder)
from tortoiselab.studies import power as pw
from tortoiselab.studies.measure import STATISTICS, at_level
from tortoiselab.studies.model import ALPHA, SEEDS, Claim, Measurement, NoData, Study, Verdict

SETTLE_SIMS = 200  # simulated samples per n when the report asks how many pairs would settle a claim

STUDIES: dict[str, Study] = {
    "tortoise": Study("tortoise", "The TCP Tortoise: congestion control for emerging markets (LinkedIn 2017)",
                      (SEEDS["000"], SEEDS["004"]), ("experiments/tortoise.yaml", "experiments/tortoise-screen.yaml",
                       "experiments/tortoise-population.yaml"),
                      tortoise.CLAIMS, "notebooks/01_tortoise.ipynb", "labs/01-tortoise.md"),
    "coalescing": Study("coalescing", "HTTP/2 connection coalescing (LinkedIn)", (SEEDS["001"],),
                        ("experiments/coalescing.yaml", "experiments/coalescing-population.yaml"), coalescing.CLAIMS,
                        "notebooks/02_coalescing.ipynb", "labs/02-coalescing.md"),
    "cubic_plus": Study("cubic_plus", "CUBIC+ for HTTP/2 (Stony Brook)", (SEEDS["002"],),
                        ("experiments/cubic_plus.yaml",), cubic_plus.CLAIMS, "notebooks/03_cubic_plus.ipynb",
                        "labs/03-cubic-plus.md"),
    "reno_beta": Study("reno_beta", "Reno's reduction factor 0.5-0.9, both readings (Stony Brook)", (SEEDS["002"],),
                       ("experiments/reno_beta.yaml",), reno.CLAIMS, "notebooks/03_cubic_plus.ipynb",
                       "labs/03-cubic-plus.md"),
    "initcwnd": Study("initcwnd", "Fitting in the initial slow-start window (Napkin Problem 15)", (SEEDS["003"],),
                      ("experiments/initcwnd.yaml",), initcwnd.CLAIMS, "notebooks/04_initcwnd.ipynb",
                      "labs/04-initcwnd.md"),
}


def study(study_id: str) -> Study:
    """STUDIES[study_id], or a KeyError that names the studies there are."""
    if study_id not in STUDIES:
        raise KeyError(f"study: unknown study {study_id!r}; the studies are {', '.join(STUDIES)}")
    return STUDIES[study_id]


def experiment_files(s: Study) -> dict[str, str]:
    """experiment name -> file, for a study."""
    return {experiment_name(f): f for f in s.experiments}


@functools.cache
def all_experiment_files() -> dict[str, str]:
    """experiment name -> file, over every study."""
    return {name: f for s in STUDIES.values() for name, f in experiment_files(s).items()}


def _clean(x) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


def measure_claim(c: Claim, df: pd.DataFrame, folder: Path) -> Measurement:
    """The claim's measurement on its experiment's runs (only those of its
    loader count); NoData when they are not there."""
    if df.empty:
        raise NoData(f"no runs in {folder}")
    df = of_loader(df, c.loader)
    if df.empty:
        raise NoData(f"no runs of client.loader {c.loader} in {folder}")
    m = c.measure(df)
    if m.value is None or not math.isfinite(float(m.value)):
        raise NoData("the measurement gave no value")
    return m


# "the same" value in both arms of a pair: within this share of the control's value. The loader stores times rounded
# to 1 us (client/timeline.py); 5e-5 of a ~200 ms load is 10 us, the screen's SAME_MEDIAN_MS (claims/tortoise.py):
# pairs this close ran the same load, up to the loader's timing, not a different congestion control
SAME_RELATIVE = 5e-5


def _same(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    return np.abs(a - c) <= SAME_RELATIVE * np.abs(c)


def tie_of(m: Measurement) -> str:
    """Why the measurement is a tie by construction ("" if it is not), for
    every paired comparison: every pair identical (m.tie); or at least half
    the pairs the same within SAME_RELATIVE (the loader's timing) and the
    statistic itself the same at that resolution (the p90s of the two arms,
    or the median per-pair change, within SAME_RELATIVE): both arms ran the
    same load by construction (e.g. Scalable and H-TCP's identical slow
    start on a loss-free path); or, without the pairs, a change whose value
    and whole CI are exactly 0 % with a test behind it."""
    if m.tie:
        return m.tie
    if m.control and m.statistic in ("ratio", "p90") and len(m.control) == len(m.arm):
        c, a = np.asarray(m.control, float), np.asarray(m.arm, float)
        same = _same(c, a)
        if 2 * int(same.sum()) < len(c):
            return ""
        if m.statistic == "p90":
            pc, pa = float(np.quantile(c, 0.9)), float(np.quantile(a, 0.9))
            if not _same(np.array([pc]), np.array([pa]))[0]:
                return ""
            stat = f"the p90s {pc:.3f} and {pa:.3f} agree"
        else:
            med = float(np.median(a / c - 1))
            if abs(med) > SAME_RELATIVE:
                return ""
            stat = f"the median per-pair change {100 * med:+.4f} % is 0"
        return (f"{int(same.sum())} of {len(c)} pairs gave the arm the control's value within {SAME_RELATIVE:g} of it "
                f"(the loader's timing), and {stat} at that resolution: both arms ran the same load, "
                "a tie by construction, not a finding")
    if m.unit != "%" or m.p_value is None or not (m.value == 0 and m.low == 0 and m.high == 0):
        return ""
    return ("the change and its whole CI are exactly 0.00 % (the median pair tied in every resample): a tie by "
            "construction, not a finding")


def size_problem(m: Measurement) -> str:
    """Why a p90 reading's test cannot decide on these values ("" if it
    can): the check of analysis/sizecheck.py, the test's size on a
    population made from the reading's own values whose p90 ratio is
    exactly 1 (docs/statistics.md, "A p90 test decides only where it holds
    its size"). Exact runs (one value a condition) and readings without
    their values are not checked."""
    kinds = {"p90": True, "p90-groups": False, "p90-ratio-groups": "sets"}
    if m.exact_repeats or m.statistic not in kinds or min(len(m.control), len(m.arm)) < 4:
        return ""
    check = sizecheck.p90_size(m.control, m.arm, paired=kinds[m.statistic])
    return "" if check.holds else check.text()


def not_testable(m: Measurement) -> str:
    """Why the reading cannot decide a label ("" if it can): a tie by
    construction (tie_of), or a p90 test that does not hold its size on
    its values (size_problem)."""
    return tie_of(m) or size_problem(m)


# a composite row's labels from the one that refutes "every part ..." to the one that supports it most: the row
# takes the first label any part has (deciding)
SEVERITY = ("disagree", "not testable here", "inconclusive", "smaller than claimed", "agree", "larger than claimed")


def part_judge(judge, name: str = ""):
    """The judge of one part of a composite row: the claim's own, or, for a
    row whose parts have claims of their own (measure.per_part: a sentence
    naming three markets, each with its figure), that part's."""
    return getattr(judge, "parts", {}).get(name, judge)


def part_label(part: Measurement, judge, name: str = "") -> tuple[str, str]:
    """One part of a composite row judged as a row of its own: "not
    testable here" for a tie by construction, else its judge (part_judge)."""
    why = not_testable(part)
    return ("not testable here", why) if why else part_judge(judge, name)(part)


def deciding(m: Measurement, judge) -> Measurement:
    """The comparison a composite row ("every one of these parts ...",
    m.parts; an intersection-union test, Berger 1982) is judged and shown
    by: each part judged by the claim's rule at the level it is at (the
    family's, after family_level), the first label of SEVERITY that any
    part has decides (disagree if any part is disagree: significant the
    wrong way, or rejecting the claimed size; else not testable if any is
    a tie; else inconclusive if any is, ...), and of the parts with that
    label the one with the largest p (then value). Its value, interval, p
    and power are the row's; the detail lists every part with its label.
    m itself when it has no parts."""
    if not m.parts:
        return m
    labels = {name: part_label(part, judge, name) for name, part in m.parts}
    parts = dict(m.parts)
    rank = {v: i for i, v in enumerate(SEVERITY)}

    def key(name):
        p = parts[name].p_value
        return (-rank.get(labels[name][0], len(SEVERITY)), 1.0 if p is None else p, parts[name].value)
    name = max(parts, key=key)
    part = parts[name]
    return dataclasses.replace(
        part, part=name, tie=f"{name}: {tie_of(part)}" if tie_of(part) else "", detail=(
            f"{m.composite}: all {len(parts)} must hold; shown, the part that decides ({labels[name][0]}): {name}; "
            + "; ".join(f"{j} {labels[j][0]}: {parts[j].text()}" for j in parts)
            + f"; shown comparison: {part.detail}"))


def pair_word(setup: str) -> str:
    """What one pair of a claim is: a simulated user (population set-up) or a pair of runs."""
    return "users" if setup == "population" else "pairs"


def settle_note(m: Measurement, effect: pw.Effect | None, level: float,
                unit: str = "pairs") -> tuple[int | None, str]:
    """What would settle an inconclusive claim, as `tortoise plan` sizes it
    (studies/plan.py): the pairs (unit: or users) with 80 % power for its
    claimed effect, a shift or an equivalence margin (at the pilot's
    measured change), at its level (power.required_n), or in words why the
    planner cannot size it (no claimed effect, a test it does not
    simulate, runs that repeat exactly). A claim whose own n already has
    that power says so, with no count: more of the same runs would not
    settle it (before, "about 76 pairs would settle it" stood on a row of
    186)."""
    if effect is None or pw.log_ratios(m) is None:
        test = STATISTICS.get(m.statistic, "a number without a test")
        why = f"its claimed effect is in {m.unit}, not a change in %" if effect is None else "it has no such pairs"
        return None, ("`tortoise plan` cannot size it: it simulates the paired tests of a change in % (a median "
                      f"change, a paired p90); this row's number is {test}, and {why}")
    n = pw.required_n(m, effect, alpha=level, sims=SETTLE_SIMS)
    if n is None:
        return None, f"more than {pw.N_MAX} {unit} would be needed to settle it"
    if n <= m.n:
        return None, (f"its {m.n} {unit} already give 80 % power for {effect.text()} at this level (`tortoise plan` "
                      f"asks for {n}): more of the same runs would not settle it; the measured change lies between 0 "
                      "and the claimed effect, or the pilot's spread understates the tail that decides its test")
    return n, f"about {n} {unit} would settle it (80 % power for {effect.text()} at this level, `tortoise plan`)"


def judge_claim(c: Claim, m: Measurement | None, why_none: str = "", settle: bool = False) -> Verdict:
    """The Verdict of a measured claim: "not testable here" for a claim the
    lab cannot test (c.untestable) or a tie by construction, else the
    claim's judge on m (read off its interval), with the power for its
    claimed effect at m's level and at ALPHA; settle: for an inconclusive
    claim, the pairs that would settle it (power.required_n at m's level);
    m None: "no data" (why_none)."""
    settle_n = None
    m = deciding(m, c.judge) if m is not None else None
    judge = part_judge(c.judge, m.part if m is not None else "")
    effect = pw.effect_of(judge)
    if m is None:
        m, verdict, why = Measurement(math.nan, detail=why_none), "no data", why_none
    elif c.untestable:
        verdict, why = "not testable here", c.untestable
    elif tie_of(m):
        verdict, why = "not testable here", tie_of(m)
    elif size_problem(m):  # (a composite row: its deciding part, with its values)
        verdict, why = "not testable here", (f"{m.part}: " if m.part else "") + size_problem(m)
        if settle and effect is not None:  # the n that would give the power, checked for size by `tortoise plan`
            settle_n, note = settle_note(m, effect, m.level or ALPHA, pair_word(c.setup))
            why += "; " + note.replace("would settle it", "would give the power") + (
                " (whether its test holds its size there: `tortoise plan`)")
    else:
        level = m.level or ALPHA
        if effect is not None and m.power is None:
            raw = pw.power(m, effect)
            judged = pw.power(m, effect, alpha=level) if level < ALPHA and raw else raw
            m = dataclasses.replace(m, power=judged, power_raw=raw)
        verdict, why = judge(m)
        if verdict == "inconclusive" and settle:
            settle_n, note = settle_note(m, effect, level, pair_word(c.setup))
            why += "; " + note
    if m.failed:
        why += f"; {m.failed} failed runs of its selection are in no pair"
    return Verdict(c.study, c.id, c.seed_file, c.text, c.experiment, c.metric,
                   _clean(m.value), _clean(m.low), _clean(m.high), _clean(m.p_value), m.n, m.unit,
                   m.text(), verdict, why, c.rule, m.detail, p_family=_clean(m.p_family), power=_clean(m.power),
                   power_raw=_clean(m.power_raw), family=m.family,
                   effect=effect.text() if effect and m.power is not None else "",
                   n_control=m.n_control, n_arm=m.n_arm, setup=c.setup, sentence=c.sentence, primary=c.primary,
                   variant=c.variant, level=m.level, min_p=_clean(m.min_p), settle_n=settle_n, failed=m.failed,
                   untestable=c.untestable, n_what=m.n_what)


def verdict_of(c: Claim, df: pd.DataFrame, folder: Path) -> Verdict:
    """One claim on its experiment's runs (df, read from folder; only those
    of the claim's loader count), on its own (a family of one: ALPHA);
    missing runs give verdict "no data", never an exception."""
    try:
        return judge_claim(c, measure_claim(c, df, folder))
    except NoData as exc:
        return judge_claim(c, None, str(exc))


def in_family(c: Claim, m: Measurement | None) -> bool:
    """A claim that counts in its study's family: a primary reading with a
    test (a finite p), neither untestable, nor a tie by construction, nor a
    p90 test that does not hold its size (not_testable; a composite row:
    its deciding part at the level it is at)."""
    m = deciding(m, c.judge) if m is not None else None
    return (c.primary and not c.untestable and m is not None and m.p_value is not None
            and math.isfinite(m.p_value) and not not_testable(m))


def family_level(claims: tuple[Claim, ...], ms: list[Measurement | None]) -> list[Measurement | None]:
    """The study's measurements at its family's level: m = the claims in
    the family (in_family), each measurement recomputed by its own test at
    ALPHA / m (measure.at_level: the interval that inverts it), with
    p_family = min(1, p x m) and family = m. A tie by construction (tie_of
    at the level it was measured at) stays as it was measured: it is out
    of the family, and at a stricter level its interval could leave 0 and
    be judged as a finding."""
    m_family = max(1, sum(in_family(c, m) for c, m in zip(claims, ms)))
    return [None if m is None else at_family(m, m_family) for m in ms]


def at_family(m: Measurement, m_family: int) -> Measurement:
    """m at level ALPHA / m_family (family_level), and so each part of a
    composite row (each judged at the family's level, deciding)."""
    if m.parts:
        m = dataclasses.replace(m, parts=tuple((name, at_family(part, m_family)) for name, part in m.parts))
    if tie_of(m):
        return dataclasses.replace(m, family=m_family)
    m = at_level(m, ALPHA / m_family)
    p_adj = None if m.p_value is None else min(1.0, m.p_value * m_family)
    return dataclasses.replace(m, p_family=p_adj, family=m_family)


def claim_grids(c: Claim, grid: str | None) -> list[str | None]:
    """The grids a claim may read when the report reads `grid`, in order:
    its own, if it names one (e.g. the browser arm's); else the report's,
    where a list such as "powered,reduced" gives the grids of the list
    its experiment file defines and that serve the claim (a grid's
    `claims:`; none: the last one)."""
    if c.grid:
        return [c.grid]
    files = all_experiment_files()
    return report_grids(files[c.experiment], grid, c.id) if c.experiment in files else [grid]


def claim_grid(c: Claim, grid: str | None) -> str | None:
    """The first grid a claim may read (claim_grids)."""
    return claim_grids(c, grid)[0]


def evaluate(study_id: str, results: str | Path = "results", grid: str | None = "reduced",
             settle: bool = False) -> list[Verdict]:
    """Every claim of the study against the results of its experiments on
    `grid` (None: the full sweep, results/<name>; a claim that names a grid
    of its own reads that one; a list "powered,reduced": each claim from the
    grid of the list whose runs give it the most pairs, the first on a tie:
    a powered grid may repeat only the conditions one claim needs, and a
    claim that it covers in part keeps its reduced grid), in the study's
    order: all measured first, then each at the family's level
    (family_level), then each judged (settle: with the pairs that would
    settle an inconclusive one). A verdict's `grid` says which grid it
    read."""
    s = study(study_id)
    files = experiment_files(s)
    frames: dict[tuple[str, str | None], pd.DataFrame] = {}
    ms: list[Measurement | None] = []
    why: list[str] = []
    read: list[str | None] = []
    for c in s.claims:
        m, w, used = None, "", None
        for g in claim_grids(c, grid):
            folder = study_folder(c.experiment, g, results)
            if (c.experiment, g) not in frames:
                points = current_points(files[c.experiment], g)
                frames[c.experiment, g] = load_runs(folder, set(points), points)
            try:
                mg = measure_claim(c, frames[c.experiment, g], folder)
            except NoData as exc:
                w = w or str(exc)  # the first grid's reason
                continue
            if m is None or mg.n > m.n:
                m, w, used = mg, "", g
        ms.append(m)
        why.append(w)
        read.append(used)
    return [dataclasses.replace(judge_claim(c, m, w, settle), grid=g or "")
            for c, m, w, g in zip(s.claims, family_level(s.claims, ms), why, read)]


def verdict_frame(verdicts: list[Verdict]) -> pd.DataFrame:
    """One row per claim: the Verdict's fields as columns."""
    return pd.DataFrame([v.as_dict() for v in verdicts])
