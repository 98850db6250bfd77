"""Claims measured over users (docs/population.md): the runs of an
experiment with a `population` (spec/population.py), each row one user's
load in one arm, with the user's draw beside it; p50/p90 over users per
arm; and the paired change of an arm's p90 against the control's over the
same users, as a Measurement a claim's measure function returns.

For a claim (studies/claims/*.py):

    from tortoiselab.studies.population import population_change
    measure=lambda df: population_change(df, "plt_ms", "arm", "htcp", "hybla", market="india-mobile-2017")

`df` is what the registry hands a claim (studies/data.load_runs); the
population's columns are added from the run folders when missing
(with_population). A warm user's measured load is its second one
(plt2_ms for plt_ms, ...), as RUM counts the page view the user saw.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from tortoiselab.analysis.population import MIN_USERS_FOR_TEST, quantiles_over_users, rho_class
from tortoiselab.host import store
from tortoiselab.spec import cols
from tortoiselab.studies.data import load_runs
from tortoiselab.studies.measure import Where, infer, pair_key, select, tie_reason
from tortoiselab.studies.model import Measurement, NoData

# what a run records of its user (config.population), as columns (vary: a sensitivity setting's changed
# numbers, spec/population.vary_name; None for the market as the file has it)
POPULATION_FIELDS = ("market", "user", "seed", "access", "host", "warm", "idle_s", "vary")
# a warm user's measured load: the second load's figure (studies/data.STUDY_COLUMNS)
WARM_METRIC = {cols.PLT: "plt2_ms", "ttfb_ms": "ttfb2_ms", cols.CDT: "content_download2_ms"}


def _population_of(run_dir: Any) -> dict:
    try:
        return store.read_record(Path(run_dir)).config.get("population") or {}
    except (OSError, ValueError, TypeError):
        return {}


def with_population(df: pd.DataFrame) -> pd.DataFrame:
    """df with population.<field> columns (market, user, seed, access, host,
    warm, idle_s, vary; from each run's config.population, read from run_dir when
    the columns are missing) and rho_class (the user's RTT, Hybla's rho
    = RTT / 25 ms in classes). Runs without a population get NaN."""
    if f"population.{POPULATION_FIELDS[0]}" not in df.columns:
        df = df.copy()
        pops = [_population_of(d) for d in df["run_dir"]] if "run_dir" in df.columns else [{}] * len(df)
        for k in POPULATION_FIELDS:
            df[f"population.{k}"] = [p.get(k) for p in pops]
    if "rho_class" not in df.columns:
        df = df.copy()
        df["rho_class"] = [rho_class(r) if isinstance(r, (int, float)) and math.isfinite(r) else "no rtt"
                           for r in df[cols.RTT]]
    return df


def load_population_runs(exp_dir: str | Path, run_ids: set[str] | None = None) -> pd.DataFrame:
    """studies/data.load_runs with the population's columns (with_population)."""
    return with_population(load_runs(exp_dir, run_ids))


def user_values(df: pd.DataFrame, metric: str) -> pd.Series:
    """Each row's measured load: metric for a cold user, its second load's
    (WARM_METRIC) for a warm one."""
    second = WARM_METRIC.get(metric)
    warm = df["population.warm"].fillna(False).astype(bool) if "population.warm" in df else False
    if second is None or second not in df.columns:
        return df[metric]
    return df[second].where(warm, df[metric])


def _select(df: pd.DataFrame, market: str | None, where: Where | None) -> pd.DataFrame:
    """The users' rows (of one market, unless None) that where selects (measure.select)."""
    d = with_population(df)
    d = d[d["population.market"].notna()]
    if market is not None:
        d = d[d["population.market"] == market]
    return select(d, where)


