"""The pilot-resampling check (issue 36; docs/statistics.md, "On the pilot
pairs"): each claim's own pilot pairs resampled, centred so the pilot is
"no change" for its test, shifted by its claimed effect and -5 %, and the
size with each pair's runs swapped at random (exchangeable pairs) beside
it: how far a p90 test answers "the arms differ" rather than "the p90
differs". Printed only (the table in docs/statistics.md is bench/stats_check.py's,
at the pilots' spreads summarised in bench/stats_spreads.json).

    .venv/bin/python bench/stats_check.py --results DIR --grid powered,reduced [--save-pairs FILE]
    .venv/bin/python bench/stats_check.py --pairs FILE

--pairs FILE reads JSON {name: {"control": [...], "arm": [...],
"statistic": "ratio" | "p90", "effect": -5.0}} (statistic and effect
optional); --save-pairs FILE writes the pilot's pairs in that form."""

from __future__ import annotations

import math

import numpy as np

from tortoiselab.analysis import inference as inf
from tortoiselab.analysis import quantiletests as qt
from tortoiselab.analysis.sizecheck import limit, paired_null
from stats_sims import hd_paired_pvalues, hd_weights

NS = (6, 20, 60)
ALPHA = 0.05
FAMILY = 10
Q = 0.9

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


# the pilot as a continuous population whose p90 ratio is exactly 1: the same smoothed bootstrap as the size check
# every p90 reading passes (analysis/sizecheck.py)
smoothed_pilot_runs = paired_null


# --- the tests, vectorised: (p, estimate) per sample ----------------------------------------



def run_test(test: str, c: np.ndarray, a: np.ndarray, n: int, swaps: int, rng: np.random.Generator):
    """(p, estimate) of one test on each simulated sample."""
    cp, ap = c[:, :n], a[:, :n]
    if test == "Wilcoxon HL":
        return inf.paired_location_pvalues(np.log(ap) - np.log(cp))
    if test == "p90 between":
        ab = a[:, n:]
        return (qt.between_groups_quantile_pvalues(cp, ab, Q, swaps, rng),
                np.log(np.quantile(ab, Q, axis=1) / np.quantile(cp, Q, axis=1)))
    est = np.log(np.quantile(ap, Q, axis=1) / np.quantile(cp, Q, axis=1))
    if test == "p90 paired":
        return qt.paired_quantile_pvalues(cp, ap, Q, swaps, rng), est
    if test == "unstudentized p90 paired":
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



def claim_measurements(results: str, grid: str):
    """Every claim of every study with its measurements on `results`, as the
    report reads them: yields (claim, [(measurement, the runs table it was
    measured on), ...]) over the grids of the list that hold its data (each
    experiment's table read once)."""
    from tortoiselab import studies as S  # only with --results: the lab's studies are heavy to import
    from tortoiselab.studies.data import current_points, load_runs, study_folder
    from tortoiselab.studies.registry import claim_grids, experiment_files, measure_claim
    frames = {}
    for s in S.STUDIES.values():
        files = experiment_files(s)
        for c in s.claims:
            found = []
            for g in claim_grids(c, grid):
                folder = study_folder(c.experiment, g, results)
                if not folder.is_dir() or c.experiment not in files:
                    continue
                if (c.experiment, g) not in frames:
                    points = current_points(files[c.experiment], g)
                    frames[c.experiment, g] = load_runs(folder, set(points), points)
                try:
                    found.append((measure_claim(c, frames[c.experiment, g], folder), frames[c.experiment, g]))
                except S.NoData:
                    continue
            yield c, found


def results_pairs(results: str, grid: str) -> dict:
    """{claim id: {"control", "arm", "statistic", "effect"}} for every claim
    whose measurement on `results` carries pairs (the grid of the list with
    the most pairs)."""
    from tortoiselab.studies import power as pw
    out = {}
    for c, found in claim_measurements(results, grid):
        best = None
        for m, _ in found:
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
        tests = ("Wilcoxon HL",) if stat == "ratio" else ("p90 paired", "unstudentized p90 paired", "p90 between")
        effects = tuple(dict.fromkeys(e for e in (p.get("effect"), -5.0) if e))
        res = cells(lambda n, e, s, rng: pilot_runs(p["control"], p["arm"], stat, n, e, s, rng), tests, effects,
                    sims, swaps, seed=len(p["control"]))
        swapped = cells(lambda n, e, s, rng: pilot_runs(p["control"], p["arm"], stat, n, e, s, rng, swapped=True),
                        tests, (), sims, swaps, seed=len(p["control"]) + 1)
        out += [f"**{name}** (pilot: {len(p['control'])} pairs, statistic {stat}; in %)", ""]
        out += table(res, tests, effects, swapped) + [""]
    return out




# --- the p90 pilots' table that `make stats-check` writes (bench/pilot_pairs.json) ---------------

