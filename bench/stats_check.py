"""Size and power of every test the verdicts use (figures, not assertions),
at the lab's own measured spreads: for each test, its size (how often it
rejects a true "no change") and its power at the claimed effect of each
claim that uses it (the smallest effect of interest its judge reads:
studies.power.effect_of, or a direction judge's `interest` in its unit), at
n = 6, 20, 60 and at alpha 0.05 and at each family level in use (0.05 / m,
m from the report's families in tests/data/verdict-rows.json).

    .venv/bin/python bench/stats_check.py [--sims 1000] [--swaps 2000] [--quick] [--no-write] [--only tests|pilots]
    .venv/bin/python bench/stats_check.py --results DIR --grid reduced --save-pilots   (bench/pilot_pairs.json)
    .venv/bin/python bench/stats_check.py --results DIR [--grid G] [--save-pairs FILE] | --pairs FILE

(the second form: each claim's own pilot pairs resampled, printed only:
bench/stats_resample.py, docs/statistics.md "On the pilot pairs").

Which claim uses which test, at what n and with what spread: the canned
pilot summary bench/stats_spreads.json (bench/stats_pilots.py on the
2026-11-27 reproduction's reduced grids; --spreads FILE for another). A
cell's spread is the median over the pilots of the claims with that effect
(ties and exact repeats left out), else over the test's claims, else over
every claim of its statistic, else the model (MODEL: levels sd 10 %, pairs
sd 5 %; a unit sd for the tests in a claim's own unit). The table, a line
per size above its alpha and per alternative with far more power, is
printed and written into docs/statistics.md between its stats-check markers
(unless --no-write). Every cell is --sims samples (Monte Carlo standard
error at most 50 / sqrt(sims) points); the permutation tests enumerate
every swap / split where there are few, else --swaps random ones."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ holds stats_sims (run as a script or imported)
import stats_sims as sim  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "statistics.md"
SPREADS = Path(__file__).resolve().parent / "stats_spreads.json"
FAMILIES = ROOT / "tests" / "data" / "verdict-rows.json"
BEGIN, END = "<!-- stats-check:begin -->", "<!-- stats-check:end -->"
NS = (6, 20, 60)
ALPHA = 0.05
MODEL = {"level_sd": 0.10, "pair_sd": 0.05, "stall": 0.0, "stall_log": 0.0}
MODEL_SD = {"sd": 1.0}
TIED_SD = 1e-3  # a log spread below this is a tie (identical pairs), not a spread
FAR_POINTS, FAR_RATIO = 0.15, 1.5  # "far more power": at least 15 points and 1.5 times as much


@dataclass(frozen=True)
class Test:
    """A test in use: name, the measurement statistic it serves
    (studies.measure.STATISTICS, or "kruskal"), how a claim reads it
    ("shift": significant on the claimed side; "equivalence": an interval
    within +-margin %; "margin": the interval within 1 +- margin; "any":
    significant), where it lives, the n simulated, its alternatives."""

    name: str
    statistic: str
    reading: str
    what: str
    ns: tuple[int, ...] = NS
    alternatives: tuple[str, ...] = ()


TESTS = (
    Test("Wilcoxon HL", "ratio", "shift", "Wilcoxon signed-rank on per-pair log ratios, Hodges-Lehmann estimate "
         "(inference.paired_location, n >= 6)"),
    Test("sign-flip", "ratio", "shift", "the exact sign-flip test of summed log ratios (paired_location below 6 "
         "pairs; simulated at 5, its largest n)", (5,)),
    Test("Wilcoxon HL, equivalence", "ratio", "equivalence", "paired_location's interval within +-margin (n >= 6)"),
    Test("sign-flip, equivalence", "ratio", "equivalence", "the sign-flip interval within +-margin (below 6 pairs)",
         (5,)),
    Test("p90 paired", "p90", "shift", "the studentized paired permutation test of the p90 ratio "
         "(quantiletests.paired_quantile)", alternatives=("unstudentized p90 paired", "HD p90 paired")),
    Test("p90 between", "p90-groups", "shift", "the studentized two-group permutation test of the p90 ratio "
         "(quantiletests.between_groups_quantile; groups of n)", alternatives=("unstudentized p90 between",)),
    Test("median ratio between", "ratio-groups", "shift", "the two-group permutation test of the ratio of the "
         "groups' median per-pair ratios (the studentized quantiletests.between_groups_quantile, q = 0.5; groups of n)",
         alternatives=("Mann-Whitney on log ratios",)),
    Test("Mann-Whitney shift", "shift-groups", "shift", "Mann-Whitney between two groups, Hodges-Lehmann shift "
         "(rankci.shift_between_groups; groups of n; effect in the claim's unit)"),
    Test("Spearman", "spearman", "shift", "Spearman's rho, Fisher z test and interval (rankci.spearman; effect: rho)"),
    Test("Wilcoxon one-sample", "location", "margin", "the one-sample Wilcoxon test and its Hodges-Lehmann interval "
         "(rankci.location): p of centre 0, the interval within 1 +- margin"),
    Test("Kruskal-Wallis", "kruskal", "any", "Kruskal-Wallis across the screen's algorithms (n runs each; "
         "3 of 11 faster by the effect)"),
)
# an alternative for the same hypothesis -> why the claims keep their test (the lead's call, issue 36 item 3)
ALTERNATIVES = {
    "HD p90 paired": "the same paired permutation test of the Harrell-Davis p90 ratio (a Beta-weighted sum of all "
                     "order statistics, Harrell & Davis 1982); not switched here: the claims' registered test is "
                     "the sample p90 (changing a test is a registered change, the lead's call), and it is not "
                     "uniformly better: its weights reach into the stalls of the tail",
    "unstudentized p90 paired": "the test the p90 claims used before issue 51 (inference.paired_quantile): its "
                                "permutation null is the arms' exchangeability, so it rejects where the arms differ "
                                "in shape with the same p90 (the pilots' table below); replaced",
    "unstudentized p90 between": "the two-group test before issue 51 (inference.between_groups_quantile); replaced "
                                 "for the same reason",
    "Mann-Whitney on log ratios": "the shift of the log per-pair ratios between the groups (Mann-Whitney, "
                                  "Hodges-Lehmann); not switched here: the claims' registered statistic is the "
                                  "ratio of the groups' medians, which a shift test estimates only under a pure "
                                  "shift; a candidate for the lead",
}


@dataclass(frozen=True)
class Use:
    """One claim's use of a test: its claimed effect in unit (a margin for
    the equivalence readings), its pilot's n and spread (None: none usable)."""

    claim: str
    study: str
    test: str
    effect: float
    unit: str
    n: int
    spread: dict | None


