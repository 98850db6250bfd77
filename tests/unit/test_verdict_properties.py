"""Properties of the verdict rule (docs/statistics.md) on generated
intervals and measurements: a label never contradicts the numbers it is
read from. The rule alone (measure.read_interval and the judges), then
whole claims on generated pairs (effects, spreads, n, ties), at a family's
level (registry.family_level, judge_claim), and composite rows
(claims.tortoise.weakest): value, interval, p and power of one comparison."""

import math

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as hs

from tortoiselab import studies as S
from tortoiselab.studies.claims.tortoise import weakest
from tortoiselab.studies.measure import at_level, interval_of, read_interval, tie_reason
from tortoiselab.studies.model import claim
from tortoiselab.studies.registry import family_level, judge_claim, part_label, size_problem, tie_of

bound = hs.one_of(hs.floats(-60, 60, allow_nan=False), hs.just(math.inf), hs.just(-math.inf))
size = hs.floats(0.5, 30, allow_nan=False)


@hs.composite
def intervals(draw):
    a, b = draw(bound), draw(bound)
    assume(not (math.isinf(a) and a == b))
    return min(a, b), max(a, b)


@hs.composite
def claimed(draw):
    """A claimed range on one side of 0: (sign, (lo, hi))."""
    sign = draw(hs.sampled_from((-1, 1)))
    near, far = sorted((draw(size), draw(size)))
    lo, hi = sorted((sign * near, sign * far))
    return sign, (lo, hi)


def _overlaps(low, high, lo, hi):
    return low <= hi and high >= lo


@given(intervals(), claimed())
@settings(max_examples=400, deadline=None)
def test_a_label_never_contradicts_its_interval(iv, cl):
    (low, high), (sign, (lo, hi)) = iv, cl
    label, why = read_interval(low, high, sign, (lo, hi), lo if sign > 0 else hi)
    claimed_side = high < 0 if sign < 0 else low > 0
    other_side = low > 0 if sign < 0 else high < 0
    holds_zero = low <= 0 <= high
    if label == "agree":
        assert claimed_side and _overlaps(low, high, lo, hi)  # never agree where it misses the claimed range
    if label in ("larger than claimed", "smaller than claimed"):
        assert claimed_side and not _overlaps(low, high, lo, hi)
    if label == "inconclusive":
        assert holds_zero and _overlaps(low, high, lo, hi)  # never inconclusive where it excludes the claim
    if label == "disagree":
        assert other_side or (holds_zero and not _overlaps(low, high, lo, hi))
    assert label in S.VERDICTS and why


@given(intervals(), hs.sampled_from((-1, 1)), size)
@settings(max_examples=300, deadline=None)
def test_a_direction_claim_agrees_exactly_when_the_interval_is_on_its_side(iv, sign, interest):
    low, high = iv
    label, _ = read_interval(low, high, sign, None, sign * interest)
    assert (label == "agree") == (high < 0 if sign < 0 else low > 0)
    if label == "inconclusive":
        assert low <= 0 <= high and (low <= -interest if sign < 0 else high >= interest)


@given(intervals(), hs.sampled_from(("lower", "higher")), size)
@settings(max_examples=300, deadline=None)
def test_a_direction_judge_names_no_size_to_reject(iv, better, planned):
    """A direction claim (issue 51): agree exactly when the interval is on
    the claimed side, disagree exactly when it is on the other side,
    inconclusive whenever it holds 0, whatever effect the planner sizes it
    for (no threshold the seed does not state)."""
    low, high = iv
    judge, _ = S.direction(better, effect=planned)
    label = judge(S.Measurement((low + high) / 2 if math.isfinite(low + high) else 0.0, low, high, 0.5, 10))[0]
    lower = better == "lower"
    assert (label == "agree") == (high < 0 if lower else low > 0)
    assert (label == "disagree") == (low > 0 if lower else high < 0)
    assert (label == "inconclusive") == (low <= 0 <= high)


@given(intervals(), size)
@settings(max_examples=300, deadline=None)
def test_an_equivalence_claim_reads_its_margin(iv, margin):
    low, high = iv
    judge, _ = S.equivalent(margin)
    label = judge(S.Measurement((low + high) / 2 if math.isfinite(low + high) else 0.0, low, high, 0.5, 10))[0]
    assert (label == "agree") == (-margin <= low and high <= margin)
    assert (label == "disagree") == (low > margin or high < -margin)


def _claim(judge_rule, **kw):
    return claim("tortoise", "x", "seed", "text", "tortoise", "plt_ms", lambda df: None, judge_rule, **kw)


