"""`tortoise plan EXPERIMENT --grid PILOT --check POWERED`: a plan put
against the powered grid that was run on it. Per claim the powered grid
serves: the power the pilot predicted at the powered grid's pairs (its
pairs resampled to that n, at their observed spread and at the upper
confidence bound of it that the plan recommends from: studies.plan), and
the power realised, the same simulation (power.power) on the powered
grid's own pairs at their n. All three at one level: alpha/m, m the
study's family as a report reading "POWERED,PILOT" counts it (plan.LEVEL).
A realised power far below the prediction says the pilot's spread misled
the plan (issue 36: India desktop PLT, 80 % predicted at 20 repetitions,
0.02 realised), and by how much (docs/statistics.md, "Planning from a
pilot")."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tortoiselab.studies import power as pw
from tortoiselab.studies.data import experiment_name, study_folder
from tortoiselab.studies.model import ALPHA, Claim, Measurement
from tortoiselab.studies.plan import (LEVEL, P90_SIMS, SPREAD_CONFIDENCE, Frames, claims_of, experiment_file,
                                      family, inflated, read_claim, require_grid, spread_factor)
from tortoiselab.studies.registry import claim_grids, tie_of


@dataclass
class CheckRow:
    """One claim's plan against its powered grid: the study's family m
    (the level is ALPHA / family), the pilot's pairs (n_pilot) and the
    powered grid's (n); the power the pilot predicted at n at its observed
    spread (predicted) and at the upper bound (predicted_upper: the pilot
    smoothed to factor times its sd, plan.inflated), the power the powered grid's own pairs give at n
    (realised); None where a grid has no pairs or the claim no test of an
    effect (note says which)."""

    claim_id: str
    effect: str = ""
    family: int = 1
    n_pilot: int = 0
    n: int = 0
    predicted: float | None = None
    predicted_upper: float | None = None
    realised: float | None = None
    factor: float | None = None
    note: str = ""


def _untestable(m: Measurement | None, grid: str, why: str) -> str:
    """Why a grid's measurement gives no power to compare ("" if it does)."""
    if m is None:
        return f"no data on the {grid} grid: {why}"
    if m.untestable:
        return f"not testable here on the {grid} grid: {m.untestable}"
    if tie_of(m):
        return f"a tie by construction on the {grid} grid: {tie_of(m)}"
    if pw.log_ratios(m) is None:
        return f"no pairs on the {grid} grid to simulate from"
    return ""


def check_claim(c: Claim, pilot: Measurement | None, powered: Measurement | None, family: int,
                sims: int = pw.PLAN_SIMS, confidence: float = SPREAD_CONFIDENCE,
                why: tuple[str, str] = ("", "")) -> CheckRow:
    """The CheckRow of one claim from its pilot and powered measurements
    (None: no runs there, why[0] / why[1] says so), at ALPHA / family."""
    out = CheckRow(c.id, family=family)
    effect = pw.effect_of(c.judge)
    if effect is None:
        out.note = "no claimed effect: the claim's own rule, no power to check"
        return out
    out.effect = effect.text()
    level = ALPHA / family
    either = powered if powered is not None else pilot
    sims = min(sims, P90_SIMS) if either is not None and either.statistic == "p90" else sims
    bad_pilot, bad_powered = _untestable(pilot, "pilot", why[0]), _untestable(powered, "powered", why[1])
    out.note = "; ".join(x for x in (bad_pilot, bad_powered) if x)
    if not bad_powered:
        out.n = pw.log_ratios(powered).size
        out.realised = pw.power(powered, effect, sims=sims, alpha=level)
    if not bad_pilot:
        out.n_pilot = pw.log_ratios(pilot).size
        out.factor = spread_factor(out.n_pilot, confidence)
    if not (bad_pilot or bad_powered):
        out.predicted = pw.power(pilot, effect, out.n, sims, level)
        out.predicted_upper = pw.power(inflated(pilot, out.factor), effect, out.n, sims, level)
    return out


