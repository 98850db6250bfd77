"""The verdicts' statistics without the lab: the exact sign-flip test for
few pairs, the paired permutation test of a p90 difference, Holm's
correction, the power of a claim's test by simulation (against the closed
form for a normal shift), ties by construction, and the set-up of a claim."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from tortoiselab import studies as S
from tortoiselab.analysis import stats
from tortoiselab.studies import power as pw
from tortoiselab.studies.measure import at_level
from tortoiselab.studies.model import claim
from tortoiselab.studies.registry import family_level, judge_claim, tie_of

finite = hs.floats(-5, 5, allow_nan=False, allow_infinity=False)


# --- the tests -----------------------------------------------------------------------


@given(hs.lists(finite, min_size=1, max_size=10))
@settings(max_examples=200, deadline=None)
def test_a_sign_flip_p_is_never_below_two_over_two_to_the_n(d):
    r = stats.sign_flip_test(d)
    assert 2 / 2 ** len(d) - 1e-12 <= r["p_value"] <= 1
    assert r["p_value"] == pytest.approx(stats.sign_flip_test([-x for x in d])["p_value"])  # two-sided


def test_sign_flip_against_its_enumeration_by_hand():
    # 3 pairs +1, +2, -0.5: |sum| 2.5; the 8 patterns' |sums| 2.5 3.5 1.5 0.5 (each twice): 2 of 8 reach 2.5... and 3.5
    assert stats.sign_flip_test([1, 2, -0.5])["p_value"] == pytest.approx(4 / 8)
    assert stats.sign_flip_test([0, 0, 0])["p_value"] == 1
    with pytest.raises(ValueError, match="n <= 20"):
        stats.sign_flip_test(np.ones(21))


@given(hs.lists(hs.floats(0, 1), min_size=0, max_size=12))
@settings(max_examples=200, deadline=None)
def test_holm_keeps_the_order_of_the_p_values_and_never_lowers_one(p):
    adj = stats.holm(p)
    assert np.all(adj >= np.asarray(p) - 1e-12) and np.all(adj <= 1)
    order = np.argsort(p, kind="stable")
    assert np.all(np.diff(adj[order]) >= -1e-12)  # monotone in the raw p


def test_the_p90_test_is_floored_two_sided_and_sees_a_shift():
    rng = np.random.default_rng(3)
    c = rng.lognormal(7, 0.3, 40)
    faster = stats.quantile_diff_test(c, 0.8 * c)
    assert faster["p_value"] < 0.01 and faster["statistic"] < 0 and not faster["exact"]
    assert stats.quantile_diff_test(c, c)["p_value"] == 1
    # 4 pairs, every arm 20 % faster: only swaps of the top pair move the p90 enough; never below 2/2^4
    few = stats.quantile_diff_test(c[:4], 0.8 * c[:4])
    assert few["exact"] and few["min_p"] == pytest.approx(2 / 16) and few["p_value"] >= 2 / 16
    noise = stats.quantile_diff_test(c, c * rng.lognormal(0, 0.3, 40))
    assert noise["p_value"] > 0.05


def test_the_p90_permutation_test_keeps_its_size_where_a_bootstrap_would_not():
    """Pairs whose two runs are exchangeable (no change): the permutation
    test rejects at most alpha of them at 6 and at 40 pairs."""
    rng = np.random.default_rng(1)
    for n in (6, 40):
        u = rng.normal(7, 0.2, (300, n))
        c, a = np.exp(u + rng.normal(0, 0.07, (300, n))), np.exp(u + rng.normal(0, 0.07, (300, n)))
        assert np.mean(stats.quantile_diff_pvalues(c, a, 0.9, 500, rng) < 0.05) <= 0.05 + 0.03


def test_a_p90_claim_is_tested_with_a_quantile_test_not_wilcoxon():
    c = np.linspace(900, 1100, 12)
    df = pd.DataFrame([{"ok": True, "server.cc": cc, "cond": f'{{"server.cc": "{cc}"}}', "repetition": i,
                        "plt_ms": v} for i, x in enumerate(c) for cc, v in (("htcp", x), ("hybla", 0.9 * x))])
    r = S.change(df, "plt_ms", "server.cc", "htcp", "hybla", "p90")
    assert "permutation test of the p90 ratio" in r.detail and "Wilcoxon" not in r.detail
    assert r.statistic == "p90" and 2 / 2 ** 12 <= r.p_value < 0.05


# --- power --------------------------------------------------------------------------


def _normal_pilot(sigma: float, n: int = 2000, seed: int = 1, statistic: str = "ratio") -> S.Measurement:
    rng = np.random.default_rng(seed)
    c = np.full(n, 1000.0)
    return S.Measurement(0.0, control=tuple(c), arm=tuple(c * np.exp(rng.normal(0, sigma, n))), statistic=statistic)


def test_required_n_matches_the_closed_form_for_a_normal_shift():
    """A normal shift of the log ratios by delta with known sigma: the
    z-test needs n = ((z_0.975 + z_0.8) sigma / delta)^2; the project's test
    (Wilcoxon signed-rank) about pi/3 times that (its asymptotic relative
    efficiency against the t-test under normality is 3/pi). The simulated
    n is within 10 % of it."""
    sigma, delta = 0.1, 0.05
    want = pw.normal_n(sigma, delta) * math.pi / 3
    assert pw.normal_n(sigma, delta) == pytest.approx(31.4, abs=0.05)
    got = pw.required_n(_normal_pilot(sigma), pw.Effect("shift", 100 * math.expm1(delta)))
    assert abs(got - want) <= 0.1 * want, (got, want)


def test_power_grows_with_n_and_below_six_pairs_is_nil():
    m = _normal_pilot(0.1, 500)
    e = pw.Effect("shift", -5)
    p6, p20, p60 = (pw.power(m, e, n) for n in (6, 20, 60))
    assert p6 < p20 < p60 and p60 > 0.9
    assert pw.power(m, e, 5) == 0  # the sign-flip test of 5 pairs cannot reach 0.05
    assert pw.power(S.Measurement(1.0), e) is None  # no pairs to simulate from


def test_equivalence_power_needs_a_narrow_ci():
    m = _normal_pilot(0.05, 500)
    e = pw.Effect("equivalence", margin=5)
    assert pw.power(m, e, 4) < 0.5 < pw.power(m, e, 60)


def test_required_n_says_none_when_out_of_reach():
    assert pw.required_n(_normal_pilot(2.0, 200), pw.Effect("shift", -1), n_max=40, sims=200) is None


# --- ties, Holm's family, the set-up ---------------------------------------------------------


def _claim(judge_rule=None, **kw):
    return claim("tortoise", "x", "seed", "text", "tortoise", "plt_ms", lambda df: None,
                 judge_rule or S.improvement(-7, -5), **kw)


def test_a_tie_by_construction_is_not_testable_here_never_a_finding():
    c = np.array([100.0, 200, 300, 400, 500, 600])
    m = S.Measurement(0.0, 0.0, 0.0, 1.0, 6, control=tuple(c), arm=tuple(c), statistic="ratio",
                      tie="every one of the 6 pairs ...")
    for judge_rule in (S.improvement(-7, -5), S.equivalent(5), S.direction("lower")):
        v = judge_claim(_claim(judge_rule), m)
        assert v.verdict == "not testable here" and "6 pairs" in v.why
    # a measurement rebuilt without its pairs: exactly 0 % with a zero-width CI and a test
    assert "tie by construction" in tie_of(S.Measurement(0.0, 0.0, 0.0, 0.62, 12))
    assert tie_of(S.Measurement(0.0, 0.0, 0.0, None, 12)) == ""  # no test: a count, not a tie
    assert tie_of(S.Measurement(0.0, -1.0, 2.0, 0.6, 12)) == ""


def test_the_family_is_the_primary_readings_with_a_test_and_sets_every_interval():
    rng = np.random.default_rng(5)
    c = rng.uniform(900, 1100, 12)
    a = c * 0.94 * rng.lognormal(0, 0.02, 12)
    paired = S.Measurement(-6, -8, -4, 0.01, 12, control=tuple(c), arm=tuple(a), statistic="ratio")
    claims = (_claim(), _claim(), _claim(sentence="x", variant="rich paths"), _claim(), _claim())
    ms = [paired, paired, paired, S.Measurement(0.0, 0.0, 0.0, 1.0, 12, tie="tied"), None]
    out = family_level(claims, ms)
    assert [m.family for m in out[:4]] == [2, 2, 2, 2] and out[4] is None  # the variant and the tie are not in it
    assert out[0].level == pytest.approx(0.025) and out[2].level == pytest.approx(0.025)
    assert out[0].p_family == pytest.approx(min(1.0, 2 * out[0].p_value))
    alone = family_level(claims[:1], ms[:1])[0]
    assert alone.level == 0.05 and alone.low < alone.value < alone.high
    assert out[0].low <= alone.low and out[0].high >= alone.high  # a wider interval at the family's level


def test_judge_claim_gives_power_n_per_arm_and_setup():
    rng = np.random.default_rng(2)
    c = rng.uniform(900, 1100, 12)
    a = c * 0.94 * rng.lognormal(0, 0.01, 12)
    m = S.Measurement(-6.0, -7.0, -5.0, 0.0005, 12, n_control=12, n_arm=12, control=tuple(c), arm=tuple(a),
                      statistic="ratio")
    v = judge_claim(_claim(), m)
    assert v.verdict == "agree" and v.n_control == v.n_arm == 12 and v.power > 0.8
    assert "-5 %" in v.effect and v.setup == "single path"
    assert _claim(grid="browser").setup == "browser"
    assert _claim(setup="population").setup == "population"
    with pytest.raises(ValueError, match="setup 'users'"):
        _claim(setup="users")
    assert judge_claim(_claim(), None, "no runs").verdict == "no data"


def test_a_p90_claims_pairs_reach_the_power_they_promise():
    """required_n for a p90 (simulated with the permutation test, 200
    samples per n) against the power at that n and below it."""
    rng = np.random.default_rng(6)
    c = rng.lognormal(7, 0.2, 60)
    m = S.Measurement(0.0, control=tuple(c), arm=tuple(c * rng.lognormal(0, 0.1, 60)), statistic="p90")
    e = pw.Effect("shift", -8)
    n = pw.required_n(m, e, sims=200)
    assert 12 <= n <= 200
    assert pw.power(m, e, n, sims=400) >= 0.72 and pw.power(m, e, int(n * 0.6), sims=400) < 0.8


def test_power_at_holms_alpha_is_not_nil_by_the_resamples_resolution():
    """Counted with INNER random swaps, a p90 test's p can never be below
    1 / (INNER + 1), so at Holm's alpha / m below that every simulated sample
    would fail: power 0 by construction. Below the resolution the planner
    takes the swap null's normal tail: conservative (never more rejections
    of a true "no change" than alpha), and a strong effect reaches it."""
    rng = np.random.default_rng(2)
    alpha = 0.05 / 25
    assert alpha * pw.INNER < pw.RESOLVED
    u = rng.normal(7, 0.3, (400, 40))
    c, a = np.exp(u + rng.normal(0, 0.1, (400, 40))), np.exp(u + rng.normal(0, 0.1, (400, 40)))
    counted = stats.quantile_diff_pvalues(c, 0.6 * a, 0.9, pw.INNER, rng)
    assert counted.min() >= 1 / (pw.INNER + 1)  # the floor that made power 0
    strong = stats.quantile_diff_pvalues(c, 0.6 * a, 0.9, pw.INNER, rng, normal_tail=True)
    assert np.mean(strong < alpha) > 0.5
    null = stats.quantile_diff_pvalues(c, a, 0.9, pw.INNER, rng, normal_tail=True)
    assert np.mean(null < 0.05) <= 0.05 + 0.02
    m = S.Measurement(0.0, control=tuple(c[0]), arm=tuple(a[0]), statistic="p90")
    assert pw.power(m, pw.Effect("shift", -40), 40, sims=100, alpha=alpha) > 0.5


def test_a_report_on_powered_grids_falls_back_to_reduced_where_a_study_has_none(tmp_path):
    from tortoiselab.studies.data import report_grids
    f = tmp_path / "x.yaml"
    f.write_text("name: x\ngrids:\n  ci: {repetitions: 1}\n  reduced: {repetitions: 2}\n")
    assert report_grids(f, "powered,reduced") == ["reduced"]
    assert report_grids(f, "reduced,ci") == ["reduced", "ci"]
    assert report_grids(f, "reduced") == ["reduced"] and report_grids(f, None) == [None]
    assert report_grids(f, "powered,other") == ["other"]  # none defined: the last, whose folder then holds no runs


def test_a_grid_list_reads_each_claim_from_the_grid_that_gives_it_most_pairs(monkeypatch, tmp_path):
    """cubic_plus's powered grid repeats only the lossy conditions of two
    claims: a claim it is for reads it where it gives more pairs, one it is
    for but covers in part (fewer pairs) keeps reduced, and one it does not
    serve falls back to reduced."""
    from tortoiselab.studies import registry as R
    monkeypatch.setattr(R, "current_points", lambda f, g: {})
    monkeypatch.setattr(R, "load_runs", lambda folder, ids, pts: folder.name)  # the frame: its folder's name
    pairs = {"cubic_plus.loss-throughput": {"cubic_plus@powered": 120, "cubic_plus@reduced": 30},
             "cubic_plus.plt-high-loss-better": {"cubic_plus@powered": 8, "cubic_plus@reduced": 10},
             "cubic_plus.initcwnd-little-role-lossy": {"cubic_plus@powered": 62, "cubic_plus@reduced": 15}}

    def measure(c, df, folder):
        n = pairs.get(c.id, {"cubic_plus@reduced": 5}).get(df)
        if n is None:
            raise S.NoData(f"no runs of {c.id} in {df}")
        return S.Measurement(1.0, 0.5, 1.5, 0.01, n)
    monkeypatch.setattr(R, "measure_claim", measure)
    monkeypatch.setattr(R, "judge_claim", lambda c, m, w, settle=False: S.Verdict(
        c.study, c.id, "", "", c.experiment, "", None, None, None, None, m.n if m else 0, "%", "", "", w, ""))
    got = {v.claim_id: (v.grid, v.n) for v in R.evaluate("cubic_plus", tmp_path, "powered,reduced")}
    assert got["cubic_plus.loss-throughput"] == ("powered", 120)
    assert got["cubic_plus.plt-high-loss-better"] == ("reduced", 10)
    assert got["cubic_plus.initcwnd-little-role-lossy"] == ("reduced", 15)  # not a claim the grid names
    assert got["cubic_plus.plt-low-loss-equal"] == ("reduced", 5)
    # every claim reads the report's grid, but those that name a grid of their own (issue 51: CUBIC+'s loss-free
    # sweeps read the grid paper, which this test's frames do not have)
    own = {c.id for c in R.study("cubic_plus").claims if c.grid}
    assert own == {"cubic_plus.delay-small-close", "cubic_plus.initcwnd-little-role"}
    assert {v.grid for v in R.evaluate("cubic_plus", tmp_path, "reduced") if v.claim_id not in own} == {"reduced"}


def test_a_grid_powered_for_some_claims_serves_only_those(tmp_path):
    from tortoiselab.spec.experiment import ExperimentError, load
    from tortoiselab.studies.data import report_grids
    f = tmp_path / "x.yaml"
    f.write_text("name: x\ngrids:\n  reduced: {repetitions: 2}\n"
                 "  powered: {repetitions: 9, claims: [x.little-role]}\n")
    assert report_grids(f, "powered,reduced", "x.little-role") == ["powered", "reduced"]
    assert report_grids(f, "powered,reduced", "x.other") == ["reduced"]
    assert report_grids(f, "powered,reduced", "") == ["reduced"]  # a whole study's notebook
    assert report_grids(f, "powered,reduced") == ["powered", "reduced"]  # the folders a report lists
    f.write_text("name: x\nsweep: {server.cc: [cubic]}\ngrids:\n  powered: {repetitions: 9, claims: [little-role]}\n")
    with pytest.raises(ExperimentError, match="claims.*study.claim-id"):
        load(f, grid="powered")


def test_every_claim_a_study_grid_names_is_a_claim():
    import glob
    from tortoiselab.studies.data import grid_claims
    known = {c.id for s in S.STUDIES.values() for c in s.claims}
    named = {c for f in glob.glob("experiments/*.yaml") for cs in grid_claims(f).values() for c in cs or ()}
    assert named and named <= known, named - known


def test_the_power_simulation_runs_the_verdicts_own_test():
    """ratio_pvalues is paired_location's p, and ratio_side the side of 0
    its interval lies on whenever the test rejects (analysis.inference)."""
    from tortoiselab.analysis import inference
    rng = np.random.default_rng(7)
    sides = 0
    for n in (3, 5, 6, 9, 20, 35):
        x = rng.normal(rng.choice([-0.05, 0.0, 0.05]), 0.05, (12, n))
        p, side = pw.ratio_pvalues(x), pw.ratio_side(x)
        for i in range(len(x)):
            r = inference.paired_location(np.ones(n), np.exp(x[i]))
            assert p[i] == pytest.approx(r.p_value, rel=1e-9)
            if r.significant():
                sides += 1
                assert side[i] == np.sign(r.estimate) == (1 if r.low > 0 else -1)
    assert sides > 10


def test_equivalence_power_is_that_of_the_test_the_label_is_read_from():
    """reno_beta.low-loss-similar showed power 1.00 with 5 pairs (a 95 %
    bootstrap CI), although its exact sign-flip test never reaches p <
    0.0625 there, so its interval is unbounded whatever the pairs: the
    power of that test at the family's level is 0."""
    m = _normal_pilot(0.005, 5)  # five tight pairs: a bootstrap CI lies well within +-5 %
    e = pw.Effect("equivalence", margin=5)
    assert pw.power(m, e) == 0.0
    assert pw.power(m, e, alpha=0.05 / 3) == 0.0
    tight = _normal_pilot(0.005, 500)
    assert pw.power(tight, e, 6) > 0.9  # 2/2^6 < 0.05: the interval can close
    assert pw.power(tight, e, 6, alpha=0.05 / 3) == 0.0  # but not at 0.05 / 3 (2/2^6 = 0.031)
    assert pw.power(tight, e, 8, alpha=0.05 / 3) > 0.9


