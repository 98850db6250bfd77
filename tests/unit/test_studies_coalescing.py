"""The coalescing study's gain claims on the seed's own metric, without the
lab: each market's primary reading is the paired p90 ratio of PLT at one
cache-hit ratio (no cache hits: the seed's "pages whose static content was
downloaded"), never pooled over cache ratios; the highest cache ratio and
the old pooled median per-pair change are variants beside it (issue 39),
on small synthetic run tables."""

import json

import numpy as np
import pandas as pd
import pytest

from tortoiselab import studies as S
from tortoiselab.studies.claims import coalescing as C
from tortoiselab.studies.registry import verdict_of

CLAIMS = {c.id: c for c in S.STUDIES["coalescing"].claims}
MARKETS = {"india": C.MARKETS[0], "us": C.MARKETS[1], "germany": C.MARKETS[2]}


def _row(region, rep, plt, coalescing, cache):
    point = {"client.coalescing": coalescing, "path.region": region, "client.cache_hit_ratio": cache}
    return {"ok": True, "client.loader": "loader", "client.coalescing": coalescing, "path.region": region,
            "client.cache_hit_ratio": cache, "repetition": rep, "plt_ms": plt,
            "cond": json.dumps(point, sort_keys=True)}


def _runs(factor_by_cache: dict[float, np.ndarray], n=13, seed=3, off_ms=(700, 1300)) -> pd.DataFrame:
    """Every market, per cache ratio: n pairs, coalescing off drawn
    uniformly from off_ms, on = off x that ratio's factor for the pair (an
    array of n factors)."""
    rng = np.random.default_rng(seed)
    rows = []
    for region in MARKETS.values():
        for cache, factors in factor_by_cache.items():
            for rep, (off, f) in enumerate(zip(rng.uniform(*off_ms, n), factors)):
                rows += [_row(region, rep, off, False, cache), _row(region, rep, f * off, True, cache)]
    return pd.DataFrame(rows)


def _p90_change(df, region, cache):
    d = df[(df["path.region"] == region) & (df["client.cache_hit_ratio"] == cache)]
    off = d[~d["client.coalescing"]].sort_values("repetition")["plt_ms"].to_numpy()
    on = d[d["client.coalescing"]].sort_values("repetition")["plt_ms"].to_numpy()
    return 100 * (np.quantile(on, 0.9) / np.quantile(off, 0.9) - 1)


@pytest.mark.parametrize("market", list(MARKETS))
def test_the_primary_gain_is_the_p90_without_cache_hits_not_pooled(market):
    """Coalescing on 10 % faster in every pair without cache hits, 50 %
    slower in every pair with 80 % of views from cache: the primary reading
    sees only the first (-10 %, the p90 ratio); pooled, the median per-pair
    change would lie between the two."""
    df = _runs({0.0: np.full(13, 0.9), 0.8: np.full(13, 1.5)})
    c = CLAIMS[f"coalescing.gain-{market}"]
    assert c.loader == "loader" and "p90" in c.metric and "no cache hits" in c.metric
    m = c.measure(df)
    assert m.statistic == "p90" and m.n == 13
    assert m.value == pytest.approx(-10.0)
    assert "p90 ratio" in m.detail
    # the single-path reading of the sentence: this market is one of its parts, with the same number
    part = dict(CLAIMS["coalescing.gain-path"].measure(df).parts)[market]
    assert part.value == pytest.approx(-10.0) and part.statistic == "p90" and part.n == 13
    variant = CLAIMS[f"coalescing.gain-{market}-cache80"].measure(df)
    assert variant.statistic == "p90" and variant.value == pytest.approx(50.0) and variant.n == 13
    pooled = CLAIMS[f"coalescing.gain-{market}-pooled-median"].measure(df)
    assert pooled.statistic == "ratio" and pooled.n == 26 and -10.0 < pooled.value < 50.0


