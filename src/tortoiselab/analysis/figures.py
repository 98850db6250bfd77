"""The lab's figures (seaborn on matplotlib), each written as PNG and SVG.

Every function takes its data (a DataFrame of runs, or a list of samples or
flights) and an output path *stem* (``out/plt_cdf`` writes ``out/plt_cdf.png``
and ``out/plt_cdf.svg``) and returns the two paths written. No pyplot and no
global style: each figure is its own matplotlib ``Figure`` rendered by the
Agg canvas inside a seaborn style context, so calling these from a server, a
test or a notebook changes nothing else. The SVG is written with a fixed hash
salt and no date, so the same data give the same file.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from tortoiselab.analysis import stats
from tortoiselab.spec import cols

DPI = 110
PALETTE = "colorblind"
INFINITE_SSTHRESH = 0x7FFFFFFF  # the kernel's "no ssthresh yet" (TCP_INFINITE_SSTHRESH)
PLT_LABEL = "page-load time (ms)"


def _stem(out_stem: Path | str) -> Path:
    p = Path(out_stem)
    if p.suffix.lower() in (".png", ".svg"):
        p = p.with_suffix("")
    p.parent.mkdir(parents=True, exist_ok=True)
    return p


@contextmanager
def _style() -> Iterator[None]:
    with matplotlib.rc_context({"svg.hashsalt": "tortoiselab", "svg.fonttype": "path"}), \
            sns.axes_style("whitegrid"), sns.plotting_context("notebook", font_scale=0.9):
        yield


def _new(ncols: int = 1, nrows: int = 1, width: float = 6.4, height: float = 4.2,
         sharey: bool = True, sharex: bool = True) -> tuple[Figure, np.ndarray]:
    fig = Figure(figsize=(width * ncols, height * nrows), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=sharey, sharex=sharex)
    return fig, axes


def _save(fig: Figure, stem: Path) -> list[Path]:
    png, svg = stem.with_suffix(".png"), stem.with_suffix(".svg")
    fig.savefig(png, dpi=DPI, metadata={"Software": None})
    fig.savefig(svg, metadata={"Date": None, "Creator": None})
    return [png, svg]


def _label(col: str | None) -> str:
    return {cols.CC: "congestion control", cols.REGION: "region", cols.RTT: "RTT (ms)",
            cols.LOSS: "loss (%)", cols.RATE: "rate (Mbit/s)", cols.PLT: PLT_LABEL,
            cols.THROUGHPUT: "throughput (Mbit/s)", cols.INITCWND: "initial window (segments)",
            }.get(col or "", col or "")


def _levels(df: pd.DataFrame, col: str | None) -> list:
    return list(dict.fromkeys(df[col].tolist())) if col else [None]


def _empty_note(ax, text: str = "no data") -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4")


def _facets(n: int, max_cols: int = 3) -> tuple[int, int]:
    cols = min(n, max_cols)
    return cols, math.ceil(n / cols)


# --- page-load times ---------------------------------------------------------


def plt_cdf(df: pd.DataFrame, out_stem: Path | str, metric: str = cols.PLT, arm_col: str = cols.CC,
            facet_col: str | None = None, title: str | None = None) -> list[Path]:
    """Empirical CDF of `metric` per arm (hue), one panel per value of
    facet_col (e.g. path.region) if given. Rows without the metric are left
    out; a panel says so when none remain."""
    stem = _stem(out_stem)
    d = df[df[metric].notna()] if metric in df else df.iloc[0:0]
    facets = _levels(df, facet_col)
    hue_order = _levels(df, arm_col)
    with _style():
        ncols, nrows = _facets(len(facets))
        fig, axes = _new(ncols, nrows, width=5.2, height=3.8)
        palette = dict(zip(hue_order, sns.color_palette(PALETTE, len(hue_order))))
        for ax, f in zip(axes.flat, facets):
            sub = d if facet_col is None else d[d[facet_col] == f]
            if len(sub):
                sns.ecdfplot(data=sub, x=metric, hue=arm_col, hue_order=[h for h in hue_order if h in set(sub[arm_col])],
                             palette=palette, ax=ax, linewidth=2)
                for h, g in sub.groupby(arm_col, sort=False):  # the runs themselves, as ticks
                    ax.plot(g[metric], np.zeros(len(g)) - 0.02, "|", color=palette[h], ms=8, alpha=0.6)
                leg = ax.get_legend()
                if leg is not None:
                    leg.set_title(_label(arm_col))
            else:
                _empty_note(ax)
            ax.set_xlabel(_label(metric))
            ax.set_ylabel("fraction of runs")
            ax.set_ylim(-0.05, 1.02)
            if facet_col is not None:
                ax.set_title(f"{_label(facet_col)} = {f}")
        for ax in list(axes.flat)[len(facets):]:
            ax.set_visible(False)
        if title:
            fig.suptitle(title)
        return _save(fig, stem)


def p90_bars(df: pd.DataFrame, out_stem: Path | str, metric: str = cols.PLT, arm_col: str = cols.CC,
             hue_col: str | None = None, quantile: str = "p90", n_resamples: int = stats.DEFAULT_RESAMPLES,
             seed: int = 0, title: str | None = None) -> list[Path]:
    """Bars of the p90 (or `quantile`: p50, mean, ...) of `metric` per arm,
    grouped by hue_col if given, with the percentile-bootstrap 95 % CI
    (stats.summarize) as error bars and n under each bar."""
    stem = _stem(out_stem)
    keys = [arm_col] + ([hue_col] if hue_col else [])
    d = df[df[metric].notna()] if metric in df else df.iloc[0:0]
    s = stats.summarize(d, metric, keys, n_resamples=n_resamples, seed=seed) if len(d) else None
    arms, hues = _levels(df, arm_col), _levels(df, hue_col)
    with _style():
        fig, axes = _new(width=min(12.0, max(4.5, 0.9 * len(arms) * len(hues) + 2)), height=4.2)
        ax = axes[0, 0]
        if s is None or not len(s):
            _empty_note(ax)
        else:
            colors = sns.color_palette(PALETTE, len(hues) if hue_col else len(arms))
            width = 0.8 / len(hues)
            for j, h in enumerate(hues):
                for i, a in enumerate(arms):
                    m = s[arm_col] == a
                    if hue_col:
                        m &= s[hue_col] == h
                    if not m.any():
                        continue
                    r = s[m].iloc[0]
                    x = i - 0.4 + width * (j + 0.5)
                    v, lo, hi = r[quantile], r[f"{quantile}_low"], r[f"{quantile}_high"]
                    ax.bar(x, v, width * 0.9, color=colors[j if hue_col else i],
                           label=str(h) if hue_col and i == 0 else None)
                    ax.errorbar(x, v, yerr=[[max(v - lo, 0)], [max(hi - v, 0)]], fmt="none", ecolor="0.15",
                                capsize=4, lw=1.2)
                    ax.annotate(f"n={int(r['n'])}", (x, 0), xytext=(0, 3), textcoords="offset points",
                                ha="center", va="bottom", fontsize=7, color="white")
            ax.set_xticks(range(len(arms)), [str(a) for a in arms])
            if hue_col:
                ax.legend(title=_label(hue_col))
        ax.set_xlabel(_label(arm_col))
        ax.set_ylabel(f"{quantile} {_label(metric)}")
        ax.set_title(title or f"{quantile} with 95 % bootstrap CI")
        return _save(fig, stem)


def plt_vs_floor(df: pd.DataFrame, out_stem: Path | str, measured: str = cols.PLT, floor: str = cols.FLOOR,
                 hue_col: str | None = cols.CC, title: str | None = None) -> list[Path]:
    """Measured page-load time against its napkin-model floor, one point per
    run, with the line y = x: every point should lie on or above it."""
    stem = _stem(out_stem)
    d = df[df[measured].notna() & df[floor].notna()] if {measured, floor} <= set(df.columns) else df.iloc[0:0]
    with _style():
        fig, axes = _new(width=5.2, height=5.0)
        ax = axes[0, 0]
        if len(d):
            sns.scatterplot(data=d, x=floor, y=measured, hue=hue_col if hue_col in d else None, ax=ax,
                            palette=PALETTE if hue_col in d else None, s=40, alpha=0.8)
            hi = float(max(d[floor].max(), d[measured].max())) * 1.05
            ax.plot([0, hi], [0, hi], "--", color="0.3", lw=1, label="measured = floor")
            ax.set_xlim(0, hi)
            ax.set_ylim(0, hi)
            ax.set_aspect("equal", adjustable="box")
            ax.legend(title=None, fontsize=8)
        else:
            _empty_note(ax)
        ax.set_xlabel(f"floor ({floor})")
        ax.set_ylabel(f"measured ({measured})")
        ax.set_title(title or "measured vs floor")
        return _save(fig, stem)


# --- throughput ----------------------------------------------------------------

SIZE_CLASSES = ((10_000, "<= 10 KB"), (100_000, "<= 100 KB"), (1_000_000, "<= 1 MB"), (10_000_000, "<= 10 MB"))


def size_class(nbytes: float | None) -> str | None:
    """An object-size class label for a transfer of nbytes."""
    if nbytes is None or not np.isfinite(nbytes):
        return None
    for limit, name in SIZE_CLASSES:
        if nbytes <= limit:
            return name
    return "> 10 MB"


def throughput_vs(df: pd.DataFrame, out_stem: Path | str, x: str, y: str = cols.THROUGHPUT,
                  hue_col: str = cols.CC, size_col: str | None = "size_class",
                  title: str | None = None) -> list[Path]:
    """Median `y` against `x` (lines with markers and a 95 % bootstrap band,
    hue = algorithm), one panel per object-size class (size_col; one panel if
    the column is missing or None)."""
    stem = _stem(out_stem)
    d = df[df[y].notna() & df[x].notna()] if {x, y} <= set(df.columns) else df.iloc[0:0]
    use_size = size_col is not None and size_col in d.columns
    panels = [c for c in _levels(d, size_col) if c is not None] if use_size else [None]
    panels = panels or [None]
    hue_order = _levels(df, hue_col) if hue_col in df else None
    with _style():
        ncols, nrows = _facets(len(panels))
        fig, axes = _new(ncols, nrows, width=5.0, height=3.8, sharey=False)
        for ax, p in zip(axes.flat, panels):
            sub = d if p is None else d[d[size_col] == p]
            if len(sub):
                sns.lineplot(data=sub, x=x, y=y, hue=hue_col if hue_order else None, hue_order=hue_order,
                             palette=PALETTE if hue_order else None, estimator="median",
                             errorbar=("ci", 95), n_boot=1000, seed=0, marker="o", ax=ax)
                leg = ax.get_legend()
                if leg is not None:
                    leg.set_title(_label(hue_col))
            else:
                _empty_note(ax)
            ax.set_xlabel(_label(x))
            ax.set_ylabel(_label(y))
            ax.set_ylim(bottom=0)
            if p is not None:
                ax.set_title(f"object size {p}")
        for ax in list(axes.flat)[len(panels):]:
            ax.set_visible(False)
        if title:
            fig.suptitle(title)
        return _save(fig, stem)


def throughput_vs_loss(df: pd.DataFrame, out_stem: Path | str, **kw) -> list[Path]:
    """Throughput vs configured loss (path.loss_pct), per object-size class."""
    return throughput_vs(df, out_stem, x=cols.LOSS, **kw)


def throughput_vs_delay(df: pd.DataFrame, out_stem: Path | str, **kw) -> list[Path]:
    """Throughput vs configured RTT (path.rtt_ms), per object-size class."""
    return throughput_vs(df, out_stem, x=cols.RTT, **kw)


# --- one connection ------------------------------------------------------------


def loss_times(samples: Sequence[Sequence[float]]) -> list[float]:
    """Times of the multiplicative decreases in tcp_probe samples [t, cwnd,
    ssthresh, ...]: ssthresh changes to a value below the previous cwnd (the
    rule of ccanalysis.find_loss_event, for every event)."""
    out = []
    for prev, cur in zip(samples, samples[1:]):
        if cur[2] != prev[2] and cur[2] < prev[1]:
            out.append(float(cur[0]))
    return out


def cwnd_over_time(samples: Sequence[Sequence[float]], out_stem: Path | str,
                   losses: Sequence[float] | None = None, title: str | None = None) -> list[Path]:
    """cwnd (segments) over time from samples [t s, cwnd, ssthresh, ...]
    (tcp:tcp_probe as trace/ccanalysis read them), ssthresh where it is set,
    and a mark at every loss: the given times, or the reductions found in the
    samples (loss_times)."""
    stem = _stem(out_stem)
    a = np.asarray([list(s[:3]) for s in samples], dtype=float).reshape(-1, 3)
    marks = list(losses) if losses is not None else loss_times(list(samples))
    with _style():
        fig, axes = _new(width=7.5, height=3.8)
        ax = axes[0, 0]
        if len(a):
            t0 = a[0, 0]
            t = a[:, 0] - t0
            colors = sns.color_palette(PALETTE, 3)
            ax.step(t, a[:, 1], where="post", color=colors[0], lw=1.6, label="cwnd")
            ss = np.where(a[:, 2] >= INFINITE_SSTHRESH, np.nan, a[:, 2])
            if np.isfinite(ss).any():
                ax.step(t, ss, where="post", color=colors[1], lw=1.2, ls="--", label="current ssthresh (kernel's tcp_current_ssthresh)")
            top = float(np.nanmax(a[:, 1])) if len(a) else 1.0
            for i, lt in enumerate(marks):
                ax.axvline(lt - t0, color=colors[2], lw=1, alpha=0.7, label="loss" if i == 0 else None)
            if marks:
                ax.plot(np.asarray(marks) - t0, np.full(len(marks), top * 1.04), "v", color=colors[2], ms=7)
            ax.set_ylim(0, top * 1.1)
            ax.legend(loc="upper left", fontsize=8)
        else:
            _empty_note(ax)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("segments")
        ax.set_title(title or "congestion window")
        return _save(fig, stem)


def flights_bars(flights: Sequence[dict], out_stem: Path | str, title: str | None = None) -> list[Path]:
    """Segments the sender put in flight per round trip: one bar per round
    ({round, segments, bytes}; round 1 = the first flight), labelled with the
    bytes. Flights carrying a "label" key (e.g. "initcwnd 10") are drawn as
    side-by-side series."""
    stem = _stem(out_stem)
    d = pd.DataFrame(list(flights), columns=None)
    with _style():
        fig, axes = _new(width=max(5.0, 0.5 * (d["round"].nunique() if len(d) else 1) + 3), height=3.8)
        ax = axes[0, 0]
        if len(d):
            if "label" not in d:
                d["label"] = ""
            labels = _levels(d, "label")
            rounds = sorted(d["round"].unique())
            colors = sns.color_palette(PALETTE, len(labels))
            width = 0.8 / len(labels)
            for j, lab in enumerate(labels):
                g = d[d["label"] == lab]
                xs = [rounds.index(r) - 0.4 + width * (j + 0.5) for r in g["round"]]
                bars = ax.bar(xs, g["segments"], width * 0.9, color=colors[j], label=str(lab) if lab else None)
                if "bytes" in g:  # upright labels when series stand side by side
                    ax.bar_label(bars, [_kb(b) for b in g["bytes"]], fontsize=7, padding=2,
                                 rotation=90 if len(labels) > 1 else 0)
            ax.set_xticks(range(len(rounds)), [str(r) for r in rounds])
            ax.margins(y=0.25 if len(labels) > 1 else 0.12)
            if any(labels):
                ax.legend(fontsize=8)
        else:
            _empty_note(ax)
        ax.set_xlabel("round trip")
        ax.set_ylabel("segments in flight")
        ax.set_title(title or "flights per round trip")
        return _save(fig, stem)


def _kb(b: float) -> str:
    return f"{b / 1000:.1f} KB" if b < 1e6 else f"{b / 1e6:.2f} MB"
