"""`tortoise plan EXPERIMENT`: how many runs each claim reading the
experiment needs before the lab runs them. From a pilot (the experiment's
results on a grid: its pairs' spread), per claim: the pairs needed to see
the seed's effect with 80 % power (studies.power.required_n, by
simulation with the claim's own test), at ALPHA and at Holm's ALPHA / m
for its study's m tests (the level REPRODUCTION.md judges by), the
repetitions of the grid that give them, and the cost: seconds per run from
the pilot runs' stored wall times, on this machine (/ jobs) and on a
cluster of nodes. powered_grid writes a `powered` grid for the experiment
file: the pilot grid's sweep with the repetitions needed (README.md,
"Analysis, report, the VM")."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from pathlib import Path

import yaml

from tortoiselab.host import store
from tortoiselab.project import REPO_DIR as REPO
from tortoiselab.studies import power as pw
from tortoiselab.studies.data import current_run_ids, experiment_name, load_runs, study_folder
from tortoiselab.studies.model import ALPHA, POWER_TARGET, Claim, Measurement, NoData
from tortoiselab.studies.registry import STUDIES, claim_grid, experiment_files, measure_claim, tie_of

P90_SIMS = 200  # simulated samples per n for a p90 claim (each runs a permutation test of its own)


@dataclass
class ClaimPlan:
    """One claim's plan: the pilot's pairs (n) over its repetitions, the
    pairs per repetition (per_rep), the power now, the pairs and the
    repetitions needed at ALPHA and at Holm's ALPHA / family (None: not
    reachable within power.N_MAX pairs, or nothing to plan from: note)."""

    claim_id: str
    effect: str = ""
    n: int = 0
    per_rep: float = 0.0
    family: int = 1
    power_now: float | None = None
    pairs: int | None = None
    pairs_holm: int | None = None
    reps: int | None = None
    reps_holm: int | None = None
    note: str = ""


def experiment_file(experiment: str) -> Path:
    """A file, or a name under experiments/: a clear error when neither."""
    for p in (Path(experiment), REPO / "experiments" / f"{experiment}.yaml", REPO / experiment):
        if p.is_file():
            return p
    raise ValueError(f"experiment: {experiment!r} is neither a file nor a name under experiments/ "
                     "(e.g. experiments/tortoise.yaml or tortoise)")


def _claims_of(name: str, grid: str | None) -> list[Claim]:
    """The claims that read this experiment on this grid."""
    return [c for s in STUDIES.values() for c in s.claims if c.experiment == name and claim_grid(c, grid) == grid]


def _family(study_id: str, pilot: Path, grid: str | None) -> int:
    """Holm's m for a study: its claims with a test that is no tie, on the
    pilot results there are."""
    s = STUDIES[study_id]
    files, m = experiment_files(s), 0
    for c in s.claims:
        g = claim_grid(c, grid)
        folder = study_folder(c.experiment, g, pilot)
        if not folder.is_dir():
            continue
        try:
            x = measure_claim(c, load_runs(folder, current_run_ids(files[c.experiment], g)), folder)
        except NoData:
            continue
        m += x.p_value is not None and math.isfinite(x.p_value) and not tie_of(x)
    return max(m, 1)


def plan_claim(c: Claim, m: Measurement, reps: int, family: int, sims: int = pw.PLAN_SIMS,
               n_max: int = pw.N_MAX) -> ClaimPlan:
    """The plan of one claim from its pilot measurement m over `reps`
    repetitions, with Holm's m = family for its study."""
    out = ClaimPlan(c.id, n=m.n, per_rep=m.n / max(reps, 1), family=family)
    effect = pw.effect_of(c.judge)
    if tie_of(m):
        out.note = "a tie by construction: more runs do not help (" + tie_of(m) + ")"
        return out
    if effect is None or pw.log_ratios(m) is None:
        out.note = "no claimed effect or no pairs to simulate from: the claim's own rule, not a test of a shift"
        return out
    out.effect = effect.text()
    if m.exact_repeats:
        out.note = ("more repetitions add no pairs: its loss-free runs repeat exactly and count once (more "
                    "conditions would)")
        out.power_now = pw.power(m, effect, sims=sims, alpha=ALPHA / family)
        return out
    if m.statistic == "p90":
        sims = min(sims, P90_SIMS)
    out.power_now = pw.power(m, effect, sims=sims, alpha=ALPHA / family)
    out.pairs = pw.required_n(m, effect, POWER_TARGET, ALPHA, sims, n_max)
    out.pairs_holm = (out.pairs if family == 1 else
                      pw.required_n(m, effect, POWER_TARGET, ALPHA / family, sims, n_max))
    out.reps, out.reps_holm = (None if x is None else math.ceil(x / out.per_rep) for x in (out.pairs, out.pairs_holm))
    if out.pairs_holm is None:
        out.note = f"more than {n_max} pairs: the effect is small against the pilot's spread"
    return out


def seconds_per_run(folder: Path) -> float | None:
    """The mean stored wall time of the pilot's runs (host time per run,
    with the jobs the pilot ran with side by side)."""
    walls = [s.record.meta.wall_seconds for s in store.read_records(folder) if s.record.meta.wall_seconds]
    return sum(walls) / len(walls) if walls else None


