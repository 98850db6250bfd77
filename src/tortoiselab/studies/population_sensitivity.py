"""How far each population assumption moves a verdict
(`tortoise population-sensitivity`, docs/population.md, "Sensitivity"):
a claim over users judged on the runs of each one-at-a-time setting of
its market (spec/population_oat: every assumed number moved to a low and
a high value, the others at their base) of an experiment's `sensitivity`
grid, beside the base setting: the effect and its interval per setting,
at the study's level, and whether the label changes.

The level: alpha / m with m the study's primary claims that can be tested
(neither untestable nor judged off a rule without a test), the report's
Bonferroni level when every one of them has data (docs/statistics.md).
Every setting draws its users from the same uniforms as the base
(spec/population.draw_users), so a setting differs from the base only
where its change moves a user."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from pathlib import Path

import pandas as pd

from tortoiselab.spec.experiment import load as load_experiment
from tortoiselab.spec.population import load_populations
from tortoiselab.spec.population_oat import oat_settings
from tortoiselab.studies.data import current_points, grid_claims, load_runs, study_folder
from tortoiselab.studies.measure import at_level
from tortoiselab.studies.model import ALPHA, Claim, NoData
from tortoiselab.studies.plan import experiment_file, require_grid
from tortoiselab.studies.population import with_population
from tortoiselab.studies.registry import STUDIES, judge_claim, tie_of

GRID = "sensitivity"
BASE = "base"


@dataclass(frozen=True)
class Row:
    """One setting of a claim: the setting (BASE or "param.field=value"),
    its level and base value, the verdict's number (value, low, high in
    the claim's unit, p, users), label, and whether it differs from the
    base's label."""

    claim_id: str
    setting: str
    level: str
    base_value: float | None
    value: float | None
    low: float | None
    high: float | None
    p_value: float | None
    n: int
    verdict: str
    moved: bool


def study_family(study_id: str) -> int:
    """m of the study's Bonferroni level: its primary claims that are not
    untestable (at least 1)."""
    return max(1, sum(c.primary and not c.untestable for c in STUDIES[study_id].claims))


def _clean(x) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


def judge_setting(c: Claim, df: pd.DataFrame, family: int) -> tuple:
    """(value, low, high, p, n, verdict) of claim c on one setting's runs
    at ALPHA / family; "no data" when the runs give no measurement."""
    try:
        m = c.measure(df)
    except NoData as exc:
        v = judge_claim(c, None, str(exc))
        return None, None, None, None, 0, v.verdict
    if not tie_of(m):
        m = dataclasses.replace(at_level(m, ALPHA / family), family=family)
    v = judge_claim(c, m)
    return _clean(m.value), _clean(m.low), _clean(m.high), _clean(m.p_value), m.n, v.verdict


def settings_of(df: pd.DataFrame, order: list[str] = ()) -> list[str]:
    """The settings the runs hold (population.vary; BASE for none): BASE
    first, then those of `order` (the OAT settings' order), then any
    other, sorted."""
    vary = df["population.vary"].fillna("").astype(str) if "population.vary" in df else pd.Series("", df.index)
    held = set(vary) - {""}
    return ([BASE] if (vary == "").any() else []) + [n for n in order if n in held] + sorted(held - set(order))


def oat_rows(c: Claim, df: pd.DataFrame, market: str, family: int) -> list[Row]:
    """Claim c (over the users of `market`) judged per setting of the runs
    df; each row says whether its label differs from the base's. The
    settings' levels and base values come from the market's OAT settings
    (spec/population_oat)."""
    df = with_population(df)
    vary = df["population.vary"].fillna("").astype(str)
    known = {s.name: s for s in oat_settings(market, load_populations().markets[market])[0]}
    rows, base_label = [], None
    for name in settings_of(df, list(known)):
        sub = df[vary == ("" if name == BASE else name)]
        value, low, high, p, n, verdict = judge_setting(c, sub, family)
        base_label = verdict if name == BASE else base_label
        s = known.get(name)
        rows.append(Row(c.id, name, s.level if s else ("" if name == BASE else "other"), s.base if s else None,
                        value, low, high, p, n, verdict, base_label is not None and verdict != base_label))
    return rows


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def format_rows(rows: list[Row], unit: str = "%") -> str:
    """A markdown table: per setting the effect [interval], p, users, the
    label, and "moved" where it differs from the base's."""
    out = ["| claim | setting | level | base value | effect [interval] | p | users | label | moved |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        effect = "-" if r.value is None else f"{r.value:+.1f} {unit} [{_num(r.low)}, {_num(r.high)}]"
        out.append(f"| {r.claim_id} | {r.setting} | {r.level} | {_num(r.base_value)} | {effect} | {_num(r.p_value)} "
                   f"| {r.n} | {r.verdict} | {'**moved**' if r.moved else ''} |")
    return "\n".join(out)


def grid_markets(f, grid: str) -> list[str]:
    """The markets a sensitivity grid sweeps (its population.market axis,
    linked or not), in order."""
    exp = load_experiment(f, grid=grid)
    for key, values in exp.sweep.items():
        fields = key.split("+")
        if "population.market" in fields:
            i = fields.index("population.market")
            return list(dict.fromkeys(v[i] if len(fields) > 1 else v for v in values))
    return [exp.population["market"]] if exp.population else []


def report(experiment: str, results: str | Path = "results", grid: str = GRID) -> str:
    """The OAT table of every claim the experiment's sensitivity grid
    names (its `claims:`), per market it sweeps, with the runs' count and
    wall time; a ValueError naming the fix when the grid or its runs are
    not there."""
    f = experiment_file(experiment)
    require_grid(f, grid, "--grid")
    ids = grid_claims(f).get(grid) or ()
    if not ids:
        raise ValueError(f"--grid: {f.name}'s grid {grid} names no claims (claims: [study.claim-id, ...])")
    folder = study_folder(f, grid, results)
    points = current_points(f, grid)
    df = load_runs(folder, set(points), points) if folder.is_dir() else pd.DataFrame()
    if df.empty:
        raise ValueError(f"--results: no runs of {f.name} --grid {grid} in {folder}; run `tortoise run {f} --grid "
                         f"{grid}` first")
    claims = {c.id: c for s in STUDIES.values() for c in s.claims}
    rows = []
    for cid in ids:
        c = claims[cid]
        for market in grid_markets(f, grid):
            got = oat_rows(c, df, market, study_family(c.study))
            if got and got[0].verdict != "no data":
                rows += got
    walls = pd.to_numeric(df.get("wall_seconds", pd.Series(dtype=float)), errors="coerce")
    head = (f"{f.name} --grid {grid}: {len(df)} runs of {len(points)} ({int(df['ok'].sum())} ok)"
            + (f", {walls.sum() / 60:.1f} min of run walls" if walls.notna().any() else "")
            + "; each claim at its study's level alpha / m (m: its primary claims that can be tested); "
            "moved: a label other than the base setting's")
    return head + "\n\n" + format_rows(rows)
