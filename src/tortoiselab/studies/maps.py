"""Sensitivity maps (docs/maps.md): a map's runs (results/<name>@map-<map>,
an ordinary sweep, spec/maps.py) read back as cells of RTT x loss (x size),
each with the arm's change against the control, its interval, the label
the verdict rule reads off that interval (measure.read_interval); beside
the map's metric, each arm's PLT and the round trips the arm saved, read
from every run's server capture (analysis/flights.py), with a short reason
that tells a saved round trip from serialization (same rounds); for an
exact (loss-free) cell, its cause: each arm's first flights; and the
markers: the region profiles and the drawn users of the markets.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tortoiselab.analysis import flights as fl
from tortoiselab.host.columns import SUMMARY_METRICS
from tortoiselab.host.store import captures
from tortoiselab.spec.experiment import expand, load
from tortoiselab.spec.maps import LOSS_AXIS, RTT_AXIS, MapCfg, draws_nothing, grid_name
from tortoiselab.spec import cols
from tortoiselab.spec.population import draw_users
from tortoiselab.spec.regionfiles import load_regions
from tortoiselab.studies.data import current_runs, study_folder
from tortoiselab.studies.measure import infer, read_interval
from tortoiselab.studies.model import ALPHA

# the label of a cell and its letter on the figure (the verdict rule's labels, measure.read_interval,
# docs/statistics.md); an exact cell whose arms are within the map's tie_pct is "not testable here" (a tie)
# with the letter "="
LETTERS = {"agree": "A", "disagree": "D", "inconclusive": "?", "larger than claimed": "L",
           "smaller than claimed": "S", "not testable here": "-"}
FIRST_FLIGHTS = 4  # flights named in a cell's cause
# metrics of the base HTML alone: their rounds are the first response's (flights.transfer_flights); any other
# metric's are every data round of the connection that sent the most
FIRST_RESPONSE_METRICS = (cols.CDT, "ttfb_ms")
ROUNDS = "rounds"  # the tidy table's column of each run's rounds (run_rounds)


class MapError(ValueError):
    """A map that cannot be read: which, and what to do."""


def map_of(experiment_file: str | Path, name: str) -> MapCfg:
    """The map `name` of an experiment file, or MapError naming the maps it has."""
    exp = load(Path(experiment_file))
    if name not in exp.maps:
        raise MapError(f"--map: {Path(experiment_file).name} has no map {name!r} (its maps: "
                       f"{', '.join(exp.maps) or 'none'}); add one under maps: (docs/maps.md)")
    return exp.maps[name]


def check_metric(m: MapCfg, name: str) -> None:
    """MapError when the map's metric is no column of the runs table."""
    if m.metric not in SUMMARY_METRICS:
        raise MapError(f"maps.{name}.metric: {m.metric!r} is no metric of runs.parquet; give one of "
                       f"{', '.join(sorted(SUMMARY_METRICS))}")


def cost(experiment_file: str | Path, name: str, seconds_per_run: float, jobs: int) -> dict[str, Any]:
    """A map's size before it runs: cells, runs (exact and lossy) and the
    expected wall time at `seconds_per_run` per run with `jobs` side by side."""
    exp = load(Path(experiment_file), grid=grid_name(name))
    runs = expand(exp)
    exact = sum(draws_nothing(r.path, r.config) for r in runs)
    arms = len(exp.sweep[next(iter(exp.sweep))])
    cells = len({json.dumps(r.point, sort_keys=True) for r in runs}) // arms
    return {"map": name, "folder": exp.name, "cells": cells, "runs": len(runs), "exact_runs": exact,
            "lossy_runs": len(runs) - exact, "wall_s": len(runs) * seconds_per_run / max(jobs, 1)}


def format_cost(c: dict[str, Any]) -> str:
    return (f"map {c['map']} -> results/{c['folder']}: {c['cells']} cells, {c['runs']} runs ({c['exact_runs']} "
            f"exact, once each; {c['lossy_runs']} lossy, with repetitions), about {c['wall_s'] / 60:.1f} min")


