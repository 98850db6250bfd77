"""`tortoise plan`'s pure logic: a claim's pairs and repetitions needed
from a pilot measurement, the cap on the powered grid with its note, the
`powered` grid block (the pilot grid's sweep), the cost line; and the p90
test column of stats.compare that the study notebooks read."""

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
from tortoiselab.studies.model import claim


def _pilot(sigma=0.1, n=24, shift=-0.06, seed=4):
    rng = np.random.default_rng(seed)
    c = rng.uniform(900, 1100, n)
    return S.Measurement(-6.0, -8, -4, 0.01, n, n_control=n, n_arm=n, control=tuple(c),
                         arm=tuple(c * np.exp(shift + rng.normal(0, sigma, n))), statistic="ratio")


def _claim(judge_rule):
    return claim("tortoise", "x", "seed", "text", "tortoise", "plt_ms", lambda df: None, judge_rule)


def test_a_claims_plan_scales_pairs_to_repetitions_and_holm_asks_for_more():
    m = _pilot()
    r = P.plan_claim(_claim(S.improvement(-7, -5)), m, reps=6, family=5, sims=400)
    assert r.per_rep == 4 and r.effect.startswith("-5 %")
    assert r.pairs is not None and r.pairs_holm is not None and r.pairs_holm >= r.pairs
    assert r.reps == math.ceil(r.pairs / 4) and r.reps_holm == math.ceil(r.pairs_holm / 4)
    tie = S.Measurement(0.0, 0, 0, 1.0, 6, control=(1.0,) * 6, arm=(1.0,) * 6, statistic="ratio", tie="all tied")
    assert "tie by construction" in P.plan_claim(_claim(S.improvement(-7, -5)), tie, 6, 1).note
    count = P.plan_claim(_claim(S.exact(10, 0, "packets")), m, 6, 1)
    assert count.pairs is None and "no claimed effect" in count.note
    # loss-free runs that repeat exactly count once: repetitions cannot add pairs, so none are asked for
    fixed = P.plan_claim(_claim(S.improvement(-7, -5)), dataclasses.replace(m, exact_repeats=True), 6, 1, sims=100)
    assert fixed.reps is None and fixed.reps_holm is None and "add no pairs" in fixed.note


def test_the_powered_grid_takes_the_largest_need_capped_with_a_note(tmp_path):
    rows = [P.ClaimPlan("a", reps_holm=12), P.ClaimPlan("b", reps_holm=40), P.ClaimPlan("c")]
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
    rows = [P.ClaimPlan("tortoise.x", effect="-5 %", n=12, per_rep=2, pairs=20, pairs_holm=30, reps=10,
                        reps_holm=15)]
    info = {"name": "e", "folder": "results/e@reduced", "runs": 24, "reps": 6, "runs_per_rep": 4,
            "seconds_per_run": 90.0}
    text = P.format_plan(rows, info, jobs=2, nodes=10)
    # 15 repetitions x 4 runs = 60 runs x 90 s / 2 jobs = 45 min here; 4.5 min on 10 nodes
    assert "15 repetitions, 60 runs" in text and "45.0 min on this machine" in text and "4.5 min on a cluster" in text


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
])
def test_tortoise_plan_refuses_bad_input_with_the_field(tmp_path, args, field):
    p = subprocess.run([*TORTOISE, "plan", *args, "--pilot", str(tmp_path)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2 and field in p.stderr, p.stderr


def test_tortoise_plan_without_a_pilot_says_how_to_make_one(tmp_path):
    with pytest.raises(ValueError, match="tortoise run .*tortoise.yaml --grid reduced"):
        P.plan("tortoise", "reduced", tmp_path)