def claim_effect(judge, statistic: str) -> tuple[float, str] | None:
    """(effect, unit) a claim's judge reads: a shift's pct or an
    equivalence's margin (power.effect_of), a direction judge's interest in
    its unit, the coalescing ratio's margin, the screen's
    measure.DIRECTION_EFFECT (it names no size); None for exact counts."""
    from tortoiselab.studies import power as pw
    from tortoiselab.studies.claims import coalescing
    from tortoiselab.studies.measure import DIRECTION_EFFECT
    e = pw.effect_of(judge)
    if e is not None:
        return (e.margin, "%") if e.kind == "equivalence" else (e.pct, "%")
    if getattr(judge, "interest", None):
        return tuple(judge.interest)
    if statistic == "location":
        return coalescing.RATIO_MARGIN, "x"
    if statistic == "kruskal":
        return -DIRECTION_EFFECT, "%"
    return None


def test_for(statistic: str, equivalence: bool, n: int) -> str | None:
    """The TESTS name a measurement's statistic runs (the sign-flip below 6 pairs)."""
    small = n < 6
    if statistic == "ratio" and equivalence:
        return "sign-flip, equivalence" if small else "Wilcoxon HL, equivalence"
    if statistic == "ratio":
        return "sign-flip" if small else "Wilcoxon HL"
    return next((t.name for t in TESTS if t.statistic == statistic), None)


def usable(spread: dict | None, tie: bool) -> dict | None:
    """A pilot's spread where it is one (None for ties and identical pairs)."""
    if not spread:
        return None
    if "pair_sd" in spread:
        return None if tie or spread["pair_sd"] < TIED_SD else spread
    if "sd" in spread:
        return None if tie or spread["sd"] <= 0 else spread
    return spread  # the screen's runs: a spread within each algorithm, whatever their medians


