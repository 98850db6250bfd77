"""`tortoise plan`'s pure logic: a claim's pairs and repetitions needed
from a pilot measurement, at its observed spread and at the upper
confidence bound of it, at alpha/m of the study's primary claims; the cap
on the powered grid with its note, the `powered` grid block (the pilot
grid's sweep), the cost line; the check of a plan against the powered grid
that was run (predicted vs realised power); and the p90 test column of
stats.compare that the study notebooks read."""

import dataclasses
import math
import subprocess

import numpy as np
import pandas as pd
import pytest
import yaml

from tests.conftest import TORTOISE
from tortoiselab import studies as S
from tortoiselab.analysis import stats
from tortoiselab.studies import plan as P
from tortoiselab.studies import plan_check as PC
from tortoiselab.studies import power as pw
from tortoiselab.studies.model import ALPHA, claim


def _pilot(sigma=0.1, n=24, shift=-0.06, seed=4):
    rng = np.random.default_rng(seed)
    c = rng.uniform(900, 1100, n)
    return S.Measurement(-6.0, -8, -4, 0.01, n, n_control=n, n_arm=n, control=tuple(c),
                         arm=tuple(c * np.exp(shift + rng.normal(0, sigma, n))), statistic="ratio")


def _claim(judge_rule, cid="x", **kw):
    return claim("tortoise", cid, "seed", "text", "tortoise", "plt_ms", lambda df: None, judge_rule, **kw)


def test_a_claims_plan_scales_pairs_to_repetitions_and_a_larger_family_asks_for_more():
    m = _pilot()
    one, five = (P.plan_claim(_claim(S.improvement(-7, -5)), m, reps=6, family=f, sims=400) for f in (1, 5))
    assert five.per_rep == 4 and five.effect.startswith("-5 %") and five.level == ALPHA / 5
    assert one.pairs is not None and five.pairs is not None and five.pairs >= one.pairs
    assert five.reps == math.ceil(five.pairs / 4) and five.reps_upper == math.ceil(five.pairs_upper / 4)
    tie = S.Measurement(0.0, 0, 0, 1.0, 6, control=(1.0,) * 6, arm=(1.0,) * 6, statistic="ratio", tie="all tied")
    assert "tie by construction" in P.plan_claim(_claim(S.improvement(-7, -5)), tie, 6, 1).note
    count = P.plan_claim(_claim(S.exact(10, 0, "packets")), m, 6, 1)
    assert count.pairs is None and "no claimed effect" in count.note
    # loss-free runs that repeat exactly count once: repetitions cannot add pairs, so none are asked for
    fixed = P.plan_claim(_claim(S.improvement(-7, -5)), dataclasses.replace(m, exact_repeats=True), 6, 1, sims=100)
    assert fixed.reps is None and fixed.reps_upper is None and "add no pairs" in fixed.note
    # such a claim is not "out of reach": the powered grid's note leaves it out
    assert "out of reach" not in P.repetitions_needed([fixed, P.ClaimPlan("a", reps_upper=3)], 100)[1]


def test_the_powered_grid_takes_the_largest_need_capped_with_a_note(tmp_path):
    # the powered grid takes the repetitions at the upper bound of the spread, not at the observed one
    rows = [P.ClaimPlan("a", reps=5, reps_upper=12), P.ClaimPlan("b", reps=20, reps_upper=40), P.ClaimPlan("c")]
    assert P.repetitions_needed(rows, 100) == (40, "")
    reps, note = P.repetitions_needed(rows, 30)
    assert reps == 30 and "b would need up to 40" in note
    assert P.repetitions_needed([P.ClaimPlan("c")], 30)[0] is None
    far = P.repetitions_needed(rows + [P.ClaimPlan("d", effect="-2 %")], 100)
    assert far[0] == 40 and "out of reach" in far[1] and "d" in far[1]
    f = tmp_path / "e.yaml"
    f.write_text(yaml.safe_dump({"name": "e", "sweep": {"x": [1, 2, 3]},
                                 "grids": {"reduced": {"repetitions": 6, "sweep": {"x": [1, 2]},
                                                       "exclude": [{"x": 2}]}}}))
    block = yaml.safe_load(P.powered_grid({"file": f, "grid": "reduced"}, 30, note))
    assert block["powered"]["repetitions"] == 30 and block["powered"]["sweep"] == {"x": [1, 2]}
    assert block["powered"]["exclude"] == [{"x": 2}] and "capped" in block["powered"]["description"]
    full = yaml.safe_load(P.powered_grid({"file": f, "grid": None}, 8))
    assert full["powered"]["sweep"] == {"x": [1, 2, 3]}


