"""HTTP/2 connection coalescing (LinkedIn, seed 001): the page load with
coalescing on against off per market, the gain against one connect time,
the reuse ratio, and the cache's effect on the gain (labs/02-coalescing.md),
on our loader's runs; and the browser arm (issue 22, docs/browser.md):
Chromium's gain per market and reuse ratio on the experiment's grid
`browser`, coalescing possible (one IP) against not (two IPs), since
Chromium cannot turn coalescing off."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from tortoiselab.analysis import stats
from tortoiselab.studies.connections import reuse_in_connections
from tortoiselab.studies.measure import change, direction, improvement, ok_rows, pair_key, paired_test, pairs
from tortoiselab.studies.model import SEEDS, Measurement, NoData, claim
from tortoiselab.studies.population import measure_over_users

S001 = SEEDS["001"]
# the seed's reuse ratios by market, in % (the lab's regions start with the market's name)
SEED_REUSE = {"india": 92, "us": 72, "germany": 52}
MARKETS = ("india-desktop-2017", "us-desktop-2017", "germany-desktop-2016")
BROWSER_GRID = "browser"


def _coalesce_gain(region: str):
    """PLT with coalescing on against off (on = arm), pooled over the cache
    ratios: median per-pair change (the seed's p90 over its real users'
    cache mix)."""
    return lambda df: change(df, "plt_ms", "client.coalescing", False, True, "ratio", path__region=region)


def _gain_vs_connect(df: pd.DataFrame) -> Measurement:
    """(PLT off - PLT on) / one connect time (TCP + TLS handshake of the www
    connection), per pair, without cache hits."""
    p = pairs(df, "plt_ms", "client.coalescing", False, True, client__cache_hit_ratio=0.0)
    if p.empty:
        raise NoData("no paired coalescing runs without cache hits")
    on = ok_rows(df, "connect_ms", client__coalescing=True, client__cache_hit_ratio=0.0).copy()
    on["cond"] = [pair_key(c, "client.coalescing") for c in on["cond"]]
    p = p.merge(on[["cond", "repetition", "connect_ms"]], on=["cond", "repetition"])
    r = (p["control"] - p["arm"]) / p["connect_ms"]
    e = stats.bootstrap_ci(r.to_numpy(float), "median", n_resamples=4000, seed=0)
    gain = (p["control"] - p["arm"]).to_numpy(float)
    pv, test = paired_test(p["control"].to_numpy(float), p["arm"].to_numpy(float))  # is the gain > 0
    return Measurement(e.value, e.low if len(r) > 1 else math.nan, e.high if len(r) > 1 else math.nan, pv, len(r),
                       "x", f"median gain {np.median(gain):.0f} ms against a median connect time "
                            f"{p['connect_ms'].median():.0f} ms (TCP + TLS); p: is the gain > 0 "
                            f"({test})")


def _judge_ratio_one(m: Measurement) -> tuple[str, str]:
    low, high = (m.low, m.high) if math.isfinite(m.low) else (m.value, m.value)
    if low <= 1.25 and high >= 0.75:
        return "agree", "the gain is one connect time within +-25 %"
    if low <= 1.5 and high >= 0.5:
        return "partly", "the gain is within a factor 1.5 of one connect time"
    return "disagree", f"the gain is {m.value:.2f} connect times"


def _conn_reuse_by_market(d: pd.DataFrame) -> dict[str, tuple[float, int]]:
    """Per market: (reused / all connections to the asset host, connections),
    pooled over the market's page views (connections, not requests)."""
    return {r: reuse_in_connections(zip(g["conns_reused"], g["conns_new"])) for r, g in d.groupby("path.region")}


def _market_text(by: dict[str, tuple[float, int]]) -> str:
    return ", ".join(f"{r} connections {100 * v:.0f} % of {n}" for r, (v, n) in by.items() if n)


def _shown(by: dict[str, tuple[float, int]]) -> str:
    if not any(n for _, n in by.values()):
        raise NoData("no page view needed a connection to the asset host")
    return "india-desktop-2017" if by.get("india-desktop-2017", (0, 0))[1] else next(r for r, v in by.items() if v[1])


