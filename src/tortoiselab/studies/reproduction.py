"""REPRODUCTION.md: every seed claim against the studies' results, the
physicist's checks, and the commands and run times behind them; what
`tortoise report --reproduction` writes (README.md, "Analysis, report, the
VM"). Every number in it is computed from the runs."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from tortoiselab.host import store
from tortoiselab.studies.data import current_run_ids, report_grids, study_folder
from tortoiselab.studies.model import VERDICTS, Study, Verdict
from tortoiselab.studies.physics import gate_check, physics_checks
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
    "coalescing": "The seed's percentages are RUM p90s over real desktop users with real caches; the lab's client "
                  "coalesces every eligible request, so reuse is all-or-nothing. Without coalescing the static "
                  "assets wait for a second TCP + TLS set-up and then start from the initial window on a cold "
                  "connection, so the gain in the lab is more than one connect time. The Chromium rows (grid "
                  "browser, no cache) load the page in a real browser, which cannot turn coalescing off: its arms "
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
                  "K is our function 2R/(R + srtt) (kernel/modules/README.md), since the paper does not give one.",
    "reno_beta": "The paper calls 0.5 'the default' and says a 'smaller reduction factor ... reduces the "
                 "congestion window less aggressively': its reduction factor is how hard the window is cut, "
                 "1 - beta in our module (ssthresh = beta * cwnd), and both high-loss sentences are read that way. "
                 "Low loss is 2 %: at 0 % every beta runs the same load.",
    "initcwnd": "The article measured one real page over a real LTE path (curl, a 64 KB receive window). In the "
                "lab, when the handshake overflows IW 3 its ACKs grow the server's window (Linux grows cwnd while "
                "it is the limit), so the response starts from a larger window than 3 and needs fewer data "
                "rounds; the lab's client also advertises a small window early on (about 51 KB, the flights "
                "marked rwnd-limited in the captures), much like the article's 64 KB.",
}

HOW_TO_READ = (
    "How to read a row: *our number* is the change of the arm against the control in % (negative = faster "
    "for times, positive = more throughput) with its 95 % bootstrap CI in brackets and the raw p-value of a "
    "paired test: Wilcoxon signed-rank on log ratios for a median change with 6 or more pairs (as in the seed), "
    "the exact sign-flip test on log ratios below that (its smallest p is 2/2^n: 5 pairs can never reach "
    "0.05), and for a p90 a test made for the quantile: a paired permutation test of the p90 difference "
    "(arm and control swapped within pairs; exact over the 2^n swaps up to 12 pairs, smallest p 2/2^n; its "
    "size is right at any n, where a percentile bootstrap of a p90 of 6 pairs rejects a true no-change "
    "about 3.6 times too often). *n per arm* = runs of control + arm that were paired. Loss-free runs on the "
    "virtual clock are exact, so their interval is the runs' range and there is no test. *power* = the "
    "probability that the claim's test, at the level its verdict is judged by (Holm's alpha / m, m = the "
    "study's tests), sees the claimed effect (the claimed range's bound nearer 0; a direction claim's 5 %; for "
    "\"about the same\", a CI within the margin) given the spread the pairs measured, by simulation: the pairs' "
    "log ratios resampled to n, shifted to the claimed effect, the same test run (src/tortoiselab/studies/"
    "power.py; for a p90 beyond 12 pairs at a Holm level below what its 400 random swaps resolve, the swaps' "
    "normal tail, which is conservative: it understates that power); in brackets the power at 0.05 before the "
    "correction. The verdicts: *agree* / *partly* / "
    "*disagree* as the rule under each study says; *inconclusive* = not significant, and the test had less "
    "than 0.8 power for the claimed effect (too few runs to tell); *disagree* for a result that is not "
    "significant only where it had that power; *not testable here* = every pair of runs identical (a tie by "
    "construction, e.g. a loss-free load that runs the same slow start in both arms): the lab cannot tell the "
    "arms apart, which is no finding; *no data* = the runs are not there. *set-up*: single path (one emulated "
    "path per condition, seeded repetitions), population (simulated users of a market), browser (Chromium).")

MULTIPLE_COMPARISONS = (
    "Multiple comparisons: one policy for the whole report (and the study notebooks, which call the same "
    "code): Holm per study over its claims' p-values (the claims with a test; ties by construction left out), "
    "significance judged by the Holm-adjusted p < 0.05. Both p-values are shown: raw, then Holm.")

THE_LAB = (
    "The lab: a UML guest boot per batch of up to 8 runs (real Linux TCP, netem, Apache h2, tcpdump; "
    "every run with its own path, seeds and freshly started servers), virtual clock (time-travel), 2 "
    "batches side by side on a 2-core machine shared with other work; guest time includes the idle "
    "stretch before each later load of a batch (docs/determinism.md, \"Batches\"). An experiment "
    "run in several passes (repetitions raised between them; the runner keeps completed runs and adds "
    "the new ones) has the gaps between passes in its wall span: the sum of run walls is the cost.")


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
            "kernel": sorted({m.get("kernel_release") for m in metas if m.get("kernel_release")})}


def _md(x) -> str:
    """A table cell: pipes escaped, one line."""
    return str(x).replace("|", "\\|").replace("\n", " ")


def _grid_flag(grid: str | None) -> str:
    return f" --grid {grid}" if grid else ""


def _header(results: Path, grid: str | None, flat: list[Verdict]) -> list[str]:
    counts = verdict_counts(flat)
    return [
        "# Reproduction of the seed studies",
        "",
        f"Generated by `tortoise report --reproduction{_grid_flag(grid)}` on "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC "
        f"from `{results}/` ({'grid ' + grid if grid else 'the full grids'}). Every number below is computed from "
        "the runs by `src/tortoiselab/studies/` (claims and their measurements in `claims/`, verdict rules in "
        "`measure.py`); nothing is typed in. Seed files are the studies' texts, named by file at each claim "
        "(the project's briefing; they are not part of this repository).",
        "",
        f"**{len(flat)} claims: " + ", ".join(f"{counts[k]} {k}" for k in VERDICTS) + ".**",
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
    return f"{v.n_control} + {v.n_arm}" if v.n_control or v.n_arm else f"{v.n} (runs)"


def _p_cell(v: Verdict) -> str:
    if v.p_value is None:
        return "-"
    holm = f"{v.p_holm:.2g}" if v.p_holm is not None else "-"
    return f"{v.p_value:.2g} / {holm}"


def _power_cell(v: Verdict) -> str:
    if v.power is None:
        return "-"
    raw = f" ({v.power_raw:.2f} at 0.05)" if v.power_raw is not None and v.family > 1 else ""
    return f"{v.power:.2f}{raw} for {v.effect}"


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
    counts = verdict_counts(vs)
    family = max((v.family for v in vs if v.p_holm is not None), default=0)
    lines = [f"## {s.title}", "",
             f"Seed: {', '.join(f'`{x}`' for x in s.seed_files)}; experiments: "
             f"{', '.join(f'`{e}`' for e in s.experiments)}; notebook `{s.notebook}`.", "",
             "Runs: " + "; ".join(_study_runs(s, results, grid)) + ".", "",
             f"{len(vs)} claims: " + ", ".join(f"{n} {k}" for k, n in counts.items() if n)
             + (f"; Holm over {family} tests." if family else "."), "",
             "| claim (seed) | set-up | measured | our number | n per arm | p raw / Holm | power | verdict | why |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for v in vs:
        setup = f"{v.setup} ({v.grid} grid)" if grid and "," in grid and v.grid else v.setup
        lines.append(f"| {_md(v.claim)} (`{v.seed_file}`) | {setup} | {_md(v.metric)} | {_md(v.measured)} | "
                     f"{_n_per_arm(v)} | {_p_cell(v)} | {_md(_power_cell(v))} | **{v.verdict}** | {_md(v.why)} |")
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
             "| command | runs (failed) of the grid | lab kernel, clock | first start .. last end (UTC) | wall span | "
             "sum of run walls | guest time |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for f, fg in _grids_read(grid):
        g = _grid_flag(fg)
        d = study_folder(f, fg, results)
        ids = current_run_ids(f, fg)
        total = len(ids)
        t = _run_times(d, ids) if d.is_dir() else None
        if not t or not t["runs"]:
            lines.append(f"| `tortoise run {f}{g} --jobs 2` | 0 of {total} | - | - | - | - | - |")
            continue
        lines.append(f"| `tortoise run {f}{g} --jobs 2` | {t['runs']} ({t['failed']}) of {total} | "
                     f"{', '.join(t['kernel']) or '-'}, {', '.join(t['clock']) or '-'} | "
                     f"{t['first'][:19]} .. {t['last'][11:19]} | {t['wall_span_s'] / 60:.1f} min | "
                     f"{t['run_wall_s'] / 60:.1f} min | {t['sim_s'] / 60:.1f} min |")
    lines += ["", f"Then `tortoise report --reproduction{_grid_flag(grid)}` wrote this file.", ""]
    return lines


def reproduction_markdown(results: str | Path = "results", grid: str | None = "reduced",
                          with_checks: bool = True) -> str:
    """REPRODUCTION.md: one row per seed claim (claim, our number with 95 %
    CI and p, verdict and why), the physicist's checks, and the commands and
    run times behind them; every number is computed from the results."""
    results = Path(results)
    all_v = {sid: evaluate(sid, results, grid) for sid in STUDIES}
    lines = _header(results, grid, [v for vs in all_v.values() for v in vs])
    for sid, vs in all_v.items():
        lines += _study_section(STUDIES[sid], vs, results, grid)
    if with_checks:
        lines += _checks_section(results, grid)
    lines += _times_section(results, grid)
    return "\n".join(lines)