def uses_of(spreads: dict) -> list[Use]:
    """Every claim of the canned pilots that runs a test, with its effect (claim_effect)."""
    from tortoiselab.studies import power as pw
    from tortoiselab.studies.registry import STUDIES
    judges = {c.id: c.judge for s in STUDIES.values() for c in s.claims}
    out = []
    for r in spreads["claims"]:
        if r.get("no_data") or not r.get("statistic") or r["claim"] not in judges:
            continue
        eff = claim_effect(judges[r["claim"]], r["statistic"])
        e = pw.effect_of(judges[r["claim"]])
        name = test_for(r["statistic"], e is not None and e.kind == "equivalence", r["n"])
        if name and eff:
            out.append(Use(r["claim"], r["study"], name, float(eff[0]), eff[1], int(r["n"]),
                           usable(r.get("spread"), r.get("tie", False) or r.get("exact_repeats", False))))
    return out


def median_spread(spreads: list[dict]) -> dict:
    """Each field's median over the pilots' spreads."""
    keys = set.intersection(*(set(s) for s in spreads))
    return {k: float(np.median([s[k] for s in spreads])) for k in sorted(keys)}


def spread_for(test: Test, effect: float | None, uses: list[Use], all_uses: list[Use]) -> tuple[dict, str]:
    """(spread, source in words) for a cell: the median over the usable
    pilots of the test's claims with this effect (None: every effect),
    else of the test's claims, else of every claim of its statistic, else
    the model; none for a rank correlation (it has no scale)."""
    if test.statistic == "spearman":
        return {}, "none: ranks have no scale"
    pools = ([u for u in uses if effect is None or u.effect == effect], uses,
             [u for u in all_uses if (next(t for t in TESTS if t.name == u.test)).statistic == test.statistic])
    for where, pool in zip(("its claims' pilots", "the test's pilots", f"the {test.statistic} pilots"), pools):
        got = [u.spread for u in pool if u.spread]
        if got:
            return median_spread(got), f"{where} ({len(got)})"
    return (MODEL_SD if test.statistic in ("shift-groups", "location") else MODEL), "the model"


def families(path: Path = FAMILIES) -> dict[str, int]:
    """Study -> its family's size m in the report (verdict-rows.json)."""
    return json.loads(path.read_text())["families"]


def alphas_of(uses: list[Use], fam: dict[str, int]) -> list[tuple[float, str]]:
    """(alpha, label): 0.05 and 0.05 / m of each study whose claims use the test."""
    by: dict[float, list[str]] = {}
    for s in sorted({u.study for u in uses}):
        if fam.get(s, 1) > 1:
            by.setdefault(ALPHA / fam[s], []).append(s)
    return [(ALPHA, "0.05")] + [(a, f"{a:.2g} ({', '.join(s)}: m = {round(ALPHA / a)})") for a, s in sorted(by.items())]


def truths(test: Test, uses: list[Use]) -> list[tuple[str, float | None, float]]:
    """(row kind, the claimed effect it serves or None, the simulated truth):
    a size row at 0 and a power row per claimed effect; for an equivalence,
    a size row at the margin and a power row at 0; for the location margin,
    size at centre 0 (its p), at the margin's far end, power at centre 1."""
    effects = sorted({u.effect for u in uses}, key=lambda e: (abs(e), e))
    if test.reading == "equivalence":
        return [r for m in effects for r in (("size", m, m), ("power", m, 0.0))]
    if test.reading == "margin":
        return [("size", None, 0.0)] + [r for m in effects for r in (("size", m, 1 + m), ("power", m, 1.0))]
    return [("size", None, 0.0)] + [("power", e, e) for e in effects]


def decide(name: str, test: Test, effect: float | None, truth: float, n: int, sims: int, swaps: int, sp: dict,
           rng: np.random.Generator):
    """The stats_sims function for test `name` (the test or an alternative) at one truth."""
    if name in ("Wilcoxon HL", "sign-flip", "p90 paired", "HD p90 paired", "p90 between", "unstudentized p90 paired",
                "unstudentized p90 between"):
        return sim.sim_paired(name, n, truth, sims, sp, swaps, rng)
    if test.reading == "equivalence":
        return sim.sim_equivalence(n, truth, effect, sims, sp, rng)
    if name in ("median ratio between", "Mann-Whitney on log ratios"):
        return sim.sim_groups_ratio(name, n, truth, sims, sp, swaps, rng)
    if name == "Mann-Whitney shift":
        return sim.sim_shift(n, truth, sims, sp, rng)
    if name == "Spearman":
        return sim.sim_spearman(n, truth, sims, rng, slope=_slope(truth))
    if name == "Wilcoxon one-sample":
        return sim.sim_location(n, truth, None if effect is None else effect, sims, sp, rng)
    if name == "Kruskal-Wallis":
        return sim.sim_kruskal(n, truth, sims, sp, rng)
    raise ValueError(f"decide: no simulation for {name!r}")