def test_an_inconclusive_row_says_what_would_settle_it_or_that_plan_cannot():
    """Before: only a shift claim on pairs said which runs would settle it;
    an equivalence claim (which `tortoise plan` sizes) and a two-group
    test (which it cannot) said nothing."""
    rng = np.random.default_rng(3)
    c = rng.uniform(900, 1100, 8)
    a = c * rng.lognormal(0, 0.04, 8)
    m = at_level(S.Measurement(0.0, n=8, control=tuple(c), arm=tuple(a), statistic="ratio"), 0.05)
    v = judge_claim(_claim(S.equivalent(5)), m, settle=True)
    assert v.verdict == "inconclusive" and v.settle_n and f"about {v.settle_n} pairs would settle it" in v.why
    groups = S.Measurement(-10.0, -40.0, 15.0, 0.4, 12, unit="ms", statistic="shift-groups", n_control=12, n_arm=12,
                           control=tuple(c.tolist() * 2)[:12], arm=tuple(a.tolist() * 2)[:12])
    v = judge_claim(_claim(S.direction("lower", "the gain", 20, "ms")), groups, settle=True)
    assert v.verdict == "inconclusive" and v.settle_n is None
    assert "`tortoise plan` cannot size it" in v.why and "the shift between two groups" in v.why
