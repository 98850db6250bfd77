"""`tortoise grade LAB [RESULTS]`: is a student's results folder complete for
a course lab, and if not, what is missing and which command fixes it.

A lab (labs/NN-name.md) declares what it needs in its front matter, the YAML
block between the first two `---` lines of the handout:

    ---
    title: "Lab 1: the TCP Tortoise"
    study: tortoise                      # tortoiselab.studies.STUDIES id
    grid: reduced                        # the experiments' grid (default reduced)
    min_repetitions: 5                   # completed runs per sweep point
    fidelity_ok_share: 0.9               # of completed runs, measured RTT = configured
    max_failed_share: 0.1                # of the lab's runs in the folder
    expected_minutes: 25
    notebook: notebooks/01_tortoise.ipynb
    experiments:
      - file: experiments/tortoise.yaml  # repository-relative
        require: {server.cc: [htcp, hybla]}   # optional: only these sweep values
        min_repetitions: 5                    # optional: overrides the lab's
    ---

The checks, per experiment, each printed with what is missing and the fix:

- experiment: the folder holds runs of the lab's experiment and grid (each
  run.json's `experiment` is <name>@<grid>), each run's resolved
  configuration is one of the grid's points and its run id is the one the
  lab's seed gives: a run from an edited experiment file is named with the
  fields that differ. The folder's experiment.yaml (the file of its first
  run) is compared with the lab's file too, to explain a difference; the runs
  decide;
- sweep points: every required point (all points of the grid, or those whose
  values are in `require`) has at least one completed run;
- repetitions: every required point has `min_repetitions` completed runs;
  a failed run stands in for one while the failed-runs check passes and the
  point completed at least half of them (its seed would fail it again);
- failed runs: at most `max_failed_share` of the folder's matching runs
  failed, each listed with its error;
- fidelity: at least `fidelity_ok_share` of the completed runs measured the
  configured handshake RTT (run.json `fidelity`);
- physics: no completed run has numbers no run can measure (a loss-free PLT
  below its napkin floor, a PLT below the path's RTT, bytes that are not the
  page's: analysis/gates.py), each such run named;
- lab assets: the folder's .lab (the pages and certificates its runs used)
  is what their generators make (host/labcheck.py); a .lab that differs
  fails the grade, and its runs are not rerun;
- rerun (by default): every completed run, rerun on the virtual clock,
  gives its record's numbers (host/audit.py); `--audit K` reruns a sample
  of K, chosen by `--audit-seed`, and says what it catches; `--audit 0`
  reruns none, a quick look that verifies no number (docs/course-labs.md,
  "Graded by rerunning"). A run of the real clock cannot be rerun exactly:
  the check names it as unverifiable and fails.

A point is a sweep point of the grid, i.e. one arm in one condition. The
folder for experiment <name> is RESULTS itself when RESULTS is named
<name>@<grid> or holds that experiment's runs, else RESULTS/<name>@<grid>
(RESULTS defaults to results/), so a lab with two experiments is graded
from the results root or from either folder.
"""

from __future__ import annotations

import os
import random
import shlex
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from tortoiselab.analysis.fidelity import NOT_JUDGED, judged_fidelity
from tortoiselab.course.handout import GradeError, Lab, LabExperiment, Point, config_key, fmt_value, plain
from tortoiselab.host import audit, labcheck, safefs, store
from tortoiselab.host.storedtraces import folder_traces
from tortoiselab.spec import cols, yamlfile
from tortoiselab.spec.experiment import Experiment, ExperimentError, expand, load

MAX_LINES = 8  # detail lines per check before "... and N more"


@dataclass
class GradeCheck:
    name: str
    ok: bool
    summary: str
    details: list[str] = field(default_factory=list)
    fix: str | None = None


@dataclass
class Section:
    """The checks of one experiment of the lab against one folder."""

    experiment: str  # <name>@<grid>
    folder: Path
    checks: list[GradeCheck]
    info: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


# --- the lab file ----------------------------------------------------------------


