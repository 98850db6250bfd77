"""Which packets the path lost, from a load's two captures (analysis/pathloss.py)."""

from pathlib import Path

import pytest

from tortoiselab.analysis.pathloss import common_draws, lost_positions, path_losses

DATA = Path(__file__).resolve().parents[1] / "data"


def test_the_one_dropped_segment_is_found_by_position_and_sequence_number():
    out = path_losses(DATA / "flights_drop1_iw10.pcap", DATA / "flights_drop1_iw10_client.pcap")
    assert out["down"] == {"sent": 85, "lost": [{"position": 39, "conn": 0, "rel_seq": 48423, "flags": 16,
                                                 "ip_len": 1500}]}
    assert out["up"] == {"sent": 80, "lost": []}


def test_a_loss_free_load_loses_nothing():
    out = path_losses(DATA / "flights_iw3.pcap", DATA / "flights_iw3_client.pcap")
    assert (out["down"]["lost"], out["up"]["lost"]) == ([], [])
    assert (out["down"]["sent"], out["up"]["sent"]) == (82, 51)


def test_lost_positions_walks_a_subsequence():
    assert lost_positions(list("abcdef"), list("acf")) == [1, 3, 4]
    assert lost_positions(list("abc"), []) == [0, 1, 2]
    assert lost_positions([], []) == []


@pytest.mark.parametrize("received", [list("ba"), list("abx")])
def test_a_receiver_that_saw_more_or_another_order_is_refused(received):
    with pytest.raises(ValueError, match="not a subsequence"):
        lost_positions(list("abc"), received)


def _losses(down_sent, down_lost, up_sent, up_lost):
    return {"down": {"sent": down_sent, "lost": [{"position": i} for i in down_lost]},
            "up": {"sent": up_sent, "lost": [{"position": i} for i in up_lost]}}


def test_common_draws_compares_the_positions_both_loads_reached():
    a = _losses(141, [46], 119, [48, 49, 107])
    b = _losses(143, [46], 131, [48, 49, 107, 126])  # sent more up: met one more draw, a loss
    out = common_draws(a, b)
    assert out["down"] == {"reached": 141, "a": [46], "b": [46]}
    assert out["up"] == {"reached": 119, "a": [48, 49, 107], "b": [48, 49, 107]}
    assert common_draws(a, _losses(141, [45], 119, [48, 49, 107]))["down"] == {"reached": 141, "a": [46], "b": [45]}
