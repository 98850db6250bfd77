"""The coalescing study's browser arm without the lab: loaders kept apart
(the loader's claims read only the loader's runs, whatever Chromium runs sit
beside them), Chromium's gain per market (one IP vs two, paired by seed) and
its reuse ratio in connections (and requests), on small synthetic run tables."""

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from tortoiselab import studies as S
from tortoiselab.spec.measured import ClientConnection, LoadSummary
from tortoiselab.studies.claims import coalescing as C
from tortoiselab.studies.data import STUDY_COLUMNS, _conn_reuse, of_loader
from tortoiselab.studies.registry import verdict_of

MARKETS = C.MARKETS
CLAIMS = {c.id: c for c in S.STUDIES["coalescing"].claims}


def _row(loader, region, rep, plt, *, coalescing=True, resolution="same-ip", cache=0.0, reuse=1.0, conn_reuse=1.0,
         tcp=1, connect=300.0):
    point = {"client.loader": loader, "client.coalescing": coalescing, "client.resolution": resolution,
             "path.region": region, "client.cache_hit_ratio": cache}
    return {"ok": True, "client.loader": loader, "client.coalescing": coalescing, "client.resolution": resolution,
            "path.region": region, "client.cache_hit_ratio": cache, "repetition": rep, "plt_ms": plt,
            "reuse_ratio": reuse, "conn_reuse_ratio": conn_reuse, "tcp_conns": tcp, "connect_ms": connect,
            # the feed's one other origin: one connection, reused or opened
            "conns_reused": int(conn_reuse == 1.0), "conns_new": int(conn_reuse != 1.0),
            "cond": json.dumps(point, sort_keys=True)}


def _loader_runs(n=8, seed=1):
    """Our loader, coalescing on 10 % faster than off in every market."""
    rng = np.random.default_rng(seed)
    rows = []
    for region in MARKETS:
        for rep, off in enumerate(rng.uniform(900, 1100, n)):
            rows.append(_row("loader", region, rep, off, coalescing=False, reuse=0.0, conn_reuse=0.0, tcp=2))
            rows.append(_row("loader", region, rep, 0.9 * off))
    return rows


def _chromium_runs(gain=(0.8, 0.9, 0.95), n=4, seed=2, reuse=(1.0, 1.0, 1.0)):
    """Chromium, one IP (same-ip) faster than two IPs by the market's factor;
    with one IP, round(reuse * n) of the market's views reuse the www
    connection for static and the others open their own."""
    rng = np.random.default_rng(seed)
    rows = []
    for region, g, r in zip(MARKETS, gain, reuse):
        for rep, two in enumerate(rng.uniform(1200, 1600, n)):
            rows.append(_row("chromium", region, rep, two, resolution="two-ip", reuse=0.0, conn_reuse=0.0, tcp=7))
            hit = 1.0 if rep < round(r * n) else 0.0
            rows.append(_row("chromium", region, rep, g * two, reuse=hit, conn_reuse=hit))
    return rows


def _frame(rows):
    return pd.DataFrame(rows)


def test_of_loader_keeps_one_loader_and_reads_a_missing_one_as_the_default():
    df = _frame([_row("loader", MARKETS[0], 0, 1), _row("chromium", MARKETS[0], 0, 2), _row(None, MARKETS[0], 1, 3)])
    assert list(of_loader(df, "loader")["plt_ms"]) == [1, 3]
    assert list(of_loader(df, "chromium")["plt_ms"]) == [2]
    assert len(of_loader(df, None)) == 3


@pytest.mark.parametrize("cid", ["gain-india", "gain-us", "gain-germany", "gain-is-connect-time", "reuse-ratio",
                                 "cache-shrinks-gain"])
def test_the_loaders_claims_ignore_chromium_runs(cid):
    """The loader's verdicts on its runs alone equal those with Chromium's runs
    beside them (Chromium's PLTs differ wildly, and its rows carry
    client.coalescing true in both arms)."""
    loader_only = _frame(_loader_runs() + [_row("loader", MARKETS[0], r, 500.0, cache=0.8, coalescing=c)
                                           for r in range(8) for c in (True, False)])
    mixed = pd.concat([loader_only, _frame(_chromium_runs(gain=(0.2, 3.0, 0.5)))], ignore_index=True)
    c = CLAIMS[f"coalescing.{cid}"]
    assert c.loader == "loader" and c.grid is None
    a, b = verdict_of(c, loader_only, "f"), verdict_of(c, mixed, "f")
    assert a.verdict != "no data", a.why
    assert (a.verdict, a.value, a.measured, a.detail) == (b.verdict, b.value, b.measured, b.detail)
    if cid == "reuse-ratio":  # pooled, Chromium's two-IP runs (reuse 0, client.coalescing true) would count
        assert c.measure(mixed).value < a.value == 100