_SLOPES: dict[float, float] = {}


def _slope(rho: float) -> float:
    if rho not in _SLOPES:
        _SLOPES[rho] = sim.slope_for_rho(rho) if rho else 0.0
    return _SLOPES[rho]


def _fmt_effect(test: Test, kind: str, effect: float | None, truth: float, unit: str) -> str:
    if test.reading == "equivalence":
        return f"{'at the margin +' if kind == 'size' else '0, margin +-'}{effect:g} %: within"
    if test.reading == "margin":
        return "centre 0: p" if effect is None else f"centre {truth:g}: within 1 +- {effect:g}"
    return "0" if kind == "size" else f"{truth:+g} {unit}"


def _spread_text(sp: dict) -> str:
    if "pair_sd" in sp:
        s = f"pair {sp['pair_sd']:.3g}, level {sp.get('level_sd', 0):.3g}" if "level_sd" in sp else f"sd {sp['pair_sd']:.3g}"
        return s + (f", stall {100 * sp['stall']:.0f} % x{math.exp(sp['stall_log']):.2g}" if sp.get("stall") else "")
    if "sd" in sp:
        return f"sd {sp['sd']:.3g}"
    return f"level {sp['level_sd']:.3g}" if "level_sd" in sp else "-"


def mc_limit(alpha: float, sims: int) -> float:
    """The largest share a test of size alpha shows in sims samples within 2 Monte Carlo standard errors."""
    return alpha + 2 * math.sqrt(alpha * (1 - alpha) / sims)


def test_rows(test: Test, uses: list[Use], all_uses: list[Use], fam: dict[str, int], sims: int, swaps: int,
              ns: tuple[int, ...] | None = None) -> list[dict]:
    """Rows {test, kind, effect, truth, n, spread, rates {alpha: share}} of
    a test and its alternatives on the same samples per (truth, n)."""
    alphas = [a for a, _ in alphas_of(uses, fam)]
    unit = uses[0].unit if uses else "%"
    rows = []
    for k, (kind, effect, truth) in enumerate(truths(test, uses)):
        mine = [u for u in uses if effect is None or u.effect == effect]
        sp, src = spread_for(test, None if kind == "size" and test.reading == "shift" else effect, uses, all_uses)
        for n in ns or test.ns:
            for j, name in enumerate((test.name, *test.alternatives)):
                rng = np.random.default_rng([TESTS.index(test), k, n])  # an alternative sees the same samples
                d = decide(name, test, effect, truth, n, sims, swaps, sp, rng)
                rows.append({"test": name, "kind": kind, "effect": effect, "truth": truth, "n": n,
                             "label": _fmt_effect(test, kind, effect, truth, (mine[0].unit if mine else unit)),
                             "spread": f"{_spread_text(sp)} ({src})" if sp else src, "rates": {a: float(np.mean(d(a))) for a in alphas},
                             "alt": j > 0})
    return rows


def table(test: Test, uses: list[Use], rows: list[dict], fam: dict[str, int], sims: int) -> list[str]:
    """A markdown table of one test's rows (in %; "!" marks a size above its alpha beyond Monte Carlo error)."""
    al = alphas_of(uses, fam)
    by_effect: dict[float, list[str]] = {}
    for u in uses:
        by_effect.setdefault(u.effect, []).append(f"{u.claim} ({u.n})")
    claims = "; ".join(f"{e:+g} {next(u.unit for u in uses if u.effect == e)}: {', '.join(c)}"
                       for e, c in sorted(by_effect.items()))
    out = [f"**{test.name}**: {test.what}. Claims (pilot n) by claimed effect: {claims}.", "",
           "| test | truth | n | spread (log sd unless a unit) | " + " | ".join(f"@ {lab}" for _, lab in al) + " |",
           "|" + "---|" * (4 + len(al))]
    for r in rows:
        cells = []
        for a, _ in al:
            v = r["rates"][a]
            flag = " !" if r["kind"] == "size" and v > mc_limit(a, sims) else ""
            cells.append(f"{100 * v:.1f}{flag}")
        name = ("alt: " if r["alt"] else "") + r["test"]
        out.append(f"| {name} | {r['kind']} {r['label']} | {r['n']} | {r['spread']} | " + " | ".join(cells) + " |")
    return out + [""]


