"""The report page: one self-contained HTML file per experiment (docs/analysis.md,
"The report"; docs/architecture.md), rendered by Jinja2 from
templates/report.html.j2 with its stylesheet templates/report.css inlined
and every figure embedded (base64 PNG, with the SVG as a data: link); the
page loads nothing from anywhere and runs no script. Autoescape is on:
every value from a results folder reaches the page escaped.

    write_report(Path("results/quick"))  ->  results/quick/report.html
"""

from __future__ import annotations

import base64
import math
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from tortoiselab.analysis import stats
from tortoiselab.host.store import files
from tortoiselab.host.storedtraces import folder_traces
from tortoiselab.report.context import (
    METRICS,
    PRIORITY_AXIS,
    Context,
    comparisons,
    fidelity_summary,
    floor_table,
    load_context,
    metadata,
    runs_summary,
)
from tortoiselab.report.maps import map_sections
from tortoiselab.report.plots import Figure, make_figures
from tortoiselab.spec import cols, experiment

TEMPLATES = Path(__file__).parent / "templates"
TEMPLATE = "report.html.j2"
FLOOR_VALUES = ("runs", "clock", cols.FLOOR, cols.PLT, "ratio_min", "ratio_median", "ratio_max")


# --- filters: how a value is written on the page --------------------------------


def text(x: Any) -> str:
    """A value as text; None as nothing."""
    return "" if x is None else str(x)


def num(x: Any, digits: int = 1) -> str:
    """A number with thousands separators and `digits` decimals; "–" when
    not finite; anything else as text."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return text(x)
    if not math.isfinite(v):
        return "–"
    return f"{v:,.{digits}f}"


def ci(v: Any, lo: Any, hi: Any, digits: int = 0) -> Markup:
    """A value and its confidence interval in brackets (muted)."""
    if not (isinstance(v, (int, float)) and math.isfinite(v)):
        return Markup("–")
    return Markup("{} <span class=muted>[{}, {}]</span>").format(num(v, digits), num(lo, digits), num(hi, digits))


def p_value(p: Any) -> str:
    """A p-value in two significant digits (scientific below 0.001)."""
    try:
        v = float(p)
    except (TypeError, ValueError):
        return "–"
    if not math.isfinite(v):
        return "–"
    return f"{v:.2g}" if v >= 0.001 else f"{v:.1e}"


def environment() -> Environment:
    """The Jinja2 environment of the report's templates (autoescaped; an
    unknown variable is an error, not an empty cell)."""
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(text=text, num=num, ci=ci, p=p_value)
    return env


# --- the page -------------------------------------------------------------------


def render_page(ctx: Context, summary: pd.DataFrame, comp: pd.DataFrame, fid: dict, meta: list[tuple[str, str]],
                figs: list[Figure], n_resamples: int) -> str:
    """The report page of a context, its tables and its drawn figures."""
    df = ctx.df
    sections, footnotes = _comparison_sections(comp)
    ft = floor_table(ctx)
    return environment().get_template(TEMPLATE).render(
        ctx=ctx, description=ctx.exp.get("description") or "", priority_axis=PRIORITY_AXIS,
        n_runs=len(df), n_ok=int(df[cols.OK].astype(bool).sum()) if len(df) else 0,
        written=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), planned=_planned_runs(ctx.exp_dir),
        summary=summary.to_dict("records") if len(summary) else [],
        has_throughput=bool(len(summary) and summary["throughput_median"].notna().any()),
        n_resamples=n_resamples,
        comparison=sections, footnotes=footnotes,
        show_stratum=bool(len(comp)) and (comp["stratum"].nunique() > 1 or comp["stratum"].iloc[0] != "all runs"),
        multiple_comparisons=comp.attrs.get("multiple_comparisons", ""),
        fidelity=fid, floor=ft.to_dict("records"), floor_keys=[c for c in ft.columns if c not in FLOOR_VALUES],
        figures=[_embed(f) for f in figs], metadata=meta, maps=map_sections(ctx.exp_dir))


def _comparison_sections(comp: pd.DataFrame) -> tuple[list[dict], dict[str, int]]:
    """One table per metric that has rows (label, unit, decimals, rows), and
    the rows' notes numbered in order of first appearance."""
    sections: list[dict] = []
    footnotes: dict[str, int] = {}
    if not len(comp):
        return sections, footnotes
    for metric, label in METRICS:
        rows = comp[comp["metric"] == metric].to_dict("records")
        if not rows:
            continue
        for r in rows:
            footnotes.setdefault(r["note"], len(footnotes) + 1)
        sections.append({"label": label, "unit": label.split("(")[-1].rstrip(")"),
                         "digits": 2 if metric == cols.THROUGHPUT else 0, "rows": rows})
    return sections, footnotes


def _planned_runs(exp_dir: Path) -> int | None:
    """How many runs the folder's experiment.yaml expands to; None when it
    cannot be read with this version (the page then says nothing of it)."""
    try:  # its traces: the project's or the folder's copies only (host/storedtraces.py)
        with folder_traces(exp_dir):
            return len(experiment.expand(experiment.load(exp_dir / "experiment.yaml")))
    except Exception:  # noqa: BLE001 - an old or missing experiment file must not cost the report
        return None


def _embed(f: Figure) -> dict:
    return {"name": f.name, "caption": f.caption, "png": base64.b64encode(f.png.read_bytes()).decode(),
            "svg": base64.b64encode(f.svg.read_bytes()).decode()}


def write_report(exp_dir: Path, out: Path | None = None, n_resamples: int = stats.DEFAULT_RESAMPLES,
                 seed: int = 0) -> Path:
    """Write the experiment's HTML report (default exp_dir/report.html,
    atomically) and return its path."""
    ctx = load_context(Path(exp_dir))
    summary = runs_summary(ctx, n_resamples=n_resamples, seed=seed) if len(ctx.df) else pd.DataFrame()
    comp = comparisons(ctx, n_resamples=n_resamples, seed=seed) if len(ctx.df) else pd.DataFrame()
    with tempfile.TemporaryDirectory(prefix="tortoise-report-") as tmp:
        figs = make_figures(ctx, Path(tmp), n_resamples) if len(ctx.df) else []
        page = render_page(ctx, summary, comp, fidelity_summary(ctx), metadata(ctx), figs, n_resamples)
    out = Path(out) if out is not None else ctx.exp_dir / "report.html"
    if files.inside(ctx.exp_dir, out):  # the store writes it, never through a link (host/store/files.py)
        return files.write_file(ctx.exp_dir, out, page, doing=f"writing the report {out}")
    return _write_elsewhere(out, page)


def _write_elsewhere(out: Path, page: str) -> Path:
    """The report at a path the user named (--out): written whole, neither it
    nor its temporary a link followed (host/store/files.py)."""
    Path(out).parent.mkdir(parents=True, exist_ok=True)  # the user's own folder
    return files.write_elsewhere(out, page, doing=f"writing the report {out}")
