"""What the report is made of: a results folder read through
tortoiselab.host.store, the one owner of results folders (docs/architecture.md:
experiment.yaml, every completed run's record, the runs table), and the
tables recomputed from it. docs/analysis.md ("The report") describes
the report; this module decides what it compares:

- arms: the values of the most important swept axis: ``server.cc`` if the
  experiment sweeps it, else the first axis of its ``sweep:`` mapping (the
  order of the file); with no sweep there is one arm and no comparison;
- control: the first value listed for that axis in the experiment file;
- strata: every combination of the other swept axes; arms are compared with
  the control within each stratum, never across;
- paired or not: paired (Wilcoxon signed-rank, pairs matched by seed) when the
  experiment sets ``paired: true`` (its arms share the seed of a
  repetition), else unpaired (Mann-Whitney U);
- Holm's correction over every row of the comparison table;
- only runs that completed (ok) enter statistics and figures, and of those
  only the runs that pass the physics gate (analysis/gates.py, as for the
  grade and the studies): a run whose numbers no run can measure (a PLT
  below its floor on a loss-free path, bytes that are not the page's) is
  left out and listed with the reason (Context.gated).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from tortoiselab.analysis import figures, stats
from tortoiselab.host import readfiles, safefs, store
from tortoiselab.host.audit import gate_runs
from tortoiselab.host.storedtraces import folder_traces
from tortoiselab.spec import cols, experiment
from tortoiselab.spec.yamlfile import YamlFileError, read_yaml

PRIORITY_AXIS = cols.CC
METRICS = cols.reported_metrics()  # (column, label): those spec/cols.py gives a label


class ReportError(RuntimeError):
    pass


@dataclass
class Context:
    """Everything the page is made from (kept so tests and notebooks can
    inspect what the report decided)."""

    exp_dir: Path
    name: str
    yaml_text: str
    exp: dict
    records: dict[str, dict]
    df: pd.DataFrame
    axes: list[str]
    main_axis: str | None
    control: Any
    strata_axes: list[str]
    paired_key: str | None
    notes: list[str] = field(default_factory=list)
    gated: dict[str, list[str]] = field(default_factory=dict)  # run id -> why the physics gate fails it


# --- loading -------------------------------------------------------------------


def _scalar(v: Any) -> Any:
    return v if v is None or isinstance(v, (str, int, float, bool)) else json.dumps(v, sort_keys=True)


def load_context(exp_dir: Path) -> Context:
    """Read a results folder: experiment.yaml, every completed run's run.json,
    and runs.parquet (rebuilt in memory when it does not match the folders)."""
    exp_dir = Path(exp_dir)
    if not exp_dir.is_dir():
        raise ReportError(f"{exp_dir}: no such results folder (run `tortoise run EXPERIMENT.yaml` first)")
    notes: list[str] = []
    yaml_text, exp = _read_experiment(exp_dir / "experiment.yaml", exp_dir.name.partition("@")[2] or None, notes)
    records: dict[str, dict] = {}
    for st in store.read_records(exp_dir):
        rec = st.record.model_dump(mode="json")
        rec["_dir"] = str(st.run_dir)
        records[rec[cols.RUN_ID]] = rec
    df, rebuilt = store.read_table(exp_dir)
    if rebuilt:
        notes.append(f"runs.parquet does not match the run records (unreadable, stale, edited or of another "
                     f"version): the table was rebuilt in memory from the records; `tortoise verify {exp_dir}` "
                     "names the rows that differ, with --rebuild-table rewrites the file")
    gated = gate_runs(exp_dir, list(records.values()))
    df[cols.OK] = df[cols.OK].astype(bool) & ~df[cols.RUN_ID].isin(list(gated))
    if gated:
        notes.append(f"{len(gated)} runs fail the physics gate (analysis/gates.py: numbers no run can measure) "
                     "and are left out of every statistic, as the grade and the studies leave them out: "
                     + "; ".join(f"{rid}: {'; '.join(why)}" for rid, why in sorted(gated.items())))

    sweep: dict = exp.get("sweep") or {}
    axes = list(sweep)
    for ax in axes:  # the swept value of each run, as the experiment wrote it
        df[ax] = [_scalar((records.get(r, {}).get("point") or {}).get(ax)) for r in df[cols.RUN_ID]]
    # object size of the transfer, for throughput figures
    df["object_bytes"] = [_object_bytes(records.get(r, {})) for r in df[cols.RUN_ID]]
    df["size_class"] = [figures.size_class(b) for b in df["object_bytes"]]
    manifest = _lab_json(exp_dir)
    df["object_class"] = [_object_class(records.get(r, {}), manifest) for r in df[cols.RUN_ID]]
    if len(df):  # sweep points in the file's order, then repetitions
        order = {ax: {v: i for i, v in enumerate(map(_scalar, sweep[ax]))} for ax in axes}
        keys = pd.DataFrame({f"_o{i}": df[ax].map(order[ax]) for i, ax in enumerate(axes)}, index=df.index)
        df = pd.concat([df, keys], axis=1).sort_values([*keys.columns, "repetition", cols.RUN_ID], kind="stable")
        df = df.drop(columns=list(keys.columns)).reset_index(drop=True)

    main = PRIORITY_AXIS if PRIORITY_AXIS in axes else (axes[0] if axes else None)
    control = _scalar(sweep[main][0]) if main else None
    if main and len(df) and control not in set(df[main]):
        present = [v for v in map(_scalar, sweep[main]) if v in set(df[main])]
        if present:
            notes.append(f"the control {main} = {control} has no completed runs; comparing against {present[0]}")
            control = present[0]
    paired_key = "seed" if exp.get("paired") else None
    return Context(exp_dir=exp_dir, name=str(exp.get("name") or exp_dir.name), yaml_text=yaml_text, exp=exp,
                   records=records, df=df, axes=axes, main_axis=main, control=control,
                   strata_axes=[a for a in axes if a != main], paired_key=paired_key, notes=notes, gated=gated)


def _read_experiment(yfile: Path, grid: str | None, notes: list[str]) -> tuple[str, dict]:
    """(the file's text, the experiment as a dict, as the folder's grid ran
    it: a folder <name>@<grid> holds that grid's sweep): validated by this
    version's spec, else read as plain (bounded) YAML with a note."""
    # neither through a link nor from a FIFO (host/safefs.py): refused with the fix
    yaml_text = safefs.read_text_regular(yfile, doing="tortoise report") if os.path.lexists(yfile) else ""
    if not yaml_text:
        notes.append("the folder has no experiment.yaml")
        return yaml_text, {}
    try:  # its traces: the project's or the folder's copies, never a file it names elsewhere (host/storedtraces.py)
        with folder_traces(yfile.parent):
            return yaml_text, experiment.load(yfile, grid=grid).model_dump()
    except (ValueError, OSError) as exc:  # a report of an old folder must still render
        notes.append(f"experiment.yaml does not validate with this version ({str(exc)[:300]}); read as plain YAML")
    try:
        raw = read_yaml(yfile, "experiment file")
    except YamlFileError:
        return yaml_text, {}
    raw = raw if isinstance(raw, dict) else {}
    grid_raw = (raw.get("grids") or {}).get(grid) if grid else None
    if isinstance(grid_raw, dict) and grid_raw.get("sweep") is not None:
        raw = {**raw, "sweep": grid_raw["sweep"]}
    return yaml_text, raw


def _object_bytes(rec: dict) -> float | None:
    url = ((rec.get("config") or {}).get("client") or {}).get("url") or ""
    m = re.search(r"objects/(\d+)", url)
    if m:
        return float(m.group(1))
    s = rec.get("summary") or {}
    if s.get("data_bytes") and s.get("requests"):
        return float(s["data_bytes"]) / float(s["requests"])
    return float(s["bytes"]) if isinstance(s.get("bytes"), (int, float)) else None


def _lab_json(exp_dir: Path) -> dict:
    """The site's manifest ({} without one), never read through a link or from a FIFO."""
    f = exp_dir / ".lab" / "site" / "manifest.json"
    return readfiles.lab_json(exp_dir, "site") if os.path.lexists(f) else {}


def _object_class(rec: dict, manifest: dict) -> str | None:
    """The object-size class of what a run loaded: a Stony Brook page's
    class (seed 002), the feed page, or a single object's size class."""
    c = (rec.get("config") or {}).get("client") or {}
    if not c.get("url"):
        page = (manifest.get("pages") or {}).get(c.get("page") or "")
        if page and page.get("size_class"):
            sc = page["size_class"]
            return f"{sc['name']} ({sc['label']})"
        if c.get("page"):
            return c["page"].removesuffix(".html") + (f" ({page['n_objects']} objects)" if page else "")
    b = _object_bytes(rec)
    return f"single object {figures.size_class(b)}" if b is not None else None


# --- tables --------------------------------------------------------------------


def floor_table(ctx: Context) -> pd.DataFrame:
    """Measured PLT / floor per object-size class, configured loss and arm:
    the ok runs that have both. On the virtual clock and without loss the
    ratio is what the network and the protocols cost beyond the napkin
    model (>= 1 by construction of a floor)."""
    df = ctx.df[ctx.df[cols.OK].astype(bool) & ctx.df[cols.FLOOR].notna() & ctx.df[cols.PLT].notna()]
    keys = ["object_class", cols.LOSS] + ([ctx.main_axis] if ctx.main_axis and ctx.main_axis not in
                                                (cols.PAGE, cols.URL) else [])
    rows = []
    for key, g in df.groupby(keys, sort=False, dropna=False):
        r = g[cols.PLT] / g[cols.FLOOR]
        rows.append({**dict(zip(keys, key)), "runs": len(g), "clock": ", ".join(sorted(set(map(str, g["clock"])))),
                     cols.FLOOR: float(g[cols.FLOOR].median()), cols.PLT: float(g[cols.PLT].median()),
                     "ratio_min": float(r.min()), "ratio_median": float(r.median()), "ratio_max": float(r.max())})
    return pd.DataFrame(rows, columns=[*keys, "runs", "clock", cols.FLOOR, cols.PLT, "ratio_min", "ratio_median",
                                       "ratio_max"])


def format_floor_table(t: pd.DataFrame) -> str:
    """The floor table as plain text (for `tortoise report` and `make bench`)."""
    if not len(t):
        return "measured PLT / floor: no ok run has both a PLT and a floor"
    head = [c for c in t.columns if c not in (cols.FLOOR, cols.PLT, "ratio_min", "ratio_median", "ratio_max")]
    lines = ["measured PLT / napkin floor per object-size class",
             "  ".join(f"{h:<28}" if h == "object_class" else f"{h:>10}" for h in head)
             + f"{'floor ms':>11}{'PLT ms':>11}{'ratio min':>11}{'median':>9}{'max':>8}"]
    for r in t.to_dict("records"):
        lines.append("  ".join(f"{str(r[h]):<28}" if h == "object_class" else f"{str(r[h]):>10}" for h in head)
                     + f"{r['floor_ms']:>11.1f}{r['plt_ms']:>11.1f}{r['ratio_min']:>11.4f}"
                       f"{r['ratio_median']:>9.4f}{r['ratio_max']:>8.4f}")
    return "\n".join(lines)


def runs_summary(ctx: Context, n_resamples: int = stats.DEFAULT_RESAMPLES, seed: int = 0) -> pd.DataFrame:
    """Per sweep point: runs, ok, PLT p50/p90/mean with bootstrap CIs, median
    throughput where runs have one, and fidelity failures."""
    df = ctx.df
    keys = ctx.axes
    groups = df.groupby(keys, sort=False, dropna=False) if keys else [((), df)]
    rows = []
    for i, (key, g) in enumerate(groups):
        key = key if isinstance(key, tuple) else (key,)
        ok = g[g[cols.OK].astype(bool)]
        row = dict(zip(keys, key))
        row.update({"runs": len(g), cols.OK: len(ok)})
        s = stats.summarize(ok, cols.PLT, n_resamples=n_resamples, seed=seed + i).iloc[0]
        row.update({k: s[k] for k in s.index if k.startswith(("p50", "p90", "mean"))})
        row["n_plt"] = int(s["n"])
        thr = pd.to_numeric(ok[cols.THROUGHPUT], errors="coerce").dropna()
        row["throughput_median"] = float(thr.median()) if len(thr) else math.nan
        row["fidelity_failed"] = int((g[cols.FIDELITY_OK] == False).sum())  # noqa: E712 - None is "unknown"
        rows.append(row)
    return pd.DataFrame(rows)


def comparisons(ctx: Context, n_resamples: int = stats.DEFAULT_RESAMPLES, seed: int = 0,
                alpha: float = 0.05) -> pd.DataFrame:
    """stats.compare of every arm against the control, per metric that runs
    have and per stratum of the other swept axes; Holm over all rows."""
    if ctx.main_axis is None:
        return pd.DataFrame(columns=["stratum", *stats.COMPARE_COLUMNS])
    ok = ctx.df[ctx.df[cols.OK].astype(bool)]
    parts = []
    strata = ok.groupby(ctx.strata_axes, sort=False, dropna=False) if ctx.strata_axes else [((), ok)]
    for j, (key, sub) in enumerate(strata):
        key = key if isinstance(key, tuple) else (key,)
        label = ", ".join(f"{a} = {v}" for a, v in zip(ctx.strata_axes, key)) or "all runs"
        if sub[ctx.main_axis].nunique() < 2 or ctx.control not in set(sub[ctx.main_axis]):
            continue
        arms = [a for a in dict.fromkeys(_scalar(v) for v in (ctx.exp.get("sweep") or {}).get(ctx.main_axis, []))
                if a in set(sub[ctx.main_axis])]
        for k, (metric, _) in enumerate(METRICS):
            if pd.to_numeric(sub[metric], errors="coerce").notna().sum() == 0:
                continue
            c = stats.compare(sub, metric, ctx.main_axis, ctx.control, paired_key=ctx.paired_key,
                              n_resamples=n_resamples, seed=seed * 1000 + j * 10 + k, alpha=alpha, arms=arms)
            c.insert(0, "stratum", label)
            parts.append(c)
    if not parts:
        return pd.DataFrame(columns=["stratum", *stats.COMPARE_COLUMNS])
    out = pd.concat(parts, ignore_index=True)
    out["p_holm"] = stats.holm(out["p_value"].to_numpy(dtype=float))
    out["significant"] = out["p_holm"] < alpha
    out.attrs["multiple_comparisons"] = stats.holm_note(len(out), alpha)
    return out


def fidelity_summary(ctx: Context) -> dict:
    """Counts of runs outside the fidelity tolerance, without a check, with
    capture drops and failed; the failed checks, the failed runs' errors
    and the runs the physics gate leaves out, with the reason."""
    df = ctx.df
    bad = df[df[cols.FIDELITY_OK] == False]  # noqa: E712
    unknown = df[df[cols.FIDELITY_OK].isna()]
    drops = pd.to_numeric(df["capture_drops"], errors="coerce")
    rows = []
    for rid in bad[cols.RUN_ID]:
        for f in ctx.records.get(rid, {}).get("fidelity") or []:
            if not f.get(cols.OK):
                rows.append({"run": rid, "quantity": f.get("quantity"), "configured": f.get("configured"),
                             "expected": f"{f.get('low')} .. {f.get('high')}", "measured": f.get("measured"),
                             "unit": f.get("unit"), "note": f.get("note")})
    failed = df[~df[cols.OK].astype(bool) & ~df[cols.RUN_ID].isin(list(ctx.gated))]
    return {"runs": len(df), "fidelity_failed": len(bad), "fidelity_unknown": len(unknown),
            "capture_drops_total": int(drops.fillna(0).sum()), "runs_with_drops": int((drops > 0).sum()),
            "failed_runs": [{"run": r.run_id, "error": str(r.error)[:300]} for r in failed.itertuples()],
            "checks": rows,
            "physics_gated": [{"run": rid, "reason": "; ".join(why)} for rid, why in sorted(ctx.gated.items())]}


def metadata(ctx: Context) -> list[tuple[str, str]]:
    """Each recorded property of the runs with its value(s), and how many
    runs had each value when they differ."""
    metas = [r.get("meta") or {} for r in ctx.records.values()]
    flat: dict[str, list[str]] = {}

    def add(key: str, value: Any) -> None:
        flat.setdefault(key, []).append("" if value is None else str(value))

    for m in metas:
        tools = m.get("tools") or {}
        if tools.get("tortoiselab_git"):
            add("tortoiselab git revision", tools["tortoiselab_git"] +
                (" (with uncommitted changes)" if tools.get("tortoiselab_dirty") else ""))
        for k in ("backend", "clock", "kernel_release", "switch"):
            add(k, m.get(k))
        for k, v in sorted(tools.items()):
            if not k.startswith("tortoiselab_"):
                add(f"tools.{k}", v)
        for alg, ps in sorted((m.get("modules") or {}).items()):
            add(f"module tcp_{alg}", " ".join(f"{p}={v}" for p, v in sorted(ps.items())))
        for k, v in sorted((m.get("server_sysctls") or {}).items()):
            add(k, v)
        add("server_route", m.get("server_route"))
    out = []
    for k, vals in flat.items():
        c = Counter(vals)
        out.append((k, c.most_common(1)[0][0] if len(c) == 1 else "; ".join(f"{v} ({n} runs)" for v, n in c.items())))
    starts = sorted(m["started"] for m in metas if m.get("started"))
    ends = sorted(m["ended"] for m in metas if m.get("ended"))
    if starts:
        out.append(("runs started / ended", f"{starts[0]} .. {ends[-1] if ends else '?'}"))
    walls = [m["wall_seconds"] for m in metas if isinstance(m.get("wall_seconds"), (int, float))]
    sims = [m["sim_seconds"] for m in metas if isinstance(m.get("sim_seconds"), (int, float))]
    if walls:
        out.append(("wall time of all runs", f"{sum(walls):.1f} s"))
    if sims:
        out.append(("guest time of all runs", f"{sum(sims):.1f} s"))
    return out