@hs.composite
def measurements(draw):
    """A paired measurement: n pairs, a true effect, spread between pairs
    and within them, a share of tied pairs, and its statistic."""
    n = draw(hs.integers(2, 30))
    effect = draw(hs.sampled_from((-0.3, -0.08, -0.03, 0.0, 0.05, 0.2)))
    sd = draw(hs.sampled_from((0.0, 0.02, 0.1, 0.3)))
    tied = draw(hs.floats(0, 1))
    statistic = draw(hs.sampled_from(("ratio", "p90")))
    rng = np.random.default_rng(draw(hs.integers(0, 2 ** 16)))
    c = rng.lognormal(7, 0.3, n)
    a = c * np.exp(effect + rng.normal(0, sd, n))
    a = np.where(rng.uniform(size=n) < tied, c, a)
    return S.Measurement(0.0, n=n, control=tuple(c), arm=tuple(a), statistic=statistic, tie=tie_reason(c, a))


@given(measurements(), hs.integers(1, 12),
       hs.sampled_from(((-7, -5), (-2.5, -1.5), (3, 8))))
@settings(max_examples=40, deadline=None)
def test_a_claim_on_generated_pairs_is_labelled_by_its_own_interval(m, family, rng_claim):
    m = at_level(m, 0.05)  # measured as change() measures: value, interval and p of its test
    judge_rule = S.improvement(*rng_claim, better="lower" if rng_claim[0] < 0 else "higher")
    others = [S.Measurement(-1, -2, -0.5, 0.01, 10) for _ in range(family - 1)]
    c = _claim(judge_rule)
    out = family_level((c,) + tuple(_claim(judge_rule) for _ in others), [m, *others])[0]
    v = judge_claim(c, out)
    # a tie at 0.05 stays a tie at the family's level (found by this test: 23 of 30 pairs tied, the
    # other 7 all higher, the CI 0 at 0.05 but not at 0.05 / 3, where it was judged "disagree")
    if tie_of(m):
        assert v.verdict == "not testable here"  # pairs tied by construction: never a finding
        return
    if size_problem(m):  # a p90 test that does not hold its size on these pairs (issue 51): out of the family
        assert v.verdict == "not testable here" and "does not hold its size" in v.why
        return
    level = 0.05 / max(1, family)
    assert out.level == level
    low, high = interval_of(out)
    assert low <= out.value <= high
    if out.p_value is not None:
        assert (out.p_value < level) == (not (low <= 0 <= high))  # interval and test agree
    lo, hi = rng_claim
    if v.verdict == "agree":
        assert _overlaps(low, high, lo, hi) and not (low <= 0 <= high)
    if v.verdict == "inconclusive":
        assert low <= 0 <= high and _overlaps(low, high, lo, hi)


def test_a_composite_row_is_one_comparison():
    rng = np.random.default_rng(1)

    def meas(effect):
        c = rng.lognormal(7, 0.2, 20)
        a = c * np.exp(effect + rng.normal(0, 0.05, 20))
        return S.change(_frame(c, a), "plt_ms", "server.cc", "htcp", "hybla", "p90")
    ms = {("india", "hybla"): meas(-0.2), ("india", "yeah"): meas(-0.01), ("china", "hybla"): meas(0.15)}
    w = weakest(ms, "each against htcp")
    one = ms["china", "hybla"]  # significantly the other way: it refutes "all improve"
    assert (w.value, w.low, w.high, w.p_value, w.control) == (one.value, one.low, one.high, one.p_value, one.control)
    ms.pop(("china", "hybla"))
    w = weakest(ms, "each against htcp")
    biggest_p = max(ms.values(), key=lambda m: m.p_value)
    assert (w.value, w.p_value, w.control) == (biggest_p.value, biggest_p.p_value, biggest_p.control)


def _frame(c, a):
    import pandas as pd
    rows = []
    for i, (x, y) in enumerate(zip(c, a)):
        for cc, v in (("htcp", x), ("hybla", y)):
            rows.append({"ok": True, "server.cc": cc, "cond": f'{{"server.cc": "{cc}"}}', "repetition": i,
                         "plt_ms": v})
    return pd.DataFrame(rows)


# the case the property test above found: 30 pairs, 24 tied, 5 higher and 1 lower (the values of the draw)
TIE_CONTROL = (1138.787, 1054.022, 1328.927, 1131.693, 933.834, 1222.286, 1621.651, 1456.985, 887.918, 750.225,
               909.612, 1110.314, 545.930, 1026.964, 754.629, 880.350, 931.431, 997.358, 1240.772, 1499.301,
               1055.151, 1652.326, 898.244, 1218.594, 1438.047, 1128.003, 877.389, 831.709, 955.928, 1171.521)
TIE_ARM = {7: 1293.672, 11: 1614.168, 13: 1198.416, 17: 1657.702, 18: 1966.439, 27: 946.050}


