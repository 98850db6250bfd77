"""`tortoise plan EXPERIMENT`: how many runs each claim reading the
experiment needs before the lab runs them. From a pilot (the experiment's
results on a grid: its pairs' spread), per claim: the pairs needed to see
the seed's effect with 80 % power (studies.power.required_n, by
simulation with the claim's own test) at the level the report judges by,
alpha/m (Bonferroni over the study's primary claims: LEVEL), once at the
pilot's observed spread and once at the upper confidence bound of that
spread (spread_factor, inflated); the repetitions of the grid that give
them (the recommendation comes from the upper bound), and the cost:
seconds per run from the pilot runs' stored wall times, on this machine
(/ jobs) and on a cluster of nodes. powered_grid writes a `powered` grid
for the experiment file: the pilot grid's sweep with the repetitions
needed. studies.plan_check puts a plan against the powered grid that was
run (docs/statistics.md, "Planning from a pilot"; docs/analysis.md, "Users,
maps, plans")."""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy import stats as st

from tortoiselab.analysis import sizecheck
from tortoiselab.host import store
from tortoiselab.host.slurm import MAX_TASKS
from tortoiselab.project import REPO_DIR as REPO
from tortoiselab.spec.experiment import load as load_experiment
from tortoiselab.studies import power as pw
from tortoiselab.studies.data import current_points, defined_grids, experiment_name, load_runs, study_folder
from tortoiselab.studies.model import ALPHA, POWER_TARGET, Claim, Measurement, NoData
from tortoiselab.studies.registry import (STUDIES, claim_grid, claim_grids, deciding, experiment_files, in_family,
                                          measure_claim, size_problem, tie_of)

MAX_USERS_HERE = 200  # users per market a population's powered grid is capped at (--max-users)
SLURM_TASK_S = 5.2  # sbatch + dispatch + a task's own start, per array task (docs/cluster.md)
P90_SIMS = 200  # simulated samples per n for a p90 claim (each runs a permutation test of its own)
# one-sided confidence of the upper bound of the pilot's spread that the plan recommends from (spread_factor)
SPREAD_CONFIDENCE = 0.8
SUPPORT = 1000  # pairs of the smoothed pilot at the upper bound of its spread (inflated)
LEVEL = "alpha/m (Bonferroni over the study's primary claims)"
EXACT_REPEATS = ("more repetitions add no pairs: its loss-free runs repeat exactly and count once (more conditions "
                 "would)")

Frames = dict[tuple[str, str | None], pd.DataFrame]  # (experiment, grid) -> its runs, read once per command


@dataclass
class ClaimPlan:
    """One claim's plan: the pilot's pairs (n) over its repetitions, the
    pairs per repetition (per_rep), the study's family m (level = ALPHA /
    family), the power now at that level; the pairs and repetitions needed
    at that level at the pilot's observed spread (pairs, reps) and at the
    upper confidence bound of its spread (pairs_upper, reps_upper: the
    recommendation), the factor the bound spreads the pairs by (factor).
    None: not reachable within power.N_MAX pairs, or nothing to plan from
    (note says which)."""

    claim_id: str
    effect: str = ""
    n: int = 0
    per_rep: float = 0.0
    family: int = 1
    power_now: float | None = None
    factor: float | None = None
    pairs: int | None = None
    pairs_upper: int | None = None
    reps: int | None = None
    reps_upper: int | None = None
    note: str = ""
    primary: bool = True
    min_n: int = 0  # the fewest pairs whose test can reach the level at all (power.min_pairs)

    @property
    def level(self) -> float:
        return ALPHA / self.family


def experiment_file(experiment: str) -> Path:
    """A file, or a name under experiments/: a clear error when neither."""
    for p in (Path(experiment), REPO / "experiments" / f"{experiment}.yaml", REPO / experiment):
        if p.is_file():
            return p
    raise ValueError(f"experiment: {experiment!r} is neither a file nor a name under experiments/ "
                     "(e.g. experiments/tortoise.yaml or tortoise)")