def user_pairs(df: pd.DataFrame, metric: str, arm_col: str, control, arm, market: str | None = None,
               where: Where | None = None) -> tuple[pd.DataFrame, int]:
    """(control and arm value per user, pairs dropped) in the rows where
    selects (measure.select): rows matched on
    (market, user, repetition, other sweep values) where both loads are
    ok; the second figure counts the users whose load failed in either arm."""
    d = _select(df, market, where).copy()
    d["value"] = user_values(d, metric)
    key = ["population.market", "population.user", "repetition", "_rest"]
    d["_rest"] = [_rest_of(c, arm_col) for c in d["cond"]] if "cond" in d else ""
    good = d[cols.OK].astype(bool) & d["value"].notna()
    c = d[d[arm_col] == control]
    a = d[d[arm_col] == arm]
    both = c[key + ["value"]].merge(a[key + ["value"]], on=key, suffixes=("_c", "_a"))
    ok = c[good.loc[c.index]][key + ["value", "population.warm", cols.RTT]].merge(
        a[good.loc[a.index]][key + ["value"]], on=key, suffixes=("_c", "_a"))
    ok = ok.rename(columns={"value_c": "control", "value_a": "arm"})
    return ok, len(both) - len(ok)


def _rest_of(cond: str, arm_col: str) -> str:
    """A run's sweep point without the arm's own fields and the user (the
    other sweep values a pair must share, e.g. client.page)."""
    key = json.loads(pair_key(cond, arm_col))
    key.pop("population.user", None)
    key.pop("population.market", None)
    return json.dumps(key, sort_keys=True)


def population_change(df: pd.DataFrame, metric: str, arm_col: str, control, arm, market: str | None = None,
                      q: float = 0.9, seed: int = 0, n_resamples: int = 4000, groups: bool = False,
                      where: Where | None = None) -> Measurement:
    """The arm's p90 over users against the control's, in %: users paired
    (both arms loaded by the same simulated user; the paired permutation
    test of the p90 ratio over users, and the interval that inverts it:
    measure.infer, statistic "p90"), or, with groups, as two independent
    groups of users as LinkedIn split its machines (the between-group
    permutation test, statistic "p90-groups"); the users ride along for
    the family's level and power. market: one market's users (None: every
    market's users pooled). NoData without a pair."""
    if q != 0.9:
        raise ValueError(f"population_change: q = {q}: the claims' tests are for the p90 (q = 0.9)")
    p, dropped = user_pairs(df, metric, arm_col, control, arm, market, where)
    if p.empty:
        raise NoData(f"no users with ok loads of both {arm} and {control} for {metric}"
                     + (f" in {market}" if market else ""))
    # a time of 0 (content_download_ms when the whole response came in the loader's first read) has no
    # log ratio, which the tests take: that user is left out, and counted
    zero = (p["control"] <= 0) | (p["arm"] <= 0)
    p = p[~zero]
    if p.empty:
        raise NoData(f"no users with a positive {metric} in both {arm} and {control}" + (f" in {market}" if market else ""))
    c, a = p["control"].to_numpy(float), p["arm"].to_numpy(float)
    statistic = "p90-groups" if groups else "p90"
    test = len(c) >= MIN_USERS_FOR_TEST
    r = infer(c, a, statistic, seed=seed) if test else None
    value, low, high = r.pct() if r else (100 * (float(np.quantile(a, q) / np.quantile(c, q)) - 1), math.nan, math.nan)
    warm = float(p["population.warm"].fillna(False).astype(bool).mean())
    rho = p[cols.RTT].map(rho_class).value_counts(normalize=True).sort_index()
    mix = ", ".join(f"{k} {100 * v:.0f} %" for k, v in rho.items())
    how = "two independent groups of users" if groups else "users paired"
    return Measurement(
        value, low, high, r.p_value if r else None, len(c), "%",
        f"p90 change over users of {metric} ({market or 'all markets'}), {arm} vs {control}, {how}; "
        + (f"{r.test}; " if r else "") + f"control p90 {np.quantile(c, q):.0f}, arm {np.quantile(a, q):.0f}; "
        f"{warm * 100:.0f} % warm loads; RTT mix {mix}"
        + (f"; {dropped} users left out (a failed load in either arm)" if dropped else "")
        + (f"; {int(zero.sum())} users left out ({metric} of 0 in either arm: the whole response in the "
           "loader's first read, which no log ratio takes)" if zero.any() else "")
        + ("" if test else f"; no test with fewer than {MIN_USERS_FOR_TEST} users"),
        n_control=len(c), n_arm=len(a), control=tuple(c.tolist()), arm=tuple(a.tolist()),
        statistic=statistic if test else "", tie=tie_reason(c, a), level=0.05 if r else None,
        min_p=r.min_p if r else None, failed=dropped, n_what="users per group" if groups else "users")


