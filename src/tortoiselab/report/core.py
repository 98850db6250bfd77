"""One self-contained HTML page per experiment: what was run, what came out,
which arm is better and how sure we are, how faithful the lab was, and on
what it ran. Figures are embedded (base64 PNG, with the SVG as a data: link);
the page loads nothing from anywhere and runs no script.

    write_report(Path("results/quick"))  ->  results/quick/report.html

What the page compares (documented here and on the page):
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
- only runs that completed (ok) enter statistics and figures.

Figures are drawn for what the runs carry: PLT CDF and p90 bars when runs
have a PLT; throughput vs loss / vs delay when runs have a throughput
(h2load) and the loss / RTT takes more than one value; measured vs floor when
runs have ``floor_ms`` (in runs.parquet or in run.json's summary); cwnd over
time when a run folder has tcp_probe samples (run.json ``cwnd_samples`` or
``cwnd.json``: a list of [t, cwnd, ssthresh, ...]); flights per round trip
when run.json's connections carry ``flights`` ([{round, segments, bytes}]) or
the run folder has server.pcap (analysed with tortoiselab.analysis.flights, data phase,
first 12 rounds). For the last two, the run with the median PLT of each arm
is shown.
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from tortoiselab.analysis import figures, stats
from tortoiselab.host import store

PRIORITY_AXIS = "server.cc"
METRICS = (("plt_ms", "PLT (ms)"), ("throughput_mbit", "throughput (Mbit/s)"))
MAX_FACETS = 9
MAX_ROUNDS = 12  # flights shown per run


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
    yfile = exp_dir / "experiment.yaml"
    yaml_text = yfile.read_text() if yfile.exists() else ""
    exp: dict = {}
    if yaml_text:
        try:
            from tortoiselab.spec.experiment import load

            exp = load(yfile).model_dump()
        except Exception as exc:  # noqa: BLE001 - a report of an old folder must still render
            notes.append(f"experiment.yaml does not validate with this version ({str(exc)[:300]}); read as plain YAML")
            try:
                exp = yaml.safe_load(yaml_text) or {}
            except yaml.YAMLError:
                exp = {}
    else:
        notes.append("the folder has no experiment.yaml")

    records: dict[str, dict] = {}
    for st in store.read_records(exp_dir):
        rec = st.record.model_dump(mode="json")
        rec["_dir"] = str(st.run_dir)
        records[rec["run_id"]] = rec
    df, rebuilt = store.read_table(exp_dir)
    if rebuilt:
        notes.append("runs.parquet does not match the run folders or this version's columns; "
                     "the table was rebuilt in memory")

    sweep: dict = exp.get("sweep") or {}
    axes = list(sweep)
    for ax in axes:  # the swept value of each run, as the experiment wrote it
        df[ax] = [_scalar((records.get(r, {}).get("point") or {}).get(ax)) for r in df["run_id"]]
    # object size of the transfer, for throughput figures
    df["object_bytes"] = [_object_bytes(records.get(r, {})) for r in df["run_id"]]
    df["size_class"] = [figures.size_class(b) for b in df["object_bytes"]]
    manifest = _lab_json(exp_dir / ".lab" / "site" / "manifest.json")
    df["object_class"] = [_object_class(records.get(r, {}), manifest) for r in df["run_id"]]
    if len(df):  # sweep points in the file's order, then repetitions
        order = {ax: {v: i for i, v in enumerate(map(_scalar, sweep[ax]))} for ax in axes}
        keys = pd.DataFrame({f"_o{i}": df[ax].map(order[ax]) for i, ax in enumerate(axes)}, index=df.index)
        df = pd.concat([df, keys], axis=1).sort_values([*keys.columns, "repetition", "run_id"], kind="stable")
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
                   strata_axes=[a for a in axes if a != main], paired_key=paired_key, notes=notes)


def _object_bytes(rec: dict) -> float | None:
    url = ((rec.get("config") or {}).get("client") or {}).get("url") or ""
    m = re.search(r"objects/(\d+)", url)
    if m:
        return float(m.group(1))
    s = rec.get("summary") or {}
    if s.get("data_bytes") and s.get("requests"):
        return float(s["data_bytes"]) / float(s["requests"])
    return float(s["bytes"]) if isinstance(s.get("bytes"), (int, float)) else None


def _lab_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


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
    df = ctx.df[ctx.df["ok"].astype(bool) & ctx.df["floor_ms"].notna() & ctx.df["plt_ms"].notna()]
    keys = ["object_class", "path.loss_pct"] + ([ctx.main_axis] if ctx.main_axis and ctx.main_axis not in
                                                ("client.page", "client.url") else [])
    rows = []
    for key, g in df.groupby(keys, sort=False, dropna=False):
        r = g["plt_ms"] / g["floor_ms"]
        rows.append({**dict(zip(keys, key)), "runs": len(g), "clock": ", ".join(sorted(set(map(str, g["clock"])))),
                     "floor_ms": float(g["floor_ms"].median()), "plt_ms": float(g["plt_ms"].median()),
                     "ratio_min": float(r.min()), "ratio_median": float(r.median()), "ratio_max": float(r.max())})
    return pd.DataFrame(rows, columns=[*keys, "runs", "clock", "floor_ms", "plt_ms", "ratio_min", "ratio_median",
                                       "ratio_max"])


def format_floor_table(t: pd.DataFrame) -> str:
    """The floor table as plain text (for `tortoise report` and `make bench`)."""
    if not len(t):
        return "measured PLT / floor: no ok run has both a PLT and a floor"
    head = [c for c in t.columns if c not in ("floor_ms", "plt_ms", "ratio_min", "ratio_median", "ratio_max")]
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
        ok = g[g["ok"].astype(bool)]
        row = dict(zip(keys, key))
        row.update({"runs": len(g), "ok": len(ok)})
        s = stats.summarize(ok, "plt_ms", n_resamples=n_resamples, seed=seed + i).iloc[0]
        row.update({k: s[k] for k in s.index if k.startswith(("p50", "p90", "mean"))})
        row["n_plt"] = int(s["n"])
        thr = pd.to_numeric(ok["throughput_mbit"], errors="coerce").dropna()
        row["throughput_median"] = float(thr.median()) if len(thr) else math.nan
        row["fidelity_failed"] = int((g["fidelity_ok"] == False).sum())  # noqa: E712 - None is "unknown"
        rows.append(row)
    return pd.DataFrame(rows)


def comparisons(ctx: Context, n_resamples: int = stats.DEFAULT_RESAMPLES, seed: int = 0,
                alpha: float = 0.05) -> pd.DataFrame:
    """stats.compare of every arm against the control, per metric that runs
    have and per stratum of the other swept axes; Holm over all rows."""
    if ctx.main_axis is None:
        return pd.DataFrame(columns=["stratum", *stats.COMPARE_COLUMNS])
    ok = ctx.df[ctx.df["ok"].astype(bool)]
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
    df = ctx.df
    bad = df[df["fidelity_ok"] == False]  # noqa: E712
    unknown = df[df["fidelity_ok"].isna()]
    drops = pd.to_numeric(df["capture_drops"], errors="coerce")
    rows = []
    for rid in bad["run_id"]:
        for f in ctx.records.get(rid, {}).get("fidelity") or []:
            if not f.get("ok"):
                rows.append({"run": rid, "quantity": f.get("quantity"), "configured": f.get("configured"),
                             "expected": f"{f.get('low')} .. {f.get('high')}", "measured": f.get("measured"),
                             "unit": f.get("unit"), "note": f.get("note")})
    failed = df[~df["ok"].astype(bool)]
    return {"runs": len(df), "fidelity_failed": len(bad), "fidelity_unknown": len(unknown),
            "capture_drops_total": int(drops.fillna(0).sum()), "runs_with_drops": int((drops > 0).sum()),
            "failed_runs": [{"run": r.run_id, "error": str(r.error)[:300]} for r in failed.itertuples()],
            "checks": rows}


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


# --- figures -------------------------------------------------------------------


def _figures(ctx: Context, work: Path, n_resamples: int) -> list[dict]:
    ok = ctx.df[ctx.df["ok"].astype(bool)].copy()
    arm = ctx.main_axis or "arm"
    if ctx.main_axis is None:
        ok[arm] = "all runs"
    facet = None
    if ctx.strata_axes:  # rows are in the sweep's order already (load_context)
        facet = " / ".join(ctx.strata_axes)
        labels = ok[ctx.strata_axes].astype(str).agg(" / ".join, axis=1)
        if labels.nunique() > MAX_FACETS:
            facet = None
    out = []

    def fig(name: str, caption: str, paths: list[Path]) -> None:
        out.append({"name": name, "caption": caption, "png": paths[0], "svg": paths[1]})

    plt = ok[pd.to_numeric(ok["plt_ms"], errors="coerce").notna()].copy()
    if facet:  # a text column for panels and bar groups (the swept columns keep their types)
        plt[facet] = labels
    if len(plt):
        strat = f", one panel per {' / '.join(ctx.strata_axes)}" if facet else ""
        fig("plt_cdf", f"Page-load time, empirical CDF per {arm}{strat}; ticks at the bottom are the runs.",
            figures.plt_cdf(plt, work / "plt_cdf", arm_col=arm, facet_col=facet))
        hue = facet if facet and plt[facet].nunique() <= 6 else None
        fig("p90_bars", f"p90 page-load time per {arm} with its 95 % percentile-bootstrap CI "
                        f"({n_resamples} resamples); n = runs per bar.",
            figures.p90_bars(plt, work / "p90_bars", arm_col=arm, hue_col=hue, n_resamples=n_resamples))
        if "floor_ms" in plt and plt["floor_ms"].notna().any():
            fig("plt_vs_floor", "Measured PLT against the napkin-model floor; the dashed line is measured = floor.",
                figures.plt_vs_floor(plt, work / "plt_vs_floor", hue_col=arm))
    thr = ok[pd.to_numeric(ok["throughput_mbit"], errors="coerce").notna()]
    for x, fn, what in (("path.loss_pct", figures.throughput_vs_loss, "loss"),
                        ("path.rtt_ms", figures.throughput_vs_delay, "delay")):
        if len(thr) and thr[x].nunique() > 1:
            fig(f"throughput_vs_{what}", f"Median throughput vs {what} per object-size class; "
                                         f"bands are 95 % bootstrap CIs of the median.",
                fn(thr, work / f"throughput_vs_{what}", hue_col="server.cc"))
    # per-connection views of one representative run per arm
    flights, n_cwnd = [], 0
    for a, g in plt.groupby(arm, sort=False):
        rid = g.iloc[(g["plt_ms"] - g["plt_ms"].median()).abs().argsort().iloc[0]]["run_id"]
        rec = ctx.records.get(rid, {})
        samples = rec.get("cwnd_samples")
        cw = Path(rec.get("_dir", "")) / "cwnd.json"
        if samples is None and cw.exists():
            samples = json.loads(cw.read_text())
        if samples:
            n_cwnd += 1
            fig(f"cwnd_{n_cwnd}", f"cwnd over time, {arm} = {a} (run {rid}, the arm's median PLT); "
                                  f"marks are losses (multiplicative decreases).",
                figures.cwnd_over_time(samples, work / f"cwnd_{n_cwnd}", title=f"{a}: run {rid}"))
        fl = _run_flights(rec, ctx.notes)
        flights += [{**f, "label": f"{a} ({rid})"} for f in fl[:MAX_ROUNDS]]
    if flights:
        fig("flights", f"Server segments per round trip of the data phase (the first {MAX_ROUNDS} at most), "
                       f"first connection of the median-PLT run of each {arm}; labels are bytes.",
            figures.flights_bars(flights, work / "flights"))
    return out


def _run_flights(rec: dict, notes: list[str]) -> list[dict]:
    """The server's flights of a run's first connection: as run.json carries
    them (connections[i].flights), else from its server.pcap (tortoiselab.analysis.flights,
    data phase). [] when neither is there; a failed analysis is noted."""
    for conn in rec.get("connections") or []:
        if conn.get("flights"):
            return list(conn["flights"])
    pcap = Path(rec.get("_dir", "")) / "server.pcap"
    if not pcap.exists():
        return []
    try:
        from tortoiselab.analysis import flights as flightmod

        conns = [c for c in flightmod.analyze_pcap(pcap) if c.get("tcp_rtt_ms")]
        return flightmod.flights(conns[0], phase="data") if conns else []
    except Exception as exc:  # noqa: BLE001 - one figure must not cost the report
        notes.append(f"flights of run {rec.get('run_id')}: capture analysis failed ({str(exc)[:200]})")
        return []


# --- HTML ----------------------------------------------------------------------

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:2rem auto;
max-width:1200px;padding:0 1rem;color:#1d2330;line-height:1.45}
h1{font-size:1.7rem;margin-bottom:.2rem}h3{font-size:1.05rem;margin:1.2rem 0 .2rem}h2{font-size:1.25rem;margin-top:2.2rem;border-bottom:2px solid #e3e7ee;
padding-bottom:.2rem}
.sub{color:#5b6473;margin-top:0}
table{border-collapse:collapse;margin:.6rem 0;font-size:.88rem}
th,td{border:1px solid #d7dce5;padding:.25rem .55rem;text-align:right;vertical-align:top}
th{background:#f1f4f9;text-align:center}td.l,th.l{text-align:left}
tr.sig td{background:#eef8ee}
pre{background:#f6f8fa;border:1px solid #e1e4e8;padding:.8rem;overflow-x:auto;font-size:.85rem}
figure{display:inline-block;vertical-align:top;margin:1rem 1.2rem 1rem 0;max-width:100%}figure img{max-width:100%;border:1px solid #e3e7ee}figcaption{max-width:560px}
figcaption{color:#4a5261;font-size:.88rem}
.note{background:#fff8e5;border-left:4px solid #e0b100;padding:.4rem .8rem;margin:.6rem 0}
.ok{color:#1a7f37}.bad{color:#b42318}.muted{color:#6b7280}
"""


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def _num(x: Any, digits: int = 1) -> str:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return _e(x)
    if not math.isfinite(v):
        return "–"
    return f"{v:,.{digits}f}"


