"""Statistics on synthetic data whose answers are known."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from tortoiselab.analysis import stats


def _lognormal(rng, n, scale=1.0):
    return scale * rng.lognormal(mean=np.log(1000), sigma=0.5, size=n)


def _runs(control, arm, names=("cubic", "hybla"), seeds=None):
    rows = [{"server.cc": names[0], "plt_ms": v, "seed": s}
            for v, s in zip(control, seeds if seeds is not None else range(len(control)))]
    rows += [{"server.cc": names[1], "plt_ms": v, "seed": s}
             for v, s in zip(arm, seeds if seeds is not None else range(len(arm)))]
    return pd.DataFrame(rows)


def test_quantile_ci_covers_the_true_value():
    rng = np.random.default_rng(42)
    x = rng.normal(0, 1, 500)
    e = stats.bootstrap_ci(x, "p90", n_resamples=10_000, seed=1)
    true_p90 = st.norm.ppf(0.9)
    assert e.n == 500 and e.low < e.value < e.high
    assert e.covers(true_p90)
    assert e.high - e.low < 0.4  # and it is not uselessly wide
    # the same seed gives the same interval; another seed a slightly different one
    assert stats.bootstrap_ci(x, 0.9, n_resamples=10_000, seed=1) == e
    assert stats.bootstrap_ci(x, 0.9, n_resamples=10_000, seed=2) != e


def test_quantile_ci_coverage_is_near_nominal():
    # 200 samples of an exponential: the 95 % interval of the median should
    # cover ln 2 in roughly 95 % of them (percentile bootstrap is a little
    # liberal at small n; allow 88 %..100 %)
    rng = np.random.default_rng(7)
    hits = sum(stats.bootstrap_ci(rng.exponential(1.0, 200), "median", n_resamples=2000, seed=i).covers(math.log(2))
               for i in range(200))
    assert 0.88 <= hits / 200 <= 1.0


def test_mean_and_degenerate_samples():
    e = stats.bootstrap_ci([2.0, 4.0, 6.0, 8.0], "mean", n_resamples=2000, seed=0)
    assert e.value == 5.0 and 2.0 <= e.low <= e.value <= e.high <= 8.0
    one = stats.bootstrap_ci([3.0, float("nan")], "p90")
    assert (one.value, one.low, one.high, one.n) == (3.0, 3.0, 3.0, 1)
    empty = stats.bootstrap_ci([], "p50")
    assert empty.n == 0 and math.isnan(empty.value)
    with pytest.raises(ValueError):
        stats.bootstrap_ci([1, 2], "p190")


def test_summarize_per_group():
    rng = np.random.default_rng(3)
    df = _runs(rng.normal(100, 5, 50), rng.normal(200, 5, 40))
    s = stats.summarize(df, "plt_ms", "server.cc", n_resamples=2000)
    assert list(s["server.cc"]) == ["cubic", "hybla"] and list(s["n"]) == [50, 40]
    for _, r in s.iterrows():
        for k in ("p50", "p90", "mean"):
            assert r[f"{k}_low"] <= r[k] <= r[f"{k}_high"]
    assert s.loc[0, "p50_high"] < s.loc[1, "p50_low"]
    whole = stats.summarize(df, "plt_ms", n_resamples=500)
    assert len(whole) == 1 and whole.loc[0, "n"] == 90


def test_shifted_distribution_is_significant_and_the_ci_covers_the_shift():
    # the arm is the control's distribution scaled by 1.2: every quantile is
    # exactly 20 % higher, so the true percent difference of p90 and of the
    # median is +20 %
    rng = np.random.default_rng(11)
    control, arm = _lognormal(rng, 300), _lognormal(rng, 300, scale=1.2)
    mw = stats.mann_whitney(control, arm)
    assert mw["test"] == "mann-whitney" and mw["p_value"] < 1e-3
    for q in ("median", "p90"):
        e = stats.percent_diff(control, arm, q, n_resamples=10_000, seed=5)
        assert e.covers(20.0), (q, e)
        assert e.low > 0  # excludes "no difference"
    assert stats.cliffs_delta(control, arm) > 0.1

    out = stats.compare(_runs(control, arm), "plt_ms", "server.cc", "cubic", n_resamples=5000)
    assert len(out) == 1
    r = out.iloc[0]
    assert r["arm"] == "hybla" and r["control"] == "cubic" and not r["paired"] and r["test"] == "mann-whitney"
    assert r["n_control"] == r["n_arm"] == 300 and r["significant"]
    assert r["p90_diff_low"] <= 20.0 <= r["p90_diff_high"]
    assert r["median_diff_low"] <= 20.0 <= r["median_diff_high"]
    assert r["effect"] == "Cliff's delta" and r["effect_size"] > 0


def test_identical_arms_are_not_significant_and_the_ci_covers_zero():
    rng = np.random.default_rng(12)
    control, arm = _lognormal(rng, 200), _lognormal(rng, 200)
    out = stats.compare(_runs(control, arm), "plt_ms", "server.cc", "cubic", n_resamples=5000)
    r = out.iloc[0]
    assert r["p_value"] > 0.05 and not r["significant"]
    assert r["p90_diff_low"] < 0 < r["p90_diff_high"]
    assert r["median_diff_low"] < 0 < r["median_diff_high"]
    assert abs(r["effect_size"]) < 0.147 and r["effect_magnitude"] == "negligible"
    # the very same values in both arms: exactly no difference
    same = stats.compare(_runs(control, control), "plt_ms", "server.cc", "cubic", n_resamples=1000).iloc[0]
    assert same["p_value"] == pytest.approx(1.0) and same["effect_size"] == 0.0
    assert same["p90_diff_pct"] == 0.0 and same["p90_diff_low"] <= 0 <= same["p90_diff_high"]


def test_paired_constant_offset():
    # every pair differs by exactly +50 ms: Wilcoxon's exact p for 12 pairs
    # all of one sign is 2 / 2^12, and the rank-biserial r is +1
    rng = np.random.default_rng(13)
    control = rng.uniform(500, 1500, 12)
    arm = control + 50.0
    w = stats.wilcoxon_signed_rank(control, arm)
    assert w["p_value"] == pytest.approx(2 / 2 ** 12)
    assert stats.rank_biserial_paired(control, arm) == 1.0
    assert stats.rank_biserial_paired(arm, control) == -1.0
    # ...while the same values taken as independent samples overlap heavily
    assert stats.mann_whitney(control, arm)["p_value"] > 0.3

    # shuffled rows, and seeds as the pairing key: the pairs are found again
    seeds = [f"s{i}" for i in range(12)]
    df = _runs(control, arm, seeds=seeds).sample(frac=1.0, random_state=1)
    r = stats.compare(df, "plt_ms", "server.cc", "cubic", paired_key="seed", n_resamples=5000).iloc[0]
    assert r["paired"] and r["test"] == "wilcoxon" and r["pair_key"] == "seed"
    assert r["n_pairs"] == 12 and r["dropped"] == 0
    assert r["p_value"] == pytest.approx(2 / 2 ** 12) and r["significant"]
    assert r["effect"].startswith("rank-biserial") and r["effect_size"] == 1.0
    true_median_pct = 100 * 50.0 / np.median(control)
    assert r["median_diff_pct"] == pytest.approx(true_median_pct)
    assert r["median_diff_low"] > 0
    # the paired percent-difference CI is positive: every resample's arm is higher
    e = stats.percent_diff(control, arm, "p90", paired=True, n_resamples=5000, seed=0)
    assert e.low > 0 and e.n == 12


def test_pairing_counts_what_it_drops():
    df = pd.DataFrame([
        {"arm": "a", "seed": 1, "v": 1.0}, {"arm": "a", "seed": 2, "v": 2.0}, {"arm": "a", "seed": 3, "v": 3.0},
        {"arm": "a", "seed": 4, "v": float("nan")},  # no value: cannot pair
        {"arm": "b", "seed": 1, "v": 1.5}, {"arm": "b", "seed": 2, "v": 2.5}, {"arm": "b", "seed": 4, "v": 4.5},
        {"arm": "b", "seed": 5, "v": 5.5},  # no partner
    ])
    p = stats.pair_rows(df, "v", "arm", "a", "b", "seed")
    assert p.keys == [1, 2] and p.n_pairs == 2
    assert list(p.control) == [1.0, 2.0] and list(p.arm) == [1.5, 2.5]
    assert p.dropped_control == 2 and p.dropped_arm == 2
    assert "2 pairs by seed" in p.describe() and "dropped 2 control and 2 arm" in p.describe()
    # a key repeated within one arm is ambiguous
    dup = pd.concat([df, pd.DataFrame([{"arm": "b", "seed": 1, "v": 9.0}])])
    assert stats.pair_rows(dup, "v", "arm", "a", "b", "seed").keys == [2]


def test_cliffs_delta_known_values():
    assert stats.cliffs_delta([1, 2, 3], [4, 5, 6]) == 1.0
    assert stats.cliffs_delta([4, 5, 6], [1, 2, 3]) == -1.0
    # arm [2, 4] vs control [1, 3]: cross-pairs (2>1, 2<3, 4>1, 4>3) -> (3 - 1) / 4
    assert stats.cliffs_delta([1, 3], [2, 4]) == pytest.approx(0.5)
    assert stats.magnitude(0.1) == "negligible" and stats.magnitude(-0.5) == "large"


def test_holm_on_a_known_example():
    # sorted p 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04;
    # made monotone: 0.02, 0.03, 0.06, 0.06
    adj = stats.holm([0.01, 0.04, 0.03, 0.005])
    assert adj == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert list(adj < 0.05) == [True, False, False, True]
    assert stats.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    nan = stats.holm([0.01, float("nan"), 0.02])
    assert nan[0] == pytest.approx(0.02) and math.isnan(nan[1]) and nan[2] == pytest.approx(0.02)
    assert "Holm" in stats.holm_note(3)


def test_compare_several_arms_is_holm_corrected():
    rng = np.random.default_rng(21)
    rows = []
    for cc, scale in (("cubic", 1.0), ("hybla", 1.3), ("bbr", 1.0), ("reno", 1.02)):
        rows += [{"server.cc": cc, "plt_ms": v} for v in _lognormal(rng, 60, scale)]
    out = stats.compare(pd.DataFrame(rows), "plt_ms", "server.cc", "cubic", n_resamples=2000)
    assert list(out["arm"]) == ["hybla", "bbr", "reno"]
    assert (out["p_holm"] >= out["p_value"]).all()
    assert out["p_holm"].to_numpy() == pytest.approx(stats.holm(out["p_value"]))
    assert list(out["significant"]) == [True, False, False]
    assert "3 comparisons" in out.attrs["multiple_comparisons"] and "Holm" in out.attrs["multiple_comparisons"]


def test_compare_with_few_runs_says_so():
    df = _runs([1000.0, 1100.0], [2000.0, 2100.0])
    r = stats.compare(df, "plt_ms", "server.cc", "cubic", n_resamples=500).iloc[0]
    # 2 vs 2: the exact Mann-Whitney p cannot go below 2/6
    assert r["min_p"] == pytest.approx(1 / 3) and r["p_value"] == pytest.approx(1 / 3)
    assert not r["significant"] and "too few runs" in r["note"]
    with pytest.raises(ValueError):
        stats.compare(df, "plt_ms", "server.cc", "bbr")


def test_scipys_bootstrap_gives_the_numbers_the_hand_written_one_gave():
    """bootstrap_ci and percent_diff are scipy.stats.bootstrap's percentile
    intervals since issue 40; on these samples they give, to the last digit,
    what the hand-written resampling before them gave (its numbers, computed
    with the code of 1705d38 and kept here)."""
    x = np.random.default_rng(3).lognormal(7, 0.4, 20)
    a = x * np.random.default_rng(4).lognormal(-0.05, 0.1, 20)
    got = [stats.bootstrap_ci(x, "p90", seed=0), stats.percent_diff(x, a, "p90", paired=True, seed=0),
           stats.percent_diff(x, a, "median", paired=False, seed=0)]
    before = [(1695.8045484107745, 1044.1393539345302, 4143.100943686947),
              (-8.390503235925184, -15.08406118609284, 12.051565646535375),
              (-2.51263142135377, -16.92155466010426, 15.69861294876131)]
    for e, (value, low, high) in zip(got, before):
        assert (e.value, e.low, e.high) == pytest.approx((value, low, high), rel=1e-12)