def test_the_primary_gain_is_the_ratio_of_p90s_not_a_median_change():
    """Most pairs 5 % faster with coalescing, the slowest controls' pairs 40 %
    faster: the p90 ratio follows the tail, the median change the bulk."""
    rng = np.random.default_rng(5)
    n = 13
    df = _runs({0.0: np.full(n, 0.95)}, n=n)
    region = MARKETS["india"]
    slow = df[(df["path.region"] == region) & ~df["client.coalescing"]].nlargest(3, "plt_ms")["repetition"]
    tail = (df["path.region"] == region) & df["client.coalescing"] & df["repetition"].isin(slow)
    df.loc[tail, "plt_ms"] = df.loc[tail, "plt_ms"] / 0.95 * 0.6 * rng.uniform(0.99, 1.01, 3)
    m = CLAIMS["coalescing.gain-india"].measure(df)
    assert m.value == pytest.approx(_p90_change(df, region, 0.0))
    assert m.value < -10  # the tail decides it, where the median change is -5 %
    assert CLAIMS["coalescing.gain-india-pooled-median"].measure(df).value == pytest.approx(-5.0, abs=0.5)


def test_each_markets_variants_name_their_sentence_and_what_they_vary():
    """The seed's one sentence "8 % in India, 4 % in U.S, and 5 % in
    Germany" is one primary row (coalescing.gain, issue 51); each market
    alone and its variants are variants of that sentence."""
    for market in MARKETS:
        alone = CLAIMS[f"coalescing.gain-{market}"]
        assert not alone.primary and alone.sentence == "coalescing.gain" and "alone" in alone.variant
        for suffix, what in (("cache80", "80 % of page views from cache"), ("pooled-median", "pooled"),
                             ("chromium", "Chromium")):
            v = CLAIMS[f"coalescing.gain-{market}-{suffix}"]
            assert not v.primary and v.sentence == "coalescing.gain" and what in v.variant
            assert v.text == alone.text and v.judge.__qualname__ == alone.judge.__qualname__
    assert [c.id for c in CLAIMS.values() if c.primary and c.id.startswith("coalescing.gain")] == [
        "coalescing.gain", "coalescing.gain-is-connect-time"]
    # the seed's p90s are over each market's real users: the primary reading is over the simulated users,
    # paired, in each of the three markets (issue 51); one path per market is a variant
    gain, path = CLAIMS["coalescing.gain"], CLAIMS["coalescing.gain-path"]
    assert gain.experiment == "coalescing-population" and gain.setup == "population"
    assert not path.primary and path.sentence == "coalescing.gain" and "single path" in path.variant
    for market in MARKETS:
        users = CLAIMS[f"coalescing.gain-{market}-users"]
        assert not users.primary and users.sentence == "coalescing.gain" and "over users, paired" in users.variant


def test_the_gain_judges_the_p90_interval_and_says_no_data_without_runs_of_its_ratio():
    # a loss-free path's spread (the powered grid's India controls: 1124-1146 ms)
    df = _runs({0.0: np.linspace(0.91, 0.93, 13), 0.8: np.ones(13)}, off_ms=(1120, 1150))
    v = verdict_of(CLAIMS["coalescing.gain-india"], df, "f")
    assert v.verdict == "agree", v.why  # about -8 % in every pair, against the claimed -9..-7 %
    assert v.value == pytest.approx(_p90_change(df, MARKETS["india"], 0.0))
    assert verdict_of(CLAIMS["coalescing.gain-india-cache80"], df, "f").verdict == "not testable here"  # all equal
    only_cached = df[df["client.cache_hit_ratio"] == 0.8]
    assert verdict_of(CLAIMS["coalescing.gain-india"], only_cached, "f").verdict == "no data"