def _ci(v: Any, lo: Any, hi: Any, digits: int = 0) -> str:
    if not (isinstance(v, (int, float)) and math.isfinite(v)):
        return "–"
    return f"{_num(v, digits)} <span class=muted>[{_num(lo, digits)}, {_num(hi, digits)}]</span>"


def _table(head: list[str], rows: list[list[str]], left: int = 0, row_class: list[str] | None = None) -> str:
    h = "".join(f"<th{' class=l' if i < left else ''}>{c}</th>" for i, c in enumerate(head))
    body = []
    for j, r in enumerate(rows):
        cls = f" class={row_class[j]}" if row_class and row_class[j] else ""
        body.append(f"<tr{cls}>" + "".join(f"<td{' class=l' if i < left else ''}>{c}</td>"
                                          for i, c in enumerate(r)) + "</tr>")
    return f"<table><thead><tr>{h}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _p(p: Any) -> str:
    try:
        v = float(p)
    except (TypeError, ValueError):
        return "–"
    if not math.isfinite(v):
        return "–"
    return f"{v:.2g}" if v >= 0.001 else f"{v:.1e}"


def _render(ctx: Context, summary: pd.DataFrame, comp: pd.DataFrame, fid: dict, meta: list[tuple[str, str]],
            figs: list[dict], n_resamples: int) -> str:
    df = ctx.df
    parts = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
             f"<meta name=viewport content='width=device-width, initial-scale=1'>"
             f"<title>Tortoise Lab: {_e(ctx.name)}</title><style>{CSS}</style></head><body>"]
    desc = ctx.exp.get("description") or ""
    n_ok = int(df["ok"].astype(bool).sum()) if len(df) else 0
    parts.append(f"<h1>Tortoise Lab report: {_e(ctx.name)}</h1><p class=sub>{_e(desc)}</p>")
    parts.append(f"<p>{len(df)} completed runs ({n_ok} ok) in <code>{_e(ctx.exp_dir)}</code>; "
                 f"report written {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}.</p>")
    for n in ctx.notes:
        parts.append(f"<div class=note>{_e(n)}</div>")
    try:
        from tortoiselab.spec.experiment import expand, load

        total = len(expand(load(ctx.exp_dir / "experiment.yaml")))
        if total > len(df):
            parts.append(f"<div class=note>{total - len(df)} of the experiment's {total} runs are not complete; "
                         f"this report covers the {len(df)} that are.</div>")
    except Exception:  # noqa: BLE001
        pass

    # the experiment file
    parts.append("<h2>Experiment</h2>")
    parts.append(f"<pre>{_e(ctx.yaml_text) or '(no experiment.yaml)'}</pre>")

    # runs per sweep point
    parts.append("<h2>Runs per sweep point</h2>")
    if len(summary):
        head = [_e(a) for a in ctx.axes] + ["runs", "ok", "PLT p50 ms [95 % CI]", "PLT p90 ms [95 % CI]",
                                            "PLT mean ms [95 % CI]"]
        has_thr = summary["throughput_median"].notna().any()
        if has_thr:
            head.append("throughput median Mbit/s")
        head.append("fidelity failed")
        rows = []
        for d in summary.to_dict("records"):
            row = [_e(d[a]) for a in ctx.axes] + [str(d["runs"]), str(d["ok"]),
                                                  _ci(d["p50"], d["p50_low"], d["p50_high"]),
                                                  _ci(d["p90"], d["p90_low"], d["p90_high"]),
                                                  _ci(d["mean"], d["mean_low"], d["mean_high"])]
            if has_thr:
                row.append(_num(d["throughput_median"], 2))
            row.append(f"<span class={'bad' if d['fidelity_failed'] else 'ok'}>{d['fidelity_failed']}</span>")
            rows.append(row)
        parts.append(_table(head, rows, left=len(ctx.axes)))
        parts.append(f"<p class=muted>Percentile-bootstrap 95 % CIs, {n_resamples} resamples, seeded; "
                     f"only ok runs. With few runs per point the intervals are wide (and with one run, "
                     f"zero-width: not a measurement of spread).</p>")
    else:
        parts.append("<p>No completed runs yet.</p>")

    # comparison
    parts.append("<h2>Comparison</h2>")
    if ctx.main_axis is None:
        parts.append("<p>The experiment sweeps nothing: one arm, nothing to compare.</p>")
    else:
        why = "the congestion control is swept" if ctx.main_axis == PRIORITY_AXIS else \
            "server.cc is not swept; the first axis of the experiment's sweep"
        parts.append(f"<p>Arms: values of <code>{_e(ctx.main_axis)}</code> ({why}). Control: "
                     f"<b>{_e(ctx.control)}</b>, the first value listed in the file. "
                     + (f"Compared within each combination of {', '.join(f'<code>{_e(a)}</code>' for a in ctx.strata_axes)}. "
                        if ctx.strata_axes else "")
                     + ("<b>Paired</b>: the experiment sets <code>paired: true</code>, so arms share the seed of a "
                        "repetition; runs are matched by seed, tested with the Wilcoxon signed-rank test, "
                        "effect size the matched-pairs rank-biserial r, bootstrap over pairs."
                        if ctx.paired_key else
                        "<b>Unpaired</b>: every run has its own seed (the experiment does not set "
                        "<code>paired: true</code>), so arms are independent samples: Mann-Whitney U test, "
                        "effect size Cliff's delta, each arm bootstrapped on its own.")
                     + " Differences are 100 × (arm − control) / control: negative means the arm is lower "
                       "(for PLT: faster).</p>")
        if len(comp):
            show_stratum = comp["stratum"].nunique() > 1 or comp["stratum"].iloc[0] != "all runs"
            notes: dict[str, int] = {}
            for metric, label in METRICS:
                mc = comp[comp["metric"] == metric]
                if not len(mc):
                    continue
                d = 2 if metric == "throughput_mbit" else 0
                unit = label.split("(")[-1].rstrip(")")
                head = (["stratum"] if show_stratum else []) + [
                    "arm", "paired", "n ctrl / arm", f"median {unit}<br>ctrl → arm", "median diff %<br>[95 % CI]",
                    f"p90 {unit}<br>ctrl → arm", "p90 diff %<br>[95 % CI]", "test", "p", "p Holm", "effect size", ""]
                rows, cls = [], []
                for r in mc.to_dict("records"):
                    npairs = f"<br>{r['n_pairs']} pairs" if r["paired"] else ""
                    ref = notes.setdefault(r["note"], len(notes) + 1)
                    rows.append(([_e(r["stratum"])] if show_stratum else []) + [
                        _e(r["arm"]), "yes" if r["paired"] else "no", f"{r['n_control']} / {r['n_arm']}{npairs}",
                        f"{_num(r['p50_control'], d)} → {_num(r['p50_arm'], d)}",
                        _ci(r["median_diff_pct"], r["median_diff_low"], r["median_diff_high"], 1),
                        f"{_num(r['p90_control'], d)} → {_num(r['p90_arm'], d)}",
                        _ci(r["p90_diff_pct"], r["p90_diff_low"], r["p90_diff_high"], 1),
                        _e(r["test"]), _p(r["p_value"]),
                        f"<b>{_p(r['p_holm'])}</b>" if r["significant"] else _p(r["p_holm"]),
                        f"{_e(r['effect'])}<br>{_num(r['effect_size'], 2)} ({_e(r['effect_magnitude'])})",
                        f"<sup>{ref}</sup>"])
                    cls.append("sig" if r["significant"] else "")
                parts.append(f"<h3>{_e(label)}</h3>")
                parts.append(_table(head, rows, left=(1 if show_stratum else 0) + 1, row_class=cls))
            parts.append("<ol class=muted>" + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ol>")
            parts.append(f"<p class=muted>{_e(comp.attrs.get('multiple_comparisons', ''))}. Highlighted rows: "
                         f"Holm-adjusted p &lt; 0.05. Effect sizes: |0.147| small, |0.33| medium, |0.474| large "
                         f"(Romano et al. 2006).</p>")
        else:
            parts.append("<p>No stratum has completed runs of the control and another arm yet.</p>")

    # fidelity
    parts.append("<h2>Fidelity</h2>")
    bad = fid["fidelity_failed"]
    parts.append(_table(["check", "runs"], [
        ["runs whose measured RTT was outside the tolerance (fidelity_ok false)",
         f"<span class={'bad' if bad else 'ok'}>{bad}</span>"],
        ["runs without a fidelity check (no capture)", str(fid["fidelity_unknown"])],
        ["packets dropped by tcpdump's buffer, all runs", f"<span class={'bad' if fid['capture_drops_total'] else 'ok'}>"
                                                        f"{fid['capture_drops_total']}</span>"],
        ["runs with capture drops", str(fid["runs_with_drops"])],
        ["failed runs (excluded from statistics)", f"<span class={'bad' if fid['failed_runs'] else 'ok'}>"
                                                  f"{len(fid['failed_runs'])}</span>"],
    ], left=1))
    if fid["checks"]:
        parts.append(_table(["run", "quantity", "configured", "expected", "measured", "unit", "note"],
                            [[_e(c[k]) for k in ("run", "quantity", "configured", "expected", "measured", "unit",
                                                 "note")] for c in fid["checks"]], left=2))
    if fid["failed_runs"]:
        parts.append(_table(["failed run", "error"], [[_e(f["run"]), _e(f["error"])] for f in fid["failed_runs"]],
                            left=2))

    # measured against the floor
    parts.append("<h2>Measured PLT against the floor</h2>")
    ft = floor_table(ctx)
    if len(ft):
        keys = [c for c in ft.columns if c not in ("runs", "clock", "floor_ms", "plt_ms", "ratio_min",
                                                   "ratio_median", "ratio_max")]
        parts.append(_table([_e(k) for k in keys] + ["runs", "clock", "floor ms (median)", "PLT ms (median)",
                                                     "PLT / floor min", "median", "max"],
                            [[_e(r[k]) for k in keys] + [str(r["runs"]), _e(r["clock"]), _num(r["floor_ms"]),
                                                         _num(r["plt_ms"]), _num(r["ratio_min"], 3),
                                                         _num(r["ratio_median"], 3), _num(r["ratio_max"], 3)]
                             for r in ft.to_dict("records")], left=len(keys)))
        parts.append("<p class=muted>Floor: tortoiselab.analysis.napkin's model of the run's page over its path, "
                     "(DNS + TCP + TLS)·RTT, then the document and its objects in slow start from the initial "
                     "window, and the last round's bytes at the bottleneck rate. It leaves out loss, the "
                     "client's receive window, delayed ACKs, headers and CPU: with loss the ratio measures what "
                     "loss recovery costs; without loss on the virtual clock, what the model leaves out.</p>")
    else:
        parts.append("<p>No ok run has both a PLT and a floor (the floor models page loads by our loader "
                     "over HTTP/2).</p>")

    # figures
    parts.append("<h2>Figures</h2>")
    if not figs:
        parts.append("<p>No figure applies: no completed run has a page-load time or a throughput.</p>")
    for f in figs:
        png = base64.b64encode(f["png"].read_bytes()).decode()
        svg = base64.b64encode(f["svg"].read_bytes()).decode()
        parts.append(f"<figure id='{_e(f['name'])}'><img alt='{_e(f['name'])}' src='data:image/png;base64,{png}'>"
                     f"<figcaption>{_e(f['caption'])} <a download='{_e(f['name'])}.svg' "
                     f"href='data:image/svg+xml;base64,{svg}'>SVG</a></figcaption></figure>")

    # metadata
    parts.append("<h2>Metadata</h2>")
    if meta:
        parts.append(_table(["property", "value (runs with it, where runs differ)"],
                            [[_e(k), _e(v)] for k, v in meta], left=2))
    else:
        parts.append("<p>No run recorded metadata.</p>")
    parts.append("<p class=muted>Written by tortoiselab.report.core from runs.parquet and each run's run.json.</p>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_report(exp_dir: Path, out: Path | None = None, n_resamples: int = stats.DEFAULT_RESAMPLES,
                 seed: int = 0) -> Path:
    """Write the experiment's HTML report (default exp_dir/report.html,
    atomically) and return its path."""
    ctx = load_context(Path(exp_dir))
    out = Path(out) if out is not None else ctx.exp_dir / "report.html"
    summary = runs_summary(ctx, n_resamples=n_resamples, seed=seed) if len(ctx.df) else pd.DataFrame()
    comp = comparisons(ctx, n_resamples=n_resamples, seed=seed) if len(ctx.df) else pd.DataFrame()
    with tempfile.TemporaryDirectory(prefix="tortoise-report-") as tmp:
        figs = _figures(ctx, Path(tmp), n_resamples) if len(ctx.df) else []
        page = _render(ctx, summary, comp, fidelity_summary(ctx), metadata(ctx), figs, n_resamples)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = out.with_name(f".{out.name}.tmp")
    tmp_out.write_text(page, encoding="utf-8")
    tmp_out.replace(out)
    return out
