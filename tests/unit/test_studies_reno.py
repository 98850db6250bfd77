"""Reno's reduction factor under both readings (issue 39): the paper's
factor 0.5-0.9 is beta 0.5 -> 0.1 if it is the cut's depth 1 - beta (the
primary reading) and beta 0.5 -> 0.9 if it is beta; the experiment sweeps
the union, each claim judges one reading with the other's number beside it.
The runs here are made up (pure logic of the claims: the lab's runs are
judged in test_studies_golden.py)."""

import json

import pandas as pd
import pytest

from tortoiselab.project import REPO_DIR as REPO
from tortoiselab.spec.experiment import expand, load
from tortoiselab.studies.claims import reno as R
from tortoiselab.studies.model import NoData
from tortoiselab.studies.registration import claim_hash, claim_reading

BETAS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]


def _runs(betas=BETAS, losses=(2, 6, 10), reps=5, plt=None):
    """One ok run per beta, loss and repetition; PLT by default grows with
    the cut's depth and the loss: 10 s + loss x (1 - beta) x 2 s, plus a
    repetition's offset (so pairs differ)."""
    plt = plt or (lambda b, loss, r: 10_000 + loss * (1 - b) * 2000 + 37 * r)
    rows = []
    for b in betas:
        for loss in losses:
            for r in range(reps):
                point = {"server.module_params": {"reno_beta": {"beta": b}}, "path.loss_pct": loss}
                rows.append({"ok": True, "beta": b, "path.loss_pct": loss, "repetition": r,
                             "cond": json.dumps(point, sort_keys=True), "plt_ms": float(plt(b, loss, r))})
    return pd.DataFrame(rows)


def _claims():
    return {c.id.split(".", 1)[1]: c for c in R.CLAIMS}


def test_the_readings_map_the_papers_range_to_betas():
    assert R.DEPTH.betas() == [0.5, 0.4, 0.3, 0.2, 0.1]
    assert R.BETA.betas() == [0.5, 0.6, 0.7, 0.8, 0.9]
    assert [R.DEPTH.factor(b) for b in R.DEPTH.betas()] == list(R.FACTORS)
    assert [R.BETA.factor(b) for b in R.BETA.betas()] == list(R.FACTORS)
    assert R.READINGS[0] is R.DEPTH  # the primary reading


@pytest.mark.parametrize("grid", [None, "reduced"])
def test_the_experiment_sweeps_the_union_of_both_readings(grid):
    exp = load(REPO / "experiments" / "reno_beta.yaml", grid=grid)
    swept = {float(r.config["server"]["module_params"]["reno_beta"]["beta"]) for r in expand(exp)}
    assert swept == set(R.DEPTH.betas()) | set(R.BETA.betas())


def test_each_sentence_has_its_primary_reading_and_the_other_beside_it():
    cs = _claims()
    assert list(cs) == ["low-loss-similar", "low-loss-similar-as-beta", "high-loss-hard-cut-slower",
                        "high-loss-hard-cut-slower-as-beta", "high-loss-gentler-wins", "high-loss-gentler-wins-as-beta"]
    for sid, _, _, _, _ in R.SENTENCES:
        primary, variant = cs[sid], cs[f"{sid}-as-beta"]
        assert primary.primary and primary.metric.startswith("read as the cut's depth 1 - beta (factor = 1 - beta")
        assert not variant.primary and variant.sentence == primary.id and variant.text == primary.text
        assert variant.metric.startswith("read as beta itself (factor = beta: beta 0.5 -> 0.9)")
        assert "read as beta itself" in variant.variant
        # the registration tells the two readings apart
        assert claim_reading(primary)["measure"].endswith("[depth]")
        assert claim_reading(variant)["measure"].endswith("[beta]")
        assert claim_hash(primary) != claim_hash(variant)


def test_the_readings_give_opposite_answers_on_runs_where_the_deep_cut_is_slow():
    """PLT grows with the cut's depth at high loss: read as depth the
    larger factor (beta 0.1) is slower and the penalty grows; read as beta
    the larger factor (0.9) is the faster one."""
    cs, df = _claims(), _runs()
    depth, beta = cs["high-loss-hard-cut-slower"].measure(df), cs["high-loss-hard-cut-slower-as-beta"].measure(df)
    # depth: beta 0.1 minus 0.5 = loss x 0.4 x 2 s: 1.6 s at 2 %, 4.8 / 8 s at 6 / 10 %
    assert depth.value > 0 and depth.unit == "s" and depth.value == pytest.approx(4.8, abs=1.7)
    assert beta.value < 0  # beta 0.9 minus 0.5 = loss x -0.4 x 2 s: shrinks
    assert depth.detail.startswith("read as the cut's depth 1 - beta (factor = 1 - beta: beta 0.5 -> 0.1): "
                                   "factor 0.9 (beta 0.1)")
    assert f"beside it, read as beta itself (factor = beta: beta 0.5 -> 0.9): {beta.text()} (its interval at 0.05" \
        in depth.detail
    assert f"beside it, read as the cut's depth 1 - beta (factor = 1 - beta: beta 0.5 -> 0.1): {depth.text()}" \
        in beta.detail
    rho_depth, rho_beta = cs["high-loss-gentler-wins"].measure(df), cs["high-loss-gentler-wins-as-beta"].measure(df)
    assert rho_depth.value > 0.9 and rho_beta.value < -0.9  # positive: the smaller factor is faster
    assert "0.9 (beta 0.1)" in rho_depth.detail and "0.9 (beta 0.9)" in rho_beta.detail
    assert "beta 0.3" not in rho_beta.detail.split("; beside it")[0]  # only the reading's own betas


def test_low_loss_compares_each_factor_of_the_reading_with_0_5():
    cs, df = _claims(), _runs()
    depth, beta = cs["low-loss-similar"].measure(df), cs["low-loss-similar-as-beta"].measure(df)
    own = depth.detail.split("; beside it")[0]
    assert all(f"factor {f} (beta {b})" in own for f, b in ((0.6, 0.4), (0.7, 0.3), (0.8, 0.2), (0.9, 0.1)))
    assert "beta 0.6" not in own
    # the largest change is shown: factor 0.9 in both readings (beta 0.1 slower, beta 0.9 faster)
    assert "shown: factor 0.9 (beta 0.1) vs 0.5" in depth.detail and depth.value > 0
    assert "shown: factor 0.9 (beta 0.9) vs 0.5" in beta.detail and beta.value < 0


def test_without_the_readings_runs_no_data_says_so_and_gives_the_other_number():
    """The runs of beta 0.5-0.9 only (the sweep before issue 39): the depth
    reading has no data, and its reason carries the other reading's number."""
    cs, df = _claims(), _runs(betas=[0.5, 0.6, 0.7, 0.8, 0.9])
    with pytest.raises(NoData, match=r"no runs of beta 0.4, 0.3, 0.2, 0.1 .*beside it, read as beta itself "
                                     r"\(factor = beta: beta 0.5 -> 0.9\): [-+]\d"):
        cs["low-loss-similar"].measure(df)
    with pytest.raises(NoData, match=r"needs two or more pairs of beta 0.5 and 0.1"):
        cs["high-loss-hard-cut-slower"].measure(df)
    assert "beside it, read as the cut's depth 1 - beta: no data" in cs["low-loss-similar-as-beta"].measure(df).detail
