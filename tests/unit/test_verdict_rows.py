"""The rows issue 36 named, on their canned measurements
(tests/data/verdict-rows.json: the pairs each verdict is read from, a
composite row's parts each with theirs, from the reproduction of
2026-11-27 on grids powered and reduced, /work/repro2/results, the runs
REPRODUCTION.md was made from; made by scripts/verdict_rows.py), each with
the label its numbers support under the interval rule
(docs/statistics.md), and why. The labels before are in the comments."""

import json
import math
from pathlib import Path

import pytest

from tortoiselab.studies.measure import interval_of
from tortoiselab.studies.model import Measurement
from tortoiselab.studies.registry import STUDIES, at_family, deciding, judge_claim

DATA = json.loads((Path(__file__).resolve().parents[1] / "data" / "verdict-rows.json").read_text())
CLAIMS = {c.id: c for s in STUDIES.values() for c in s.claims}

# claim -> (the label now, why); before: the label REPRODUCTION.md gave before issue 36 (or on main before the
# composite, screen-tie and equivalence-power fixes, where those moved it)
EXPECTED = {
    # before: inconclusive ("underpowered") on +4.8 % [1.4, 7.7]; the interval of its own test at the family's
    # level holds 0 and excludes the claimed -7..-5 %: the data reject the claimed size
    "tortoise.india-desktop-cdt": ("disagree", "excludes the claimed"),
    # before: inconclusive with an interval [-58.2, -6.1] beside p 0.51; now the test's own interval holds 0
    "tortoise.china-desktop-cdt": ("inconclusive", "holds both 0 and the claimed effect"),
    # before: agree from a test with power 0.00; then inconclusive off the unstudentized p90 test's interval
    # [-24.2, 1.7]; the studentized test (issue 51) gives -12.5 % [-21.9, -3.2], p = 0.001
    "tortoise.china-desktop-cdt-rich": ("agree", "overlaps the claimed -7..-5 %"),
    # before: partly ("first in 1 of 2 geographies"), then (issue 36) disagree by a 5 % threshold the seed never
    # states ([-1.9, 8.0] "excludes any effect of -5 %"); issue 51: a direction claim is a significant change in
    # the claimed direction (no threshold), and with the studentized p90 test Hybla against H-TCP is +4.7 %
    # [0.40, 9.5], p = 0.0035: a significant change the other way
    "tortoise.hybla-best": ("disagree", "significant change the other way"),
    # before: inconclusive on Hybla's number with YeaH's p = 1, then disagree by the 5 % threshold; issue 51: India
    # Scalable against H-TCP (+0.00 %, 19 of 20 pairs the same within the loader's timing, the p90s the same) is
    # the identical slow start by construction, now detected for every comparison
    "tortoise.all-three-improve": ("not testable here", "india scalable: 19 of 20 pairs"),
    # before (main, 2026-11-27): inconclusive, then disagree by the 5 % threshold on India scalable / yeah; issue 51:
    # China YeaH over users (191 of 200 users the same, the p90s the same) is a tie by construction
    "tortoise.all-three-improve-users": ("not testable here", "a tie by construction"),
    # before: partly from sub-millisecond ordering; then inconclusive on the 2026-11-27 runs, where 9 of 11 medians lie
    # within 1 us but at most 5 are exactly equal: the same median within 10 us, a tie by construction
    "tortoise.screen-top3": ("not testable here", "a tie by construction"),
    "tortoise.screen-top3-rich": ("not testable here", "a tie by construction"),
    # before: agree at -20.5 / -12.6 / -12.1 % against the seed's 8 / 4 / 5 % (a median per-pair change whose
    # percentile interval reached 0.00); read since issue 39 on the seed's metric, the paired p90 ratio without
    # cache hits (13 pairs): their intervals lie beyond the claim
    "coalescing.gain-india": ("larger than claimed", "beyond the claimed -9..-7 %"),
    "coalescing.gain-us": ("larger than claimed", "beyond the claimed -5..-3 %"),
    "coalescing.gain-germany": ("larger than claimed", "beyond the claimed -6..-4 %"),
    # before: inconclusive, -42.3 % with a bootstrap interval [-62.7, -7.6] beside p 0.25; the test's own
    # interval held 0 and -5 % (-12.7 % [-22.1, 2.8], p = 0.016); the studentized p90 test (issue 51): -12.7 %
    # [-22.6, -0.12], p = 0.0062 against the level 0.00625 (4000 random swaps: at the edge)
    "tortoise.china-mobile-plt-users": ("agree", "overlaps the claimed -6..-2 %"),
    # before: agree at -25.4 % from a test with power 0.00 for the claimed 8 %: an effect several times the claim
    "coalescing.gain-india-users": ("larger than claimed", "beyond the claimed -9..-7 %"),
    # before: disagree at 100 %, though its own reason said the lab does not model what the seed measured
    "coalescing.reuse-ratio": ("not testable here", "does not model"),
    # the Chromium rows: before at n = 4 (smallest p 0.125), then 6 pairs (unbounded at the family's level); the
    # browser grid of 2026-11-27 has 30 pairs per market (the p90 ratio) and 90 runs per cache group
    "coalescing.gain-india-chromium": ("agree", "overlaps the claimed -9..-7 %"),
    "coalescing.gain-us-chromium": ("larger than claimed", "beyond the claimed -5..-3 %"),
    "coalescing.gain-germany-chromium": ("larger than claimed", "beyond the claimed -6..-4 %"),
    "coalescing.reuse-ratio-chromium": ("not testable here", "does not model"),
    "coalescing.cache-shrinks-gain-chromium": ("agree", "excludes 0 on the claimed side"),
    # before: inconclusive with "power unknown (no pairs)", the control rebuilt without its pairs (the label
    # did not move); now with them: 10 pairs, one at -66 %, so the Wilcoxon interval at the family's level holds
    # both 0 and -5 %
    "cubic_plus.plt-high-loss-better": ("inconclusive", "holds 0: no significant change on the claimed side"),
    # before: partly, then "not testable here" by an override in its claim file (34 of 35 5 KB pairs identical),
    # which is not the documented tie (every pair identical); issue 51: 7.8 pp [2.8, 16.2] at 0.05, significant in
    # the claimed direction at the family's level
    "cubic_plus.larger-objects-gain-more": ("agree", "excludes 0 on the claimed side"),
    # before: inconclusive on exact copies, then "not testable here" by an "exact repeats" override; issue 51:
    # exact runs are read one way in every study: one pair per condition, 0.00 % and -0.71 %, so CUBIC does not
    # outperform in every condition
    "cubic_plus.delay-large-cubic-wins": ("disagree", "is not wholly lower"),
    # before: inconclusive at -13.3 percentage points, then (2026-11-26 runs, read as beta) agree at +25.1 s; read as
    # the cut's depth 1 - beta on the paper's range the penalty grows by 2.2 s [-0.22, 13.9]: holds 0 and +1 s
    "reno_beta.high-loss-hard-cut-slower": ("inconclusive", "holds 0: no significant change on the claimed side"),
    # 5 pairs: its sign-flip test's smallest p (0.0625) is above every level, so the interval is unbounded
    "reno_beta.low-loss-similar": ("inconclusive", "reaches beyond +-5 %"),
    # issue 51: the seed's one sentence "8 % in India, 4 % in U.S, and 5 % in Germany" is one row whose verdict
    # needs its parts (before: three primary rows); each part lies beyond its own figure
    "coalescing.gain": ("larger than claimed", "beyond the claimed"),
    # before: "smaller than claimed" (8.3 RTT against 10 +- 1): the exact judge had no 0 side, so a count that
    # excludes the claim was never "disagree"; issue 51: exact runs outside the claimed count disagree, with why
    "initcwnd.ten-round-trips": ("disagree", "a count outside the claimed range refutes it"),
}
# issue 51 item 1: a p90 reading decides a label only where its test holds its size on its own values (the check of
# analysis/sizecheck.py: 400 samples of its n from a population made of them whose p90 ratio is 1; beyond 8.3 % at
# 0.05 it is not testable here). Sizes measured on these canned values: coalescing's 13 pairs a market 12.2 / 15.8 /
# 9.0 % (India / U.S. / Germany; the sentence's row shows the U.S.), U.S. Chromium's 30 pairs 27.3 %, China desktop
# CDT 45.2 % (rich 67.8 %), Hybla best's China parts 58-59 %, China mobile over 200 users 10.2 %; India desktop CDT's
# 8.0 % is within the limit (its label stays). The labels before, and why, are above. (The canned coalescing.gain row is the sentence read on one
# path per market, coalescing.gain-path since the primary reads users: the same judge.)
MOVED_BY_SIZE = ("coalescing.gain", "coalescing.gain-india", "coalescing.gain-us", "coalescing.gain-germany",
                 "coalescing.gain-us-chromium", "tortoise.china-desktop-cdt",
                 "tortoise.china-desktop-cdt-rich", "tortoise.hybla-best", "tortoise.china-mobile-plt-users")