def findings(rows: list[dict], sims: int) -> list[str]:
    """Lines under the tables: each size above its alpha, each alternative with far more power."""
    out = []
    for r in rows:
        for a, v in r["rates"].items():
            if r["kind"] == "size" and not r["alt"] and v > mc_limit(a, sims):
                out.append(f"- size above alpha: {r['test']}, {r['label']}, n = {r['n']}: {100 * v:.1f} % at {a:.2g}")
    base = {(r["test"], r["truth"], r["n"], r["effect"]): r for r in rows if not r["alt"]}
    gaps: dict[str, tuple[float, str]] = {}
    losses: dict[str, list[float]] = {}
    for r in (r for r in rows if r["alt"] and r["kind"] == "power"):
        of = next(t.name for t in TESTS if r["test"] in t.alternatives)
        d = [v - base[of, r["truth"], r["n"], r["effect"]]["rates"][a] for a, v in r["rates"].items()]
        gaps[r["test"]] = (max(max(d), gaps.get(r["test"], (-1.0, of))[0]), of)
        losses.setdefault(r["test"], []).extend(d)
    for alt, why in ALTERNATIVES.items():
        best = None
        for r in (r for r in rows if r["test"] == alt and r["kind"] == "power"):
            of = next(t.name for t in TESTS if alt in t.alternatives)
            b = base[of, r["truth"], r["n"], r["effect"]]
            for a, v in r["rates"].items():
                w = b["rates"][a]
                if v - w >= FAR_POINTS and v >= FAR_RATIO * w and (best is None or v - w > best[0]):
                    best = (v - w, of, r, a, v, w)
        if best:
            _, of, r, a, v, w = best
            d = losses[alt]
            out.append(f"- far more power: {alt} beside {of} (largest gap: {r['label']}, n = {r['n']}, alpha "
                       f"{a:.2g}: {100 * v:.0f} % against {100 * w:.0f} %; less power in {sum(x < 0 for x in d)} of "
                       f"{len(d)} power cells, by up to {-100 * min(d):.0f} points): {why}")
        elif gaps.get(alt) is not None:
            out.append(f"- no far more power: {alt} beside {gaps[alt][1]} gains at most {100 * gaps[alt][0]:+.0f} "
                       f"points in any power cell (far more: {100 * FAR_POINTS:.0f} points and {FAR_RATIO:g} times)")
    return out


INTRO = (
    "Made by `bench/stats_check.py` (`make stats-check`): one table per test the verdicts use, with the claims that "
    "use it (their pilot n), at the claimed effect each claim's judge reads (studies.power.effect_of, a direction "
    "judge's smallest effect of interest in its unit). Rows: `size` = the share of samples without the effect that "
    "the test rejects (for an equivalence or margin reading: the share read as \"within\" at the margin's edge), "
    "`power` = the share significant on the claimed side (or read as within the margin at no change); columns: "
    "alpha 0.05 and each family level 0.05 / m of the studies whose claims use the test (m from the report, "
    "tests/data/verdict-rows.json). n: pairs (groups of n for the between-group tests, runs per algorithm for "
    "Kruskal-Wallis). Spreads: the pilots' (bench/stats_spreads.json, bench/stats_pilots.py on the 2026-11-27 "
    "reproduction's reduced grids), each cell the median over its claims' pilots, said in the row; `alt:` rows "
    "are an alternative for the same hypothesis on the same samples. Shares in %.",
    "",
)
FIXED_NOTES = (
    "- the sign-flip rows (2 to 5 pairs): no exact paired test can do better there, since the smallest p of any "
    "test over the 2^n swap or sign patterns is 2/2^n (0.0625 at 5 pairs), above every alpha in use: such a claim "
    "needs 6 pairs or more, not another test",
    "- p90 between (the seed's design, groups of users) against p90 paired: not the same design; the paired rows "
    "are the primary readings and the groups rows are variants beside them",
    "- Wilcoxon HL against p90 paired: far more power on the same pairs, but for another hypothesis (the median "
    "per-pair change, not the p90 the seeds state); it is shown as a variant (coalescing's pooled-median rows), "
    "not used for a p90 claim",
    "- every size here is under the model's null, \"the arm is the control, scaled\" (exchangeable pairs); the p90 "
    "tests' size where the arms differ in shape, on each p90 reading's own pilot pairs, is the table of the "
    "section \"On the pilot pairs\" (the same script, bench/pilot_pairs.json)",
)


