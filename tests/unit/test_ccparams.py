import re
from pathlib import Path

import pytest

from tortoiselab.spec.ccparams import OUR_MODULES, ParamError, beta_effective, check_params, parse_assignments
from tortoiselab.spec.experiment import ExperimentError, load

MODULES = Path(__file__).resolve().parents[2] / "kernel" / "modules"


def test_assignments_are_checked_and_normalised():
    assert parse_assignments(["reno_beta.beta=0.8", "cubic_plus.n=2", "cubic_plus.rtt_aware=1"]) == {
        "reno_beta": {"beta": "0.800"}, "cubic_plus": {"n": "2", "rtt_aware": "1"}}


@pytest.mark.parametrize("item,msg", [
    ("reno_beta.beta=1.5", r"module_params.reno_beta.beta: '1.5' is outside \[0.1, 0.9\]"),
    ("reno_beta.beta=0.099", r"module_params.reno_beta.beta: '0.099' is outside \[0.1, 0.9\]"),
    ("reno_beta.beta=0.05", "outside"),
    ("reno_beta.beta=0", "outside"),
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


@pytest.mark.parametrize("beta", ["0.1", "0.2", "0.3", "0.4", "0.5", "0.9"])
def test_reno_beta_takes_both_readings_of_the_papers_factor(beta):
    """The seed's factor 0.5-0.9 read as beta (0.5..0.9) and as the cut's
    depth 1 - beta (beta 0.5..0.1): both ranges are accepted."""
    assert parse_assignments([f"reno_beta.beta={beta}"]) == {"reno_beta": {"beta": f"{float(beta):.3f}"}}


def test_an_experiment_with_beta_below_the_range_is_refused_before_it_runs(tmp_path):
    f = tmp_path / "e.yaml"
    f.write_text("name: x\nserver: {cc: reno_beta}\nsweep:\n  server.module_params:\n"
                 "    - {reno_beta: {beta: 0.1}}\n    - {reno_beta: {beta: 0.05}}\n")
    with pytest.raises(ExperimentError, match=r"module_params.reno_beta.beta: 0.05 is outside \[0.1, 0.9\]"):
        load(f)
    f.write_text("name: x\nserver: {cc: reno_beta}\nsweep:\n  server.module_params:\n"
                 "    - {reno_beta: {beta: 0.1}}\n    - {reno_beta: {beta: 0.3}}\n")
    assert load(f).name == "x"


def _module_bounds(source: str) -> dict[str, tuple[int, int, int]]:
    """parameter -> (default, min, max) as the module declares them:
    `static struct X <prefix>_<name> = { .val = V, .min = A, .max = B, };`
    registered by `module_param_cb(<name>, &ops, &<prefix>_<name>, ...)`."""
    decl = dict((m[0], tuple(int(x) for x in m[1:])) for m in re.findall(
        r"static struct \w+ (\w+) = \{\s*\.val = (\d+), \.min = (\d+), \.max = (\d+),", source))
    return {name: decl[var] for name, var in re.findall(r"module_param_cb\((\w+), &\w+, &(\w+),", source)}


@pytest.mark.parametrize("algorithm", sorted(OUR_MODULES))
def test_the_bounds_checked_here_are_the_modules_own(algorithm):
    """spec/ccparams.py refuses what the module would: same bounds, same
    default (decimals in thousandths in the module)."""
    bounds = _module_bounds((MODULES / f"tcp_{algorithm}.c").read_text())
    assert set(bounds) == set(OUR_MODULES[algorithm])
    for name, p in OUR_MODULES[algorithm].items():
        scale = 1000 if p.kind is float else 1
        assert bounds[name] == (round(p.default * scale), round(p.low * scale), round(p.high * scale)), name