def require_grid(f: Path, grid: str | None, flag: str) -> None:
    """A ValueError naming the flag and the grids the file has when it
    defines no grid `grid` (None: the file's own sweep, always there)."""
    grids = defined_grids(f)
    if grid is not None and grid not in grids:
        raise ValueError(f"{flag}: {f.name} has no grid {grid!r}; give one of its grids: "
                         f"{', '.join(sorted(grids)) or '(none)'}" + (", or full (the file's own sweep)"
                                                                    if flag == "--grid" else ""))


def claims_of(name: str, grid: str | None) -> list[Claim]:
    """The claims that read this experiment on this grid."""
    return [c for s in STUDIES.values() for c in s.claims if c.experiment == name and claim_grid(c, grid) == grid]


def _frame(c: Claim, grid: str | None, results: Path, frames: Frames) -> tuple[pd.DataFrame, Path]:
    """The runs of the claim's experiment on `grid` (the file's grid now,
    paired by its points now, as registry.evaluate reads them), read once
    into frames; an empty frame when the folder is not there."""
    file = experiment_files(STUDIES[c.study])[c.experiment]
    folder = study_folder(c.experiment, grid, results)
    if (c.experiment, grid) not in frames:
        points = current_points(file, grid) if folder.is_dir() else {}
        frames[c.experiment, grid] = load_runs(folder, set(points), points) if points else pd.DataFrame()
    return frames[c.experiment, grid], folder


def read_claim(c: Claim, results: str | Path, grids: list[str | None],
               frames: Frames) -> tuple[Measurement | None, str]:
    """The claim's measurement from the grid of `grids` that gives it the
    most pairs (the first on a tie), as registry.evaluate picks it; (None,
    the first grid's reason) when no grid has its runs."""
    best, why = None, ""
    for g in grids:
        df, folder = _frame(c, g, Path(results), frames)
        try:
            m = measure_claim(c, df, folder)
        except NoData as exc:
            why = why or str(exc)
            continue
        if best is None or m.n > best.n:
            best = m
    return best, "" if best is not None else why


def family_of(claims: list[Claim], ms: list[Measurement | None]) -> tuple[int, list[str]]:
    """The m for Bonferroni (LEVEL) of a study's claims with their
    measurements (None: no runs): the claims registry.in_family counts (a
    primary reading with a test, neither untestable nor a tie; a variant,
    Claim.primary False, stands beside its sentence's primary reading and
    does not count), as the report counts them; at least 1. With it the ids
    of the primary claims without runs: the family counts what the results
    hold, and grows when their runs come."""
    m = sum(in_family(c, x) for c, x in zip(claims, ms))
    return max(m, 1), [c.id for c, x in zip(claims, ms) if c.primary and x is None]


def family(study_id: str, results: str | Path, grid: str | None, frames: Frames) -> tuple[int, list[str]]:
    """family_of the study's claims, each measured on `grid` (a list
    "powered,reduced": on the grid the report picks for it)."""
    claims = list(STUDIES[study_id].claims)
    return family_of(claims, [read_claim(c, results, claim_grids(c, grid), frames)[0] if c.primary else None
                              for c in claims])


def spread_factor(n_pairs: int, confidence: float = SPREAD_CONFIDENCE) -> float | None:
    """The one-sided `confidence` upper confidence bound of the standard
    deviation of n_pairs pairs over the observed one: sqrt((n - 1) /
    chi2_{1 - confidence}(n - 1)), the chi-square bound of a normal sample's
    sd; None below 2 pairs. Why: planned at the pilot's own spread, a study
    reaches the target power only about half the times it is run (the
    pilot's sd is as likely low as high); planned at the bound, with about
    `confidence` (Browne, Stat. Med. 14:1933, 1995; Teare et al., Trials
    15:264, 2014, who use 80 %). 0.8 by default: the plan then reaches 80 %
    power with 80 % confidence. A closed form, one factor per pilot size,
    no resampling of few pairs: the 80 % percentile-bootstrap bound of a
    normal sample's sd covers it in 56 % of pilots of 8 pairs, 64 % of 20
    (2,000 simulated pilots each). Exact for normal pairs, too narrow for
    heavier tails (Laplace or t with 5 df: about 68 % at 8 and 20 pairs),
    which the check against the powered grid shows (studies.plan_check).
    The pilot at the bound: inflated."""
    if n_pairs < 2:
        return None
    df = n_pairs - 1
    return math.sqrt(df / float(st.chi2.ppf(1 - confidence, df)))


