"""The seed studies as data: what each one claims, which experiment measures
it, how our number is computed from the results, and the rule that turns the
number into a verdict (agree / larger or smaller than claimed / disagree /
inconclusive / not testable here), read off the interval of each claim's
own test at its study's level (docs/statistics.md). The labs, the study
notebooks, `tortoise grade`'s lab checks and `tortoise report
--reproduction` build on it (labs/README.md, notebooks/README.md, docs/analysis.md
"Verdicts: the seed studies"); notebooks use it as
`from tortoiselab import studies`. Its public face, kept stable:

    STUDIES: dict[str, Study]
        ids: "tortoise" (seeds 000/004), "coalescing" (001), "cubic_plus" and
        "reno_beta" (002), "initcwnd" (003)
    Study(id, title, seed_files, experiments, claims, notebook, lab)
        experiments: experiment files, repo-relative, e.g.
        ("experiments/tortoise.yaml", "experiments/tortoise-screen.yaml");
        notebook and lab: repo-relative files (notebooks/…, labs/….md)
    Claim(id, study, seed_file, text, experiment, metric, rule, measure, judge, loader=None, grid=None,
          setup="single path", sentence="", primary=True, variant="", untestable="")
        text: the seed's claim in its words (seed_file names the source);
        experiment: the name of the experiment whose results it reads;
        measure(runs: pd.DataFrame) -> Measurement (runs = load_runs(folder),
        only those of client.loader `loader` when it names one);
        judge(m: Measurement) -> (verdict, why); rule: the judge in words;
        grid: a grid the claim always reads (the coalescing study's
        Chromium claims: "browser"), else the grid evaluate is given;
        setup: one of SETUPS ("single path", "population", "browser"; a
        claim on grid "browser" is "browser" unless set); sentence: the
        primary claim's id of its seed sentence (its own for a primary),
        primary (in the headline and the family) or a variant (variant: what
        it varies, in words); untestable: why the lab cannot test it.
    Measurement(value, low, high, p_value, n, unit, detail, n_control=0,
                n_arm=0, control=(), arm=(), statistic="", tie="",
                p_family=None, power=None, power_raw=None, family=1, failed=0,
                exact_repeats=False, level=None, min_p=None, untestable="")
        our number with the interval that inverts its test (low, high, at
        `level`; NaN when it has none) and the raw p-value of the test named
        in detail (None when no test applies); change() fills n per arm, the
        paired values and statistic ("ratio", "p90", ...: what the family's
        level recomputes from and power simulates from), tie (all pairs
        identical, why) and failed (runs in no pair); evaluate sets level
        (ALPHA / family), p_family (min(1, p x family)) and power (for the
        judge's claimed effect at that level; power_raw at ALPHA; planning
        only). m.significant(): the interval excludes 0. A measurement built
        from another keeps them: dataclasses.replace.
    Verdict(study, claim_id, seed_file, claim, experiment, metric, value, low,
            high, p_value, n, unit, measured, verdict, why, rule, detail,
            p_family, power, power_raw, family, effect, n_control, n_arm, setup, grid,
            sentence, primary, variant, level, min_p, settle_n, failed, untestable, changed)
        verdict in VERDICTS = ("agree", "larger than claimed", "smaller than
        claimed", "disagree", "inconclusive", "not testable here", "no data");
        settle_n: the pairs that would settle an inconclusive claim; changed:
        the claim changed after its runs were judged; measured: the number in words
        ("-4.1 % [-6.0, -2.2], p = 0.002"); effect: the claimed effect the
        power is for, in words.
    NoData: raised by a measurement whose runs are not there.

    evaluate(study_id, results="results", grid="reduced") -> list[Verdict]
        every claim of the study (on its own grid if it names one); a claim
        whose experiment has no results gives verdict "no data" (never an
        exception); every measurement at the study's level ALPHA / m (m: its
        primary readings with a test), then each judged off its interval; a
        tie by construction or an untestable claim is "not testable here"
        before any judge.
    verdict_frame(verdicts) -> pd.DataFrame   one row per claim
    physics_checks(exp_dir, run_ids=None) -> list[PhysicsCheck]
        PhysicsCheck(name, ok, expected, measured, n, detail, failures):
        slow start bytes per round trip = IW*MSS*(2^k - 1) on loss-free runs,
        TLS handshake round trips = the TLS version's (1.3: 1, 1.2: 2, +1 when
        the certificate flight does not fit IW), hybla's first window = rho.
    reproduction_markdown(results="results", grid="reduced") -> str
        REPRODUCTION.md's text (what `tortoise report --reproduction` writes).
    ensure_results(study_id, grid="ci", results="results", jobs=1) -> list[Path]
        runs what is missing of the study's experiments on that grid
        (resumable: completed runs are kept) and returns their folders.

    study_folder(experiment, grid=None, results="results") -> Path
        results/<name> for the file's own sweep, results/<name>@<grid> for a
        grid (`tortoise run FILE --grid NAME` writes there).
    experiment_name(file_or_name) -> str;  current_run_ids(file, grid) -> set
        of the run ids the file's grid has now.
    load_runs(exp_dir, run_ids=None) -> pd.DataFrame
        the runs table (host.store) plus the studies' columns: arm (cc with
        its module parameters, e.g. "cubic_plus(n=6,rtt_aware=1)"),
        module_params, beta, url, slow_start_after_idle, cond, connect_ms,
        dns_ms, the second load's plt2_ms / ttfb2_ms / content_download2_ms /
        repeat_new_conns, conn_reuse_ratio (second origins that opened no
        connection of their own), tcp_conns (in the server capture), then
        run_dir.
    current_runs(exp_dir) -> pd.DataFrame: only the runs of the folder's
        grid as its experiment file has it now (what notebooks read)
    capture helpers (a run folder's server capture, analysis.flights):
        first_conn(run_dir), transfer(conn), handshake_flight_bytes(conn),
        handshake_grew_window(conn, iw), second_load_window(run_dir),
        hybla_rho(rtt_ms)
    measuring and judging: pairs, paired_test (Wilcoxon with 6+ pairs, the
        exact sign-flip test below: smallest p 2/2^n), change (value,
        interval and p from one test, measure.infer: Hodges-Lehmann with
        Wilcoxon, or the paired permutation test of the p90 ratio), and the judges
        improvement, direction, equivalent, exact (each -> (judge, rule);
        judge.effect: the claimed effect, power.Effect).
    power (module): power(m, effect, n=None) by simulation with the
        claim's own test, required_n(m, effect), normal_n (the closed form).
    plan (module): `tortoise plan`: plan, format_plan, powered_grid, at
        the observed spread and its upper bound (spread_factor, inflated),
        at alpha/m over the study's primary claims (family).
    plan_check (module): `tortoise plan --check GRID`: check, check_claim,
        format_check (predicted against realised power).

The modules: model (data model), data (folders and runs), connections
(captures), power (power by simulation), measure (statistics and judges),
claims/<study> (one per study), registry (STUDIES, evaluate), physics,
reproduction, run, plan, plan_check. They import each
other, never this package, so that it only gathers them. A new claim goes in
claims/<study>.py (docs/architecture.md, "Where to add things").
"""