def test_chromiums_gain_is_the_p90_without_cache_hits():
    rows = []
    for rep, two in enumerate(np.linspace(1200, 1600, 8)):
        for res, plt, cache in (("two-ip", two, 0.0), ("same-ip", 0.9 * two, 0.0), ("two-ip", two, 0.8),
                                ("same-ip", 2 * two, 0.8)):
            point = {"client.resolution": res, "path.region": MARKETS["us"], "client.cache_hit_ratio": cache}
            rows.append({"ok": True, "client.loader": "chromium", "client.coalescing": True,
                         "client.resolution": res, "path.region": MARKETS["us"], "client.cache_hit_ratio": cache,
                         "repetition": rep, "plt_ms": plt, "cond": json.dumps(point, sort_keys=True)})
    v = verdict_of(CLAIMS["coalescing.gain-us-chromium"], pd.DataFrame(rows), "f")
    assert v.value == pytest.approx(-10.0) and v.n == 8 and "p90 ratio" in v.detail


def test_the_connect_time_claim_shows_each_markets_p90_drop_in_its_connect_times():
    df = _runs({0.0: np.full(13, 0.9)}, off_ms=(1000, 1000))
    df["connect_ms"] = df["path.region"].map({MARKETS["india"]: 50.0, MARKETS["us"]: 100.0, MARKETS["germany"]: 25.0})
    m = CLAIMS["coalescing.gain-is-connect-time"].measure(df)
    # p90 1000 ms off, 900 on: a drop of 100 ms, 2, 1 and 4 connect times
    assert "india-desktop-2017 100 ms = 2.00, us-desktop-2017 100 ms = 1.00, germany-desktop-2016 100 ms = 4.00" in (
        m.detail)


def test_connection_setup_is_read_as_a_share_of_the_initial_load():
    """The left-out sentence "Connection set up time typically accounts for
    5 to 7% of initial page load time" (issue 51): the www connection's
    set-up over the PLT of views without coalescing or cache hits."""
    from tortoiselab.studies.registry import judge_claim
    c = CLAIMS["coalescing.setup-share"]
    assert c.primary

    def with_connect(share):
        df = _runs({0.0: np.full(13, 0.9)})
        rng = np.random.default_rng(2)
        df["connect_ms"] = df["plt_ms"] * share * rng.uniform(0.97, 1.03, len(df)) / 100
        return df
    m = c.measure(with_connect(6.0))
    assert m.n == 39 and m.n_what == "page views" and m.value == pytest.approx(6.0, abs=0.2)
    assert judge_claim(c, m).verdict == "agree"
    assert judge_claim(c, c.measure(with_connect(20.0))).verdict == "disagree"


def test_the_cache_claim_is_read_on_the_p90():
    """The seed's impact is the drop of the p90 PLT (issue 51): the
    paired p90 ratio with 80 % of views from cache against none. The same
    drop in both (the 2026-11-27 runs: -24.1 against -24.5 %) is no
    finding, though the per-pair gain in ms (the reading before, now a
    variant) shrinks, since a cached view gains nothing."""
    from tortoiselab.studies.registry import judge_claim
    rng = np.random.default_rng(11)
    c, ms = CLAIMS["coalescing.cache-shrinks-gain"], CLAIMS["coalescing.cache-shrinks-gain-ms"]
    assert c.primary and not ms.primary and ms.sentence == c.id
    same = _runs({0.0: rng.uniform(0.72, 0.78, 13), 0.8: rng.uniform(0.72, 0.78, 13)}, off_ms=(1000, 1400))
    m = c.measure(same)
    assert {name for name, _ in m.parts} == {"india", "us", "germany"}  # per market: p90s are not pooled
    assert all(p.statistic == "p90-ratio-groups" and p.n_control == p.n_arm == 13 for _, p in m.parts)
    assert judge_claim(c, m).verdict == "inconclusive", judge_claim(c, m).why
    smaller = _runs({0.0: rng.uniform(0.72, 0.78, 13), 0.8: rng.uniform(0.93, 0.97, 13)}, off_ms=(1000, 1400))
    v = judge_claim(c, c.measure(smaller))
    assert v.verdict == "agree" and v.value > 0, (v.measured, v.why)