EXPECTED.update({cid: ("not testable here", "does not hold its size") for cid in MOVED_BY_SIZE})


def _raw(r: dict) -> Measurement:
    """A canned row as its claim measured it (at 0.05), with its parts."""
    nan = math.nan
    parts = tuple((name, _raw(part)) for name, part in r.get("parts", {}).items())
    return Measurement(r["value"], nan if r["low"] is None else r["low"], nan if r["high"] is None else r["high"],
                       r["p_value"], r["n"], r["unit"], statistic=r["statistic"], tie=r["tie"],
                       exact_repeats=r["exact_repeats"], control=tuple(r.get("control", ())),
                       arm=tuple(r.get("arm", ())), n_control=r["n_control"], n_arm=r["n_arm"], parts=parts,
                       composite=r.get("composite", ""), n_what=r.get("n_what", "pairs"))


def _measurement(cid: str) -> Measurement:
    """The canned measurement at its study family's level, as evaluate
    leaves it for the judge (a composite row: each part at that level)."""
    family = DATA["families"][cid.split(".")[0]]
    return at_family(_raw(DATA["rows"][cid]), family)


@pytest.mark.parametrize("cid", sorted(EXPECTED))
def test_each_named_row_gets_the_label_its_numbers_support(cid):
    label, why = EXPECTED[cid]
    m = deciding(_measurement(cid), CLAIMS[cid].judge)
    v = judge_claim(CLAIMS[cid], m)
    assert v.verdict == label and why in v.why, (cid, v.measured, v.why)
    low, high = interval_of(m)
    if m.p_value is not None and not m.tie:  # the interval and the test agree at the family's level
        assert (m.p_value < m.level) == (not (low <= 0 <= high)), (cid, m.p_value, m.level, low, high)