def test_a_tie_at_alpha_stays_untestable_at_the_familys_level():
    """A measurement that is a tie by construction at 0.05 (out of the
    family) is not measured again at the family's stricter level, where its
    interval left 0 and the claim was judged "disagree"."""
    arm = tuple(TIE_ARM.get(i, c) for i, c in enumerate(TIE_CONTROL))
    m = at_level(S.Measurement(0.0, n=30, control=TIE_CONTROL, arm=arm, statistic="ratio",
                               tie=tie_reason(np.array(TIE_CONTROL), np.array(arm))), 0.05)
    assert tie_of(m) and not m.tie  # a tie by its interval, not by identical pairs
    judge_rule = S.improvement(-7, -5, better="lower")
    others = [S.Measurement(-1, -2, -0.5, 0.01, 10) for _ in range(2)]
    c = _claim(judge_rule)
    out = family_level((c, _claim(judge_rule), _claim(judge_rule)), [m, *others])
    assert judge_claim(c, out[0]).verdict == "not testable here"
    assert out[1].level == 0.05 / 2  # the family: the two claims that are not ties
    stricter = at_level(m, 0.05 / 3)
    # what the family's level did to it before issue 51 (the tie read off an interval of exactly 0); now the tie is
    # read off the pairs (most the same, the median change 0), at any level
    assert tie_of(stricter)


def _part(low, high, p=0.5):
    return S.Measurement((low + high) / 2 if math.isfinite(low + high) else 0.0, low, high, p, 10)


@given(hs.lists(intervals(), min_size=1, max_size=6), size, hs.integers(1, 12))
@settings(max_examples=300, deadline=None)
def test_a_composite_row_is_disagree_when_any_part_rejects_the_claimed_size(ivs, interest, family):
    """An "every part improves" row (weakest) is judged by the rule on each
    part: disagree when any part is disagree (significant the wrong way, or
    holding 0 and excluding the claimed size), else inconclusive when any
    part is (after a part that is a tie by construction: not testable);
    the row shows one part's value, interval and p."""
    judge_rule = S.direction("lower", "every pair", effect=interest)
    parts = {(f"part{i}",): _part(lo, hi, p=0.01 * (i + 1)) for i, (lo, hi) in enumerate(ivs)}
    composite = weakest(parts, "each part")
    c = _claim(judge_rule)
    out = family_level((c,), [composite])[0]
    v = judge_claim(c, out)
    labels = [part_label(m, judge_rule[0])[0] for m in parts.values()]
    assert (v.verdict == "disagree") == ("disagree" in labels)
    if not {"disagree", "not testable here"} & set(labels):
        assert (v.verdict == "inconclusive") == ("inconclusive" in labels)
    if v.verdict == "agree":
        assert set(labels) == {"agree"}
    shown = [m for m in parts.values() if (m.low, m.high, m.p_value) == (v.low, v.high, v.p_value)
             or (math.isinf(m.low) and v.low is None) or (math.isinf(m.high) and v.high is None)]
    assert shown, (v.low, v.high, v.p_value)


def test_a_part_that_rejects_the_claim_decides_the_composite_row():
    """Two parts significantly the other way (each "disagree" alone), while
    another part holds 0 (inconclusive, the largest p). Before issue 36 the
    largest p was shown and the row read inconclusive. (Until issue 51 a
    part holding 0 and excluding a 5 % gain was "disagree" too: a threshold
    the seed never states; a direction claim is now a significant change in
    the claimed direction, so only the other side refutes it.)"""
    rng = np.random.default_rng(7)

    def meas(effect, sd, n=20):
        c = rng.lognormal(7, 0.2, n)
        return S.change(_frame(c, c * np.exp(effect + rng.normal(0, sd, n))), "plt_ms", "server.cc", "htcp",
                        "hybla")
    ms = {("india", "hybla"): meas(-0.2, 0.03), ("india", "scalable"): meas(0.05, 0.01),
          ("india", "yeah"): meas(0.06, 0.01), ("china", "hybla"): meas(-0.03, 0.4, 8)}
    judge_rule = S.direction("lower", "every (market, arm) pair")
    c = _claim(judge_rule)
    out = family_level((c,), [weakest(ms, "each (market, arm) against htcp")])[0]
    alone = {k: judge_claim(c, m).verdict for k, m in zip(ms, family_level((c,) * len(ms), list(ms.values())))}
    assert alone[("india", "scalable")] == "disagree" and alone[("china", "hybla")] == "inconclusive", alone
    assert max(ms, key=lambda k: ms[k].p_value) == ("china", "hybla")  # what the row showed before
    v = judge_claim(c, out)
    assert v.verdict == "disagree", (v.measured, v.why)
    assert "india" in v.detail.split("shown, the part that decides")[1].split(";")[0]