def build(spreads: dict, fam: dict[str, int], sims: int, swaps: int, ns: tuple[int, ...] | None = None,
          only: set[str] | None = None) -> tuple[list[str], list[dict]]:
    """(markdown lines, every row) for every test in use (only: these names)."""
    all_uses = uses_of(spreads)
    lines, every = [], []
    for t in TESTS:
        mine = [u for u in all_uses if u.test == t.name]
        if not mine or (only and t.name not in only):
            continue
        rows = test_rows(t, mine, all_uses, fam, sims, swaps, ns if ns and t.ns == NS else None)
        lines += table(t, mine, rows, fam, sims)
        every += rows
    return list(INTRO) + lines + findings(every, sims) + list(FIXED_NOTES) + [""], every


def write_doc(lines: list[str], doc: Path = DOC, begin: str = BEGIN, end: str = END) -> None:
    """lines between the markers begin ... end of doc (nothing else of it changes)."""
    text = doc.read_text()
    head, _, rest = text.partition(begin)
    _, found, tail = rest.partition(end)
    if not found:
        raise SystemExit(f"{doc}: no {begin} ... {end} markers")
    doc.write_text(head + begin + "\n" + "\n".join(lines) + "\n" + end + tail)


def resample(args) -> int:
    """The pilot-resampling check (bench/stats_resample.py), printed."""
    import stats_resample as rs
    pairs = rs.results_pairs(args.results, args.grid) if args.results else json.loads(Path(args.pairs).read_text())
    if args.save_pairs:
        Path(args.save_pairs).write_text(json.dumps(pairs, indent=1))
    print("\n".join(rs.pilot_tables(pairs, args.sims, args.swaps)))
    return 0


def save_pilots(results: str, grid: str, out: Path) -> int:
    """The p90 claims' pilot pairs of a results folder (the grid of the
    list with the most pairs, as the report reads them) with each claim's
    family level (tests/data/verdict-rows.json) and claimed effect,
    written as PILOTS: small (the per-pair numbers only), committed, so
    the pilots' table runs on a fresh clone."""
    import stats_resample as rs
    from tortoiselab.studies.registry import STUDIES
    fam, primary = families(), {c.id: c.primary for s in STUDIES.values() for c in s.claims}
    pairs = {k: {"control": [round(x, 3) for x in v["control"]], "arm": [round(x, 3) for x in v["arm"]],
                 "statistic": "p90", "effect": v["effect"], "alpha": ALPHA / fam.get(k.split(".")[0], 1),
                 "primary": primary.get(k, False)}
             for k, v in rs.results_pairs(results, grid).items() if v["statistic"] == "p90"}
    out.write_text(json.dumps({"source": f"bench/stats_check.py --results {results} --grid {grid} --save-pilots",
                               "pairs": pairs}, indent=1) + "\n")
    print(f"{out}: {len(pairs)} p90 claims' pilot pairs")
    return 0


def pilots(args) -> list[str]:
    """The p90 pilots' table (bench/stats_resample.py, pilot_table) of PILOTS, with its heading and summary."""
    import stats_resample as rs
    data = json.loads(Path(args.pilots).read_text())
    t0 = time.time()
    sims, swaps = (20, 100) if args.quick else (args.pilot_sims, args.pilot_swaps)
    pairs = {k: v for k, v in data["pairs"].items()
             if args.all_pilots or v.get("primary", True) or k.endswith("-users")}
    lines, s = rs.pilot_table(pairs, sims, swaps)
    over = lambda xs: ", ".join(xs) if xs else "none"  # noqa: E731
    return [PILOT_INTRO, "", *lines, "",
            f"Beyond alpha + 2 standard errors (\"!\"): studentized {len(s['new_over'])} of {s['cells']} size cells "
            f"({over(s['new_over'])}); unstudentized {len(s['old_over'])} of {s['cells']} ({over(s['old_over'])}). "
            f"{sims} samples a cell, {swaps} random swaps a sample; pilots: "
            f"{data.get('source', args.pilots)}; wall time {(time.time() - t0) / 60:.1f} min.", ""]