def _key(v: Any) -> str:
    return json.dumps(v, sort_keys=True)


def tidy(df: pd.DataFrame, m: MapCfg) -> pd.DataFrame:
    """The map's runs with the columns cells() reads: arm (the compare
    value as JSON), rtt_ms, loss_pct, size (the size value as JSON, "" when
    the map has no size axis), from each run's sweep point (cond)."""
    size_axis = next(iter(m.size)) if m.size else None
    pts = [json.loads(c) for c in df["cond"]]
    out = df.copy()
    out["arm_key"] = [_key(p.get(m.compare)) for p in pts]
    out["rtt_ms"] = [float(p[RTT_AXIS]) for p in pts]
    out["loss_pct"] = [float(p[LOSS_AXIS][0]) for p in pts]
    out["size"] = [_key(p.get(size_axis)) if size_axis else "" for p in pts]
    return out


def _label(low: float, high: float, m: MapCfg) -> tuple[str, str]:
    """The verdict rule's label of an interval (measure.read_interval)."""
    sign = -1 if m.better == "lower" else 1
    return read_interval(low, high, sign, m.claimed_pct, 0.0)


def cell(c: np.ndarray, a: np.ndarray, exact: bool, m: MapCfg) -> dict[str, Any]:
    """One cell from its paired control and arm values: the change in %
    (exact: the one pair's ratio; else the Hodges-Lehmann change with the
    interval of the paired test at ALPHA, measure.infer), and the label."""
    if len(c) == 0:
        return {"n": 0, "effect_pct": math.nan, "low_pct": math.nan, "high_pct": math.nan, "p": math.nan,
                "label": "not testable here", "why": "no pair of ok runs"}
    if exact:
        v = 100 * (float(a[0] / c[0]) - 1)
        label, why = (("not testable here", f"a tie: the arms within {m.tie_pct:g} % (maps.tie_pct)")
                      if abs(v) <= m.tie_pct else _label(v, v, m))
        return {"n": 1, "effect_pct": v, "low_pct": v, "high_pct": v, "p": math.nan, "label": label,
                "why": f"exact (loss-free on the virtual clock): {why}"}
    positive = (c > 0) & (a > 0)  # a log ratio needs both values above 0
    zeros = int((~positive).sum())
    c, a = c[positive], a[positive]
    dropped = f"; {zeros} pairs with a value of 0 left out (no log ratio)" if zeros else ""
    if len(c) < 2:
        return {"n": len(c), "effect_pct": 100 * (float(a[0] / c[0]) - 1) if len(c) else math.nan,
                "low_pct": math.nan, "high_pct": math.nan, "p": math.nan, "label": "not testable here",
                "why": f"{len(c)} pair: no test{dropped}"}
    r = infer(c, a, "ratio", ALPHA)
    v, lo, hi = r.pct()
    label, why = _label(lo, hi, m)
    return {"n": len(c), "effect_pct": v, "low_pct": lo, "high_pct": hi, "p": r.p_value, "label": label,
            "why": f"{r.test}: {why}{dropped}"}


def _median(v: np.ndarray) -> float:
    return float(np.median(v)) if len(v) else math.nan


def _both(d: pd.DataFrame, col: str, control: str, arm: str, reps: pd.Index) -> tuple[np.ndarray, np.ndarray]:
    """The control's and the arm's values of `col` on the pairs `reps`
    where both are known (empty when the table has no such column)."""
    if col not in d.columns:
        return np.array([]), np.array([])
    by = {k: d[d["arm_key"] == k].set_index("repetition")[col].reindex(reps).to_numpy(float) for k in (control, arm)}
    known = np.isfinite(by[control]) & np.isfinite(by[arm])
    return by[control][known], by[arm][known]