def test_the_plan_text_costs_the_powered_grid_from_the_pilots_wall_times():
    rows = [P.ClaimPlan("tortoise.x", effect="-5 %", n=12, per_rep=2, pairs=20, pairs_upper=30, reps=10,
                        reps_upper=15, factor=1.26)]
    info = {"name": "e", "folder": "results/e@reduced", "runs": 24, "reps": 6, "runs_per_rep": 4,
            "seconds_per_run": 90.0}
    text = P.format_plan(rows, info, jobs=2, nodes=10)
    # 15 repetitions x 4 runs = 60 runs x 90 s / 2 jobs = 45 min here; through Slurm one lab per array task
    # (host/slurm.py), 10 at once: 60 x 90 s / 10 + 6 rounds of tasks x 5.2 s to start = 9.5 min
    assert "15 repetitions, 60 runs" in text and "45.0 min on this machine" in text
    assert "9.5 min through the Slurm executor with 10 array tasks at once" in text
    assert "alpha/m (Bonferroni over the study's primary claims)" in text and "x1.26" in text


def test_an_unknown_experiment_is_a_clear_error():
    with pytest.raises(ValueError, match="experiments/tortoise.yaml or tortoise"):
        P.experiment_file("no-such-experiment")


def test_compare_tests_the_p90_difference_with_a_quantile_test():
    rng = np.random.default_rng(5)
    c = rng.lognormal(7, 0.2, 30)
    df = pd.DataFrame({"arm": ["a"] * 30 + ["b"] * 30, "plt_ms": np.r_[c, 0.7 * c], "seed": list(range(30)) * 2})
    for key in ("seed", None):
        row = stats.compare(df, "plt_ms", "arm", "a", paired_key=key).iloc[0]
        assert row["p90_test"] in ("paired permutation", "permutation") and row["p90_p_value"] < 0.01
        assert row["p90_p_holm"] == pytest.approx(row["p90_p_value"])