def leaf_diff(mine: Any, lab: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """(dotted field, yours, the lab's) for every leaf that differs."""
    if isinstance(mine, dict) and isinstance(lab, dict):
        out = []
        for k in sorted(set(mine) | set(lab)):
            out.extend(leaf_diff(mine.get(k), lab.get(k), f"{prefix}{k}."))
        return out
    return [] if mine == lab else [(prefix.rstrip("."), mine, lab)]


def closest_diff(config: dict, points: dict[str, Point]) -> list[tuple[str, Any, Any]]:
    """The differences to the lab's nearest point (fewest differing fields)."""
    diffs = [leaf_diff(plain(config), p.config) for p in points.values()]
    return min(diffs, key=len) if diffs else []


def read_runs(folder: Path) -> list[dict]:
    """Every completed run's record in a results folder (store.read_records;
    not the in-progress .tmp folders). An unreadable record is no run: the
    CLI refuses a folder with damaged runs first (host/verify.admitted)."""
    return [st.record.model_dump(mode="json") for st in store.read_records(folder, strict=False)
            if st.record is not None]


def _folder_experiment(folder: Path) -> str | None:
    """The experiment a results folder holds (its experiment.yaml's name or
    a run's), None when it is not an experiment's folder."""
    f = folder / "experiment.yaml"
    if os.path.lexists(f):  # neither through a link nor from a FIFO (host/safefs.py)
        try:
            # bounded: depth and digits before it is composed (spec/yamlfile.py)
            name = (yamlfile.loads(safefs.read_text_regular(f, doing="tortoise grade"), f) or {}).get("name")
            if name:
                return str(name)
        except (yaml.YAMLError, AttributeError, ValueError):
            pass
    for st in store.read_records(folder, strict=False):
        if st.record is not None:
            return st.record.experiment
    return None


def lab_results_folder(results: Path, exp: Experiment) -> Path:
    """RESULTS itself when it holds this experiment (any grid: the grid
    check then says which), its sibling <name>@<grid> when it holds another
    experiment, else RESULTS/<name>@<grid>."""
    base = exp.name.split("@")[0]
    held = _folder_experiment(results) if results.is_dir() else None
    if held is None:
        return results if results.name == exp.name else results / exp.name
    if held.split("@")[0] == base:
        return results
    return results.parent / exp.name


# --- the checks ------------------------------------------------------------------


def _more(lines: list[str]) -> list[str]:
    return lines if len(lines) <= MAX_LINES else [*lines[:MAX_LINES], f"... and {len(lines) - MAX_LINES} more"]


def run_command(le: LabExperiment, folder: Path) -> str:
    cmd = f"tortoise run {le.file} --grid {le.grid} --backend uml"
    parent = folder.parent
    if parent != Path("results"):
        cmd += f" --results {shlex.quote(str(parent))}"
    return cmd


def _stored_diff(folder: Path, le: LabExperiment) -> tuple[list[str], str | None]:
    """(what differs between the folder's experiment.yaml and the lab's file
    with its grid: name, seed, sweep, settings; None) or ([], why the
    folder's experiment.yaml cannot be read). Its traces are the project's
    or the folder's own copies, never a file it names elsewhere
    (host/storedtraces.py)."""
    f = folder / "experiment.yaml"
    if not os.path.lexists(f):
        return [], f"{f} is missing"
    try:  # neither through a link nor from a FIFO (host/safefs.py): refused, naming the file and the fix
        raw = yamlfile.loads(safefs.read_text_regular(f, doing="tortoise grade"), f, "experiment file") or {}
        with folder_traces(folder):
            stored = Experiment(**raw) if "@" in str(raw.get("name", "")) else load(f, grid=le.grid)
    except (ExperimentError, ValidationError, yaml.YAMLError, TypeError, ValueError, yamlfile.YamlFileError) as exc:
        return [], f"{f} does not load with grid {le.grid!r}: {str(exc).splitlines()[0]}"
    ours = le.exp.model_dump(exclude={"grids", "description"})
    theirs = stored.model_dump(exclude={"grids", "description"})
    if theirs["repetitions"] >= ours["repetitions"]:  # more repetitions than the lab's are welcome
        theirs["repetitions"] = ours["repetitions"]
    return [f"{k}: yours {fmt_value(a)}, the lab's {fmt_value(b)}" for k, a, b in leaf_diff(theirs, ours)], None


def check_experiment(le: LabExperiment, folder: Path, runs: list[dict],
                     matched: dict[str, list[dict]], unmatched: list[dict]) -> GradeCheck:
    name = le.exp.name
    wrong_name = Counter(str(r.get("experiment")) for r in runs if r.get("experiment") != name)
    details = [f"{n} runs of {e!r}, not {name!r}" for e, n in wrong_name.items()]
    fields: Counter = Counter()
    for r in unmatched:
        for k, mine, lab in closest_diff(r.get("config") or {}, le.points):
            fields[(k, fmt_value(mine), fmt_value(lab))] += 1
    if unmatched:
        details.append(f"{len(unmatched)} runs are not at any point of the lab's grid; they differ in:")
        details += [f"  {k}: yours {mine}, the lab's {lab} ({n} runs)" for (k, mine, lab), n in fields.most_common()]
    reps = max([int(r.get("repetition") or 0) + 1 for r in runs] + [le.exp.repetitions])
    ids = {s.run_id for s in expand(le.exp.model_copy(update={"repetitions": reps}))}
    reseeded = [r for rs in matched.values() for r in rs if r.get(cols.RUN_ID) not in ids]
    if reseeded:
        details.append(f"{len(reseeded)} runs have the lab's settings but not its run ids "
                       "(another seed: the experiment's seed was changed)")
    n_ok = sum(len(v) for v in matched.values())
    # the stored file explains a difference; the runs decide (the runner keeps the file of the folder's first run)
    diffs, unreadable = _stored_diff(folder, le)
    if unreadable:  # the runs are graded against the file they were run from: without it, no grade
        return GradeCheck("experiment", False, "the folder's experiment.yaml cannot be read", [unreadable],
                          f"run the lab's experiment unchanged into a fresh folder: {run_command(le, folder)} "
                          f"(move {folder} aside first; it is yours to keep)")
    stored = [f"experiment.yaml: {d}" for d in diffs]
    if not details:
        return GradeCheck("experiment", True, f"{n_ok} runs, all of {name} ({le.file}, grid {le.grid})", stored)
    details = stored + details
    grid_only = wrong_name and all(str(e).split("@")[0] == name.split("@")[0] for e in wrong_name)
    fix = (f"these are runs of another grid; run the lab's: {run_command(le, folder.parent / name)}"
           if grid_only else
           f"run the lab's experiment unchanged (`git diff {le.file}` shows your edits; `git checkout "
           f"{le.file}` undoes them) into a fresh folder: move {folder} aside (it is yours to keep), then "
           f"{run_command(le, folder)}")
    return GradeCheck("experiment", False, f"the folder differs from {name} as the lab defines it", _more(details), fix)


def check_points(le: LabExperiment, folder: Path, done: dict[str, int]) -> GradeCheck:
    missing = [le.points[k].label for k in le.required if done.get(k, 0) == 0]
    total = len(le.required)
    if not missing:
        return GradeCheck("sweep points", True, f"all {total} required points have completed runs")
    return GradeCheck("sweep points", False, f"{len(missing)} of {total} required points have no completed run",
                 _more(missing), f"{run_command(le, folder)}   (it resumes: only the missing runs are done)")


def check_repetitions(le: LabExperiment, folder: Path, done: dict[str, int], failed: dict[str, int],
                      failures_ok: bool) -> GradeCheck:
    """Every required point has min_repetitions completed runs. A run that
    failed stands in for a completed one while the failed-runs check passes
    and the point kept at least half its runs: its seed decides its path, so
    on the virtual clock it would fail the same way again (e.g. the one DNS
    query a bursty path drops)."""
    need = le.min_repetitions
    excused = {k for k in le.required if failures_ok and done.get(k, 0) < need
               and done.get(k, 0) + failed.get(k, 0) >= need and 2 * done.get(k, 0) >= need}
    short = [k for k in le.required if 0 < done.get(k, 0) < need and k not in excused]
    if not short and all(done.get(k, 0) >= need or k in excused for k in le.required):
        return GradeCheck("repetitions", True, f"every required point has >= {need} completed runs"
                          + (f" ({len(excused)} of them with failed runs standing in: see failed runs)" if excused else ""))
    lines = [f"{le.points[k].label}: {done.get(k, 0)} of {need}"
             + (f" ({failed[k]} failed)" if failed.get(k) else "") for k in short]
    return GradeCheck("repetitions", False, f"{len(short)} points have fewer than {need} completed runs"
                 + ("" if short else " (see sweep points)"), _more(lines),
                 f"{run_command(le, folder)}   (failed runs are kept and not redone: see failed runs)")


def check_failures(le: LabExperiment, folder: Path, matched_all: list[dict], max_share: float) -> GradeCheck:
    bad = [r for r in matched_all if not r.get(cols.OK)]
    n = len(matched_all)
    share = len(bad) / n if n else 0.0
    lines = [f"{r['run_id']} ({le.points[config_key(r.get('config') or {})].label}): "
             f"{str(r.get('error') or 'failed').splitlines()[0][:160]}" for r in bad]
    summary = f"{len(bad)} of {n} runs failed ({share:.0%}; at most {max_share:.0%} allowed)"
    if share <= max_share:
        return GradeCheck("failed runs", True, summary, _more(lines))
    fix = (f"see why with `tortoise show RUN_ID --results {folder.parent}`; a failed run stays in the folder "
           f"and is not redone: move its folder out of {folder} (keep it), then {run_command(le, folder)}")
    return GradeCheck("failed runs", False, summary, _more(lines), fix)


def check_fidelity(ok_runs: list[dict], share_needed: float) -> GradeCheck:
    every = [(r, *judged_fidelity(r)) for r in ok_runs]
    verdicts = [v for v in every if v[3] != NOT_JUDGED]
    good = sum(1 for _, v, _, _ in verdicts if v)
    n = len(verdicts)
    share = good / n if n else 0.0
    allowed = Counter(how for _, v, _, how in verdicts if v and how)
    by = {"jitter": "within the path's jitter", "queue": "within the queue of the cross traffic"}
    unjudged = len(every) - n
    summary = (f"{good} of {n} completed runs measured the configured path ({share:.0%}; {share_needed:.0%} needed"
               + "".join(f"; {allowed[k]} of them {by[k]}" for k in by if allowed[k]) + ")"
               + (f"; {unjudged} not judged (every handshake waited out a retransmission timeout)"
                  if unjudged else ""))
    lines = [f"{r['run_id']}: {why}" for r, v, why, _ in verdicts if not v]
    if n and share >= share_needed:
        return GradeCheck("fidelity", True, summary, _more(lines))
    fix = ("runs whose measured RTT is off ran on a lab that was not doing what it was told: check it with "
           "`tortoise probe --backend uml`, run on the uml backend with the virtual clock (its results do not "
           "depend on how busy the laptop is), move the off runs out of the folder and run again")
    return GradeCheck("fidelity", False, summary, _more(lines), fix if n else None)


def check_physics(le: LabExperiment, folder: Path, ok_runs: list[dict]) -> GradeCheck:
    """Every completed run's numbers are ones a run can measure (the physics
    gate, analysis/gates.py, with the folder's own site): a loss-free PLT not
    below its napkin floor, no PLT below the path's RTT, the page's bytes."""
    bad = audit.gate_runs(folder, ok_runs)
    n = len(ok_runs)
    site = folder / ".lab" / "site" / "manifest.json"
    note = [] if site.is_file() else [f"bytes and napkin floors not checked: no {site} (a copy without .lab; "
                                      "grade the folder where it was run)"]
    if not bad:
        return GradeCheck("physics", True, f"all {n} completed runs pass the physics gate (PLT >= the napkin floor "
                          "on loss-free paths and >= the RTT, the page's bytes)", note)
    lines = note + [f"{rid}: {'; '.join(why)}" for rid, why in bad.items()]
    return GradeCheck("physics", False, f"{len(bad)} of {n} completed runs have numbers no run can measure: "
                      f"{', '.join(bad)}", _more(lines),
                      f"these records were edited or measured another page: move those runs' folders out of "
                      f"{folder} (keep them), then {run_command(le, folder)}   (it redoes the missing runs)")


def _pct(p: float) -> str:
    return f"{100 * p:.0f} %" if p < 0.995 or p == 1 else f"{100 * p:.1f} %"


def sample_line(n: int, k: int) -> str:
    """What a sample of k reruns of n runs catches: one forged run with
    probability k/n, f forged ones with 1 - C(n-f, k)/C(n, k) (audit.detection_probability)."""
    fs = [f for f in (2, 3, 5) if f <= n]
    return (f"a sample: one forged run is caught with probability {k}/{n} = {_pct(audit.detection_probability(n, k))}"
            + "".join(f", {f} forged runs {_pct(audit.detection_probability(n, k, f))}" for f in fs)
            + "; leave out --audit to rerun every run")


def check_rerun(le: LabExperiment, folder: Path, ok_runs: list[dict], k: int | None, seed: int,
                jobs: int = 1) -> GradeCheck:
    """Rerun every completed run (k None) or k of them (chosen by seed) on
    the virtual clock and compare every number the grade, a report or a
    verdict reads (host/audit.py): the lab's determinism is the check
    (docs/course-labs.md, "Graded by rerunning")."""
    reps = max([int(r.get("repetition") or 0) + 1 for r in ok_runs] + [le.exp.repetitions])
    exp = le.exp.model_copy(update={"repetitions": reps})
    res = audit.audit(folder, exp, [str(r.get(cols.RUN_ID)) for r in ok_runs], k, seed, jobs=jobs)
    cmd = run_command(le, folder)
    sampled = k is not None and len(res.chosen) < res.pool
    how = f"{len(res.chosen)} of {res.pool} completed runs" + (f" (seed {seed})" if sampled else "")
    notes = [sample_line(res.pool, len(res.chosen))] if sampled else []
    if res.refused:
        return GradeCheck("rerun", False, f"could not rerun {how}: {res.refused}", notes,
                          fix=f"run the lab on the uml backend's virtual clock ({cmd}) and grade where the lab "
                              "kernel is built (make kernel; the course VM has it)")
    real = [f"{r}: ran on the real clock, which no rerun repeats exactly: its numbers cannot be verified"
            for r in res.real_clock]
    lines = [f"{rid} ({res.labels.get(rid, '')}): {'; '.join(d)}" for rid, d in res.mismatches.items()]
    if res.ok:
        return GradeCheck("rerun", True, f"{how} rerun on the virtual clock ({res.wall_seconds} s) gave their "
                          "records' numbers", notes)
    summary = "; ".join(x for x in (
        f"{len(res.mismatches)} of {len(res.rerun)} runs rerun on the virtual clock differ from their records: "
        f"{', '.join(res.mismatches)}" if res.mismatches else "",
        f"{len(res.real_clock)} of {len(res.chosen)} runs ran on the real clock and cannot be verified"
        if res.real_clock else "") if x)
    return GradeCheck("rerun", False, summary, _more(notes + lines + real),
                      (f"a record must hold what the lab measured: move those runs' folders out of {folder} "
                       f"(keep them), then {cmd}   (it redoes the missing runs), and do not edit results")
                      if res.mismatches else
                      f"run the lab as its handout says, on the uml backend's virtual clock, into a fresh folder: "
                      f"move {folder} aside (keep it), then {cmd}")


def check_lab_assets(folder: Path, le: LabExperiment, sites_dir: Path | None = None) -> GradeCheck:
    """The folder's .lab (the pages and certificates its runs used) is what
    their generators make for it (host/labcheck.py), its imported sites the
    import in sites_dir and what the run records say they loaded."""
    c = labcheck.check_lab(folder, seed_name=le.exp.name, certs={p.config.get("server", {}).get("cert")
                                                                 for p in le.points.values()} - {None},
                           sites_dir=sites_dir)
    if c.unchecked:
        return GradeCheck("lab assets", True, f"not compared: {c.unchecked}")
    if c.ok:
        return GradeCheck("lab assets", True, f".lab: the pages and certificates are what their generators make "
                          f"({c.files} files)")
    return GradeCheck("lab assets", False, f"{len(c.differences)} files of {folder / '.lab'} differ from what their "
                      "generators make: every run of the folder used them", c.lines(MAX_LINES), labcheck.fix(folder))


def grade_experiment(lab: Lab, le: LabExperiment, results: Path, audit_k: int | None = None, audit_seed: int = 0,
                     jobs: int = 1, sites_dir: Path | None = None) -> Section:
    folder = lab_results_folder(results, le.exp)
    if not folder.is_dir():
        return Section(le.exp.name, folder, [GradeCheck(
            "results folder", False, f"{folder} does not exist",
            fix=f"{run_command(le, folder)}   (writes {folder}; or pass the folder it wrote as RESULTS)")])
    runs = read_runs(folder)
    if not runs:
        return Section(le.exp.name, folder, [GradeCheck(
            "results folder", False, f"{folder} has no completed runs",
            fix=f"{run_command(le, folder)}")])
    matched: dict[str, list[dict]] = {}
    unmatched = []
    for r in runs:
        k = config_key(r.get("config") or {})
        if k in le.points and r.get("experiment") == le.exp.name:
            matched.setdefault(k, []).append(r)
        elif k not in le.points:
            unmatched.append(r)
    done = {k: sum(1 for r in rs if r.get(cols.OK)) for k, rs in matched.items()}
    failed = {k: sum(1 for r in rs if not r.get(cols.OK)) for k, rs in matched.items()}
    matched_all = [r for rs in matched.values() for r in rs]
    ok_runs = [r for r in matched_all if r.get(cols.OK)]
    failures = check_failures(le, folder, matched_all, lab.spec.max_failed_share)
    checks = [check_experiment(le, folder, runs, matched, unmatched), check_points(le, folder, done),
              check_repetitions(le, folder, done, failed, failures.ok), failures,
              check_fidelity(ok_runs, lab.spec.fidelity_ok_share), assets := check_lab_assets(folder, le, sites_dir),
              check_physics(le, folder, ok_runs)]
    if audit_k != 0 and not assets.ok:  # the pages or certificates its runs used are not the lab's
        checks.append(GradeCheck("rerun", False, "not rerun: the folder's .lab differs from what its generators "
                                 "make (see lab assets); a rerun with it would repeat what it measured"))
    elif audit_k != 0:
        checks.append(check_rerun(le, folder, ok_runs, audit_k, audit_seed, jobs))
    envs = Counter(f"{(r.get('meta') or {}).get('backend')} backend, {(r.get('meta') or {}).get('clock')} clock"
                   for r in ok_runs)
    info = ["ran on: " + "; ".join(f"{e} ({n} runs)" for e, n in envs.most_common())] if envs else []
    return Section(le.exp.name, folder, checks, info)


def grade(lab: Lab, results: Path, audit_k: int | None = None, audit_seed: int | None = None,
          jobs: int = 1, sites_dir: Path | None = None) -> list[Section]:
    """The lab's checks on every experiment's folder, then the reruns on the
    virtual clock: of every completed run (audit_k None, the default), of
    audit_k of them picked by audit_seed (None: a seed of the grader's own,
    printed so that it can be repeated with --audit-seed), or of none
    (audit_k 0: a quick look at what is missing, which verifies no number);
    `jobs` labs side by side; sites_dir: the imported sites a folder's
    staged copies are compared with (host/sitecheck.py)."""
    if audit_k is not None and audit_k < 0:
        raise GradeError(f"--audit {audit_k}: K is the number of runs to rerun per experiment (leave --audit out "
                         "to rerun every run; 0: none, a quick look that verifies no number); e.g. --audit 2")
    audit_seed = random.SystemRandom().randrange(2**31) if audit_seed is None else audit_seed
    results = Path(results)
    if results.exists() and not results.is_dir():
        raise GradeError(f"RESULTS {results}: is a file; give the results folder `tortoise run` printed "
                         "(e.g. results/tortoise@reduced) or the results root (results)")
    if not results.exists():
        names = ", ".join(str(lab_results_folder(Path("results"), le.exp)) for le in lab.experiments)
        raise GradeError(f"RESULTS {results}: no such folder; run the lab first (its handout, {lab.path}, says "
                         f"how), then give its folder ({names}) or the results root")
    return [grade_experiment(lab, le, results, audit_k, audit_seed, jobs, sites_dir) for le in lab.experiments]


def format_grade(lab: Lab, sections: list[Section]) -> str:
    out = [f"{lab.spec.title} ({lab.path})"]
    for s in sections:
        out.append(f"\n{s.experiment}: {s.folder}")
        for c in s.checks:
            out.append(f"  [{'ok' if c.ok else 'MISSING'}] {c.name}: {c.summary}")
            out.extend(f"        {d}" for d in c.details)
            if not c.ok and c.fix:
                out.append(f"        fix: {c.fix}")
        out.extend(f"  {line}" for line in s.info)
    n_bad = sum(1 for s in sections for c in s.checks if not c.ok)
    unverified = not all(any(c.name == "rerun" for c in s.checks) for s in sections)
    out.append(("\ncomplete: every requirement of the lab is met" + (
        " (its numbers unverified: no run was rerun, --audit 0; the grade without --audit reruns every run)"
        if unverified else "")) if n_bad == 0 else
               f"\nnot complete: {n_bad} requirement{'s' if n_bad > 1 else ''} missing (see fix: lines above)")
    return "\n".join(out)


def complete(sections: list[Section]) -> bool:
    return all(s.ok for s in sections)