PILOT_INTRO = (
    "Made by `bench/stats_check.py` (`make stats-check`) from the pilot pairs of the primary p90 readings and the "
    "paired readings over users (bench/pilot_pairs.json; --all-pilots: every variant's too; claims with the same "
    "pairs on one row): each pilot as a continuous population whose p90 ratio is exactly 1 (a "
    "smoothed bootstrap of its pairs, the log ratios shifted until the population's p90s are equal: "
    "analysis/sizecheck.py, paired_null, the check every p90 reading passes), n pairs drawn from it; `size` = the share of samples the test "
    "rejects at 0.05 and at the claim's family level alpha / m, for the studentized test the claims now use (new) and "
    "the unstudentized one it replaced (old); `pairs swapped` = the studentized test's size when each pair's runs are "
    "also swapped at random (exchangeable pairs, where it is exact); power = the studentized test's share significant "
    "on the claimed side at the claimed effect (0.05, alpha / m). Shares in %.")
PILOT_BEGIN, PILOT_END = "<!-- stats-pilots:begin -->", "<!-- stats-pilots:end -->"
PILOTS = Path(__file__).resolve().parent / "pilot_pairs.json"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", type=int, default=1000)
    ap.add_argument("--swaps", type=int, default=2000)
    ap.add_argument("--spreads", default=str(SPREADS), help="the pilots' spreads (bench/stats_pilots.py)")
    ap.add_argument("--quick", action="store_true", help="a smoke test: 60 samples, 400 swaps; prints only")
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/statistics.md")
    ap.add_argument("--results", help="print the pilot-resampling check of a results folder's claims "
                                      "(bench/stats_resample.py) instead")
    ap.add_argument("--grid", default="powered,reduced", help="with --results: the grids to read")
    ap.add_argument("--pairs", help="print the pilot-resampling check of JSON {name: {control, arm, statistic, effect}}")
    ap.add_argument("--save-pairs", help="with --results: write the pilot pairs read here")
    ap.add_argument("--save-pilots", action="store_true", help=f"with --results: write the p90 claims' pilot pairs "
                    f"to --pilots ({PILOTS.name})")
    ap.add_argument("--pilots", default=str(PILOTS), help="the p90 pilots' pairs (--save-pilots writes them)")
    ap.add_argument("--only", choices=("tests", "pilots"), help="only the tests' table, or only the pilots' table")
    ap.add_argument("--pilot-sims", type=int, default=200)
    ap.add_argument("--pilot-swaps", type=int, default=200)
    ap.add_argument("--all-pilots", action="store_true", help="every variant's pilots too (default: the primary readings' and those over users)")
    args = ap.parse_args(argv)
    if args.results and args.save_pilots:
        return save_pilots(args.results, args.grid, Path(args.pilots))
    if args.results or args.pairs:
        return resample(args)
    if args.only != "tests":
        if not Path(args.pilots).is_file():
            raise SystemExit(f"--pilots {args.pilots}: no such file (make it with --results DIR --save-pilots)")
        plines = pilots(args)
        print("\n".join(plines))
        if not (args.no_write or args.quick):
            write_doc(plines, begin=PILOT_BEGIN, end=PILOT_END)
        if args.only == "pilots":
            return 0
    if args.sims < 10 or args.swaps < 10:
        raise SystemExit("--sims and --swaps: 10 or more each")
    sims, swaps = (60, 400) if args.quick else (args.sims, args.swaps)
    path = Path(args.spreads)
    if not path.is_file():
        raise SystemExit(f"--spreads {path}: no such file (make it with bench/stats_pilots.py --results DIR)")
    spreads = json.loads(path.read_text())
    t0 = time.time()
    lines, _ = build(spreads, families(), sims, swaps)
    lines += [f"{sims} simulated samples per cell (Monte Carlo standard error at most {50 / math.sqrt(sims):.1f} "
              f"points, {100 * math.sqrt(ALPHA * (1 - ALPHA) / sims):.1f} at a size of 5 %; \"!\" marks a size "
              f"beyond alpha + 2 standard errors); {swaps} random swaps / splits where not every one is enumerated; "
              f"spreads: {spreads.get('source', path.name)}; families: tests/data/verdict-rows.json; wall time "
              f"{(time.time() - t0) / 60:.1f} min (`make stats-check`)."]
    print("\n".join(lines))
    if not (args.no_write or args.quick):
        write_doc(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