def inflated(m: Measurement, factor: float, support: int = SUPPORT, seed: int = 0) -> Measurement:
    """m at a spread `factor` times its own: each pair repeated (to about
    `support` pairs in all), its log ratio plus normal noise of variance
    (factor^2 - 1) var(log ratios), so the log ratios' sd is factor times
    the pilot's about the same centre, the arm = control * exp(log ratio):
    the spread the pilot may have missed, taken as normal (a smoothed
    bootstrap, Silverman & Young, Biometrika 74:469, 1987). For a p90
    claim the controls' log values are spread so too: its test reads the
    values, and the p90 of 20 pairs is decided by a tail that 8 tight
    pilot controls do not show (India desktop PLT, issue 36, 20 pairs at
    alpha/8: 0.90 at the pilot's spread, 0.81 at 1.35 times its log
    ratios' sd alone, 0.44 with its controls' too; the powered grid's own
    20 pairs gave 0.11). Not a plain rescaling: power.power
    resamples the pilot's few pairs, and a rank test on a resample of 8
    values sees only their signs and order after the claimed shift, so its
    power steps, and stays put when every value is stretched by factor (a
    pilot of 8 pairs planned 93 pairs at its spread and at 1.35 times it);
    the noise gives the resample a continuous spread. m unchanged without
    pairs or for factor <= 1."""
    lr = pw.log_ratios(m)
    if lr is None or factor <= 1:
        return m
    reps = max(1, math.ceil(support / lr.size))
    rng = np.random.default_rng([seed, lr.size])
    wider = math.sqrt(factor ** 2 - 1)
    c = np.tile(np.asarray(m.control, float), reps)
    if m.statistic == "p90":
        c = c * np.exp(rng.normal(0.0, wider * float(np.std(np.log(c))), size=c.shape))
    log_r = np.tile(lr, reps) + rng.normal(0.0, wider * float(np.std(lr)), size=c.shape)
    return dataclasses.replace(m, control=tuple(c), arm=tuple(c * np.exp(log_r)))


def _reps(pairs: int | None, per_rep: float) -> int | None:
    return None if pairs is None else math.ceil(pairs / per_rep)


def plan_claim(c: Claim, m: Measurement, reps: int, family: int, sims: int = pw.PLAN_SIMS,
               n_max: int = pw.N_MAX, confidence: float = SPREAD_CONFIDENCE) -> ClaimPlan:
    """The plan of one claim from its pilot measurement m over `reps`
    repetitions, at ALPHA / family (its study's m, LEVEL): the pairs needed
    at m's observed spread and at its upper bound (spread_factor at
    `confidence`, the pairs inflated by it); a composite row plans its
    deciding part (registry.deciding)."""
    m = deciding(m, c.judge)
    out = ClaimPlan(c.id, n=m.n, per_rep=m.n / max(reps, 1), family=family, primary=c.primary)
    out.min_n = pw.min_pairs(out.level)
    effect = pw.effect_of(c.judge)
    if c.untestable or m.untestable:
        out.note = "not testable here: " + (c.untestable or m.untestable)
        return out
    if tie_of(m):
        out.note = "a tie by construction: more runs do not help (" + tie_of(m) + ")"
        return out
    if size_problem(m):  # the pilot's own test is beyond its size: planned still, the planned n checked below
        out.note = "the pilot's p90 test does not hold its size at its n (registry.size_problem)"
    lr = pw.log_ratios(m)
    if effect is None or lr is None:
        out.note = "no claimed effect or no pairs to simulate from: the claim's own rule, not a test of a shift"
        return out
    out.effect = effect.text()
    if m.n < out.min_n:  # no p below the level at its n: said, and never planned there (required_n's floor)
        out.note = (f"at its {m.n} pairs the smallest possible p, 2/2^{m.n} = {2 / 2 ** m.n:.3g}, is not below the "
                    f"level {out.level:.2g}: at least {out.min_n} pairs")
    sims = min(sims, P90_SIMS) if m.statistic == "p90" else sims
    out.power_now = pw.power(m, effect, sims=sims, alpha=out.level)
    out.factor = spread_factor(lr.size, confidence)
    if m.exact_repeats:
        out.note = EXACT_REPEATS + (f"; {out.note}" if out.note else "")
        return out
    out.pairs = pw.required_n(m, effect, POWER_TARGET, out.level, sims, n_max)
    upper = pw.required_n(inflated(m, out.factor), effect, POWER_TARGET, out.level, sims, n_max)
    # never fewer than at the observed spread: a resample of few pairs steps either way, and a p90 test's simulated
    # power at alpha/m (the swap null's normal tail) need not fall as the spread grows (india-desktop-cdt, 8 pilot
    # pairs, 20 pairs at alpha/15: 0.30 at its spread, 0.47 at twice it)
    out.pairs_upper = None if upper is None or out.pairs is None else max(upper, out.pairs)
    out.reps, out.reps_upper = _reps(out.pairs, out.per_rep), _reps(out.pairs_upper, out.per_rep)
    if out.pairs_upper is None:
        where = "at the upper bound of" if out.pairs is not None else "against"
        out.note = "; ".join(x for x in (out.note, f"more than {n_max} pairs: the effect is small {where} the "
                                                  "pilot's spread") if x)
    if out.pairs is not None and m.statistic in ("p90", "p90-groups"):
        # a p90 test decides only where it holds its size (registry.size_problem): checked at the planned n too
        check = sizecheck.p90_size(m.control, m.arm, paired=m.statistic == "p90", n=out.pairs)
        if not check.holds:
            why = (f"at {out.pairs} pairs the p90 test does not hold its size on the pilot's population "
                   f"({100 * check.size:.1f} % at {check.alpha:g}, limit {100 * check.limit:.1f} %): those pairs "
                   "would not decide it (docs/statistics.md, \"A p90 test decides only where it holds its size\")")
            out.note = "; ".join(x for x in (out.note, why) if x)
    return out


