import math

from tortoiselab.analysis.fidelity import (format_table, handshake_rtt_check, loss_check, rate_check, rtt_check,
                                           window_rates)
from tortoiselab.spec.pathspec import PathSpec

P = PathSpec(rtt_ms=200, rate_mbit=10, loss_pct=1)


def test_rtt_expected_includes_serialization():
    c = rtt_check(P, 200.157, 20, 20)
    assert c.expected == 200.157 and c.ok
    assert (c.low, c.high) == (198.157, 202.157)  # 1 % of 200 ms > 0.5 ms
    assert not rtt_check(P, 202.3, 20, 20).ok
    small = PathSpec(rtt_ms=20, rate_mbit=100)
    assert rtt_check(small, 20.6, 5, 5).ok is False  # 0.5 ms floor, not 1 %
    assert rtt_check(P, None, 0, 20).ok is False


def test_rate_from_link_bytes():
    # 10 Mbit/s = 125000 bytes per 100 ms, after a slow first 2 s
    samples, b = [], 0
    for i in range(101):
        samples.append((i * 0.1, b))
        b += 30000 if i < 20 else 125000
    assert window_rates(samples[20:], 1.0)[0] == 10e6
    c = rate_check(P, samples, warmup_s=2.0)
    assert c.ok and math.isclose(c.measured, 10.0)
    slow = [(t, int(v * 0.96)) for t, v in samples]
    assert not rate_check(P, slow, warmup_s=2.0).ok  # 9.6 < 9.7
    assert not rate_check(P, samples[:15], warmup_s=2.0).ok  # too short


def test_loss_interval():
    c = loss_check("down", 1.0, 4000, 3970)
    assert c.measured == 0.75 and c.ok
    assert c.low < 0.75 < c.high
    assert not loss_check("down", 1.0, 4000, 3900).ok  # 2.5 % is far off
    assert not loss_check("down", 1.0, 0, 0).ok


def test_table_marks_failures():
    t = format_table([rtt_check(P, 200.157, 20, 20), loss_check("up", 1.0, 4000, 3900)])
    assert "yes" in t and "NO" in t


def test_handshake_rtt_names_its_source():
    """A page-load run's base RTT comes from the TCP handshakes in the
    server capture, not from ping: the check says so, with the handshake's
    own frames (SYN-ACK down, ACK up) in the serialization."""
    c = handshake_rtt_check(P, [200.4, 200.2, 201.0], 3)
    assert c.measured == 200.2 and c.ok and "min of 3 TCP handshakes in the server capture" in c.note
    assert c.expected == round(200 + 74 * 8e3 / 10e6 + 66 * 8e3 / 10e6, 3)
    none = handshake_rtt_check(P, [], 2)
    assert not none.ok and none.note == "no TCP handshake in the server capture (2 connections)"
    assert "ping" not in none.note