def test_chromiums_gain_per_market_pairs_one_ip_with_two_by_repetition():
    df = _frame(_loader_runs() + _chromium_runs(gain=(0.8, 0.9, 0.95)))
    for market, want in zip(("india", "us", "germany"), (-20, -10, -5)):
        c = CLAIMS[f"coalescing.gain-{market}-chromium"]
        assert c.loader == "chromium" and c.grid == "browser"
        v = verdict_of(c, df, "f")
        assert v.value == pytest.approx(want) and v.n == 4
        # the seed's statistic, the p90 ratio, as the loader's primary reading (issue 39)
        assert "same-ip vs two-ip" in v.detail and "permutation test of the p90 ratio" in v.detail
    # -10 % in every pair against the claimed 3-5 %: but 4 pairs cannot reach p < 0.05 (2/2^4 = 0.125), so
    # the test has no power for it: inconclusive, never significant from a handful of pairs
    v = verdict_of(CLAIMS["coalescing.gain-us-chromium"], df, "f")
    assert v.verdict == "inconclusive" and v.min_p == 0.125 <= v.p_value and v.power == 0 and v.setup == "browser"
    # no Chromium runs at all: no data, never an exception
    v = verdict_of(CLAIMS["coalescing.gain-india-chromium"], _frame(_loader_runs()), "f")
    assert v.verdict == "no data" and "client.loader chromium" in v.why


def test_chromiums_reuse_ratio_is_counted_in_connections():
    df = _frame(_loader_runs() + _chromium_runs())
    c = CLAIMS["coalescing.reuse-ratio-chromium"]
    v = verdict_of(c, df, "f")
    assert v.value == pytest.approx(100) and v.n == 12 and v.verdict == "not testable here"  # n: connections
    assert "does not model" in v.why and "Testable with" in v.why  # the reason, and what would make it testable
    assert "india-desktop-2017 connections 100 % of 4" in v.detail
    assert "india-desktop-2017 1 / 7" in v.detail  # TCP connections in the capture, one IP / two IPs
    # the rule a model of the seed's reuse would be judged by
    seedlike = c.measure(of_loader(_frame(_chromium_runs(reuse=(0.9, 0.75, 0.5), n=20)), "chromium"))
    assert c.judge(seedlike)[0] == "agree" and seedlike.value == pytest.approx(90)
    differ = c.measure(of_loader(_frame(_chromium_runs(reuse=(1.0, 0.5, 1.0))), "chromium"))
    assert c.judge(differ)[0] == "disagree"


def test_the_loaders_reuse_judge_is_unchanged_by_the_browser_rows():
    v = verdict_of(CLAIMS["coalescing.reuse-ratio"],
                   _frame(_loader_runs() + _chromium_runs(reuse=(0.9, 0.75, 0.5), n=20)), "f")
    assert v.verdict == "not testable here" and v.value == pytest.approx(100)
    assert v.n == 24  # the coalescing-on views' connections to static, 8 per market


def _rec(conns, capture=1):
    """A record's parts _conn_reuse reads: the loader's connections (typed, spec/measured.py)."""
    summary = LoadSummary(connections=[ClientConnection(id=i, **c) for i, c in enumerate(conns)])
    return SimpleNamespace(summary=summary, connections=[{}] * capture)


def test_reuse_in_connections_counts_second_origins_without_a_connection_of_their_own():
    www, static = "https://www.lab.test:443", "https://static.lab.test:443"
    coalesced = [{"origin": www, "origins": [www, static]}]
    separate = [{"origin": www, "origins": [www]}, {"origin": static, "origins": [static]}]
    partly = [{"origin": www, "origins": [www, static]}, {"origin": static, "origins": [static]}]
    assert _conn_reuse(_rec(coalesced)) == 1.0
    assert _conn_reuse(_rec(separate)) == 0.0
    assert _conn_reuse(_rec(partly)) == 0.0  # static still needed a connection of its own
    assert _conn_reuse(_rec([{"origin": www, "origins": [www]}])) is None  # no second origin
    assert _conn_reuse(_rec([])) is None
    assert STUDY_COLUMNS["tcp_conns"](_rec(separate, capture=7)) == 7


def test_the_report_lists_the_browser_grid_and_says_no_data_without_it(tmp_path):
    text = S.reproduction_markdown(tmp_path, "reduced", with_checks=False)
    assert "| `tortoise run experiments/coalescing.yaml --grid browser --jobs 2` | 0 of 720 |" in text
    assert "| `tortoise run experiments/coalescing.yaml --grid reduced --jobs 2` | 0 of " in text
    vs = {v.claim_id: v for v in S.evaluate("coalescing", tmp_path, "reduced")}
    assert vs["coalescing.gain-india-chromium"].verdict == "no data"
    assert "coalescing@browser" in vs["coalescing.gain-india-chromium"].why
    assert "coalescing@reduced" in vs["coalescing.gain-india"].why