def _folder(f: Path, grid: str, results: str | Path, flag: str) -> Path:
    """The grid's results folder, or a ValueError naming the flag and the fix."""
    folder = study_folder(f, grid, results)
    if not folder.is_dir():
        raise ValueError(f"{flag}: no results in {folder}; run `tortoise run {f} --grid {grid}` first, or give "
                         "--results the results root that holds them")
    return folder


def check(experiment: str, pilot_grid: str, powered_grid: str, results: str | Path = "results",
          sims: int = pw.PLAN_SIMS, confidence: float = SPREAD_CONFIDENCE) -> tuple[list[CheckRow], dict]:
    """Every claim reading the experiment on the pilot grid that the
    powered grid serves (a grid's `claims:` may name a few), checked
    (check_claim) on the results under `results`; and the facts: the two
    folders, each study's family m and the primary claims without runs,
    the claims the powered grid does not serve (left)."""
    f = experiment_file(experiment)
    require_grid(f, pilot_grid, "--grid")
    require_grid(f, powered_grid, "--check")
    if powered_grid == pilot_grid:
        raise ValueError(f"--check: {powered_grid!r} is the pilot grid (--grid); give the grid the plan's "
                         "repetitions ran on, e.g. --check powered")
    name = experiment_name(f)
    folders = {g: _folder(f, g, results, flag) for g, flag in ((pilot_grid, "--grid"), (powered_grid, "--check"))}
    both = f"{powered_grid},{pilot_grid}"
    claims = claims_of(name, pilot_grid)
    served = [c for c in claims if powered_grid in claim_grids(c, both)]
    frames: Frames = {}
    families = {s: family(s, results, both, frames) for s in dict.fromkeys(c.study for c in served)}
    rows = []
    for c in served:
        (pm, pwhy), (wm, wwhy) = (read_claim(c, results, [g], frames) for g in (pilot_grid, powered_grid))
        rows.append(check_claim(c, pm, wm, families[c.study][0], sims, confidence, (pwhy, wwhy)))
    info = {"file": f, "name": name, "pilot": pilot_grid, "powered": powered_grid, "folders": folders,
            "families": families, "confidence": confidence, "left": [c.id for c in claims if c not in served]}
    return rows, info


def _p(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def format_check(rows: list[CheckRow], info: dict) -> str:
    """The check as text: the grids, the level, one line per claim."""
    fams = "; ".join(f"{s} m = {m}" + (f" (no runs, not counted: {', '.join(miss)})" if miss else "")
                     for s, (m, miss) in info["families"].items())
    pilot, powered = (info["folders"][info[k]] for k in ("pilot", "powered"))
    out = [f"{info['name']}: the plan from {pilot} against {powered}",
           f"power to see the claimed effect at {LEVEL}" + (f": {fams}" if fams else ""),
           f"predicted: the pilot's pairs resampled to the powered grid's n, at their observed spread and at its "
           f"{info['confidence']:.0%} upper confidence bound (bound: the pilot smoothed to factor x its sd, "
           "studies/plan.py); realised: the powered grid's own pairs at that n (studies/power.py, the claim's own test)", "",
           f"{'claim':38} {'m':>3} {'pilot n':>7} {'n':>4} {'predicted':>9} {'factor':>6} {'bound':>5} "
           f"{'realised':>8}  effect / note"]
    for r in rows:
        k = "-" if r.factor is None else f"x{r.factor:.2f}"
        out.append(f"{r.claim_id:38} {r.family:>3} {r.n_pilot:>7} {r.n:>4} {_p(r.predicted):>9} {k:>6} "
                   f"{_p(r.predicted_upper):>5} {_p(r.realised):>8}  "
                   f"{r.effect}{'; ' if r.effect and r.note else ''}{r.note}")
    if info["left"]:
        out += ["", f"not checked: grid {info['powered']} does not serve them (its claims:): {', '.join(info['left'])}"]
    return "\n".join(out)
