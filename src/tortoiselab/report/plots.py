"""The report's figures, drawn with tortoiselab.analysis.figures for what the
runs carry (docs/analysis.md, "The report"; a new figure goes here,
docs/architecture.md):

- PLT CDF and p90 bars when runs have a PLT, and measured vs floor when they
  have ``floor_ms`` too;
- throughput vs loss / vs delay when runs have a throughput (h2load) and the
  loss / RTT takes more than one value;
- for the run with the median PLT of each arm: the server's cwnd over time
  when its folder has ``cwnd.json`` (tcp_probe samples the uml backend
  stores: [t, cwnd, ssthresh, ...]), and its flights per round trip when its
  folder has ``server.pcap`` (its connections table, host/store/captures.py;
  data phase, the first connection, the first MAX_ROUNDS rounds).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tortoiselab.analysis import figures
from tortoiselab.analysis import flights as flightmod
from tortoiselab.host import safefs
from tortoiselab.host.store import captures
from tortoiselab.report.context import Context
from tortoiselab.spec import cols

MAX_FACETS = 9
MAX_ROUNDS = 12  # flights shown per run


@dataclass(frozen=True)
class Figure:
    """One drawn figure: its id on the page, its caption and its files."""

    name: str
    caption: str
    png: Path
    svg: Path


def make_figures(ctx: Context, work: Path, n_resamples: int) -> list[Figure]:
    """Every figure that applies to the ok runs, drawn into work (a folder
    the caller removes once the page embeds them)."""
    ok = ctx.df[ctx.df[cols.OK].astype(bool)].copy()
    arm = ctx.main_axis or "arm"
    if ctx.main_axis is None:
        ok[arm] = "all runs"
    facet = None
    if ctx.strata_axes:  # rows are in the sweep's order already (load_context)
        facet = " / ".join(ctx.strata_axes)
        labels = ok[ctx.strata_axes].astype(str).agg(" / ".join, axis=1)
        if labels.nunique() > MAX_FACETS:
            facet = None
    out: list[Figure] = []

    def fig(name: str, caption: str, paths: list[Path]) -> None:
        out.append(Figure(name, caption, paths[0], paths[1]))

    plt = ok[pd.to_numeric(ok[cols.PLT], errors="coerce").notna()].copy()
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
        if cols.FLOOR in plt and plt[cols.FLOOR].notna().any():
            fig("plt_vs_floor", "Measured PLT against the napkin-model floor; the dashed line is measured = floor.",
                figures.plt_vs_floor(plt, work / "plt_vs_floor", hue_col=arm))
    thr = ok[pd.to_numeric(ok[cols.THROUGHPUT], errors="coerce").notna()]
    for x, fn, what in ((cols.LOSS, figures.throughput_vs_loss, "loss"),
                        (cols.RTT, figures.throughput_vs_delay, "delay")):
        if len(thr) and thr[x].nunique() > 1:
            fig(f"throughput_vs_{what}", f"Median throughput vs {what} per object-size class; "
                                         f"bands are 95 % bootstrap CIs of the median.",
                fn(thr, work / f"throughput_vs_{what}", hue_col=cols.CC))
    return out + _median_run_figures(ctx, plt, arm, work)


def _median_run_figures(ctx: Context, plt: pd.DataFrame, arm: str, work: Path) -> list[Figure]:
    """The per-connection views of one representative run per arm (the run
    closest to the arm's median PLT): its cwnd over time, and the flights of
    every arm's run in one figure."""
    out, flights, n_cwnd = [], [], 0
    for a, g in plt.groupby(arm, sort=False):
        rid = g.iloc[(g[cols.PLT] - g[cols.PLT].median()).abs().argsort().iloc[0]][cols.RUN_ID]
        rec = ctx.records.get(rid, {})
        samples = run_cwnd(rec)
        if samples:
            n_cwnd += 1
            stem = work / f"cwnd_{n_cwnd}"
            png, svg = figures.cwnd_over_time(samples, stem, title=f"{a}: run {rid}")[:2]
            out.append(Figure(f"cwnd_{n_cwnd}", f"cwnd over time, {arm} = {a} (run {rid}, the arm's median PLT); "
                                                f"marks are losses (multiplicative decreases).", png, svg))
        fl = run_flights(rec, ctx.notes)
        flights += [{**f, "label": f"{a} ({rid})"} for f in fl[:MAX_ROUNDS]]
    if flights:
        png, svg = figures.flights_bars(flights, work / "flights")[:2]
        out.append(Figure("flights", f"Server segments per round trip of the data phase (the first {MAX_ROUNDS} at "
                                     f"most), first connection of the median-PLT run of each {arm}; labels are bytes.",
                          png, svg))
    return out


def run_cwnd(rec: dict) -> list | None:
    """The server's cwnd samples of a run: its folder's cwnd.json (written
    by the uml backend's tcp_probe), None when there is none."""
    cw = Path(rec["_dir"]) / "cwnd.json" if rec.get("_dir") else None
    if cw is None or not os.path.lexists(cw):
        return None
    return json.loads(safefs.read_bytes_regular(cw, doing="tortoise report"))  # no link, no FIFO (host/safefs.py)


def run_flights(rec: dict, notes: list[str]) -> list[dict]:
    """The server's flights of a run's first connection with an RTT, from
    its folder's server.pcap (tortoiselab.analysis.flights, data phase): its
    connections table (host/store/captures.py), or the capture with its
    series where the connection's flights are split by silence (a capture
    not taken at the server). [] when there is no capture; a failed
    analysis is noted in notes."""
    pcap = Path(rec["_dir"]) / "server.pcap" if rec.get("_dir") else None
    if pcap is None or not pcap.exists():
        return []
    try:
        conns = [c for c in captures.connections(pcap.parent) if c.get("tcp_rtt_ms")]
        if conns and conns[0]["flight_method"] != "ack":  # the silence split reads the series
            conns = [c for c in captures.connections_with_series(pcap.parent) if c.get("tcp_rtt_ms")]
        return flightmod.flights(conns[0], phase="data") if conns else []
    except Exception as exc:  # noqa: BLE001 - one figure must not cost the report
        notes.append(f"flights of run {rec.get('run_id')}: capture analysis failed ({str(exc)[:200]})")
        return []
