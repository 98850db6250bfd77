import math

import pytest

from tortoiselab.analysis.ccanalysis import CUBIC_C, cubic_k, find_loss_event, fit_k, rtt_aware_factor


def test_loss_event_skips_hystart_and_reads_the_decrease():
    # [t, cwnd, ssthresh, srtt, snd_una, snd_nxt]
    s = [[0.0, 10, 2147483647, 100000, 0, 100], [0.1, 20, 2147483647, 100000, 100, 200],
         [0.2, 32, 32, 100000, 200, 300],  # HyStart / route ssthresh: ssthresh = cwnd, not a decrease
         [0.3, 40, 32, 100000, 300, 400],  # the ACK whose processing detects the loss
         [0.4, 40, 20, 100000, 300, 410],  # the loss: 40 -> 20, recovery point 400
         [0.5, 18, 20, 100000, 300, 420], [0.6, 19, 20, 100000, 420, 430],  # snd_una past 400: done
         [0.7, 20, 20, 100000, 430, 440], [0.8, 21, 20, 100000, 440, 450]]
    ev = find_loss_event(s)
    assert (ev.cwnd_before, ev.ssthresh_after, ev.ratio) == (40, 20, 0.5)
    assert (ev.t_loss, ev.t_recovered, ev.cwnd_recovered) == (0.4, 0.6, 20)
    assert ev.srtt_ms == 100.0
    assert find_loss_event(s[:4]) is None


def test_cubic_k_rfc9438():
    # W_max 100, beta 0.7: K = cbrt(100 * 0.3 / 0.4) = cbrt(75)
    assert cubic_k(100, 0.7) == pytest.approx(75 ** (1 / 3))
    assert rtt_aware_factor(100, 100) == 1.0
    assert rtt_aware_factor(50, 100) > 1 > rtt_aware_factor(200, 100)


def test_fit_recovers_a_known_k():
    w_max, k, rtt = 100.0, 2.0, 0.1
    samples = [[0.0, 100, 2147483647, 100000, 0, 50], [0.5, 100, 95, 100000, 0, 60]]  # loss at 0.5
    t0 = 0.6
    for i in range(400):
        t = i * 0.01
        w = CUBIC_C * (t + rtt - k) ** 3 + w_max
        samples.append([t0 + t, max(95, round(w)), 95, 100000, 100 + i, 200 + i])
    ev = find_loss_event(samples)
    r = fit_k(samples, ev, w_max)
    assert abs(r["k_fit_s"] - k) < 0.05
    assert r["rms_segments"] < 1.0
    assert math.isnan(fit_k(samples[:5], ev, w_max)["k_fit_s"])