def _weighted_p90(values: np.ndarray, weights: np.ndarray, q: float = 0.9) -> float:
    """The q-quantile of values under weights: the smallest value whose cumulative weight reaches q."""
    order = np.argsort(values)
    cum = np.cumsum(weights[order]) / weights.sum()
    return float(values[order][min(int(np.searchsorted(cum, q - 1e-12)), len(values) - 1)])


def warm_share_curve(df: pd.DataFrame, metric: str, arm_col: str, control, arm, market: str,
                     where: Where | None = None, shares=tuple(np.round(np.arange(0, 1.0001, 0.05), 2))
                     ) -> tuple[float, list[tuple[float, float]]]:
    """How the p90 change over a market's users moves with the share of
    warm loads (loads on a connection an earlier load left open): the
    market's own users reweighted, warm users to `share` and cold ones to
    the rest (a population sensitivity from the runs there are, no new
    runs). (the users' own warm share, [(share, change in %)]); no warm or
    no cold users: the curve is empty."""
    p, _ = user_pairs(df, metric, arm_col, control, arm, market, where)
    p = p[(p["control"] > 0) & (p["arm"] > 0)]
    warm = p["population.warm"].fillna(False).astype(bool).to_numpy()
    own = float(warm.mean()) if len(warm) else math.nan
    if warm.all() or not warm.any():
        return own, []
    c, a = p["control"].to_numpy(float), p["arm"].to_numpy(float)
    out = []
    for share in shares:
        w = np.where(warm, share / warm.sum(), (1 - share) / (~warm).sum())
        if w.sum() <= 0:
            continue
        out.append((float(share), 100 * (_weighted_p90(a, w) / _weighted_p90(c, w) - 1)))
    return own, out


def meets_at(curve: list[tuple[float, float]], figure: float) -> float | None:
    """The smallest warm share at which the change is no larger (in size)
    than the seed's figure (a change in %, same sign): where the lab's
    effect shrinks to the seed's; None if it never does on the curve."""
    for share, change in curve:
        if abs(change) <= abs(figure) or np.sign(change) != np.sign(figure):
            return share
    return None


def population_quantiles(df: pd.DataFrame, metric: str, arm_col: str, market: str | None = None,
                         by: str | list[str] | None = None, seed: int = 0,
                         where: Where | None = None) -> pd.DataFrame:
    """Per arm (and per `by` group, e.g. rho_class or population.access):
    users, failed loads, p50 and p90 over users with bootstrap intervals."""
    d = _select(df, market, where).copy()
    d["value"] = user_values(d, metric)
    keys = [arm_col] + ([by] if isinstance(by, str) else list(by or []))
    rows = []
    for i, (k, g) in enumerate(d.groupby(keys, sort=True, dropna=False)):
        ok = g[g[cols.OK].astype(bool)]["value"].dropna().to_numpy(float)
        e = quantiles_over_users(ok, seed=seed + i)
        row = dict(zip(keys, k if isinstance(k, tuple) else (k,)))
        row.update({"users": int(len(g)), "failed": int(len(g) - ok.size)})
        for name, est in e.items():
            row.update({name: est.value, f"{name}_low": est.low, f"{name}_high": est.high})
        rows.append(row)
    return pd.DataFrame(rows)


def measure_over_users(metric: str, arm_col: str, control, arm, market: str | None = None,
                       **kw) -> Callable[[pd.DataFrame], Measurement]:
    """A claim's measure function: df -> population_change(df, ...)."""
    return lambda df: population_change(df, metric, arm_col, control, arm, market, **kw)