def reason(saved: float, change_pct: float, tie_pct: float, exact: bool = True) -> str:
    """Why a cell's arm differs, in round trips: "rounds saved: N" (the arm
    needs N fewer round trips than the control), "rounds lost: N", or with
    the same rounds, "same rounds: a tie" (an exact cell within tie_pct) or
    "same rounds: serialization / window sizes" (the change comes from how
    the same rounds' flights are cut, not from a round trip). A lossy
    cell's figure is the median over its pairs ("median rounds saved"),
    and its same rounds may also differ in loss recovery."""
    if math.isnan(saved):
        return "rounds: no capture"
    pre = "" if exact else "median "
    if saved >= 0.5:
        return f"{pre}rounds saved: {saved:g}"
    if saved <= -0.5:
        return f"{pre}rounds lost: {-saved:g}"
    if not exact:
        return "same median rounds: serialization, window sizes or loss recovery"
    if not math.isnan(change_pct) and abs(change_pct) <= tie_pct:
        return "same rounds: a tie"
    return "same rounds: serialization / window sizes"


def why_columns(d: pd.DataFrame, control: str, arm: str, reps: pd.Index, effect_pct: float, exact: bool,
                m: MapCfg) -> dict[str, Any]:
    """A cell's PLT and round trips beside its metric: each arm's median PLT
    and the median per-pair PLT change; each arm's median rounds (the
    tidy table's ROUNDS, from the server captures) and the rounds saved,
    the median per-pair control's minus the arm's (an exact cell: its one
    pair); and the reason() they give."""
    cp, ap = _both(d, cols.PLT, control, arm, reps)
    cp, ap = cp[(cp > 0) & (ap > 0)], ap[(cp > 0) & (ap > 0)]
    cr, ar = _both(d, ROUNDS, control, arm, reps)
    saved = _median(cr - ar)
    return {"control_plt_ms": _median(cp), "arm_plt_ms": _median(ap),
            "plt_change_pct": _median(100 * (ap / cp - 1)) if len(cp) else math.nan,
            "control_rounds": _median(cr), "arm_rounds": _median(ar), "rounds_saved": saved, "rounds_pairs": len(cr),
            "reason": reason(saved, effect_pct, m.tie_pct, exact)}


def cells(df: pd.DataFrame, m: MapCfg) -> pd.DataFrame:
    """One row per (size, arm, rtt_ms, loss_pct) of a tidy() table: the
    cell() fields, the control's and the arm's medians of the metric, exact
    (one pair at no loss), label and its letter, and why_columns() (PLT,
    rounds, the rounds saved and the reason)."""
    ok = df[df[cols.OK].astype(bool) & df[m.metric].notna()]
    rows = []
    control = _key(m.control)
    for (size, rtt, loss), d in df.groupby(["size", "rtt_ms", "loss_pct"], sort=True):
        d_ok = ok.loc[ok.index.intersection(d.index)]
        c = d_ok[d_ok["arm_key"] == control].set_index("repetition")[m.metric]
        for arm in m.arms:
            a = d_ok[d_ok["arm_key"] == _key(arm)].set_index("repetition")[m.metric]
            reps = c.index.intersection(a.index)
            cv, av = c.loc[reps].to_numpy(float), a.loc[reps].to_numpy(float)
            exact = loss == 0 and len(reps) == 1 and d["repetition"].max() == 0
            row = {"size": size, "arm": _key(arm), "size_name": short(json.loads(size)) if size else "",
                   "arm_name": short(arm), "rtt_ms": rtt, "loss_pct": loss, "exact": bool(exact),
                   "control_median": _median(cv), "arm_median": _median(av), **cell(cv, av, exact, m)}
            row["letter"] = "=" if exact and abs(row["effect_pct"]) <= m.tie_pct else LETTERS[row["label"]]
            rows.append(row | why_columns(d_ok, control, _key(arm), reps, row["effect_pct"], bool(exact), m))
    order = [_key(v) for v in next(iter(m.size.values()))] if m.size else [""]  # sizes in the file's order
    return pd.DataFrame(rows).sort_values("size", key=lambda s: s.map(order.index), kind="stable",
                                          ignore_index=True) if rows else pd.DataFrame(rows)


