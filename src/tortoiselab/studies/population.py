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

import pandas as pd

from tortoiselab.analysis import stats
from tortoiselab.analysis.population import MIN_USERS_FOR_TEST, paired_quantile_change, quantiles_over_users, rho_class
from tortoiselab.host import store
from tortoiselab.studies.data import load_runs
from tortoiselab.studies.measure import pair_key, tie_reason
from tortoiselab.studies.model import Measurement, NoData

# what a run records of its user (config.population), as columns
POPULATION_FIELDS = ("market", "user", "seed", "access", "host", "warm", "idle_s")
# a warm user's measured load: the second load's figure (studies/data.STUDY_COLUMNS)
WARM_METRIC = {"plt_ms": "plt2_ms", "ttfb_ms": "ttfb2_ms", "content_download_ms": "content_download2_ms"}


def _population_of(run_dir: Any) -> dict:
    try:
        return store.read_record(Path(run_dir)).config.get("population") or {}
    except (OSError, ValueError, TypeError):
        return {}


def with_population(df: pd.DataFrame) -> pd.DataFrame:
    """df with population.<field> columns (market, user, seed, access, host,
    warm, idle_s; from each run's config.population, read from run_dir when
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
                           for r in df["path.rtt_ms"]]
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


def _select(df: pd.DataFrame, market: str | None, where: dict[str, Any]) -> pd.DataFrame:
    d = with_population(df)
    d = d[d["population.market"].notna()]
    if market is not None:
        d = d[d["population.market"] == market]
    for col, val in where.items():
        col = col.replace("__", ".")
        d = d[d[col].isin(list(val))] if isinstance(val, (list, tuple, set)) else (
            d[val(d[col])] if callable(val) else d[d[col] == val])
    return d


def user_pairs(df: pd.DataFrame, metric: str, arm_col: str, control, arm, market: str | None = None,
               **where) -> tuple[pd.DataFrame, int]:
    """(control and arm value per user, pairs dropped): rows matched on
    (market, user, repetition, other sweep values) where both loads are
    ok; the second figure counts the users whose load failed in either arm."""
    d = _select(df, market, where).copy()
    d["value"] = user_values(d, metric)
    key = ["population.market", "population.user", "repetition", "_rest"]
    d["_rest"] = [_rest_of(c, arm_col) for c in d["cond"]] if "cond" in d else ""
    good = d["ok"].astype(bool) & d["value"].notna()
    c = d[d[arm_col] == control]
    a = d[d[arm_col] == arm]
    both = c[key + ["value"]].merge(a[key + ["value"]], on=key, suffixes=("_c", "_a"))
    ok = c[good.loc[c.index]][key + ["value", "population.warm", "path.rtt_ms"]].merge(
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
                      q: float = 0.9, seed: int = 0, n_resamples: int = 4000, **where) -> Measurement:
    """The arm's p90 (or quantile q) over users against the control's, in %,
    users paired: 95 % interval from the paired bootstrap over users
    (analysis/population.paired_quantile_change), p from the report's own
    test of a quantile difference (the paired permutation test,
    stats.quantile_diff_test, as single-path p90 claims use), and the pairs
    riding along for power (statistic "p90"). market: one market's users
    (None: every market's users pooled, a population of its own). NoData
    without a pair."""
    p, dropped = user_pairs(df, metric, arm_col, control, arm, market, **where)
    if p.empty:
        raise NoData(f"no users with ok loads of both {arm} and {control} for {metric}"
                     + (f" in {market}" if market else ""))
    c, a = p["control"].to_numpy(float), p["arm"].to_numpy(float)
    ch = paired_quantile_change(c, a, q, n_resamples, seed)
    t = stats.quantile_diff_test(c, a, q, n_resamples=n_resamples, seed=seed)
    test = len(c) >= MIN_USERS_FOR_TEST and math.isfinite(t["p_value"])
    warm = float(p["population.warm"].fillna(False).astype(bool).mean())
    rho = p["path.rtt_ms"].map(rho_class).value_counts(normalize=True).sort_index()
    mix = ", ".join(f"{k} {100 * v:.0f} %" for k, v in rho.items())
    return Measurement(
        ch.value, ch.low, ch.high, t["p_value"] if test else None, ch.n, "%",
        f"paired p{100 * q:g} change over users of {metric} ({market or 'all markets'}), {arm} vs {control}; "
        f"interval: paired bootstrap over users ({n_resamples} resamples); p: paired permutation test of the "
        f"p{100 * q:g} difference; control p{100 * q:g} {ch.control_q:.0f}, "
        f"arm {ch.arm_q:.0f}; {warm * 100:.0f} % warm loads; RTT mix {mix}"
        + (f"; {dropped} users left out (a failed load in either arm)" if dropped else "")
        + ("" if test else f"; no test with fewer than {MIN_USERS_FOR_TEST} users"),
        n_control=len(c), n_arm=len(a), control=tuple(c.tolist()), arm=tuple(a.tolist()),
        statistic="p90" if q == 0.9 else "", tie=tie_reason(c, a))


def population_quantiles(df: pd.DataFrame, metric: str, arm_col: str, market: str | None = None,
                         by: str | list[str] | None = None, seed: int = 0, **where) -> pd.DataFrame:
    """Per arm (and per `by` group, e.g. rho_class or population.access):
    users, failed loads, p50 and p90 over users with bootstrap intervals."""
    d = _select(df, market, where).copy()
    d["value"] = user_values(d, metric)
    keys = [arm_col] + ([by] if isinstance(by, str) else list(by or []))
    rows = []
    for i, (k, g) in enumerate(d.groupby(keys, sort=True, dropna=False)):
        ok = g[g["ok"].astype(bool)]["value"].dropna().to_numpy(float)
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