def _reuse(df: pd.DataFrame) -> Measurement:
    """Reuse ratio in connections with coalescing on, per market."""
    d = ok_rows(df, "conns_reused", client__coalescing=True)
    if d.empty:
        raise NoData("no coalescing-on runs")
    by = _conn_reuse_by_market(d)
    shown = _shown(by)
    return Measurement(100 * by[shown][0], math.nan, math.nan, None, sum(n for _, n in by.values()), "%",
                       f"shown: {shown}; reuse ratio in connections with coalescing on (of the connections the "
                       "page views needed to static, the share that rode the www connection; n = connections; "
                       "views served wholly from cache need none): " + _market_text(by))


def _cache_shrinks(df: pd.DataFrame) -> Measurement:
    """Coalescing's mean gain in ms at the highest cache-hit ratio against
    none. The cache is per page view (client.cache_unit: page): a cached
    view fetches nothing from static and gains nothing, so the mean gain,
    not the median of a few pairs, carries the share of cached views."""
    hi = df["client.cache_hit_ratio"].max()
    g = {}
    for ratio in (0.0, hi):
        p = pairs(df, "plt_ms", "client.coalescing", False, True, client__cache_hit_ratio=ratio)
        if p.empty or ratio == 0 and hi == 0:
            raise NoData("needs runs with and without cache hits")
        g[ratio] = (p["control"] - p["arm"]).to_numpy(float)
    base, high = g[0.0], g[hi]
    e = stats.percent_diff(base, high, "mean", n_resamples=4000, seed=0)
    pv = stats.mann_whitney(base, high)["p_value"]
    still = int(np.sum(np.abs(high) > 0))
    return Measurement(e.value, e.low, e.high, pv, min(len(base), len(high)), "%",
                       f"mean gain {np.mean(base):.0f} ms without cache hits, {np.mean(high):.0f} ms with "
                       f"{100 * hi:.0f} % of page views served from cache ({still} of {len(high)} pairs still "
                       "fetched from static; change of the mean gain; Mann-Whitney)")


# --- the browser arm: Chromium on the grid "browser" ------------------------------------


def _browser_gain(region: str):
    """Chromium's PLT with coalescing possible (one IP) against not (two IPs
    of the server, the same certificate): median per-pair change, as the
    loader's gain, over the market's pairs (no cache)."""
    return lambda df: change(df, "plt_ms", "client.resolution", "two-ip", "same-ip", "ratio", path__region=region)


def _browser_reuse(df: pd.DataFrame) -> Measurement:
    """Per market, with coalescing possible (one IP): the reuse ratio in
    requests (reuse_ratio) and in connections (conn_reuse_ratio), and the
    TCP connections the server capture saw with one IP and with two."""
    d = ok_rows(df, "conns_reused", client__resolution="same-ip")
    if d.empty:
        raise NoData("no runs with coalescing possible (client.resolution same-ip)")
    by = _conn_reuse_by_market(d)
    shown = _shown(by)
    req = d.groupby("path.region")["reuse_ratio"].mean()
    tcp = ok_rows(df, "tcp_conns").groupby(["path.region", "client.resolution"])["tcp_conns"].median()

    def tcp_of(region: str, res: str) -> str:
        return f"{tcp[region, res]:.0f}" if (region, res) in tcp else "-"
    return Measurement(100 * by[shown][0], math.nan, math.nan, None, sum(n for _, n in by.values()), "%",
                       f"shown: {shown}; reuse ratio with coalescing possible (one IP), in connections (of the "
                       "connections the page views needed to static, the share that rode the www connection; "
                       "n = connections): " + _market_text(by)
                       + "; in requests (share of static requests sent on the www connection): "
                       + ", ".join(f"{r} {100 * v:.0f} %" for r, v in req.items())
                       + "; TCP connections in the server capture (median), one IP / two IPs: "
                       + ", ".join(f"{r} {tcp_of(r, 'same-ip')} / {tcp_of(r, 'two-ip')}" for r in req.index))


