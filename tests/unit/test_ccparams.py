import pytest

from tortoiselab.spec.ccparams import ParamError, beta_effective, check_params, parse_assignments


def test_assignments_are_checked_and_normalised():
    assert parse_assignments(["reno_beta.beta=0.8", "cubic_plus.n=2", "cubic_plus.rtt_aware=1"]) == {
        "reno_beta": {"beta": "0.800"}, "cubic_plus": {"n": "2", "rtt_aware": "1"}}


@pytest.mark.parametrize("item,msg", [
    ("reno_beta.beta=1.5", r"module_params.reno_beta.beta: '1.5' is outside \[0.5, 0.9\]"),
    ("reno_beta.beta=0.45", "outside"),
    ("cubic_plus.n=0", r"module_params.cubic_plus.n: '0' is outside \[1, 16\]"),
    ("cubic_plus.n=2.5", "whole number"),
    ("cubic_plus.beta=0.7001", "more than 3 decimals"),
    ("cubic_plus.gamma=1", "unknown parameter; cubic_plus has beta"),
    ("reno_beta.beta=high", "not a number"),
    ("beta=0.8", "write <algorithm>.<parameter>=<value>"),
    ("cubic.beta=0.8", "'cubic' takes no parameters here"),
])
def test_bad_values_are_refused_with_the_field(item, msg):
    with pytest.raises(ParamError, match=msg):
        parse_assignments([item])


def test_beta_effective_is_the_papers_formula():
    assert beta_effective(0.7, 6) == pytest.approx(0.95)
    assert beta_effective(0.7, 2) == pytest.approx(0.85)
    assert beta_effective(0.7, 1) == pytest.approx(0.7)
    assert check_params("reno_beta", {}) == {}
