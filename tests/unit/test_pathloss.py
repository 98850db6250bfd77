"""Which packets the path lost, from a load's two captures (analysis/pathloss.py)."""

from pathlib import Path

import pytest

from tortoiselab.analysis.pathloss import DNS, common_draws, lost_positions, path_losses

DATA = Path(__file__).resolve().parents[1] / "data"


def test_the_one_dropped_segment_is_found_by_position_and_sequence_number():
    out = path_losses(DATA / "flights_drop1_iw10.pcap", DATA / "flights_drop1_iw10_client.pcap")
    # the link's streams: 85 segments down and the DNS answer before them, 80 up and the DNS query
    assert out["down"] == {"sent": 86, "lost": [{"position": 40, "conn": 0, "rel_seq": 48423, "flags": 16,
                                                 "ip_len": 1500}]}
    assert out["up"] == {"sent": 81, "lost": []}


def test_a_loss_free_load_loses_nothing():
    out = path_losses(DATA / "flights_iw3.pcap", DATA / "flights_iw3_client.pcap")
    assert (out["down"]["lost"], out["up"]["lost"]) == ([], [])
    assert (out["down"]["sent"], out["up"]["sent"]) == (83, 52)  # 82 and 51 segments, and one DNS packet each


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


def _segments(n):
    return [f"s{i}" for i in range(n)]


def test_a_lookup_that_crosses_the_link_earlier_or_later_moves_no_loss():
    """netem's 9th draw (position 8) is a loss in both loads; the load's
    DNS query crosses before it in one and after it in the other (the real
    clock's timing). Counted in segments alone the loss would be the 8th
    segment in one and the 9th in the other (the native backend's test saw
    this under load); counted in the link's stream it is position 8 in both."""
    s = _segments(10)
    a_sent = [*s[:3], DNS, *s[3:]]  # the query is draw 3: draw 8 is s7
    b_sent = [*s[:9], DNS, s[9]]  # the query is draw 9: draw 8 is s8
    a_received = [p for p in a_sent if p not in (DNS, "s7")]
    b_received = [p for p in b_sent if p not in (DNS, "s8")]
    assert lost_positions(a_sent, a_received) == lost_positions(b_sent, b_received) == [8]


def test_an_answer_the_receiver_saw_takes_its_place_in_the_stream():
    """Down: the DNS answer comes from the DNS server, not the server: the
    client's capture places it; a lost segment keeps its position after it."""
    sent = _segments(6)
    received = [DNS, "s0", "s1", "s3", "s4", DNS, "s5"]
    assert lost_positions(sent, received) == [3]
    assert lost_positions(sent, [*sent, DNS]) == []
