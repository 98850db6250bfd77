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