PILOT_NS = (20, 60)
PILOT_TESTS = ("p90 paired", "unstudentized p90 paired")


def distinct_pilots(pairs: dict) -> dict[str, dict]:
    """The p90 pilots of pairs ({claim: {control, arm, statistic, effect,
    alpha, primary}}), those with the same pairs merged into one entry
    that names every claim (a variant that reads the same runs as its
    primary, a composite's deciding part)."""
    out: dict[tuple, dict] = {}
    for name, p in pairs.items():
        if p.get("statistic") != "p90" or len(p["control"]) < 2:
            continue
        key = (tuple(p["control"]), tuple(p["arm"]))
        if key in out:
            out[key]["claims"].append(name)
            if p.get("effect") is not None and p["effect"] not in out[key]["effects"]:
                out[key]["effects"].append(p["effect"])
            out[key]["alpha"] = min(out[key]["alpha"], p.get("alpha", ALPHA))
        else:
            out[key] = {"claims": [name], "control": p["control"], "arm": p["arm"], "alpha": p.get("alpha", ALPHA),
                        "effects": [p["effect"]] if p.get("effect") is not None else []}
    return {v["claims"][0]: v for v in out.values()}


def _rate(p: np.ndarray, est: np.ndarray, effect: float, alpha: float) -> float:
    side = np.ones_like(p, bool) if effect == 0 else np.sign(est) == np.sign(effect)
    return float(np.mean((p < alpha) & side))


def pilot_rows(pilot: dict, sims: int, swaps: int, seed: int) -> list[dict]:
    """Per n of PILOT_NS: each PILOT_TESTS test's size at 0.05 and at the
    pilot's family level on the pilot resampled under "p90 ratio = 1"
    (pilot_runs), the size with each pair's runs swapped at random
    (exchangeable), and the power at each claimed effect (the same tests, the same samples)."""
    rows = []
    for n in PILOT_NS:
        rng = np.random.default_rng([seed, n])
        row = {"n": n, "size": {}, "swapped": {}, "power": {}}
        draws = {"size": smoothed_pilot_runs(pilot["control"], pilot["arm"], n, 0.0, sims, rng),
                 "swapped": smoothed_pilot_runs(pilot["control"], pilot["arm"], n, 0.0, sims, rng, swapped=True)}
        for e in pilot["effects"]:
            draws[e] = smoothed_pilot_runs(pilot["control"], pilot["arm"], n, e, sims, rng)
        for t in PILOT_TESTS:
            for what, (c, a) in draws.items():
                p, est = run_test(t, c, a, n, swaps, np.random.default_rng([seed, n, 1]))
                rates = {al: _rate(p, est, 0.0 if what in ("size", "swapped") else what, al)
                         for al in (ALPHA, pilot["alpha"])}
                if what in ("size", "swapped"):
                    row[what][t] = rates
                else:
                    row["power"][t, what] = rates
        rows.append(row)
    return rows


def pilot_table(pairs: dict, sims: int, swaps: int) -> tuple[list[str], dict]:
    """The markdown table of every distinct p90 pilot (its claims, n of
    pairs, family level): size under its p90-ratio null of the studentized
    test and the unstudentized one at 0.05 and alpha / m, with "!" beyond
    alpha + 2 standard errors, the studentized test's size on swapped
    pairs and its power at the claimed effects; with a summary."""
    new, old = PILOT_TESTS
    head = ["pilot (claims)", "pairs", "alpha / m", "n", "size 0.05 new", "size 0.05 old", "size a/m new",
            "size a/m old", "size 0.05 new, pairs swapped", "power at the claimed effect: 0.05, a/m (new)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    summary = {"cells": 0, "new_over": [], "old_over": []}

    def cell(v: float, alpha: float, t: str, where: str) -> str:
        over = v > limit(alpha, sims)
        if over:
            summary["new_over" if t == new else "old_over"].append(where)
        return f"{100 * v:.1f}{' !' if over else ''}"
    for seed, (name, pilot) in enumerate(distinct_pilots(pairs).items()):
        al = pilot["alpha"]
        for r in pilot_rows(pilot, sims, swaps, seed):
            where = f"{name} n = {r['n']}"
            summary["cells"] += 2
            power = "; ".join(f"{e:+g} %: {100 * r['power'][new, e][ALPHA]:.0f}, {100 * r['power'][new, e][al]:.0f}"
                              for e in pilot["effects"]) or "-"
            lines.append("| " + " | ".join([
                ", ".join(pilot["claims"]), str(len(pilot["control"])), f"{al:.2g}", str(r["n"]),
                cell(r["size"][new][ALPHA], ALPHA, new, where), cell(r["size"][old][ALPHA], ALPHA, old, where),
                cell(r["size"][new][al], al, new, where + " a/m"), cell(r["size"][old][al], al, old, where + " a/m"),
                f"{100 * r['swapped'][new][ALPHA]:.1f}", power]) + " |")
    return lines, summary
