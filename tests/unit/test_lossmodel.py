"""Loss models (spec/lossmodel.py) and their path fields (spec/pathspec.py):
the Simple Gilbert model from a mean loss rate and a mean burst length,
refusals that name the field and the fix, and paths that do not use them
dumping exactly as before."""

import math

import pytest
from pydantic import ValidationError

from tortoiselab.spec import idform
from tortoiselab.spec.experiment import PathCfg
from tortoiselab.spec.lossmodel import GilbertElliott, gilbert, max_loss_pct, min_burst_pkts
from tortoiselab.spec.pathspec import PathError, PathSpec, parse_path


def test_gilbert_from_loss_and_burst():
    ge = gilbert(5, 3)  # r = 1/3, p = r * 0.05 / 0.95
    assert ge.r_pct == pytest.approx(100 / 3, abs=1e-6)
    assert ge.p_pct == pytest.approx(100 / 3 * 0.05 / 0.95, abs=1e-6)
    assert (ge.loss_bad_pct, ge.loss_good_pct) == (100, 0)
    assert ge.loss_rate() == pytest.approx(0.05, rel=1e-6)
    assert ge.mean_burst_pkts() == pytest.approx(3, rel=1e-6)
    assert ge.tc_args() == ["loss", "gemodel", "1.754386%", "33.333333%", "100%", "0%"]


def test_bernoulli_is_the_gilbert_model_with_p_plus_r_one():
    ge = gilbert(10, 1 / 0.9)
    assert ge.p_pct + ge.r_pct == pytest.approx(100, abs=1e-5)
    assert ge.mean_burst_pkts() == pytest.approx(1 / 0.9, rel=1e-6)


def test_general_gilbert_elliott_figures():
    # loss in Good too: stationary loss mixes both states; runs end in either
    ge = GilbertElliott(p_pct=10, r_pct=40, loss_bad_pct=80, loss_good_pct=2)
    pb = 0.1 / 0.5
    assert ge.bad_fraction() == pytest.approx(pb)
    assert ge.loss_rate() == pytest.approx(0.8 * 0.02 + 0.2 * 0.8)
    # a brute-force check of the mean run of losses, from the chain's own draws
    import random
    rnd, state, lost = random.Random(3), "G", []
    for _ in range(400_000):
        p_loss = 0.02 if state == "G" else 0.8
        nxt = ("B" if rnd.random() < 0.1 else "G") if state == "G" else ("G" if rnd.random() < 0.4 else "B")
        lost.append(rnd.random() < p_loss)
        state = nxt
    runs, cur = [], 0
    for x in lost:
        if x:
            cur += 1
        elif cur:
            runs.append(cur)
            cur = 0
    assert sum(runs) / len(runs) == pytest.approx(ge.mean_burst_pkts(), rel=0.02)
    assert sum(lost) / len(lost) == pytest.approx(ge.loss_rate(), rel=0.02)


def test_limits_of_the_simple_gilbert_model():
    assert max_loss_pct(1) == 50
    assert min_burst_pkts(60) == pytest.approx(1.5)
    assert min_burst_pkts(0.5) == 1
    assert math.isinf(min_burst_pkts(100))


@pytest.mark.parametrize("field,value", [("p_pct", -1), ("p_pct", 101), ("r_pct", 150), ("loss_bad_pct", -0.1),
                                         ("loss_good_pct", 100.5), ("r_pct", float("nan"))])
def test_ge_probabilities_outside_0_100_are_refused(field, value):
    fields = {"p_pct": 1, "r_pct": 30, field: value}
    with pytest.raises(ValidationError) as e:
        GilbertElliott(**fields)
    assert e.value.errors()[0]["loc"] == (field,)


def test_absorbing_bad_state_is_refused():
    with pytest.raises(ValidationError, match="r_pct: 0 makes Bad absorbing.*give r_pct > 0"):
        GilbertElliott(p_pct=1, r_pct=0)
    assert GilbertElliott(p_pct=0, r_pct=0).loss_rate() == 0


# --- the path's fields ------------------------------------------------------


def _refusal(fields: dict) -> str:
    with pytest.raises(PathError) as e:
        parse_path(fields)
    return str(e.value)


