"""Sized to decide (issue 51, item 3): the planner never plans a reading
at an n whose smallest possible p is not below its level, says so for a
row that has such an n, does not tell a row of 186 pairs that "about 76
pairs would settle it", plans an equivalence at the pilot's measured
change (not at 0), and the report prints n as what it is."""

import math

import numpy as np

from tortoiselab import studies as S
from tortoiselab.studies import plan as P
from tortoiselab.studies import power as pw
from tortoiselab.studies.measure import at_level
from tortoiselab.studies.model import Verdict, claim
from tortoiselab.studies.registry import judge_claim, settle_note
from tortoiselab.studies.reproduction import _n_per_arm


def _pilot(n: int, shift: float = 0.0, sd: float = 0.03, seed: int = 0) -> S.Measurement:
    rng = np.random.default_rng(seed)
    c = rng.uniform(900, 1100, n)
    a = c * np.exp(shift + rng.normal(0, sd, n))
    return S.Measurement(0.0, n=n, control=tuple(c), arm=tuple(a), statistic="ratio")


def _claim(rule, **kw):
    return claim("cubic_plus", "x", "seed", "text", "cubic_plus", "plt_ms", lambda df: None, rule, **kw)


def test_the_smallest_n_whose_test_can_reach_the_level():
    assert [pw.min_pairs(a) for a in (0.05, 0.05 / 3, 0.05 / 5, 0.05 / 8)] == [6, 7, 8, 9]
    for a in (0.05, 0.01, 0.05 / 8, 0.001):
        n = pw.min_pairs(a)
        assert 2 / 2 ** n < a <= 2 / 2 ** (n - 1)


def test_a_row_below_that_n_says_so_and_the_grid_is_raised_to_it():
    """plt-low-loss-equal and Reno's low-loss-similar ran 5 pairs at 0.05 / 5
    and 0.05 / 3: smallest p 0.0625, above the level whatever the pairs."""
    m = at_level(_pilot(5, sd=0.002), 0.01)
    row = P.plan_claim(_claim(S.equivalent(5)), m, reps=5, family=5)
    assert row.min_n == 8
    assert "smallest possible p, 2/2^5 = 0.0625, is not below the level 0.01: at least 8 pairs" in row.note
    assert row.pairs is None or row.pairs >= 8
    reps, note = P.repetitions_needed([P.ClaimPlan("x", effect="-5 %", n=5, per_rep=1.0, family=5, min_n=8)], 200)
    assert reps == 8 and "smallest possible p is below its level" in note


def test_required_n_is_never_below_the_floor():
    m = _pilot(400, shift=-0.3, sd=0.01)  # an effect so clear that 3 pairs would do, were the test able to
    assert pw.required_n(m, pw.Effect("shift", -20), alpha=0.05 / 8, sims=100) >= 9


def test_a_row_that_already_has_the_planned_pairs_is_not_told_to_run_fewer():
    """cubic_plus.initcwnd-little-role: "about 76 pairs would settle it" on
    a row of 186 pairs. Its n already had the power; the note says so and gives no count."""
    m = _pilot(186, shift=0.0, sd=0.02)
    n, note = settle_note(m, pw.Effect("equivalence", margin=5), 0.01)
    assert n is None and "its 186 pairs already give 80 % power" in note
    assert "would settle it" not in note


def test_an_equivalence_is_planned_at_the_pilots_measured_change():
    """A pilot that measured +4 % cannot plan to show "within 5 %" as if it had measured 0."""
    e = pw.Effect("equivalence", margin=5)
    at_zero, at_four = _pilot(500, 0.0, 0.03), _pilot(500, math.log(1.04), 0.03)
    zero, four = pw.power(at_zero, e, 40, sims=200), pw.power(at_four, e, 40, sims=200)
    assert zero > 0.8 and four < zero - 0.2  # before, both pilots were simulated centred at 0: the same power
    assert "at the pilot's measured change" in e.text()


def test_an_inconclusive_population_row_counts_users():
    rng = np.random.default_rng(3)
    c = rng.uniform(900, 1100, 8)
    a = c * rng.lognormal(0, 0.04, 8)
    m = at_level(S.Measurement(0.0, n=8, control=tuple(c), arm=tuple(a), statistic="ratio"), 0.05)
    v = judge_claim(_claim(S.equivalent(5), setup="population"), m, settle=True)
    assert v.verdict == "inconclusive" and f"about {v.settle_n} users would settle it" in v.why


def _verdict(n, n_control=0, n_arm=0, setup="single path", n_what="pairs"):
    return Verdict("s", "s.x", "f", "t", "e", "m", 1.0, 0.0, 2.0, 0.1, n, "%", "", "inconclusive", "", "", "",
                   n_control=n_control, n_arm=n_arm, setup=setup, n_what=n_what)


def test_n_is_printed_as_what_it_is():
    assert _n_per_arm(_verdict(39, 39, 39)) == "39 pairs"
    assert _n_per_arm(_verdict(39)) == "39 pairs"
    assert _n_per_arm(_verdict(200, 200, 200, setup="population", n_what="users")) == "200 users"
    assert _n_per_arm(_verdict(15, 5, 10, n_what="values")) == "5 against 10 values"
    assert _n_per_arm(_verdict(36, 18, 18, setup="population", n_what="users per group")) == \
        "18 against 18 users per group"
