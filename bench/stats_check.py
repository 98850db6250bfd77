"""How each test the verdicts use behaves at the lab's sample sizes (figures,
not assertions): its size (how often it rejects a true "no change") and its
power to see a -2 %, -5 % or -7 % change (arm faster), at n = 6, 20, 60 and
at alpha 0.05 and 0.05 / 10 (one claim of a Bonferroni family of ten).

    .venv/bin/python bench/stats_check.py [--sims 1000] [--swaps 2000] [--no-write]
    .venv/bin/python bench/stats_check.py --results DIR --grid powered,reduced [--save-pairs FILE]
    .venv/bin/python bench/stats_check.py --pairs FILE

The tests (tortoiselab.analysis.inference; docs/statistics.md):

- "Wilcoxon HL": paired_location, Wilcoxon signed-rank on the per-pair log
  ratios (Hodges-Lehmann estimate); the exact sign-flip test below 6 pairs;
- "p90 paired": paired_quantile, the paired permutation test of the p90 ratio;
- "HD p90 paired": an alternative for the same hypothesis, the paired
  permutation test of the Harrell-Davis p90 ratio (Harrell & Davis 1982:
  a weighted sum of all order statistics, less noisy than one or two);
- "p90 between": between_groups_quantile, the permutation test of the p90
  ratio between two independent groups of n runs each (as many runs as n
  pairs), the design of the seed's LinkedIn experiment.

Spreads. By default a documented model of the lab's runs: each repetition's
level lognormal with sd 10 % (log sd 0.10), each run's own noise such that
a pair's log ratio has sd 5 % (per run 0.05 / sqrt 2), the arm scaled by
1 + effect; "heavy": the same with a loss-recovery stall of +50 % in 5 % of
runs (about one pair in ten), either arm alike. In the model the p90 ratio
and the median log ratio both equal the effect, so the tests' power is
comparable. "p90 between" draws its groups from different repetitions.

With --results DIR --grid G (a report's grid list), the pilot pairs of every
claim measured there (tortoiselab.studies: each claim's measurement on the
grid with the most pairs, as evaluate reads it) are resampled instead:
pairs drawn with replacement, their log ratios centred so the pilot is "no
change" for the test (on the Hodges-Lehmann estimate; for a p90, on the p90
log ratio), then shifted by the effect (the claim's own and -5 %). --pairs
FILE reads such pairs from JSON {name: {"control": [...], "arm": [...],
"statistic": "ratio" | "p90", "effect": -5.0}} (statistic and effect
optional); --save-pairs FILE writes the pilot's pairs in that form. A
pilot's table has one more column: the size with each resampled pair's
two runs swapped at random (exchangeable pairs, where the paired tests are
exact); beside the size at the pilot's own centred null it shows how far
a test answers "the arms differ" rather than "the p90 differs".

Every cell is `--sims` simulated samples (Monte Carlo standard error
sqrt(p (1 - p) / sims): at most 1.6 points at 1000); the permutation tests
use every swap pattern (every split) where there are few, else `--swaps`
random ones drawn once per cell (the verdicts use 4000). The tables are
printed and written into docs/statistics.md between its stats-check markers
(unless --no-write); the wall time is printed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import special
from scipy.stats import mstats

from tortoiselab.analysis import inference as inf

NS = (6, 20, 60)
EFFECTS_PCT = (-2.0, -5.0, -7.0)
ALPHA = 0.05
FAMILY = 10
LEVEL_SD = 0.10  # log sd of a repetition's level (between repetitions)
PAIR_SD = 0.05  # log sd of a pair's log ratio (within the pair)
STALL_SHARE, STALL = 0.05, 1.5  # "heavy": a run stalls (x1.5) with this probability
Q = 0.9
DOC = Path(__file__).resolve().parents[1] / "docs" / "statistics.md"
BEGIN, END = "<!-- stats-check:begin -->", "<!-- stats-check:end -->"
TESTS = ("Wilcoxon HL", "p90 paired", "HD p90 paired", "p90 between")


# --- the model's runs --------------------------------------------------------------------


def model_runs(n: int, effect_pct: float, sims: int, heavy: bool, rng: np.random.Generator):
    """(control, arm), each (sims, 2n) run times in ms: 2n repetitions, the
    paired tests read the first n pairs, the between-group test the first
    n controls against the last n arms."""
    level = rng.normal(math.log(1000), LEVEL_SD, (sims, 2 * n))
    own = PAIR_SD / math.sqrt(2)
    c = np.exp(level + rng.normal(0, own, level.shape))
    a = np.exp(level + rng.normal(0, own, level.shape)) * (1 + effect_pct / 100)
    if heavy:
        c = c * np.where(rng.random(c.shape) < STALL_SHARE, STALL, 1.0)
        a = a * np.where(rng.random(a.shape) < STALL_SHARE, STALL, 1.0)
    return c, a


def pilot_runs(control, arm, statistic: str, n: int, effect_pct: float, sims: int, rng: np.random.Generator,
               swapped: bool = False):
    """(control, arm), each (sims, 2n): the pilot's pairs resampled, the
    log ratios centred so the pilot is "no change" for its test (the
    Hodges-Lehmann estimate; for a p90, the p90 log ratio, corrected by the
    samples' own mean p90 log ratio as studies.power does) and shifted.
    swapped: each pair's two runs swapped at random after centring, a null
    under which the pairs are exchangeable (where the paired tests are exact)."""
    c, a = np.asarray(control, float), np.asarray(arm, float)
    x = np.log(a) - np.log(c)
    if statistic == "p90":
        centre = math.log(np.quantile(a, Q) / np.quantile(c, Q))
    else:
        i, j = np.triu_indices(x.size)
        centre = float(np.median((x[i] + x[j]) / 2))
    idx = rng.integers(0, c.size, (sims, 2 * n))
    cs, arms = c[idx], c[idx] * np.exp(x[idx] - centre)
    if statistic == "p90":
        arms = arms / math.exp(float(np.mean(np.log(np.quantile(arms[:, :n], Q, axis=1)
                                                   / np.quantile(cs[:, :n], Q, axis=1)))))
    if swapped:
        flip = rng.random(cs.shape) < 0.5
        cs, arms = np.where(flip, arms, cs), np.where(flip, cs, arms)
    return cs, arms * (1 + effect_pct / 100)


# --- the tests, vectorised: (p, estimate) per sample ----------------------------------------


def hd_weights(n: int, q: float = Q) -> np.ndarray:
    """Harrell & Davis (1982) weights of the sorted sample: the Beta((n+1)q,
    (n+1)(1-q)) mass on ((i-1)/n, i/n]."""
    edges = special.betainc((n + 1) * q, (n + 1) * (1 - q), np.arange(n + 1) / n)
    return np.diff(edges)


def hd_paired_pvalues(c: np.ndarray, a: np.ndarray, swaps: int, rng: np.random.Generator) -> np.ndarray:
    """The paired permutation p of log(HD_p90(arm) / HD_p90(control)), the
    swap patterns of inference.swap_masks (every one up to 12 pairs)."""
    n = c.shape[1]
    w = hd_weights(n)
    masks, exact = inf.swap_masks(n, swaps, rng)
    out = np.empty(c.shape[0])
    rows = max(1, 4_000_000 // (n * len(masks)))
    for i in range(0, c.shape[0], rows):
        cc, aa = c[i:i + rows, None, :], a[i:i + rows, None, :]
        hd_a, hd_c = np.sort(np.where(masks, cc, aa), axis=2) @ w, np.sort(np.where(masks, aa, cc), axis=2) @ w
        null = np.abs(np.log(hd_a) - np.log(hd_c))
        obs = np.abs(np.log(np.sort(a[i:i + rows], axis=1) @ w) - np.log(np.sort(c[i:i + rows], axis=1) @ w))
        hits = np.sum(null >= (obs - 1e-10)[:, None], axis=1)
        out[i:i + rows] = hits / len(masks) if exact else (hits + 1) / (len(masks) + 1)
    return out


def run_test(test: str, c: np.ndarray, a: np.ndarray, n: int, swaps: int, rng: np.random.Generator):
    """(p, estimate) of one test on each simulated sample."""
    cp, ap = c[:, :n], a[:, :n]
    if test == "Wilcoxon HL":
        return inf.paired_location_pvalues(np.log(ap) - np.log(cp))
    if test == "p90 between":
        ab = a[:, n:]
        return (inf.between_groups_quantile_pvalues(cp, ab, Q, swaps, rng),
                np.log(np.quantile(ab, Q, axis=1) / np.quantile(cp, Q, axis=1)))
    est = np.log(np.quantile(ap, Q, axis=1) / np.quantile(cp, Q, axis=1))
    if test == "p90 paired":
        return inf.paired_quantile_pvalues(cp, ap, Q, swaps, rng), est
    w = hd_weights(n)
    return hd_paired_pvalues(cp, ap, swaps, rng), np.log((np.sort(ap, axis=1) @ w) / (np.sort(cp, axis=1) @ w))


def rates(p: np.ndarray, est: np.ndarray, effect_pct: float) -> dict[float, float]:
    """alpha -> the share rejected: any side for effect 0 (size), else on
    the effect's side (power: the interval beyond 0 in the claimed direction)."""
    side = np.ones_like(p, bool) if effect_pct == 0 else np.sign(est) == np.sign(effect_pct)
    return {al: float(np.mean((p < al) & side)) for al in (ALPHA, ALPHA / FAMILY)}


# --- cells and tables ------------------------------------------------------------------------


def cells(draw, tests, effects, sims: int, swaps: int, seed: int) -> dict:
    """{(test, n, effect): {alpha: rate}} for draw(n, effect, sims, rng) -> (control, arm);
    the tests of one (n, effect) see the same samples."""
    out = {}
    for n in NS:
        for e in (0.0, *effects):
            rng = np.random.default_rng([seed, n, int(round(100 * e)) % 10_000])
            c, a = draw(n, e, sims, rng)
            for t in tests:
                out[t, n, e] = rates(*run_test(t, c, a, n, swaps, rng), e)
    return out


def _pct(v: float) -> str:
    return f"{100 * v:.1f}"


def table(res: dict, tests, effects, exchangeable: dict | None = None) -> list[str]:
    """A markdown table: size and power in % at alpha and alpha / FAMILY
    (exchangeable: the size at alpha under the pilot's swapped null, a column more)."""
    al, bo = f"{ALPHA:g}", f"{ALPHA / FAMILY:g}"
    head = ["test", "n", f"size {al}", f"size {bo}", *[f"{e:+g} % @ {al}" for e in effects],
            *[f"{e:+g} % @ {bo}" for e in effects]] + ([f"size {al}, pairs swapped"] if exchangeable else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for t in tests:
        for n in NS:
            row = [t, str(n), _pct(res[t, n, 0.0][ALPHA]), _pct(res[t, n, 0.0][ALPHA / FAMILY])]
            row += [_pct(res[t, n, e][ALPHA]) for e in effects] + [_pct(res[t, n, e][ALPHA / FAMILY]) for e in effects]
            row += [_pct(exchangeable[t, n, 0.0][ALPHA])] if exchangeable else []
            lines.append("| " + " | ".join(row) + " |")
    return lines


def model_tables(sims: int, swaps: int) -> list[str]:
    out = []
    for heavy, name in ((False, "lab model: levels sd 10 %, pairs sd 5 %"),
                        (True, "heavy: the same, and a +50 % stall in 5 % of runs")):
        res = cells(lambda n, e, s, rng: model_runs(n, e, s, heavy, rng), TESTS, EFFECTS_PCT, sims, swaps,
                    seed=int(heavy))
        out += [f"**{name}** (size and power in %)", ""] + table(res, TESTS, EFFECTS_PCT) + [""]
    return out


# --- pilot pairs -----------------------------------------------------------------------------


def results_pairs(results: str, grid: str) -> dict:
    """{claim id: {"control", "arm", "statistic", "effect"}} for every claim
    whose measurement on `results` carries pairs (the grid of the list with
    the most pairs)."""
    from tortoiselab import studies as S  # only with --results: the lab's studies are heavy to import
    from tortoiselab.studies import power as pw
    from tortoiselab.studies.data import current_points, load_runs, study_folder
    from tortoiselab.studies.registry import claim_grids, experiment_files, measure_claim
    out, frames = {}, {}
    for s in S.STUDIES.values():
        files = experiment_files(s)
        for c in s.claims:
            best = None
            for g in claim_grids(c, grid):
                folder = study_folder(c.experiment, g, results)
                if not folder.is_dir() or c.experiment not in files:
                    continue
                if (c.experiment, g) not in frames:
                    points = current_points(files[c.experiment], g)
                    frames[c.experiment, g] = load_runs(folder, set(points), points)
                try:
                    m = measure_claim(c, frames[c.experiment, g], folder)
                except S.NoData:
                    continue
                if m.control and m.statistic in ("ratio", "p90") and (best is None or m.n > best.n):
                    best = m
            eff = pw.effect_of(c.judge)
            if best is not None and not best.tie:
                out[c.id] = {"control": list(best.control), "arm": list(best.arm), "statistic": best.statistic,
                             "effect": eff.pct if eff is not None and eff.kind == "shift" else None}
    return out


def pilot_tables(pairs: dict, sims: int, swaps: int) -> list[str]:
    """Per pilot: its test(s), size and power at its claimed effect and -5 %."""
    out = []
    for name, p in pairs.items():
        stat = p.get("statistic") or "ratio"
        tests = ("Wilcoxon HL",) if stat == "ratio" else ("p90 paired", "HD p90 paired", "p90 between")
        effects = tuple(dict.fromkeys(e for e in (p.get("effect"), -5.0) if e))
        res = cells(lambda n, e, s, rng: pilot_runs(p["control"], p["arm"], stat, n, e, s, rng), tests, effects,
                    sims, swaps, seed=len(p["control"]))
        swapped = cells(lambda n, e, s, rng: pilot_runs(p["control"], p["arm"], stat, n, e, s, rng, swapped=True),
                        tests, (), sims, swaps, seed=len(p["control"]) + 1)
        out += [f"**{name}** (pilot: {len(p['control'])} pairs, statistic {stat}; in %)", ""]
        out += table(res, tests, effects, swapped) + [""]
    return out


def write_doc(lines: list[str], doc: Path = DOC) -> None:
    text = doc.read_text()
    head, _, rest = text.partition(BEGIN)
    _, found, tail = rest.partition(END)
    if not found:
        raise SystemExit(f"{doc}: no {BEGIN} ... {END} markers")
    doc.write_text(head + BEGIN + "\n" + "\n".join(lines) + "\n" + END + tail)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", type=int, default=1000)
    ap.add_argument("--swaps", type=int, default=2000)
    ap.add_argument("--results", help="a results folder: simulate from its claims' pilot pairs")
    ap.add_argument("--grid", default="powered,reduced")
    ap.add_argument("--pairs", help="JSON {name: {control, arm, statistic, effect}}")
    ap.add_argument("--save-pairs", help="write the pilot pairs read from --results here")
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/statistics.md")
    args = ap.parse_args(argv)
    t0 = time.time()
    w = hd_weights(25)
    x = np.random.default_rng(0).lognormal(0, 1, 25)
    assert abs(np.sort(x) @ w - mstats.hdquantiles(x, [Q])[0]) < 1e-9  # the weights are scipy's Harrell-Davis
    if args.results or args.pairs:
        pairs = results_pairs(args.results, args.grid) if args.results else json.loads(Path(args.pairs).read_text())
        if args.save_pairs:
            Path(args.save_pairs).write_text(json.dumps(pairs, indent=1))
        lines = pilot_tables(pairs, args.sims, args.swaps)
        src = f"the pilot pairs of {args.results or args.pairs}"
    else:
        lines = model_tables(args.sims, args.swaps)
        src = "the model"
    worst = 50 / math.sqrt(args.sims)
    lines += [f"{args.sims} simulated samples per cell from {src} (Monte Carlo standard error at most "
              f"{worst:.1f} points, {100 * math.sqrt(ALPHA * (1 - ALPHA) / args.sims):.1f} at a size of 5 %); "
              f"random swaps / splits: {args.swaps} where not every one is enumerated; "
              f"wall time {(time.time() - t0) / 60:.1f} min (`make stats-check`)."]
    print("\n".join(lines))
    if not args.no_write:
        write_doc(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