@pytest.mark.parametrize("args, field", [
    (["no-such-experiment"], "experiments/tortoise.yaml or tortoise"),
    (["tortoise", "--jobs", "0"], "--jobs"),
    (["tortoise", "--check", "no-such-grid"], "--check"),
    (["tortoise", "--grid", "no-such-grid"], "--grid"),
    (["tortoise", "--spread-confidence", "1.5"], "--spread-confidence"),
])
def test_tortoise_plan_refuses_bad_input_with_the_field(tmp_path, args, field):
    p = subprocess.run([*TORTOISE, "plan", *args, "--pilot", str(tmp_path)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2 and field in p.stderr, p.stderr


def test_tortoise_plan_without_a_pilot_says_how_to_make_one(tmp_path):
    with pytest.raises(ValueError, match="tortoise run .*tortoise.yaml --grid reduced"):
        P.plan("tortoise", "reduced", tmp_path)


# --- the upper confidence bound of the pilot's spread ---------------------------------------------


@pytest.mark.parametrize("n", [6, 12, 30])
def test_the_spread_bound_covers_a_normal_samples_sd_with_its_confidence(n):
    rng = np.random.default_rng(n)
    sd = rng.normal(0.0, 1.0, size=(20000, n)).std(ddof=1, axis=1)
    for conf in (0.8, 0.9):
        assert np.mean(sd * P.spread_factor(n, conf) >= 1.0) == pytest.approx(conf, abs=0.012)
    assert P.spread_factor(n, 0.9) > P.spread_factor(n, 0.8) > P.spread_factor(2 * n, 0.8) > 1
    assert P.spread_factor(1) is None


def test_inflated_gives_the_pilot_factor_times_its_spread_about_the_same_centre():
    m = _pilot(n=9)
    wide = P.inflated(m, 1.5)
    lr, lr2 = pw.log_ratios(m), pw.log_ratios(wide)
    assert lr2.size >= P.SUPPORT and set(wide.control) == set(m.control)
    assert np.std(lr2) == pytest.approx(1.5 * np.std(lr), rel=0.05)
    assert np.median(lr2) == pytest.approx(np.median(lr), abs=0.2 * np.std(lr))
    assert P.inflated(m, 1.0) is m
    # a rank test on a resample of the pilot's 9 values sees only their signs and order: stretching them alone
    # leaves its power where it was; the smoothed pilot's power falls with its spread
    e = pw.effect_of(S.improvement(-7, -5)[0])
    assert pw.power(P.inflated(m, 1.5), e, 40, 400) < pw.power(P.inflated(m, 1.2), e, 40, 400) < pw.power(m, e, 40, 400)


def test_the_upper_bound_plan_asks_for_more_pairs_than_the_observed_spread():
    m = _pilot(n=8)  # 8 pairs: the 80 % bound spreads them by 1.35
    r = P.plan_claim(_claim(S.improvement(-7, -5)), m, reps=4, family=3, sims=400)
    assert r.factor == pytest.approx(P.spread_factor(8))
    assert r.pairs is not None and r.pairs_upper is not None and r.pairs_upper > r.pairs
    assert r.pairs_upper == pw.required_n(P.inflated(m, r.factor), pw.effect_of(S.improvement(-7, -5)[0]),
                                          alpha=ALPHA / 3, sims=400)
    assert r.reps_upper == math.ceil(r.pairs_upper / 2) and r.reps == math.ceil(r.pairs / 2)
    # a higher confidence asks for more still
    r9 = P.plan_claim(_claim(S.improvement(-7, -5)), m, reps=4, family=3, sims=400, confidence=0.9)
    assert r9.pairs == r.pairs and r9.pairs_upper >= r.pairs_upper


def test_the_family_counts_the_primary_testable_claims_with_a_test_and_no_tie():
    judge = S.improvement(-7, -5)
    a, b, c, d = (_claim(judge, cid) for cid in "abcd")
    variant = _claim(judge, "a-rich", sentence="a", variant="rich paths")
    tested = _pilot()
    no_test = dataclasses.replace(tested, p_value=None)
    tie = S.Measurement(0.0, 0, 0, 1.0, 6, control=(1.0,) * 6, arm=(1.0,) * 6, statistic="ratio", tie="all tied")
    assert P.family_of([a, b, variant], [tested, tested, tested]) == (2, [])
    assert P.family_of([a, b, c, d, variant], [tested, no_test, tie, None, None]) == (1, ["tortoise.d"])
    assert P.family_of([variant], [tested]) == (1, [])
    untestable = _claim(judge, "e", untestable="the lab does not model it")
    assert P.family_of([a, b, untestable], [tested, tested, tested]) == (2, [])


# --- predicted against realised ---------------------------------------------------------------------


def test_the_checks_realised_power_is_the_powered_grids_own_power():
    judge = S.improvement(-7, -5)
    effect = pw.effect_of(judge[0])
    pilot, powered = _pilot(sigma=0.05, n=8), _pilot(sigma=0.3, n=40, seed=7)
    r = PC.check_claim(_claim(judge), pilot, powered, family=3, sims=400)
    assert (r.n_pilot, r.n, r.family) == (8, 40, 3) and r.note == ""
    assert r.realised == pw.power(powered, effect, sims=400, alpha=ALPHA / 3)
    assert r.predicted == pw.power(pilot, effect, 40, sims=400, alpha=ALPHA / 3)
    assert r.predicted_upper == pw.power(P.inflated(pilot, P.spread_factor(8)), effect, 40, 400, ALPHA / 3)
    # a pilot six times tighter than the powered runs: it promised what they could not give
    assert r.predicted > r.predicted_upper and r.predicted > 0.9 > 0.3 > r.realised
    text = PC.format_check([r], {"name": "tortoise", "pilot": "reduced", "powered": "powered", "confidence": 0.8,
                                 "folders": {"reduced": "r@reduced", "powered": "r@powered"},
                                 "families": {"tortoise": (3, [])}, "left": ["tortoise.y"]})
    assert f"{r.realised:.2f}" in text and "tortoise m = 3" in text and "not checked" in text


def test_a_claim_without_pairs_on_a_grid_says_so_in_the_check():
    judge = S.improvement(-7, -5)
    pilot = _pilot()
    r = PC.check_claim(_claim(judge), pilot, None, 1, sims=100, why=("", "no paired runs of hybla and htcp"))
    assert r.realised is None and r.predicted is None and "no data on the powered grid: no paired runs" in r.note
    r = PC.check_claim(_claim(judge), None, pilot, 1, sims=100)
    assert r.realised is not None and r.predicted is None and "no data on the pilot grid" in r.note
    tie = S.Measurement(0.0, 0, 0, 1.0, 6, control=(1.0,) * 6, arm=(1.0,) * 6, statistic="ratio", tie="all tied")
    assert "tie by construction on the powered grid" in PC.check_claim(_claim(judge), pilot, tie, 1, sims=100).note
    assert "no claimed effect" in PC.check_claim(_claim(S.exact(10, 0, "packets")), pilot, pilot, 1).note


def test_the_check_refuses_a_grid_the_experiment_lacks_naming_the_flag_and_the_fix(tmp_path):
    with pytest.raises(ValueError, match=r"--check: tortoise.yaml has no grid 'nosuch'; give one of its grids: .*"
                                         r"powered"):
        PC.check("tortoise", "reduced", "nosuch", tmp_path)
    with pytest.raises(ValueError, match="--grid: tortoise.yaml has no grid 'nosuch'"):
        PC.check("tortoise", "nosuch", "powered", tmp_path)
    with pytest.raises(ValueError, match="--check: 'reduced' is the pilot grid"):
        PC.check("tortoise", "reduced", "reduced", tmp_path)
    (tmp_path / "tortoise@reduced").mkdir()
    with pytest.raises(ValueError, match=r"--check: no results in .*tortoise@powered; run `tortoise run .*--grid "
                                         r"powered` first, or give --results"):
        PC.check("tortoise", "reduced", "powered", tmp_path)


def test_for_a_p90_claim_inflated_spreads_the_controls_too():
    m = dataclasses.replace(_pilot(n=8), statistic="p90")
    wide = P.inflated(m, 1.5)
    sd = lambda x: float(np.std(np.log(np.asarray(x))))  # noqa: E731
    assert sd(wide.control) == pytest.approx(1.5 * sd(m.control), rel=0.06)
    assert np.std(pw.log_ratios(wide)) == pytest.approx(1.5 * np.std(pw.log_ratios(m)), rel=0.06)
    ratio = P.inflated(_pilot(n=8), 1.5)  # a median test reads only the log ratios: the controls stay the pilot's
    assert set(ratio.control) == set(_pilot(n=8).control)