from tortoiselab.studies.connections import (first_conn, handshake_flight_bytes, handshake_grew_window, hybla_rho,
                                             second_load_window, transfer)
from tortoiselab.studies.data import current_run_ids, current_runs, experiment_name, load_runs, study_folder
from tortoiselab.studies.measure import change, direction, equivalent, exact, improvement, paired_test, pairs
from tortoiselab.studies.model import (ALPHA, POWER_TARGET, SEEDS, SETUPS, VERDICTS, Claim, Measurement, NoData,
                                       Study, Verdict)
from tortoiselab.studies.physics import PhysicsCheck, physics_checks
from tortoiselab.studies.registry import STUDIES, evaluate, verdict_frame
from tortoiselab.studies.reproduction import WHY_WE_DIFFER, reproduction_markdown
from tortoiselab.studies.run import ensure_results

__all__ = [
    "ALPHA", "POWER_TARGET", "SEEDS", "SETUPS", "STUDIES", "VERDICTS", "WHY_WE_DIFFER",
    "Claim", "Measurement", "NoData", "PhysicsCheck", "Study", "Verdict",
    "change", "current_run_ids", "direction", "ensure_results", "equivalent", "evaluate", "exact",
    "experiment_name", "first_conn", "handshake_flight_bytes", "handshake_grew_window", "hybla_rho",
    "current_runs", "improvement", "load_runs", "paired_test", "pairs", "physics_checks", "reproduction_markdown",
    "second_load_window", "study_folder", "transfer", "verdict_frame",
]