def floor_reps(rows: list[ClaimPlan]) -> tuple[int, str]:
    """The repetitions (or users) below which a primary reading's test
    cannot reach its level at all (ClaimPlan.min_n over its pairs per
    repetition), and the claims that set it: a powered grid never goes below."""
    need = [(math.ceil(r.min_n / r.per_rep), r.claim_id) for r in rows if r.primary and r.effect and r.per_rep > 0]
    if not need:
        return 0, ""
    top = max(k for k, _ in need)
    return top, (f"at least {top} so that every primary reading's smallest possible p is below its level "
                 f"({', '.join(c for k, c in need if k == top)})")


def seconds_per_run(folder: Path) -> float | None:
    """The mean stored wall time of the pilot's runs (host time per run,
    with the jobs the pilot ran with side by side)."""
    walls = [s.record.meta.wall_seconds for s in store.read_records(folder) if s.record.meta.wall_seconds]
    return sum(walls) / len(walls) if walls else None


def plan(experiment: str, grid: str | None = "reduced", pilot: str | Path = "results",
         sims: int = pw.PLAN_SIMS, confidence: float = SPREAD_CONFIDENCE) -> tuple[list[ClaimPlan], dict]:
    """Every claim reading the experiment on `grid`, planned from the
    pilot results (results/<name>@<grid> under `pilot`), and the pilot's
    facts: folder, repetitions, runs per repetition, seconds per run, the
    spread bound's confidence, each study's family m and the primary claims
    it could not measure."""
    f = experiment_file(experiment)
    require_grid(f, grid, "--grid")
    name = experiment_name(f)
    folder = study_folder(f, grid, pilot)
    if not folder.is_dir():
        raise ValueError(f"--pilot: no results in {folder}; run `tortoise run {f} --grid {grid}` first, or give "
                         "--pilot the results root that holds them")
    claims = claims_of(name, grid)
    if not claims:
        raise ValueError(f"experiment: no claim reads {name} on grid {grid}")
    frames: Frames = {}
    df, _ = _frame(claims[0], grid, Path(pilot), frames)
    if df.empty:
        raise ValueError(f"--pilot: {folder} holds no run of the file's grid {grid}")
    reps = int(df["repetition"].nunique())
    families = {s: family(s, pilot, grid, frames) for s in dict.fromkeys(c.study for c in claims)}
    rows = []
    for c in claims:
        m, why = read_claim(c, pilot, [grid], frames)
        rows.append(plan_claim(c, m, reps, families[c.study][0], sims, confidence=confidence) if m is not None
                    else ClaimPlan(c.id, note=f"no data in the pilot: {why}"))
    info = {"file": f, "name": name, "grid": grid, "folder": folder, "reps": reps, "runs": len(df),
            "runs_per_rep": len(current_points(f, grid)) / reps, "seconds_per_run": seconds_per_run(folder),
            "confidence": confidence, "families": families, "users": pilot_users(f, grid)}
    return rows, info