def plan(experiment: str, grid: str | None = "reduced", pilot: str | Path = "results",
         sims: int = pw.PLAN_SIMS) -> tuple[list[ClaimPlan], dict]:
    """Every claim reading the experiment on `grid`, planned from the
    pilot results (results/<name>@<grid> under `pilot`), and the pilot's
    facts: folder, repetitions, runs per repetition, seconds per run."""
    f = experiment_file(experiment)
    name = experiment_name(f)
    folder = study_folder(f, grid, pilot)
    if not folder.is_dir():
        raise ValueError(f"--pilot: no results in {folder}; run `tortoise run {f} --grid {grid}` first, or give "
                         "--pilot the results root that holds them")
    ids = current_run_ids(f, grid)
    df = load_runs(folder, ids)
    if df.empty:
        raise ValueError(f"--pilot: {folder} holds no run of the file's grid {grid}")
    reps = int(df["repetition"].nunique())
    claims = _claims_of(name, grid)
    if not claims:
        raise ValueError(f"experiment: no claim reads {name} on grid {grid}")
    families = {s: _family(s, Path(pilot), grid) for s in {c.study for c in claims}}
    rows = []
    for c in claims:
        try:
            rows.append(plan_claim(c, measure_claim(c, df, folder), reps, families[c.study], sims))
        except NoData as exc:
            rows.append(ClaimPlan(c.id, note=f"no data in the pilot: {exc}"))
    info = {"file": f, "name": name, "grid": grid, "folder": folder, "reps": reps, "runs": len(df),
            "runs_per_rep": len(ids) / reps, "seconds_per_run": seconds_per_run(folder)}
    return rows, info


def repetitions_needed(rows: list[ClaimPlan], cap: int) -> tuple[int | None, str]:
    """The largest repetitions any claim needs at Holm's level, capped (with
    a note of what the cap leaves underpowered)."""
    need = [r.reps_holm for r in rows if r.reps_holm is not None]
    out_of_reach = [r.claim_id for r in rows if r.effect and r.reps_holm is None]
    far = f"out of reach within {pw.N_MAX} pairs: {', '.join(out_of_reach)}" if out_of_reach else ""
    if not need:
        return None, far or "no claim of this experiment has a test to plan from"
    top = max(need)
    if top <= cap:
        return top, far
    short = ", ".join(r.claim_id for r in rows if r.reps_holm is not None and r.reps_holm > cap)
    return cap, "; ".join(x for x in (f"capped at {cap} repetitions (--max-repetitions): {short} would need up to "
                                      f"{top}", far) if x)


def powered_grid(info: dict, reps: int, note: str = "") -> str:
    """The `powered` grid block for the experiment file: the pilot grid's
    sweep (or the file's own) with `reps` repetitions."""
    raw = yaml.safe_load(Path(info["file"]).read_text())
    base = copy.deepcopy(raw["grids"][info["grid"]]) if info["grid"] else {
        k: raw[k] for k in ("sweep", "exclude") if k in raw}
    base["description"] = (f"powered (tortoise plan from the {info['grid'] or 'full'} pilot): the same sweep with "
                           f"{reps} repetitions, for {POWER_TARGET:.0%} power at Holm's level per claim"
                           + (f"; {note}" if note else ""))
    base["repetitions"] = reps
    return yaml.safe_dump({"powered": base}, sort_keys=False, width=110)


def _n(x) -> str:
    return "-" if x is None else f"{x}"


def format_plan(rows: list[ClaimPlan], info: dict, jobs: int = 1, nodes: int = 1, cap: int = 200) -> str:
    """The plan as text: one line per claim, then the powered grid's cost."""
    out = [f"{info['name']} (pilot {info['folder']}: {info['runs']} runs, {info['reps']} repetitions, "
           f"{info['runs_per_rep']:.0f} runs per repetition)",
           f"pairs needed for {POWER_TARGET:.0%} power to see the claimed effect at alpha {ALPHA:g} and at Holm's "
           f"alpha / m (simulation with each claim's own test, studies/power.py)", "",
           f"{'claim':38} {'n':>4} {'power now':>9} {'pairs':>6} {'Holm':>6} {'reps':>5} {'Holm':>5}  effect / note"]
    for r in rows:
        pn = "-" if r.power_now is None else f"{r.power_now:.2f}"
        holm = f"{_n(r.pairs_holm)}/{r.family}" if r.pairs_holm is not None else "-"
        out.append(f"{r.claim_id:38} {r.n:>4} {pn:>9} {_n(r.pairs):>6} {holm:>6} {_n(r.reps):>5} "
                   f"{_n(r.reps_holm):>5}  {r.effect}{'; ' if r.effect and r.note else ''}{r.note}")
    reps, note = repetitions_needed(rows, cap)
    out.append("")
    if reps is None:
        out.append(note)
        return "\n".join(out)
    runs = math.ceil(info["runs_per_rep"] * reps)
    sec = info["seconds_per_run"]
    out.append(f"powered grid: {reps} repetitions, {runs} runs" + (f" ({note})" if note else ""))
    if sec:
        here = runs * sec / jobs
        out.append(f"cost: {sec:.1f} s per run (the pilot's stored wall times): {_hours(here)} on this machine with "
                   f"--jobs {jobs}, {_hours(here / nodes)} on a cluster of {nodes} nodes (--nodes, each with --jobs "
                   f"{jobs})")
    return "\n".join(out)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"
