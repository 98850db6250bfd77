import pytest

from tortoiselab.spec.pathspec import PathError, PathSpec, check_algorithm, parse_path


def test_defaults_are_the_issue_path():
    p = parse_path({})
    assert (p.rtt_ms, p.rate_mbit, p.loss_pct) == (200.0, 10.0, 1.0)


def test_bdp_and_netem_limit():
    p = PathSpec(rtt_ms=200, rate_mbit=10, loss_pct=1)
    # 10 Mbit/s * 200 ms = 250000 bytes = 165.1 frames of 1514 bytes
    assert p.bdp_pkts() == 166
    assert p.queue() == 166
    # delay line of one direction (100 ms) = 82.6 -> 83 frames, + queue + 8 slack
    assert p.netem_limit_pkts() == 83 + 166 + 8
    assert PathSpec(rtt_ms=200, rate_mbit=10, queue_pkts=20).netem_limit_pkts() == 83 + 20 + 8


@pytest.mark.parametrize("field,value,words", [
    ("rtt_ms", -5, "rtt_ms"),
    ("loss_pct", 150, "loss_pct"),
    ("rate_mbit", 0, "rate_mbit"),
    ("jitter_ms", -1, "jitter_ms"),
    ("queue_pkts", 0, "queue_pkts"),
    ("rtt_ms", float("nan"), "rtt_ms"),
])
def test_bad_values_name_the_field_and_the_fix(field, value, words):
    with pytest.raises(PathError) as e:
        parse_path({field: value})
    msg = str(e.value)
    assert msg.startswith(f"path.{words}:")
    assert "got" in msg and ("e.g." in msg or "give" in msg)


def test_unknown_key_refused():
    with pytest.raises(PathError, match="path.rtt: Extra inputs are not permitted"):
        parse_path({"rtt": 100})


def test_unknown_algorithm_lists_the_known_ones():
    with pytest.raises(PathError, match=r"cc: unknown congestion control algorithm 'tortoise'.*cubic.*hybla"):
        check_algorithm("tortoise", ["reno", "cubic", "hybla"])
    assert check_algorithm("hybla", ["reno", "cubic", "hybla"]) == "hybla"
