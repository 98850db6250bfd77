"""REPRODUCTION.md: every seed claim against the studies' results, the
physicist's checks, and the commands and run times behind them; what
`tortoise report --reproduction` writes (docs/analysis.md, "Verdicts: the
seed studies"). Every number in it is computed from the runs."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from tortoiselab.host import store
from tortoiselab.host.provenance import code_revision
from tortoiselab.studies.data import current_run_ids, report_grids, study_folder
from tortoiselab.studies.model import VERDICTS, Study, Verdict
from tortoiselab.studies.physics import gate_check, physics_checks
from tortoiselab.studies.registration import record_judged, table_hash
from tortoiselab.studies.registry import STUDIES, claim_grid, evaluate, experiment_files

WHY_WE_DIFFER = {
    "tortoise": "LinkedIn measured real users' page views in its PoPs for weeks (RUM); we emulate one path per "
                "region (sourced profiles, topologies/regions.yaml) with a handful of seeded repetitions. Our paths "
                "carry random loss but no competing traffic and no varying last-mile queue, and the client is our "
                "loader, not a browser. Linux's hybla sets the first window to rho = RTT/25 ms (2 on a 54 ms path, "
                "12 on a 304 ms path) instead of the route's initcwnd, and grows by 2^rho - 1 packets per ACK in "
                "slow start, which helps or hurts by path. Scalable and YeaH use standard slow start: a load "
                "that ends before any loss is identical with them and with H-TCP (0.00 % on the loss-free "
                "desktop paths); the seed's gains came from real paths' losses and queues.",
    "coalescing": "The seed's percentages are RUM p90s over real desktop users with real caches, "
                  "measured for pages whose static content was downloaded; each market's gain is read as the "
                  "p90 without cache hits, the p90 at 80 % of views from cache and the old pooled median beside "
                  "it (docs/statistics.md). The lab's client "
                  "coalesces every eligible request, so reuse is all-or-nothing. Without coalescing the static "
                  "assets wait for a second TCP + TLS set-up and then start from the initial window on a cold "
                  "connection, so the gain in the lab is more than one connect time. The Chromium rows (grid "
                  "browser; no cache, and 80 % of page views from the browser's own cache for the cache row) load "
                  "the page in a real browser, which cannot turn coalescing off: its arms "
                  "are one server IP (coalescing possible) against two IPs of the same server under the same "
                  "certificate (not possible), the way our loader's coalescing: false differs (a second TCP + TLS "
                  "connection, nothing else); without coalescing Chromium also races up to six connects to the "
                  "static origin and closes the spare ones after their handshakes (docs/browser.md).",
    "cubic_plus": "The paper gives no link rate, queue, repetition count or variance; we use 20 Mbit/s with a "
                  "one-BDP queue and our own module (RFC 9438 CUBIC without HyStart, plus the paper's two changes) "
                  "against the same module with n = 1 (plain CUBIC: only the paper's change differs); Linux's "
                  "stock cubic (with HyStart) is shown beside it, labelled secondary. Without loss a 5 or 50 KB "
                  "object runs the same slow start in every arm, so the delay and initial-window claims are "
                  "measured at 2 % loss on the 50 KB object (the 5 KB one ties even then, noted). The RTT-aware "
                  "K is our function 2R/(R + srtt) (kernel/modules/README.md), since the paper does not give one; "
                  "its sensitivity: the delay claims are read again on the K arm alone with R = 25 and 400 ms "
                  "beside the default 100 ms (variants).",
    "reno_beta": "The paper varies a 'reduction factor' from 0.5 ('the default') to 0.9 without saying which "
                 "number it is. Read as the depth of the cut, 1 - beta in our module (ssthresh = beta * cwnd), as "
                 "its mechanism sentence has it (a larger factor 'reduces the congestion window aggressively'), "
                 "its range is beta 0.5 -> 0.1: the primary rows. Read as beta itself, its range is beta 0.5 -> "
                 "0.9 and its 'surprisingly' is the harder cut winning: the variants (-as-beta). Every sentence is "
                 "measured in the paper's factor under each reading; each row's detail gives the other reading's "
                 "number. Low loss is 2 %: at 0 % every beta runs the same load.",
    "initcwnd": "The article measured one real page over a real LTE path (curl, a 64 KB receive window). In the "
                "lab, when the handshake overflows IW 3 its ACKs grow the server's window (Linux grows cwnd while "
                "it is the limit), so the response starts from a larger window than 3 and needs fewer data "
                "rounds; the lab's client also advertises a small window early on (about 51 KB, the flights "
                "marked rwnd-limited in the captures), much like the article's 64 KB.",
}

HOW_TO_READ = (
    "How to read a row: *our number* is the arm's change against the control in % (negative = faster for "
    "times, positive = more throughput; other units where the row says so) with, in brackets, the interval "
    "of the claim's own test at the study's level (below), and the raw p of that test at no change. The "
    "tests (docs/statistics.md): for a median change, the Wilcoxon signed-rank test on per-pair log ratios "
    "with the Hodges-Lehmann estimate (the exact sign-flip test below 6 pairs, whose smallest p is 2/2^n); "
    "for a p90, the studentized paired permutation test of the p90 ratio (the log ratio over its standard "
    "error, arm and control swapped within pairs; exact over the 2^n swaps up to 12 pairs; Chung & Romano "
    "2013): it keeps its size where the arms differ in shape, asymptotically, and is exact where they do not; "
    "over users, the same paired over users, and beside it the studentized between-group permutation test of "
    "two independent groups of users (LinkedIn split machines into groups: its design was between groups, not "
    "paired); the interval is the set of effects each test does not reject (test inversion), so interval and p "
    "cannot disagree. A p90 reading decides a label only where its test holds its size on its own values "
    "(made a population whose p90 ratio is exactly 1, 400 samples of its n: at most 8.3 % rejected at 0.05; "
    "analysis/sizecheck.py, docs/statistics.md \"A p90 test decides only where it holds its size\"); where a "
    "few slow runs decide a p90 it does not, and the row is not testable here with those figures. The TCP "
    "Tortoise and coalescing sentences, whose p90s the seeds measured over real users, are read first over "
    "each market's simulated users, paired. An unbounded side (-inf, +inf) is "
    "one the test cannot bound with these pairs. *n* = what the test counts: pairs (a condition "
    "and seed run in both arms), users (a simulated user in both arms), users per group (two independent "
    "groups), conditions (exact runs: one pair per condition), runs or connections. Loss-free runs on "
    "the virtual clock are exact: their interval is the runs' range, read as exact values (no inconclusive). "
    "*power* (for planning; it decides no "
    "label) = the probability that the claim's test at the study's level sees the claimed effect (the claimed "
    "range's bound nearer 0; for a direction claim, which names no size, the effect the planner sizes for; "
    "for \"about the same\", an "
    "interval within the margin) given the spread the pairs measured, by simulation "
    "(src/tortoiselab/studies/power.py); in brackets at 0.05. The verdicts, read off the interval alone: "
    "*agree* = it excludes 0 on the claimed side and overlaps the claimed range; *larger / smaller than "
    "claimed* = it excludes 0 on the claimed side, beyond / short of the range; *disagree* = it excludes 0 on "
    "the other side, or holds 0 and excludes every claimed effect (the data reject the claimed size, whatever "
    "the power; a direction claim names no size, so only a significant change the other way); exact runs "
    "outside the claim: disagree (a count has no 0 side); *inconclusive* = it holds both 0 and a claimed "
    "effect, with the pairs `tortoise plan` says would settle it; *not testable here* = a tie by construction "
    "(every pair the same, within the timing's resolution where most are: e.g. a loss-free load that runs "
    "the same slow start in both arms), a p90 test beyond its size on these values, or a quantity the lab "
    "does not model, with what would "
    "make it testable; *no data* = the runs are not there. *set-up*: single path (one emulated path per "
    "condition, seeded repetitions), population (simulated users of a market), browser (Chromium).")

MULTIPLE_COMPARISONS = (
    "One primary reading per seed sentence, named in `src/tortoiselab/studies/claims/` before these runs were "
    "judged (metric, set-up, comparison, test, effect); the headline counts seed sentences by their primary "
    "reading. Variants of a sentence (rich paths, over users, two groups, Chromium) are shown beneath each "
    "study as sensitivity: not in the headline, not in the family. Multiple comparisons: each study's family is "
    "its primary readings with a test (m), and every interval of the study is at level 0.05 / m (Bonferroni: "
    "simultaneous over the family, which Holm's step-down does not give); the p shown is raw / x m. The "
    "registry stores the hash of each claim with the runs it judged (`registry.json` in the results folder): "
    "a claim changed after its data had been judged is marked so.")

THE_LAB = (
    "The lab: a UML guest boot per batch of up to 8 runs (real Linux TCP, netem, Apache h2, tcpdump; "
    "every run with its own path, seeds and freshly started servers), virtual clock (time-travel), 2 "
    "batches side by side on a 2-core machine shared with other work; guest time includes the idle "
    "stretch before each later load of a batch (docs/determinism.md, \"Batches\"). An experiment "
    "run in several passes (repetitions raised between them; the runner keeps completed runs and adds "
    "the new ones) has the gaps between passes in its wall span: the sum of run walls is the cost.")


def _code_of(meta: dict) -> str:
    """The git revision a run's lab code came from (its record's meta.tools), as code_revision names it."""
    tools = meta.get("tools") or {}
    rev = str(tools.get("tortoiselab_git") or "")
    return (rev[:12] + (" + uncommitted changes" if tools.get("tortoiselab_dirty") else "")) if rev else "unknown"


def runs_code(results: Path, grid: str | None) -> list[str]:
    """Every git revision the runs of the folders the report reads were made by."""
    out: set[str] = set()
    for f, fg in _grids_read(grid):
        d = study_folder(f, fg, results)
        if d.is_dir():
            out.update(_run_times(d, current_run_ids(f, fg))["code"])
    return sorted(out)


def _run_times(exp_dir: Path, run_ids: set[str] | None = None) -> dict:
    """Runs, failures, first start and last end, wall and guest time of a
    folder: of the runs in run_ids (the grid's now), else of all."""
    recs = [s.record for s in store.read_records(exp_dir) if run_ids is None or s.record.run_id in run_ids]
    metas = [r.meta.model_dump() for r in recs]
    starts = sorted(m["started"] for m in metas if m.get("started"))
    ends = sorted(m["ended"] for m in metas if m.get("ended"))
    span = None
    if starts and ends:
        span = (datetime.fromisoformat(ends[-1]) - datetime.fromisoformat(starts[0])).total_seconds()
    return {"runs": len(recs), "failed": sum(1 for r in recs if not r.ok),
            "wall_span_s": span, "run_wall_s": sum(m.get("wall_seconds") or 0 for m in metas),
            "sim_s": sum(m.get("sim_seconds") or 0 for m in metas), "first": starts[0] if starts else None,
            "last": ends[-1] if ends else None,
            "clock": sorted({m.get("clock") for m in metas if m.get("clock")}),
            "code": sorted({_code_of(m) for m in metas}),
            "kernel": sorted({m.get("kernel_release") for m in metas if m.get("kernel_release")})}


def _md(x) -> str:
    """A table cell: pipes escaped, one line."""
    return str(x).replace("|", "\\|").replace("\n", " ")


def _grid_flag(grid: str | None) -> str:
    return f" --grid {grid}" if grid else ""


def _header(results: Path, grid: str | None, flat: list[Verdict]) -> list[str]:
    primary = [v for v in flat if v.primary]
    counts = verdict_counts(primary)
    changed = [v.claim_id for v in flat if v.changed]
    lacking = [v.claim_id for v in primary if v.verdict == "no data"]
    failed = sum(v.failed for v in flat if v.primary)
    return [
        "# Reproduction of the seed studies",
        "",
        f"Generated by `tortoise report --reproduction{_grid_flag(grid)}` on "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC "
        f"from `{results}/` ({'grid ' + grid if grid else 'the full grids'}) by the code of commit "
        f"{code_revision()}; its runs were made by the code of commit "
        f"{', '.join(runs_code(results, grid)) or 'none (no runs)'}. Every number below is computed from "
        "the runs by `src/tortoiselab/studies/` (claims and their measurements in `claims/`, the tests in "
        "`src/tortoiselab/analysis/inference.py` and `rankci.py`, the verdict rule in `measure.py`; "
        "docs/statistics.md); nothing is typed in. Seed files are the studies' texts, named by file at each "
        "claim (the project's briefing; they are not part of this repository).",
        "",
        f"**{len(primary)} seed sentences: " + ", ".join(f"{counts[k]} {k}" for k in VERDICTS) + ".** "
        f"Beside them {len(flat) - len(primary)} variants (sensitivity, not counted). Claims table "
        f"{table_hash(STUDIES)}" + (f"; changed after their data was judged: {', '.join(changed)}" if changed else "")
        + (f"; failed runs in the primary readings' selections: {failed}" if failed else "")
        + (f"; lacking data: {', '.join(lacking)}" if lacking else "") + ".",
        "",
        MULTIPLE_COMPARISONS,
        "",
        HOW_TO_READ,
        "",
    ]


def verdict_counts(flat: list[Verdict]) -> dict[str, int]:
    """Claims per verdict, every verdict of VERDICTS counted (0 if none)."""
    return {k: sum(1 for v in flat if v.verdict == k) for k in VERDICTS}


def _n_per_arm(v: Verdict) -> str:
    """n as what it counts (Measurement.n_what): "20 pairs", "200 users",
    "198 against 200 users per group" (two groups, each counted), "5 against
    10 values", "3 conditions", "44 runs"."""
    if v.n_control and v.n_arm and not v.n_control == v.n_arm == v.n:
        return f"{v.n_control} against {v.n_arm} {v.n_what}"
    return f"{v.n} {v.n_what}"


def _p_cell(v: Verdict) -> str:
    if v.p_value is None:
        return "-"
    adj = f"{v.p_family:.2g}" if v.p_family is not None else "-"
    return f"{v.p_value:.2g} / {adj}"


def _power_cell(v: Verdict) -> str:
    if v.power is None:
        return "-"
    raw = f" ({v.power_raw:.2f} at 0.05)" if v.power_raw is not None and v.family > 1 else ""
    return f"{v.power:.2f}{raw} for {v.effect}"


def _row(v: Verdict, grid: str | None, variant: bool = False) -> str:
    setup = f"{v.setup} ({v.grid} grid)" if grid and "," in grid and v.grid else v.setup
    tested = v.level is not None and v.level < 0.05 and v.low is not None and v.p_value is not None
    level = f" ({100 * (1 - v.level):.4g} % interval)" if tested else ""
    mark = " (changed after its data was judged)" if v.changed else ""
    first = f"`{v.sentence.split('.', 1)[1]}`: {_md(v.variant)}" if variant else f"{_md(v.claim)} (`{v.seed_file}`)"
    return (f"| {first} | {setup} | {_md(v.metric)} | {_md(v.measured)}{level} | {_n_per_arm(v)} | {_p_cell(v)} | "
            f"{_md(_power_cell(v))} | **{v.verdict}**{mark} | {_md(v.why)} |")


def _study_runs(s: Study, results: Path, grid: str | None) -> list[str]:
    """The study's commands with its run counts and wall time (stored runs)."""
    files = experiment_files(s)
    reads = list(dict.fromkeys([(f, g) for f in s.experiments for g in report_grids(f, grid)]
                               + [(files[c.experiment], claim_grid(c, grid)) for c in s.claims if c.grid]))
    out = []
    for f, fg in reads:
        d = study_folder(f, fg, results)
        ids = current_run_ids(f, fg)
        total = len(ids)
        t = _run_times(d, ids) if d.is_dir() else None
        runs = f"{t['runs']} runs ({t['failed']} failed) of {total}" if t and t["runs"] else f"0 runs of {total}"
        wall = f", {t['run_wall_s'] / 60:.1f} min of run walls" if t and t["runs"] else ""
        out.append(f"`tortoise run {f}{_grid_flag(fg)}`: {runs}{wall}")
    return out


def _study_section(s: Study, vs: list[Verdict], results: Path, grid: str | None) -> list[str]:
    primary = [v for v in vs if v.primary]
    variants = [v for v in vs if not v.primary]
    counts = verdict_counts(primary)
    family = max((v.family for v in vs), default=0)
    level = f"; intervals at level 0.05 / {family} = {0.05 / family:.3g}" if family > 1 else ""
    lines = [f"## {s.title}", "",
             f"Seed: {', '.join(f'`{x}`' for x in s.seed_files)}; experiments: "
             f"{', '.join(f'`{e}`' for e in s.experiments)}; notebook `{s.notebook}`.", "",
             "Runs: " + "; ".join(_study_runs(s, results, grid)) + ".", "",
             f"{len(primary)} seed sentences: " + ", ".join(f"{n} {k}" for k, n in counts.items() if n)
             + f"; a family of {family} tests{level}." + (f" {len(variants)} variants beneath." if variants else ""),
             "", "| claim (seed) | set-up | measured | our number | n | p raw / x m | power | verdict | why |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    lines += [_row(v, grid) for v in primary]
    if variants:
        lines += ["", "Variants (sensitivity: not in the headline, not in the family; judged at the same level):", "",
                  "| sentence: variant | set-up | measured | our number | n | p raw / x m | power | verdict | "
                  "why |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        lines += [_row(v, grid, variant=True) for v in variants]
    lines += ["", "Details and rules:", ""]
    for v in vs:
        lines.append(f"- `{v.claim_id}`: {_md(v.detail)}. Rule: {_md(v.rule)}.")
    lines += ["", f"Where we differ, and why: {WHY_WE_DIFFER[s.id]}", ""]
    return lines


def _checks_section(results: Path, grid: str | None) -> list[str]:
    lines = ["## The physicist's checks", "",
             "The physics gate on every completed run (analysis/gates.py: runs that fail it are left out of the "
             "verdicts), then on the server-side captures (flights.py, the ACK clock), at most 40 runs per experiment:", "",
             "| experiment | check | expected | measured | pass | notes |",
             "| --- | --- | --- | --- | --- | --- |"]
    for s in STUDIES.values():
        for f, fg in ((f, g) for f in s.experiments for g in report_grids(f, grid)):
            d = study_folder(f, fg, results)
            if not d.is_dir():
                continue
            ids = current_run_ids(f, fg)
            for c in [gate_check(d, ids), *physics_checks(d, ids)]:
                note = "; ".join([x for x in (c.detail, *c.failures[:3]) if x])
                lines.append(f"| {d.name} | {_md(c.name)} | {_md(c.expected)} | {_md(c.measured)} | "
                             f"{'-' if c.ok is None else ('yes' if c.ok else '**NO**')} | {_md(note)} |")
    lines.append("")
    return lines


def _grids_read(grid: str | None) -> list[tuple[str, str | None]]:
    """(experiment file, grid) for every folder the verdicts read: each
    study experiment on the report's grid, then the grids claims name of
    their own (the coalescing study's browser arm)."""
    out = [(f, g) for s in STUDIES.values() for f in s.experiments for g in report_grids(f, grid)]
    for s in STUDIES.values():
        files = experiment_files(s)
        out += [(files[c.experiment], claim_grid(c, grid)) for c in s.claims if c.grid]
    return list(dict.fromkeys(out))


def folders_read(results: Path, grid: str | None) -> list[Path]:
    """The results folders the report reads (verified first: host/verify.admitted)."""
    return list(dict.fromkeys(study_folder(f, fg, results) for f, fg in _grids_read(grid)))


def _times_section(results: Path, grid: str | None) -> list[str]:
    lines = ["## Commands and run times", "", THE_LAB, "",
             "| command | runs (failed) of the grid | lab kernel, clock | code (git) | first start .. last end (UTC) | "
             "wall span | sum of run walls | guest time |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for f, fg in _grids_read(grid):
        g = _grid_flag(fg)
        d = study_folder(f, fg, results)
        ids = current_run_ids(f, fg)
        total = len(ids)
        t = _run_times(d, ids) if d.is_dir() else None
        if not t or not t["runs"]:
            lines.append(f"| `tortoise run {f}{g} --jobs 2` | 0 of {total} | - | - | - | - | - | - |")
            continue
        lines.append(f"| `tortoise run {f}{g} --jobs 2` | {t['runs']} ({t['failed']}) of {total} | "
                     f"{', '.join(t['kernel']) or '-'}, {', '.join(t['clock']) or '-'} | {', '.join(t['code'])} | "
                     f"{t['first'][:19]} .. {t['last'][11:19]} | {t['wall_span_s'] / 60:.1f} min | "
                     f"{t['run_wall_s'] / 60:.1f} min | {t['sim_s'] / 60:.1f} min |")
    lines += ["", f"Then `tortoise report --reproduction{_grid_flag(grid)}` wrote this file.", ""]
    return lines


def reproduction(results: str | Path = "results", grid: str | None = "reduced",
                 with_checks: bool = True) -> tuple[str, list[str]]:
    """REPRODUCTION.md's text (reproduction_markdown) and the primary claims
    that lack data (verdict "no data"), for the command's exit status."""
    results = Path(results)
    all_v = {sid: evaluate(sid, results, grid, settle=True) for sid in STUDIES}
    all_v = record_judged(results, grid, all_v)
    lines = _header(results, grid, [v for vs in all_v.values() for v in vs])
    for sid, vs in all_v.items():
        lines += _study_section(STUDIES[sid], vs, results, grid)
    if with_checks:
        lines += _checks_section(results, grid)
    lines += _times_section(results, grid)
    lacking = [v.claim_id for vs in all_v.values() for v in vs if v.primary and v.verdict == "no data"]
    return "\n".join(lines), lacking


def reproduction_markdown(results: str | Path = "results", grid: str | None = "reduced",
                          with_checks: bool = True) -> str:
    """REPRODUCTION.md: one row per seed sentence's primary reading (claim,
    our number with the interval of its test and p, verdict and why), its
    variants beneath, the physicist's checks, and the commands and run
    times behind them; every number is computed from the results."""
    return reproduction(results, grid, with_checks)[0]
