"""Fitting in the initial slow-start window (Napkin Problem 15, seed 003):
the response's first flight at IW 10 and 30, TLS 1.2's third round trip
when the certificate chain overflows IW 3, the article's ten round trips,
a larger IW against IW 3, and slow start after idle, read from the server
captures (labs/04-initcwnd.md)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from tortoiselab.analysis import napkin
from tortoiselab.host import readfiles, store
from tortoiselab.spec import cols
from tortoiselab.studies.connections import MSS, first_conn, handshake_grew_window, second_load_window, transfer
from tortoiselab.studies.measure import Where, exact, ok_rows, span
from tortoiselab.studies.model import SEEDS, Measurement, NoData, claim

S003 = SEEDS["003"]


ARTICLE_PATH = {cols.RTT: 130, cols.RATE: 15}  # the article's path (not the 2G rows)


def _cubic_runs(df: pd.DataFrame, where: Where | None = None) -> pd.DataFrame:
    """The ok cubic runs on the article's path that where also selects."""
    return ok_rows(df, cols.PLT, {cols.CC: "cubic", **ARTICLE_PATH, **(where or {})})


def _first_round(iw: int):
    """Packets of the response's first round trip (the first flight of the
    transfer, server capture), on runs whose handshake could not grow the
    window (handshake_grew_window). The
    window counts packets; its first packets may be small (TLS 1.3 session
    tickets, HTTP/2 SETTINGS), so bytes are given in detail, with the bytes
    of full-size packets (x MSS) that the seed's figure assumes."""
    def measure(df: pd.DataFrame) -> Measurement:
        segs, nbytes = [], []
        for _, r in _cubic_runs(df, {cols.INITCWND: iw}).iterrows():
            c = first_conn(r["run_dir"])
            if c is None or handshake_grew_window(c, iw):
                continue
            tf = transfer(c)
            if tf:
                segs.append(tf[0]["segments"])
                nbytes.append(tf[0]["bytes"])
        m = span(segs, "packets", f"first data flight at IW {iw}")
        return replace(m, unit="packets", detail=f"{m.detail}; {m.value:.0f} x MSS {MSS} = {m.value * MSS:.0f} bytes of "
                       f"full-size packets; measured bytes {min(nbytes)}..{max(nbytes)} (the first packets carry "
                       f"session tickets and SETTINGS)")
    return measure


def _tls_rtts(df: pd.DataFrame) -> Measurement:
    """TLS 1.2 with the large chain: handshake round trips at IW 3 (the
    article's case), with IW 10 and 30 in detail."""
    by: dict[int, list[float]] = {}
    for _, r in _cubic_runs(df, {cols.TLS: "1.2", cols.CERT: "large"}).iterrows():
        c = first_conn(r["run_dir"])
        if c and c.get("tls") and c["tls"].get("rtts") is not None:
            by.setdefault(int(r[cols.INITCWND]), []).append(c["tls"]["rtts"])
    if 3 not in by:
        raise NoData("no TLS 1.2 large-chain run at IW 3")
    m = span(by[3], "RTT", "TLS handshake in round trips (ClientHello to the request), IW 3")
    return replace(m, detail=m.detail + "; " + ", ".join(f"IW {iw}: {np.mean(v):.2f} RTT"
                                                        for iw, v in sorted(by.items())))


def _judge_tls(m: Measurement) -> tuple[str, str]:
    others = {int(x.split()[1].rstrip(":")): float(x.split()[2]) for x in m.detail.split("; ")[-1].split(", ")
              if x.startswith("IW ")}
    larger = {iw: v for iw, v in others.items() if iw >= 10}
    if round(m.low) == round(m.high) == 3:
        if not larger:
            return "agree", "3 round trips at IW 3 in every run (IW >= 10 not measured)"
        two = all(round(v) == 2 for v in larger.values())
        return "agree", ("3 round trips at IW 3 in every run" + (", 2 once the chain fits the initial window" if two
                         else "; IW >= 10 did not take the expected 2"))
    return "disagree", (f"{m.value:.2f} round trips at IW 3 (range {m.low:.2f}..{m.high:.2f} over {m.n} runs) against "
                        "the seed's 3: exact runs (loss-free, on the virtual clock: no sampling error), so a count "
                        "other than 3 refutes it")


def _floor(run_dir: str) -> dict | None:
    """The run's napkin floor by today's model (analysis.napkin.run_floor:
    the stored one may predate it), from its configuration and the
    experiment's site and PKI; None where it cannot be computed."""
    d = Path(run_dir)
    try:  # through the store: no link followed, no FIFO opened (host/readfiles.py)
        cfg = store.read_record(d).config
        manifest, pki = readfiles.lab_json(d.parent, "site"), readfiles.lab_json(d.parent, "pki")
    except (OSError, ValueError, KeyError):
        return None
    return napkin.run_floor(cfg, manifest, pki).get("model")


def _napkin_rtts(df: pd.DataFrame) -> Measurement:
    """The article's case (IW 3, TLS 1.2, large chain, 160 KB at 130 ms):
    the load without its DNS lookup, in round trips."""
    d = _cubic_runs(df, {cols.INITCWND: 3, cols.TLS: "1.2", cols.CERT: "large"})
    if d.empty:
        raise NoData("no run of the article's case")
    rtts = ((d[cols.PLT] - d["dns_ms"].fillna(0)) / d[cols.RTT]).to_numpy(float)
    ms = (d[cols.PLT] - d["dns_ms"].fillna(0)).median()
    rounds, floors = [], []
    for _, r in d.iterrows():
        c = first_conn(r["run_dir"])
        if c:
            rounds.append(len(transfer(c)))
        f = _floor(r["run_dir"])
        if f:
            floors.append((f["total_ms"] - f["dns_rtts"] * f["rtt_ms"]) / f["rtt_ms"])
    art = napkin.article_server()
    linux = (f"Linux's floor (doubling from the window the handshake grew) {min(floors):.2f} RTT; "
             if floors else "")
    return span(rtts, "RTT", f"(PLT - DNS) / RTT; {ms:.0f} ms against the article's 1300 ms; "
                             f"HTTP rounds in the capture: {rounds} (article: 6); {linux}the article's server "
                             f"(x{art['growth']:g} per round into a {art['rwnd_bytes'] // 1024} KB receive window): "
                             f"{art['rtts']} RTT")