def test_the_canned_rows_are_the_named_ones():
    assert set(EXPECTED) <= set(DATA["rows"]), "regenerate tests/data/verdict-rows.json (scripts/verdict_rows.py)"


def test_an_equivalence_row_whose_test_cannot_reach_the_level_has_no_power():
    """reno_beta.low-loss-similar showed power 1.00 (a 95 % bootstrap
    beside the label) with 5 pairs whose sign-flip test never gives p <
    0.0625: read at the family's level, its power is 0."""
    cid = "reno_beta.low-loss-similar"
    v = judge_claim(CLAIMS[cid], _measurement(cid))
    assert v.n == 5 and v.min_p == 0.0625 and v.power == 0.0 and v.power_raw == 0.0, (v.power, v.power_raw)


def test_n_is_printed_as_what_it_counts():
    """n says what it is: pairs on a path, users over a population, the
    smaller group of two, runs of exact counts, conditions of exact
    changes (before: "(n = 200)" for users and pairs alike, "(runs)" for
    any count)."""
    said = {cid: judge_claim(CLAIMS[cid], _measurement(cid)).measured for cid in (
        "tortoise.india-desktop-cdt", "tortoise.china-mobile-plt-users", "coalescing.cache-shrinks-gain-chromium",
        "initcwnd.ten-round-trips", "cubic_plus.delay-large-cubic-wins")}
    assert said["tortoise.india-desktop-cdt"].endswith("(n = 20 pairs)"), said
    assert said["tortoise.china-mobile-plt-users"].endswith("(n = 200 users)"), said
    assert said["coalescing.cache-shrinks-gain-chromium"].endswith("pairs in the smaller group)"), said
    assert said["initcwnd.ten-round-trips"].endswith("(n = 2 runs)"), said
    assert said["cubic_plus.delay-large-cubic-wins"].endswith("(n = 2 conditions)"), said


def test_a_sentence_naming_three_markets_is_one_row_that_needs_each_part():
    """coalescing.gain: each market judged against its own figure (India
    -9..-7 %, U.S. -5..-3 %, Germany -6..-4 %); one part that does not
    hold decides the row."""
    import dataclasses
    c = CLAIMS["coalescing.gain"]
    assert c.primary and not CLAIMS["coalescing.gain-india"].primary
    assert CLAIMS["coalescing.gain-india"].sentence == "coalescing.gain"
    m = _measurement("coalescing.gain")
    # with their pairs, no part's p90 test holds its size at 13 pairs (issue 51, MOVED_BY_SIZE): every part is not
    # testable here; the composite's logic below reads the parts' intervals alone (no pairs: no size check)
    assert "india not testable here" in judge_claim(c, deciding(m, c.judge)).detail
    m = dataclasses.replace(m, parts=tuple((k, dataclasses.replace(p, control=(), arm=())) for k, p in m.parts))
    v = judge_claim(c, deciding(m, c.judge))
    assert "india larger than claimed" in v.detail and "germany larger than claimed" in v.detail, v.detail
    # the U.S. part as Germany's numbers: -7.6 % lies within India's figure's side but beyond the U.S.'s -5..-3 %
    parts = dict(m.parts)
    us_like_zero = dataclasses.replace(parts["us"], value=0.5, low=-2.0, high=3.0, p_value=0.6, control=(), arm=())
    m2 = dataclasses.replace(m, parts=tuple((k, us_like_zero if k == "us" else p) for k, p in m.parts))
    v2 = judge_claim(c, deciding(m2, c.judge))
    assert v2.verdict == "disagree" and "the claimed -5..-3 %" in v2.why, (v2.verdict, v2.why)