def capture_cause(run_dir: Path) -> dict[str, Any] | None:
    """From a run's server capture (its connections table,
    host/store/captures.py): the connection that sent the most, its
    TLS handshake in round trips, its first response's flights (segments
    per round, flights.transfer_flights) and their number, and the
    connections that carried requests; None without a capture."""
    conns = [c for c in captures.connections(run_dir) if c["carried_request"]]
    if not conns:
        return None
    main = max(conns, key=lambda c: c["server_bytes_sent"])
    data = fl.transfer_flights(main)
    return {"segments": [f["segments"] for f in data], "rounds": len(data), "connections": len(conns),
            "tls_rtts": main["handshake_rtts"]["tls"], "data_rounds": len(fl.flights(main, phase="data")),
            "retransmissions": len(main["retransmissions"])}


def run_rounds(run_dir: Path, first_response: bool) -> float:
    """A run's rounds from its server capture (capture_cause): the first
    response's (first_response) or every data round of the connection that
    sent the most; NaN without a capture."""
    cause = capture_cause(Path(run_dir))
    if cause is None:
        return math.nan
    return float(cause["rounds"] if first_response else cause["data_rounds"])


def with_rounds(df: pd.DataFrame, m: MapCfg) -> pd.DataFrame:
    """A tidy() table with the ROUNDS column: each ok run's rounds
    (run_rounds; first response's for FIRST_RESPONSE_METRICS)."""
    first = m.metric in FIRST_RESPONSE_METRICS
    out = df.copy()
    out[ROUNDS] = [run_rounds(Path(d), first) if ok else math.nan
                   for d, ok in zip(df["run_dir"], df[cols.OK].astype(bool))]
    return out


def short(v: Any) -> str:
    """A compare value in few words: a string as it is, a mapping by its
    leaves (key=value), a list by its parts, e.g. "cubic_plus n=6"."""
    if isinstance(v, dict):
        return " ".join(f"{k}={x}" if not isinstance(x, (dict, list)) else short(x) for k, x in v.items()) or "{}"
    if isinstance(v, list):
        return " ".join(short(x) for x in v)
    return v if isinstance(v, str) else json.dumps(v)


def _arm_text(name: str, cause: dict[str, Any] | None) -> str:
    """One arm's part of a cause: connections, TLS round trips, the first
    response's rounds and flights, then the whole connection's data rounds
    and retransmissions where they say more."""
    if cause is None:
        return f"{name}: no capture"
    segs = "-".join(map(str, cause["segments"][:FIRST_FLIGHTS])) + ("-..." if cause["rounds"] > FIRST_FLIGHTS
                                                                      else "")
    conns = f"{cause['connections']} connections, " if cause["connections"] > 1 else ""
    tls = f"TLS in {cause['tls_rtts']} RTT, " if cause.get("tls_rtts") else ""
    more = (f"; all data in {cause['data_rounds']} rounds, {cause['retransmissions']} retransmitted"
            if cause.get("data_rounds", 0) > cause["rounds"] or cause.get("retransmissions") else "")
    return f"{name}: {conns}{tls}first response in {cause['rounds']} rounds ({segs} segments){more}"