def _iw_faster(df: pd.DataFrame) -> Measurement:
    """PLT at the largest IW against IW 3, per TLS version and chain."""
    d = _cubic_runs(df, {cols.SLOW_START_AFTER_IDLE: True})
    hi = d[cols.INITCWND].max()
    if not hi > 3:
        raise NoData("needs runs at IW 3 and a larger IW")
    out, parts = [], []
    for (tls, cert), g in d.groupby([cols.TLS, cols.CERT]):
        a, b = g[g[cols.INITCWND] == 3][cols.PLT], g[g[cols.INITCWND] == hi][cols.PLT]
        if len(a) and len(b):
            out.append(100 * (b.median() / a.median() - 1))
            parts.append(f"TLS {tls} {cert}: {a.median():.0f} -> {b.median():.0f} ms")
    return span(out, "%", f"PLT at IW {hi:g} vs IW 3: " + "; ".join(parts), n_what="TLS/chain cases")


def _ssai(df: pd.DataFrame) -> Measurement:
    """The second load on the same connection after 2 s idle, with
    tcp_slow_start_after_idle 0 against 1 (same IW, TLS and chain)."""
    d = ok_rows(df, "plt2_ms", {cols.CC: "cubic", **ARTICLE_PATH})
    out, parts = [], []
    for key, g in d.groupby([cols.INITCWND, cols.TLS, cols.CERT]):
        ssai = g[cols.SLOW_START_AFTER_IDLE].astype(bool)
        on, off = g[ssai]["plt2_ms"], g[~ssai]["plt2_ms"]
        if len(on) and len(off):
            out.append(100 * (off.median() / on.median() - 1))
            w_on, w_off = (second_load_window(g[mask]["run_dir"].iloc[0]) for mask in (ssai, ~ssai))
            parts.append(f"IW {key[0]:g} TLS {key[1]} {key[2]}: {on.median():.0f} ms (on) -> "
                         f"{off.median():.0f} ms (off); the second load's first flight {w_on} packets (on) vs "
                         f"{w_off} (off)")
    return span(out, "%", "second-load PLT with slow start after idle off vs on: " + "; ".join(parts),
                n_what="IW/TLS/chain cases")


def _all_lower(m: Measurement) -> tuple[str, str]:
    """Exact runs, one change per case: the claim holds in every case or
    it does not (no interval to read: the runs repeat exactly)."""
    high = m.high if math.isfinite(m.high) else m.value
    if high < 0:
        return "agree", "faster in every case measured (exact runs)"
    return "disagree", "not faster in every case measured (exact runs): " + (
        "faster on average" if m.value < 0 else "not faster on average")


CLAIMS = (
    claim("initcwnd", "first-round-iw10", S003,
          "the default for a Linux server is 10 packets, or 10 * 1460 = 14600 bytes [in the first round trip]",
          "initcwnd", "packets of the response's first flight, IW 10", _first_round(10), exact(10, 0, "packets")),
    claim("initcwnd", "first-round-iw30", S003, "Wix, Fastly ... ~40kb (~30 packets) [first round trip bytes]",
          "initcwnd", "packets of the response's first flight, IW 30", _first_round(30), exact(30, 1, "packets")),
    claim("initcwnd", "tls-3-round-trips", S003,
          "We're seeing 3 round-trips for TLS/SSL instead of the expected 2 ... the server's congestion window "
          "... just isn't large enough to accommodate the whole certificate [6908 bytes, initcwnd 3]", "initcwnd",
          "TLS 1.2 handshake round trips with the 6908-byte chain, IW 3 (IW 10/30 in detail)", _tls_rtts,
          (_judge_tls, "agree if IW 3 takes 3 round trips in every run (the expected 2 at IW >= 10 said beside); "
                       "disagree otherwise (exact runs: a count has no 0 side)")),
    claim("initcwnd", "ten-round-trips", S003,
          "1 + 3 + 6 = 10 roundtrips. With our roundtrip time at 130ms, this lines up perfectly with the 1.3s total",
          "initcwnd", "(PLT - DNS) / RTT, IW 3, TLS 1.2, large chain, 160 KB", _napkin_rtts, exact(10, 1, "RTT")),
    claim("initcwnd", "larger-iw-faster", S003,
          "The larger the initial window, the more we can transfer in the first roundtrip, the faster your site is "
          "on the initial page load", "initcwnd", "PLT at IW 30 vs IW 3, per TLS version / chain", _iw_faster,
          (_all_lower, "agree if the larger IW is faster in every TLS/chain case (exact runs); disagree "
                       "otherwise")),
    claim("initcwnd", "slow-start-after-idle", S003,
          "tcp_slow_start_after_idle ... by default when set to 1, it'll renegotiate the congestion window after a "
          "few seconds of no activity ... set this to 0 so it remembers the congestion window for the next page load",
          "initcwnd", "second-load PLT, slow start after idle off vs on", _ssai,
          (_all_lower, "agree if the second load is faster with it off in every case (exact runs); disagree "
                       "otherwise")),
)