def test_burst_below_one_packet_is_refused():
    msg = _refusal({"loss_pct": 2, "loss_burst_pkts": 0.5})
    assert msg.startswith("path.loss_burst_pkts:") and "greater than or equal to 1" in msg
    assert "give the mean loss-burst length in packets" in msg
    msg = _refusal({"loss_pct": 2, "loss_burst_up_pkts": 0})
    assert msg.startswith("path.loss_burst_up_pkts:")


def test_loss_the_model_cannot_make_is_refused_with_the_fix():
    msg = _refusal({"loss_pct": 60, "loss_burst_pkts": 1})
    assert msg.startswith("path.loss_burst_pkts:")
    assert "at least 1.5 packets" in msg and "at most 50 % loss" in msg
    assert "raise the burst length or lower loss_pct" in msg


def test_every_packet_lost_in_bursts_is_refused():
    msg = _refusal({"loss_pct": 100, "loss_burst_pkts": 4})
    assert msg.startswith("path.loss_burst_pkts:") and "give loss_pct below 100" in msg


def test_the_uplink_inherits_the_burst_and_is_checked_with_its_own_loss():
    msg = _refusal({"loss_pct": 1, "loss_up_pct": 70, "loss_burst_pkts": 2})
    assert msg.startswith("path.loss_burst_up_pkts:")
    assert "uplink takes loss_burst_pkts (2)" in msg and "lower loss_up_pct" in msg
    p = parse_path({"loss_pct": 1, "loss_up_pct": 70, "loss_burst_pkts": 2, "loss_burst_up_pkts": 3})
    assert p.burst_up_pkts == 3 and p.burst_down_pkts == 2
    assert p.loss_model("up").loss_rate() == pytest.approx(0.7, rel=1e-6)


def test_burst_per_direction():
    p = PathSpec(loss_pct=2, loss_burst_pkts=4)
    assert p.burst_up_pkts == 4 and p.loss_model("up") == p.loss_model("down")
    q = PathSpec(loss_pct=2, loss_burst_up_pkts=2)  # bursty uplink, random downlink
    assert q.loss_model("down") is None and q.loss_model("up").mean_burst_pkts() == pytest.approx(2)
    assert PathSpec().loss_model("down") is None and PathSpec().loss_model("up") is None


def test_a_path_without_bursts_dumps_as_before():
    """Run ids and seeds hash the resolved path's id form (spec/idform.py):
    the new fields are not in it while they hold their default."""
    before = {"rtt_ms": 200.0, "loss_pct": 1.0, "loss_up_pct": None, "rate_mbit": 10.0, "rate_up_mbit": None,
              "jitter_ms": 0.0, "queue_pkts": None}
    assert idform.path_form(PathSpec().model_dump()) == before
    assert PathSpec.model_validate_json(PathSpec().model_dump_json()) == PathSpec()
    bursty = PathSpec(loss_burst_pkts=3)
    form = idform.path_form(bursty.model_dump())
    assert form["loss_burst_pkts"] == 3 and "loss_burst_up_pkts" not in form
    assert PathSpec(**bursty.model_dump()) == bursty


def test_experiment_path_takes_the_burst_fields():
    cfg = PathCfg(loss_pct=3, loss_burst_pkts=2.5, loss_burst_up_pkts=1.5)
    assert cfg.resolve().burst_down_pkts == 2.5
    with pytest.raises(ValidationError) as e:
        PathCfg(loss_pct=60, loss_burst_pkts=1).resolve()
    assert e.value.errors()[0]["loc"] == ("loss_burst_pkts",)


def test_jitter_beyond_the_one_way_delay_is_refused():
    """netem sends a draw below zero delay at once: more jitter than the
    one-way delay would cut off the distribution, refused with the limit."""
    msg = _refusal({"rtt_ms": 20, "jitter_ms": 15})
    assert msg.startswith("path.jitter_ms:") and "give jitter_ms at most 10 (rtt_ms / 2)" in msg
    assert parse_path({"rtt_ms": 20, "jitter_ms": 10}).jitter_ms == 10
    with pytest.raises(ValidationError) as e:
        PathCfg(rtt_ms=20, jitter_ms=11).resolve()
    assert e.value.errors()[0]["loc"] == ("jitter_ms",)