def causes(cs: pd.DataFrame, df: pd.DataFrame, m: MapCfg) -> pd.DataFrame:
    """cs with a column cause: for each exact cell, each arm's first
    flights and rounds from its run's server capture (capture_cause), so a
    change of sign is traced to the windows that made it; "" elsewhere."""
    out = cs.copy()
    texts = []
    control = _key(m.control)
    for _, row in cs.iterrows():
        if not row["exact"]:
            texts.append("")
            continue
        at = df[(df["size"] == row["size"]) & (df["rtt_ms"] == row["rtt_ms"]) & (df["loss_pct"] == row["loss_pct"])]
        parts = []
        for key in (control, row["arm"]):
            run = at[at["arm_key"] == key]
            parts.append(_arm_text(short(json.loads(key)),
                                   capture_cause(Path(run["run_dir"].iloc[0])) if len(run) else None))
        texts.append("; ".join(parts))
    out["cause"] = texts
    return out


def markers(m: MapCfg) -> list[dict[str, Any]]:
    """What the figure marks: each region profile at its RTT and downlink
    loss (kind region), and each drawn user of each market (kind user)."""
    out = []
    regions = load_regions()
    for name in m.regions:
        p = regions.path(name)
        out.append({"kind": "region", "name": name, "rtt_ms": p.rtt_ms, "loss_pct": p.loss_down_pct})
    for name in m.markets:
        for u in draw_users(name, m.users, m.users_seed):
            out.append({"kind": "user", "name": name, "rtt_ms": u.path.rtt_ms, "loss_pct": u.path.loss_down_pct})
    return out


def read_map(experiment_file: str | Path, name: str, results: str | Path = "results",
             with_causes: bool = True) -> tuple[MapCfg, pd.DataFrame]:
    """Map `name` of the file and its cells from the results under
    `results` (results/<name>@map-<map>): MapError when none are there."""
    m = map_of(experiment_file, name)
    folder = study_folder(experiment_file, grid_name(name), results)
    if not folder.is_dir():
        raise MapError(f"no results in {folder}: run `tortoise map {experiment_file} --map {name}` first")
    df = current_runs(folder, experiment_file)
    if df.empty:
        raise MapError(f"{folder} holds no run of map {name} as the file defines it now; run `tortoise map "
                       f"{experiment_file} --map {name}`")
    t = tidy(df, m)
    t = with_rounds(t, m) if with_causes else t
    cs = cells(t, m)
    return m, causes(cs, t, m) if with_causes else cs.assign(cause="")


def maps_of(experiment_file: str | Path) -> list[str]:
    """The names of the file's maps, in the file's order."""
    return list(load(Path(experiment_file)).maps)


def _fmt(v: Any, spec: str) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def summary_lines(m: MapCfg, cs: pd.DataFrame) -> list[str]:
    """A map's cells as text, one line per cell: the metric's change and
    interval, each arm's PLT (control -> arm) and its change, the rounds
    (control -> arm) and the reason, then the label and an exact cell's
    cause."""
    out = [f"{'size':<14} {'arm':<24} {'rtt ms':>7} {'loss %':>6} {'n':>3} {'change %':>9} {'interval %':>18} "
           f"{'PLT ms ctl -> arm':>19} {'PLT %':>7} {'rounds':>9}  reason; label / cause"]
    for _, r in cs.iterrows():
        ci = "exact" if r["exact"] else ("-" if math.isnan(r["low_pct"]) else
                                         f"[{r['low_pct']:+.1f}, {r['high_pct']:+.1f}]")
        plt = f"{_fmt(r.get('control_plt_ms'), '.1f')} -> {_fmt(r.get('arm_plt_ms'), '.1f')}"
        rounds = f"{_fmt(r.get('control_rounds'), 'g')} -> {_fmt(r.get('arm_rounds'), 'g')}"
        out.append(f"{r['size_name']:<14} {r['arm_name']:<24} {r['rtt_ms']:>7g} {r['loss_pct']:>6g} {r['n']:>3} "
                   f"{r['effect_pct']:>+9.1f} {ci:>18} {plt:>19} {_fmt(r.get('plt_change_pct'), '+.1f'):>7} "
                   f"{rounds:>9}  {r.get('reason', '')}; {r['label']}" + (f"; {r['cause']}" if r["cause"] else ""))
    return out
