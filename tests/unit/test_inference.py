"""One interval per claim that agrees with its test (analysis.inference):
the interval excludes 0 exactly when the test's p is below alpha, holds
the estimate, moves with the data's scale, inverts the very test whose p
scipy and analysis.pairtests give, and covers the true effect as often as
its level promises."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from scipy import stats as sst

from tortoiselab.analysis import inference as inf
from tortoiselab.analysis import pairtests

ALPHAS = (0.05, 0.05 / 10)
B = 199  # random swaps in the property tests (speed); the exact cases enumerate anyway


@hs.composite
def paired_samples(draw, n_min=2, n_max=40):
    """Pairs on a lognormal level with a shift and within-pair noise; some
    rounded (ties), some with identical pairs, some all identical."""
    n = draw(hs.integers(n_min, n_max))
    rng = np.random.default_rng(draw(hs.integers(0, 2 ** 32 - 1)))
    shift = draw(hs.sampled_from([0.0, 0.02, -0.05, 0.3]))
    spread = draw(hs.sampled_from([0.0, 0.01, 0.1, 0.5]))
    c = np.exp(rng.normal(7, 0.2, n))
    a = c * np.exp(shift + rng.normal(0, spread, n))
    kind = draw(hs.sampled_from(["plain", "rounded", "some equal", "all equal"]))
    if kind == "rounded":
        c, a = np.round(c, -1), np.round(a, -1)
    elif kind == "some equal":
        a = np.where(rng.random(n) < 0.3, c, a)
    elif kind == "all equal":
        a = c.copy()
    return c, a


def _check(r: inf.Inference):
    assert r.significant() == (r.p_value < r.alpha), r
    assert r.low <= r.estimate <= r.high, r
    assert r.min_p <= r.p_value + 1e-12 and 0 <= r.p_value <= 1


def _shifted_same(r: inf.Inference, s: inf.Inference, k: float, tol: float):
    """s (the arm times exp(k)) is r moved by k, where neither bound was
    moved to 0 to agree with the p at 0 (that point does not move with the data)."""
    assert s.estimate == pytest.approx(r.estimate + k, abs=tol)
    for x, y in ((r.low, s.low), (r.high, s.high)):
        if math.isinf(x) or math.isinf(y):
            assert x == y - k or abs(x) < 1e-6 or abs(y) < 1e-6
        elif abs(x) > 1e-6 and abs(y) > 1e-6:
            assert y == pytest.approx(x + k, abs=tol)


@given(paired_samples(), hs.sampled_from(ALPHAS), hs.floats(-2, 2))
@settings(max_examples=150, deadline=None)
def test_paired_location_is_consistent_and_scale_equivariant(sample, alpha, k):
    c, a = sample
    r = inf.paired_location(c, a, alpha)
    _check(r)
    _shifted_same(r, inf.paired_location(c, a * math.exp(k), alpha), k, 1e-9)


@given(paired_samples(n_max=24), hs.sampled_from(ALPHAS), hs.floats(-2, 2))
@settings(max_examples=40, deadline=None)
def test_paired_quantile_is_consistent_and_scale_equivariant(sample, alpha, k):
    c, a = sample
    r = inf.paired_quantile(c, a, alpha=alpha, n_resamples=B)
    _check(r)
    _shifted_same(r, inf.paired_quantile(c, a * math.exp(k), alpha=alpha, n_resamples=B), k, 1e-5)


@given(paired_samples(n_max=16), hs.integers(0, 6), hs.sampled_from(ALPHAS))
@settings(max_examples=30, deadline=None)
def test_between_groups_is_consistent_with_unequal_groups(sample, drop, alpha):
    c, a = sample
    a = a[:max(2, a.size - drop)]
    r = inf.between_groups_quantile(c, a, alpha=alpha, n_resamples=B)
    _check(r)
    _shifted_same(r, inf.between_groups_quantile(c, a * 3.0, alpha=alpha, n_resamples=B), math.log(3.0), 1e-5)


@given(paired_samples(n_max=40))
@settings(max_examples=100, deadline=None)
def test_the_p_at_zero_is_scipys_wilcoxon_or_the_exact_sign_flip(sample):
    c, a = sample
    x = np.log(a) - np.log(c)
    r = inf.paired_location(c, a)
    if np.all(x == 0):
        assert (r.estimate, r.p_value) == (0.0, 1.0) and not r.significant()
    elif x.size < 6:
        assert r.p_value == pairtests.sign_flip_test(x)["p_value"] and r.estimate == pytest.approx(x.mean())
    else:
        xr = np.round(x, inf.RANK_DECIMALS)  # ties in exact arithmetic are ties (pairs with the same ratio)
        distinct = np.all(xr != 0) and np.unique(np.abs(xr)).size == xr.size
        if distinct:  # scipy's exact (n <= 50) or normal p, as it gives it
            assert r.p_value == pytest.approx(sst.wilcoxon(x).pvalue, rel=1e-12)
        else:  # zeros or ties: Pratt's handling (as stats.wilcoxon_signed_rank), scipy's permutation p up to 13
            assert r.p_value == pytest.approx(sst.wilcoxon(xr, zero_method="pratt").pvalue, rel=1e-9)


def test_the_wilcoxon_interval_is_the_hodges_lehmann_one():
    """Its bounds are Walsh averages; the test (scipy's) accepts an effect
    just inside each bound and rejects one just outside; the estimate is
    the median of the Walsh averages."""
    rng = np.random.default_rng(4)
    for n in (7, 15, 30):
        x = rng.normal(0.05, 0.1, n)
        r = inf.paired_location(np.ones(n), np.exp(x))
        walsh = np.sort([(x[i] + x[j]) / 2 for i in range(n) for j in range(i, n)])
        assert r.estimate == pytest.approx(np.median(walsh))
        for bound, inward in ((r.low, 1), (r.high, -1)):
            k = int(np.argmin(np.abs(walsh - bound)))
            assert walsh[k] == pytest.approx(bound, abs=1e-12)
            gap_in = abs(walsh[k + inward] - walsh[k]) / 2
            gap_out = abs(walsh[k - inward] - walsh[k]) / 2
            assert sst.wilcoxon(x - (bound + inward * gap_in)).pvalue >= 0.05
            assert sst.wilcoxon(x - (bound - inward * gap_out)).pvalue < 0.05


def test_few_pairs_give_an_unbounded_interval_and_say_so():
    c = np.array([100.0, 120, 90, 110, 105])
    r = inf.paired_location(c, 0.5 * c)  # every pair halved: still p = 2/2^5
    assert r.p_value == pytest.approx(2 / 32) and (r.low, r.high) == (-math.inf, math.inf)
    assert "unbounded" in r.test and r.pct()[1:] == (-100.0, math.inf)
    loose = inf.paired_location(c, 0.5 * c, alpha=0.1)  # 2/2^5 < 0.1: bounded, and excludes 0
    assert loose.significant() and math.isfinite(loose.low) and loose.high < 0
    assert inf.paired_location(c[:1], c[:1]).test == "one pair: no test"


def _brute_paired_p(c, a, q=0.9):
    """The paired permutation p of the p90 ratio by a loop over every swap pattern."""
    obs = abs(math.log(np.quantile(a, q) / np.quantile(c, q)))
    hits = 0
    patterns = list(itertools.product([False, True], repeat=len(c)))
    for s in patterns:
        s = np.array(s)
        t = math.log(np.quantile(np.where(s, c, a), q) / np.quantile(np.where(s, a, c), q))
        hits += abs(t) >= obs - 1e-10
    return hits / len(patterns)


def _brute_between_p(c, a, q=0.9):
    pooled = np.concatenate([c, a])
    obs = abs(math.log(np.quantile(a, q) / np.quantile(c, q)))
    splits = list(itertools.combinations(range(pooled.size), c.size))
    hits = 0
    for idx in splits:
        rest = np.setdiff1d(np.arange(pooled.size), idx)
        hits += abs(math.log(np.quantile(pooled[rest], q) / np.quantile(pooled[list(idx)], q))) >= obs - 1e-10
    return hits / len(splits)


def test_the_quantile_tests_p_is_their_enumeration_by_hand():
    rng = np.random.default_rng(5)
    for n in (3, 6, 8):
        c = rng.lognormal(7, 0.3, n)
        a = c * rng.lognormal(-0.1, 0.1, n)
        r = inf.paired_quantile(c, a)
        assert r.exact and r.p_value == pytest.approx(_brute_paired_p(c, a)) and r.min_p == 2 / 2 ** n
        assert r.estimate == pytest.approx(math.log(np.quantile(a, 0.9) / np.quantile(c, 0.9)))
        g = inf.between_groups_quantile(c[:7], a[:6])  # C(13, 7) = 1716 splits at most: every one
        assert g.exact and g.p_value == pytest.approx(_brute_between_p(c[:7], a[:6]))
    assert inf.paired_quantile(c, c).p_value == 1


def test_the_interval_holds_exactly_the_effects_its_test_accepts():
    """Just inside a bound the same test (arm scaled by exp(-d)) accepts,
    just outside it rejects: the interval is the test's, not a bootstrap's."""
    rng = np.random.default_rng(8)
    c = rng.lognormal(7, 0.2, 30)
    a = c * rng.lognormal(-0.1, 0.05, 30)
    r = inf.paired_quantile(c, a, n_resamples=999, seed=3)
    assert r.significant() and not r.exact and r.min_p == pytest.approx(1 / 1000)
    for bound, inward in ((r.low, 1), (r.high, -1)):
        for d, accept in ((bound + inward * 1e-4, True), (bound - inward * 1e-4, False)):
            p = inf.paired_quantile(c, a * math.exp(-d), n_resamples=999, seed=3).p_value
            assert (p >= 0.05) == accept, (bound, d, p)


def test_the_vectorised_p_is_the_single_test_p():
    rng = np.random.default_rng(9)
    for n in (8, 20):
        c = rng.lognormal(7, 0.2, (5, n))
        a = c * rng.lognormal(-0.05, 0.1, (5, n))
        many = inf.paired_quantile_pvalues(c, a, 0.9, 300, np.random.default_rng(11))
        one = [inf.paired_quantile(c[i], a[i], n_resamples=300, seed=11).p_value for i in range(5)]
        assert many == pytest.approx(one)
        groups = inf.between_groups_quantile_pvalues(c, a[:, :n - 2], 0.9, 300, np.random.default_rng(11))
        assert groups == pytest.approx([inf.between_groups_quantile(c[i], a[i, :n - 2], n_resamples=300,
                                                                    seed=11).p_value for i in range(5)])
    for n in (4, 6, 15, 60):
        x = np.round(rng.normal(0.02, 0.05, (6, n)), 2)  # ties and zeros
        p, est = inf.paired_location_pvalues(x)
        one = [inf.paired_location(np.ones(n), np.exp(x[i])) for i in range(6)]
        assert p == pytest.approx([r.p_value for r in one], rel=1e-9)
        assert est == pytest.approx([r.estimate for r in one], abs=1e-9)


def test_the_normal_tail_reaches_below_the_resamples_floor_and_keeps_its_size():
    rng = np.random.default_rng(2)
    u = rng.normal(7, 0.3, (300, 40))
    c, a = np.exp(u + rng.normal(0, 0.1, (300, 40))), np.exp(u + rng.normal(0, 0.1, (300, 40)))
    counted = inf.paired_quantile_pvalues(c, 0.6 * a, 0.9, 200, rng)
    assert counted.min() >= 1 / 201
    assert np.mean(inf.paired_quantile_pvalues(c, 0.6 * a, 0.9, 200, rng, normal_tail=True) < 0.002) > 0.5
    assert np.mean(inf.paired_quantile_pvalues(c, a, 0.9, 200, rng, normal_tail=True) < 0.05) <= 0.05 + 0.025


def _coverage(fn, n_sims: int, make) -> float:
    rng = np.random.default_rng(12)
    hits = 0
    for _ in range(n_sims):
        c, a, truth = make(rng)
        r = fn(c, a)
        hits += r.low <= truth <= r.high
    return hits / n_sims


def test_the_95_intervals_cover_the_true_effect():
    """Pairs whose arm, divided by the true ratio, is exchangeable with its
    control: each test's 95 % interval covers the true log ratio (and, with
    none, 0) at least about 95 % of the time (300 samples: standard error 1.3 points)."""
    def paired(n, shift):
        def make(rng):
            u = rng.normal(7, 0.2, n)
            return np.exp(u + rng.normal(0, 0.05, n)), np.exp(u + shift + rng.normal(0, 0.05, n)), shift
        return make

    def groups(rng):
        return np.exp(rng.normal(7, 0.2, 6)), np.exp(rng.normal(7.1, 0.2, 6)), 0.1
    assert _coverage(inf.paired_location, 300, paired(20, 0.0)) >= 0.93
    assert _coverage(inf.paired_location, 300, paired(9, -0.05)) >= 0.93
    assert _coverage(inf.paired_quantile, 300, paired(8, 0.1)) >= 0.93
    assert _coverage(inf.between_groups_quantile, 150, groups) >= 0.91


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="positive"):
        inf.paired_location([1.0, 2.0], [0.0, 1.0])
    with pytest.raises(ValueError, match="one value per pair"):
        inf.paired_quantile([1.0, 2.0], [1.0])