def pilot_users(f: Path, grid: str | None) -> int | None:
    """The users per market the grid draws (None: no population). A
    population claim's pairs are its market's users, one pair each, so
    its plan asks for users per market, not repetitions."""
    pop = load_experiment(f, grid=grid).population
    return int(pop["users"]) if pop else None


def users_needed(rows: list[ClaimPlan], cap: int) -> tuple[int | None, str]:
    """For a population: the most users per market any claim needs at the
    upper bound of its pilot's spread (pairs_upper: one pair per user of
    its market), at most `cap` (what fits: --max-users); `cap` itself when
    a claim is out of reach within power.N_MAX users. With a note of what
    the cap leaves short and what is out of reach."""
    need = [r.pairs_upper for r in rows if r.pairs_upper is not None]
    far = [r.claim_id for r in rows if r.effect and r.pairs_upper is None and not r.note.startswith(EXACT_REPEATS)]
    if not need and not far:
        return None, "no claim has a test to plan from"
    top = max(need + [floor_reps(rows)[0]], default=cap)
    short = [r.claim_id for r in rows if r.pairs_upper is not None and r.pairs_upper > cap]
    notes = ([f"capped at {cap} users per market (--max-users): {', '.join(short)} would need up to {top}"]
             if short else [])
    notes += [f"out of reach within {pw.N_MAX} users: {', '.join(far)}; {cap} users per market is what fits "
              "(--max-users)"] if far else []
    return (cap if far else min(top, cap)), "; ".join(notes)


def repetitions_needed(rows: list[ClaimPlan], cap: int) -> tuple[int | None, str]:
    """The largest repetitions any claim needs at the upper bound of its
    pilot's spread (reps_upper), capped (with a note of what the cap leaves
    underpowered)."""
    need = [r.reps_upper for r in rows if r.reps_upper is not None]
    out_of_reach = [r.claim_id for r in rows if r.effect and r.reps_upper is None
                    and not r.note.startswith(EXACT_REPEATS)]
    far = f"out of reach within {pw.N_MAX} pairs: {', '.join(out_of_reach)}" if out_of_reach else ""
    floor, why = floor_reps(rows)
    if not need and not floor:
        return None, far or "no claim of this experiment has a test to plan from"
    top = max(need + [floor])
    if top == floor and floor > max(need, default=0):
        far = "; ".join(x for x in (why, far) if x)
    if top <= cap:
        return top, far
    short = ", ".join(r.claim_id for r in rows if r.reps_upper is not None and r.reps_upper > cap)
    return cap, "; ".join(x for x in (f"capped at {cap} repetitions (--max-repetitions): {short} would need up to "
                                      f"{top}", far) if x)


def powered_grid(info: dict, reps: int, note: str = "") -> str:
    """The `powered` grid block for the experiment file: the pilot grid's
    sweep (or the file's own) with `reps` repetitions."""
    raw = yaml.safe_load(Path(info["file"]).read_text(encoding="utf-8"))
    base = copy.deepcopy(raw["grids"][info["grid"]]) if info["grid"] else {
        k: raw[k] for k in ("sweep", "exclude") if k in raw}
    conf = info.get("confidence", SPREAD_CONFIDENCE)
    if info.get("users"):  # a population: more users per market, one load per arm each
        base["description"] = (f"powered (tortoise plan from the {info['grid'] or 'full'} pilot): the same sweep "
                               f"over {reps} users per market, for {POWER_TARGET:.0%} power per claim at {LEVEL}, "
                               f"at the {conf:.0%} upper confidence bound of the pilot's spread"
                               + (f"; {note}" if note else ""))
        base["population"] = {**base.get("population", {}), "users": reps}
        return yaml.safe_dump({"powered": base}, sort_keys=False, width=110)
    base["description"] = (f"powered (tortoise plan from the {info['grid'] or 'full'} pilot): the same sweep with "
                           f"{reps} repetitions, for {POWER_TARGET:.0%} power per claim at {LEVEL}, at the "
                           f"{conf:.0%} upper confidence bound of the pilot's spread" + (f"; {note}" if note else ""))
    base["repetitions"] = reps
    return yaml.safe_dump({"powered": base}, sort_keys=False, width=110)