def _judge_reuse_markets(m: Measurement) -> tuple[str, str]:
    """The reuse rule itself: the markets' reuse in connections against the
    seed's 92/72/52 %."""
    got = {r: float(v) for r, v in re.findall(r"([\w.-]+) connections (\d+) %", m.detail)}
    seed = {r: SEED_REUSE[r.split("-")[0]] for r in got if r.split("-")[0] in SEED_REUSE}
    if seed and all(abs(got[r] - s) <= 10 for r, s in seed.items()):
        return "agree", "every market's reuse ratio is within 10 points of the seed's"
    if len(set(got.values())) == 1:
        return "disagree", (f"every market reuses {next(iter(got.values())):.0f} % of its connections: where "
                            "coalescing is possible the client coalesces every view that needs static; the seed's "
                            "92/72/52 % come from what the lab does not model (DNS answers, certificates, "
                            "connections already open, prefetching)")
    return "partly", "the markets differ, but not as the seed's do"


def _gain_claims(cid: str, text: str, region: str, judge_rule) -> tuple:
    """A market's gain claim twice: on our loader's runs (the coalescing
    flag, the report's grid) and on Chromium's (one IP vs two, grid browser)."""
    return (claim("coalescing", cid, S001, text, "coalescing", f"plt_ms, {region}, on vs off, pooled over cache ratios",
                  _coalesce_gain(region), judge_rule, loader="loader"),
            claim("coalescing", f"{cid}-chromium", S001, text, "coalescing",
                  f"Chromium (grid {BROWSER_GRID}): plt_ms, {region}, one IP vs two IPs",
                  _browser_gain(region), judge_rule, loader="chromium", grid=BROWSER_GRID))


REUSE_RULE = ("agree if the markets' reuse ratios match the seed's within 10 points; partly if they differ by "
              "market; disagree if the lab gives one ratio everywhere")
REUSE_TEXT = "92% of connections are reused in India, 52% in Germany, and 72% in U.S."

# over users: the seed's p90s are over each market's real users (docs/population.md); Germany has no
# desktop population with sources (topologies/populations.yaml), so its claim stays on the single path
USER_CLAIMS = tuple(
    claim("coalescing", f"gain-{name}-users", S001, text, "coalescing-population",
          f"plt_ms p90 over the market's simulated users, feed.html, coalescing on vs off, {market}",
          measure_over_users("plt_ms", "client.coalescing", False, True, market), judge, setup="population")
    for name, text, market, judge in (
        ("india", "a notable boost in client-perceived download time of 8% in India", "india-desktop-2017",
         improvement(-9, -7)),
        ("us", "... 4% in U.S", "us-desktop-2017", improvement(-5, -3))))


CLAIMS = (
    *_gain_claims("gain-india", "a notable boost in client-perceived download time of 8% in India", MARKETS[0],
                  improvement(-9, -7)),
    *_gain_claims("gain-us", "... 4% in U.S", MARKETS[1], improvement(-5, -3)),
    *_gain_claims("gain-germany", "... and 5% in Germany", MARKETS[2], improvement(-6, -4)),
    claim("coalescing", "gain-is-connect-time", S001,
          "This drop [of p90 page load time] roughly matched TCP connect time experienced in a given PoP",
          "coalescing", "(PLT off - PLT on) / (TCP + TLS connect time), no cache hits", _gain_vs_connect,
          (_judge_ratio_one, "agree if the CI of gain / connect time overlaps [0.75, 1.25]; partly if it overlaps "
                             "[0.5, 1.5]; disagree otherwise"), loader="loader"),
    claim("coalescing", "reuse-ratio", S001, REUSE_TEXT, "coalescing",
          "reuse ratio in connections with coalescing on (India shown)",
          _reuse, (_judge_reuse_markets, REUSE_RULE), loader="loader"),
    claim("coalescing", "reuse-ratio-chromium", S001, REUSE_TEXT, "coalescing",
          f"Chromium (grid {BROWSER_GRID}): reuse ratio in connections, one IP (India shown)",
          _browser_reuse, (_judge_reuse_markets, REUSE_RULE),
          loader="chromium", grid=BROWSER_GRID),
    claim("coalescing", "cache-shrinks-gain", S001,
          "The higher the percentage of browser cache hit ratio, the lesser the impact of enabling connection "
          "coalescing", "coalescing",
          "mean gain in ms with the highest share of page views served from cache vs none", _cache_shrinks,
          direction("lower", "the gain with cache hits"), loader="loader"),
    *USER_CLAIMS,
)
