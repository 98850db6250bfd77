import pytest

from tortoiselab.guest.modules import requested_algorithms
from tortoiselab.host import lossresponse as L
from tortoiselab.spec.ccparams import check_params
from tortoiselab.spec.requests import LossResponseRequest, read_request


def test_expected_ratios_are_the_formulas():
    arms = {a.label: a for a in L.default_arms()}
    assert arms["reno"].expected == 0.5
    assert arms["cubic"].expected == 717 / 1024
    assert abs(arms["cubic_plus n=6"].expected - 0.95) < 1e-12
    assert abs(arms["cubic_plus n=2"].expected - 0.85) < 1e-12
    assert arms["scalable"].expected == 0.875
    # each arm's parameters are valid for its module
    for a in arms.values():
        check_params(a.cc, a.params)


def test_predicted_k():
    arm = L.Arm("x", "cubic_plus", {"beta": "0.700", "n": "6", "rtt_aware": "0"}, 0.95)
    assert abs(L.predicted_k(arm, 160, 100) - (160 * 0.05 / 0.4) ** (1 / 3)) < 1e-9
    aware = L.Arm("x", "cubic_plus", {"beta": "0.700", "n": "6", "rtt_aware": "1", "rtt_ref_ms": "50"}, 0.95)
    assert abs(L.predicted_k(aware, 160, 100) - L.predicted_k(arm, 160, 100) * 2 * 50 / 150) < 1e-9
    assert L.predicted_k(L.Arm("r", "reno", {}, 0.5), 160, 100) is None


def test_lab_request_of_the_default_arms():
    arms = L.default_arms()
    req = L.lab_request(arms)
    assert (req.task, req.path, req.drop_nth) == ("loss_response", L.PATH, L.DROP_NTH)
    assert [(a.label, a.cc, a.params) for a in req.arms] == [(a.label, a.cc, a.params) for a in arms]
    # CUBIC+ arms run long enough for the K fit
    assert {a.cc: a.segments for a in req.arms}["cubic_plus"] == L.SEGMENTS_REGROWTH
    assert {a.cc: a.segments for a in req.arms}["reno"] == L.SEGMENTS_RATIO
    assert read_request(req.model_dump_json()) == req
    assert isinstance(read_request(req.model_dump_json()), LossResponseRequest)
    # the native backend loads the modules the arms name
    assert requested_algorithms(req) == {"reno", "reno_beta", "cubic", "cubic_plus", "scalable"}


def test_reno_beta_arms_cover_both_readings_of_the_factor():
    """beta 0.5-0.9 (the factor is beta) and 0.5-0.1 (the factor is the
    cut's depth 1 - beta): 0.1 and 0.3 are judged like 0.5-0.9."""
    arms = {a.label: a for a in L.default_arms() if a.cc == "reno_beta"}
    assert {lab: (a.params, a.expected, a.beta_milli) for lab, a in arms.items()} == {
        "reno_beta 0.1": ({"beta": "0.100"}, 0.1, 100), "reno_beta 0.3": ({"beta": "0.300"}, 0.3, 300),
        "reno_beta 0.5": ({"beta": "0.500"}, 0.5, 500), "reno_beta 0.7": ({"beta": "0.700"}, 0.7, 700),
        "reno_beta 0.9": ({"beta": "0.900"}, 0.9, 900)}
    assert L.BAD_PARAMS["reno_beta"] == {"beta": "0.099"}  # the module must refuse just below its lowest


def test_reno_ssthresh_is_the_modules_integer_result():
    assert L.reno_ssthresh(160, 100) == 16 and L.reno_ssthresh(160, 300) == 48 and L.reno_ssthresh(160, 900) == 144
    assert L.reno_ssthresh(167, 300) == 50  # 50.1 truncated
    assert L.reno_ssthresh(169, 900) == 152  # 152.1 truncated
    assert L.reno_ssthresh(15, 500) == 7
    assert L.reno_ssthresh(19, 100) == 2 and L.reno_ssthresh(3, 500) == 2  # RFC 5681's floor of 2 segments
    assert L.reno_ssthresh(29, 100) == 2 and L.reno_ssthresh(30, 100) == 3


def _task(ssthresh_after: int, cwnd_before: int = 160) -> dict:
    """One arm's record as the guest writes it: slow start to cwnd_before,
    the reduction to ssthresh_after, recovery ending one RTT later."""
    big = 2_000_000_000
    samples = [[0.01 * i, 10 + i, big, 100_000, 1000 * i, 1000 * i + 5000] for i in range(cwnd_before - 9)]
    t, una = samples[-1][0], samples[-1][4]
    samples += [[t + 0.01, cwnd_before, ssthresh_after, 100_000, una, una + 5000],
                [t + 0.11, ssthresh_after, ssthresh_after, 100_000, una + 6000, una + 9000],
                [t + 0.12, ssthresh_after, ssthresh_after, 100_000, una + 7000, una + 9000]]
    return {"samples": samples, "filter_stats": "action order 1: gact action drop\n (dropped 1, overlimits 0)\n",
            "server_cc": "reno_beta", "params": {}}


@pytest.mark.parametrize("beta,cwnd,right", [("0.1", 160, 16), ("0.3", 160, 48), ("0.3", 167, 50), ("0.1", 15, 2)])
def test_a_reno_beta_arm_is_ok_only_at_the_exact_ssthresh(beta, cwnd, right):
    """Within the ratio's tolerance (0.02) is not enough: at beta 0.1 one
    segment more is 17/160 = 0.106, which the tolerance alone would pass."""
    arm = L.reno_beta_arm(beta)
    row, = L.analyze([arm], {"arms": [_task(right, cwnd)]})
    assert (row["ok"], row["ssthresh_after"], row["ssthresh_expected"]) == (True, right, right)
    for wrong in (right - 1, right + 1):
        if wrong < 1 or wrong >= cwnd:
            continue
        row, = L.analyze([arm], {"arms": [_task(wrong, cwnd)]})
        assert row["ok"] is False and row["ssthresh_expected"] == right, (beta, wrong)
    assert "16" in L.format_rows(L.analyze([L.reno_beta_arm("0.1")], {"arms": [_task(16)]}))