def _n(x) -> str:
    return "-" if x is None else f"{x}"


def _header(info: dict) -> list[str]:
    """The plan's first lines: the pilot, the level and the spread bound."""
    conf = info.get("confidence", SPREAD_CONFIDENCE)
    fams = "; ".join(f"{s} m = {m}" + (f" (no runs yet, not counted: {', '.join(miss)})" if miss else "")
                     for s, (m, miss) in info.get("families", {}).items())
    return [f"{info['name']} (pilot {info['folder']}: {info['runs']} runs, {info['reps']} repetitions, "
            f"{info['runs_per_rep']:.0f} runs per repetition)",
            f"pairs needed for {POWER_TARGET:.0%} power to see the claimed effect at {LEVEL}" + (
                f": {fams}" if fams else ""),
            f"(simulation with each claim's own test, studies/power.py), at the pilot's observed spread and at the "
            f"{conf:.0%} upper confidence bound of it (factor: the chi-square bound on the sd of the pairs' log ratios over "
            f"their sd; the pilot smoothed to that sd): the repetitions recommended come from the bound", "",
            f"{'claim':38} {'n':>4} {'power now':>9} {'factor':>6} {'pairs':>5} {'bound':>5} {'reps':>5} "
            f"{'bound':>5}  effect / note"]


def format_plan(rows: list[ClaimPlan], info: dict, jobs: int = 1, nodes: int = 1, cap: int = 200,
                max_users: int = MAX_USERS_HERE) -> str:
    """The plan as text: one line per claim, then the powered grid's size
    (repetitions, or users per market for a population) and its cost."""
    out = _header(info)
    for r in rows:
        pn = "-" if r.power_now is None else f"{r.power_now:.2f}"
        k = "-" if r.factor is None else f"x{r.factor:.2f}"
        out.append(f"{r.claim_id:38} {r.n:>4} {pn:>9} {k:>6} {_n(r.pairs):>5} {_n(r.pairs_upper):>5} "
                   f"{_n(r.reps):>5} {_n(r.reps_upper):>5}  {r.effect}{'; ' if r.effect and r.note else ''}{r.note}")
    users = info.get("users")
    reps, note = users_needed(rows, max_users) if users else repetitions_needed(rows, cap)
    out.append("")
    if reps is None:
        out.append(note)
        return "\n".join(out)
    runs = math.ceil(info["runs_per_rep"] * reps / users) if users else math.ceil(info["runs_per_rep"] * reps)
    size = f"{reps} users per market (the pilot: {users})" if users else f"{reps} repetitions"
    out.append(f"powered grid: {size}, {runs} runs" + (f" ({note})" if note else ""))
    if info["seconds_per_run"]:
        out.append(cost_line(runs, info["seconds_per_run"], jobs, nodes))
    return "\n".join(out)


def cost_line(runs: int, sec: float, jobs: int, nodes: int) -> str:
    """The cost of `runs` runs of `sec` seconds each (the pilot's stored
    wall time per run, with the jobs it ran side by side): here with
    `jobs`, and through the Slurm executor (host/slurm.py) as `nodes` array
    tasks at once, one lab each, plus SLURM_TASK_S per task (docs/cluster.md:
    5.2 s measured) over at most slurm.MAX_TASKS tasks."""
    here = runs * sec / jobs
    tasks = min(runs, MAX_TASKS)
    cluster = runs * sec / nodes + math.ceil(tasks / nodes) * SLURM_TASK_S
    return (f"cost: {sec:.2f} s per run (the pilot's stored wall times): {_hours(here)} on this machine with --jobs "
            f"{jobs} ({3600 / (sec / jobs):.0f} runs/hour), {_hours(cluster)} through the Slurm executor with {nodes} "
            f"array tasks at once (--nodes; {tasks} tasks, {SLURM_TASK_S} s each to start)")


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"
