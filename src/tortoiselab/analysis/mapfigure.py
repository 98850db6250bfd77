"""A sensitivity map as a figure (docs/maps.md): one heatmap per arm (and
size) of the arm's change against the control over RTT x loss, colours
diverging around 0 (blue: the metric lower in the arm), each cell with its
label's letter, its change and, for a lossy cell, its interval, then
the round trips of the control and the arm (from the server captures);
region profiles marked as stars with their names and drawn users as dots. The
axes are the map's cells (evenly spaced); a marker sits between the cell
centres by linear interpolation of its RTT and loss, and one beyond the
map's range at its edge (drawn hollow). Written as figures.py writes its
figures (PNG and SVG, no pyplot, no global style).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import seaborn as sns

from tortoiselab.analysis.figures import _new, _save, _stem, _style

CMAP = "RdBu_r"  # diverging: blue below 0, red above
MAX_SCALE_PCT = 100.0  # the colour scale's end at most (a cell beyond it is drawn at the end's colour)


def position(value: float, axis: list[float]) -> tuple[float, bool]:
    """A marker's place on a heatmap axis of cells at 0.5, 1.5, ... whose
    centres hold `axis` (ascending): linear between centres; beyond the
    range, at the edge. Second: whether it lies within the range."""
    if len(axis) == 1:
        return 0.5, value == axis[0]
    inside = axis[0] <= value <= axis[-1]
    return float(np.interp(value, axis, np.arange(len(axis)) + 0.5,
                           left=0.1, right=len(axis) - 0.1)), inside


def _rounds(row: pd.Series) -> str:
    """A cell's rounds, control's -> arm's (medians of a lossy cell's
    pairs, studies/maps.why_columns), "" when the cell has none."""
    c, a = row.get("control_rounds", math.nan), row.get("arm_rounds", math.nan)
    if c is None or a is None or math.isnan(c) or math.isnan(a):
        return ""
    return f"\n{c:g}\u2192{a:g} rt"


def _annotation(row: pd.Series) -> str:
    """A cell's text: its letter and change; the interval of a lossy cell;
    the rounds (control's -> arm's) where the cell has them."""
    if math.isnan(row["effect_pct"]):
        return row["letter"]
    text = f"{row['letter']}\n{row['effect_pct']:+.0f}%"
    if not row["exact"] and not math.isnan(row["low_pct"]):
        text += f"\n[{row['low_pct']:+.0f},{row['high_pct']:+.0f}]"
    return text + _rounds(row)


def _scale(cells: pd.DataFrame) -> float:
    top = cells["effect_pct"].abs().replace([np.inf], np.nan).max()
    return float(min(MAX_SCALE_PCT, top)) if top and not math.isnan(top) and top > 0 else 1.0


def _mark(ax, markers: list[dict[str, Any]], rtts: list[float], losses: list[float]) -> None:
    """Region profiles (stars numbered as in the figure's key) and users
    (dots) on one panel; y grows downward (heatmap rows)."""
    regions = [mk for mk in markers if mk["kind"] != "user"]
    for mk in markers:
        x, in_x = position(mk["rtt_ms"], rtts)
        y, in_y = position(mk["loss_pct"], losses)
        inside = in_x and in_y
        if mk["kind"] == "user":
            ax.plot(x, y, "o", ms=3.5, mfc="0.2" if inside else "none", mec="0.2", alpha=0.5, zorder=3)
        else:
            ax.plot(x, y, "*", ms=12, mfc="gold" if inside else "none", mec="black", zorder=4)
            ax.annotate(str(regions.index(mk) + 1), (x, y), xytext=(5, 3), textcoords="offset points",
                        fontsize=7, fontweight="bold", zorder=4)


def _key_text(markers: list[dict[str, Any]]) -> str:
    """The stars' key: number, profile, its RTT and loss."""
    regions = [mk for mk in markers if mk["kind"] != "user"]
    users = sorted({mk["name"] for mk in markers if mk["kind"] == "user"})
    parts = [f"{i}: {mk['name']} ({mk['rtt_ms']:g} ms, {mk['loss_pct']:g} %)" for i, mk in enumerate(regions, 1)]
    lines = ["   ".join(parts[i:i + 2]) for i in range(0, len(parts), 2)]
    if users:
        lines.append(f"dots: drawn users of {', '.join(users)}")
    return "\n".join(lines)


def draw_map(cells: pd.DataFrame, markers: list[dict[str, Any]], out_stem: Path | str, title: str,
             metric: str, arm_names: dict[str, str] | None = None) -> list[Path]:
    """The map's figure from its cells (studies/maps.cells: size, arm,
    rtt_ms, loss_pct, effect_pct, low_pct, high_pct, exact, letter) and
    markers (kind region/user, name, rtt_ms, loss_pct); returns the PNG and
    SVG written."""
    stem = _stem(out_stem)
    panels = list(cells.groupby(["size", "arm"], sort=False)) if len(cells) else []
    rtts = sorted(cells["rtt_ms"].unique().tolist()) if len(cells) else [0.0]
    losses = sorted(cells["loss_pct"].unique().tolist()) if len(cells) else [0.0]
    vmax = _scale(cells) if len(cells) else 1.0
    with _style():
        fig, axes = _new(ncols=max(1, len(panels)), width=max(5.0, 1.6 + 1.0 * len(rtts)),
                         height=max(3.4, 1.9 + 0.8 * len(losses)), sharey=False, sharex=False)
        for ax, ((size, arm), d) in zip(axes[0], panels):
            grid = d.pivot_table(index="loss_pct", columns="rtt_ms", values="effect_pct", aggfunc="first",
                                 dropna=False).reindex(index=losses, columns=rtts)
            grid.index, grid.columns = [f"{v:g}" for v in losses], [f"{v:g}" for v in rtts]
            sns.heatmap(grid.clip(-vmax, vmax), ax=ax, cmap=CMAP, center=0, vmin=-vmax, vmax=vmax, linewidths=0.5,
                        linecolor="white", cbar_kws={"label": "change (%)"})
            for _, row in d.iterrows():  # the cell's text in its upper part, the markers below it
                j, i = rtts.index(row["rtt_ms"]), losses.index(row["loss_pct"])
                dark = not math.isnan(row["effect_pct"]) and abs(row["effect_pct"]) > 0.6 * vmax
                ax.text(j + 0.5, i + 0.08, _annotation(row), ha="center", va="top", fontsize=7,
                        color="white" if dark else "black", zorder=5)
            _mark(ax, markers, rtts, losses)
            ax.set_xlabel("RTT (ms)")
            ax.set_ylabel("loss (%, each direction)")
            name = (arm_names or {}).get(arm, arm)
            size_name = d["size_name"].iloc[0] if "size_name" in d else size
            ax.set_title(f"{name}" + (f", {size_name}" if size_name else "") + f": {metric}", fontsize=9)
        if not panels:
            axes[0][0].text(0.5, 0.5, "no cells", ha="center", va="center", transform=axes[0][0].transAxes)
        fig.suptitle(title, fontsize=9)
        fig.supxlabel("A agree, D disagree, ? inconclusive, L/S larger/smaller than claimed, - not testable,\n"
                      "= a tie (exact, within tie_pct); 3\u21922 rt: round trips, control \u2192 arm (lossy: medians);"
                      " hollow marker: beyond the map's range\n" + _key_text(markers),
                      fontsize=7)
        return _save(fig, stem)
