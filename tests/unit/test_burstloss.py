"""Bursty-loss statistics (analysis/burstloss.py) and the probe's rows for
them (analysis/fidelity.py, host/probe.py): the intervals cover the
configured figures about 95 % of the time on chains drawn as netem draws
them, and a binomial interval would not."""

import math

import numpy as np
import pytest

from tortoiselab.analysis.burstloss import burst_interval, pattern, rate_interval, wilson
from tortoiselab.analysis.fidelity import ge_loss_checks, loss_check, order_check
from tortoiselab.host.probe import describe_path, evaluate
from tortoiselab.spec.lossmodel import gilbert
from tortoiselab.spec.pathspec import PathSpec
from tortoiselab.spec.requests import ProbeMeasure


def netem_chains(p: float, r: float, n: int, reps: int, seed: int) -> np.ndarray:
    """reps loss sequences of n packets from netem's loss_gilb_ell (Simple
    Gilbert: lost exactly in Bad; the fate drawn in the state before the
    packet's transition; the chain starts in Good)."""
    rng = np.random.default_rng(seed)
    bad = np.zeros(reps, dtype=bool)
    out = np.zeros((reps, n), dtype=bool)
    for i in range(n):
        u = rng.random(reps)
        out[:, i] = bad
        bad = np.where(bad, u >= r, u < p)
    return out


def test_pattern_counts_runs_and_transitions():
    pat = pattern(10, [1, 2, 5, 9])
    assert pat.bursts == [2, 1] and pat.censored == 1 and pat.lost == 4
    assert (pat.n00, pat.n01, pat.n10, pat.n11) == (3, 3, 2, 1)
    assert pat.mean_burst == 1.5 and pat.rate == 0.4
    assert pattern(5, []).rho() == 0 and pattern(5, []).bursts == []


def test_wilson_matches_its_formula():
    lo, hi = wilson(10, 100)
    assert lo == pytest.approx(0.05522, abs=1e-4) and hi == pytest.approx(0.17437, abs=1e-4)
    assert wilson(0, 100)[0] == pytest.approx(0, abs=1e-12)


def test_burst_interval_edges():
    lo, hi = burst_interval([1, 1, 1])
    assert lo == 1.0 and hi > 1
    assert all(math.isnan(v) for v in burst_interval([]))
    lo, hi = burst_interval([3] * 100)  # 100 bursts of mean 3
    assert lo < 3 < hi and hi - lo < 1.2


@pytest.mark.parametrize("loss_pct,burst", [(5, 3), (2, 4), (1, 1 / 0.99)])
def test_intervals_cover_the_configured_figures(loss_pct, burst):
    """400 chains of 4000 packets (the probe's default): each 95 % interval
    holds the configured figure in 92-98 % of them."""
    ge = gilbert(loss_pct, burst)
    chains = netem_chains(ge.p_pct / 100, ge.r_pct / 100, 4000, 400, seed=int(loss_pct * 10 + burst))
    rate_in = burst_in = 0
    binomial_in = 0
    for x in chains:
        pat = pattern(len(x), list(np.flatnonzero(x)))
        lo, hi, _ = rate_interval(pat)
        rate_in += lo <= loss_pct / 100 <= hi
        blo, bhi = burst_interval(pat.bursts)
        burst_in += blo <= burst <= bhi
        binomial_in += loss_check("down", loss_pct, pat.sent, pat.sent - pat.lost).ok
    assert 0.92 <= rate_in / 400 <= 0.98
    assert 0.92 <= burst_in / 400 <= 0.98
    if burst >= 2:  # the independent-loss interval is far too narrow for bursts
        assert binomial_in / 400 < 0.85


def test_ge_rows_of_the_probe():
    model = gilbert(5, 3)
    x = netem_chains(model.p_pct / 100, model.r_pct / 100, 4000, 1, seed=11)[0]
    lost = [int(i) for i in np.flatnonzero(x)]
    loss, burst = ge_loss_checks("down", model, 4000, lost)
    assert loss.quantity == "loss down" and loss.unit == "%" and loss.configured == pytest.approx(5)
    assert burst.quantity == "burst down" and burst.unit == "pkts" and burst.configured == pytest.approx(3)
    assert loss.ok and burst.ok and "exact geometric interval" in burst.note
    assert "Wilson interval" in loss.note
    # every packet of a burst kept: the bursts are far too short
    singles = [s for s in range(0, 4000, 20)]
    assert not ge_loss_checks("down", model, 4000, singles)[1].ok
    none = ge_loss_checks("up", model, 4000, [])[1]
    assert not none.ok and "send more probes" in none.note


def test_probe_rows_for_a_bursty_path_with_jitter():
    path = PathSpec(rtt_ms=100, rate_mbit=10, loss_pct=5, loss_up_pct=0, loss_burst_pkts=3, jitter_ms=5)
    model = path.loss_model("down")
    x = netem_chains(model.p_pct / 100, model.r_pct / 100, 4000, 1, seed=11)[0]
    lost = [int(i) for i in np.flatnonzero(x)]
    rtts = [100.2 + 7 * v for v in (-1.2, 0.3, 1.1, -0.4, 0.8, -1.5, 0.1, 0.6, -0.7, 1.9)] * 2
    task = {"ping": {"min_ms": min(rtts), "received": 20, "transmitted": 20, "rtts_ms": rtts},
            "bulk": {"client": {"bytes": 1, "seconds": 1}, "samples": []},
            "loss_down": {"sent": 4000, "received": 4000 - len(lost), "lost_seqs": lost, "reordered": 0},
            "loss_up": {"sent": 4000, "received": 4000, "lost_seqs": [], "reordered": 0}}
    rows = {c.quantity: c for c in evaluate(path, task, ProbeMeasure())}
    assert list(rows) == ["mean RTT", "jitter", "bottleneck rate", "loss down", "burst down", "loss up",
                          "reorder down", "reorder up"]
    assert rows["mean RTT"].ok and rows["jitter"].ok, (rows["mean RTT"], rows["jitter"])
    assert not evaluate(path.model_copy(update={"jitter_ms": 1}), task, ProbeMeasure())[1].ok  # 7 ms is not 1
    assert rows["burst down"].ok and rows["loss up"].configured == 0 and rows["reorder down"].ok
    assert not order_check("up", 3).ok
    assert describe_path(path) == ("rtt 100.0 ms, rate 10.0 Mbit/s, loss 5.0 % in bursts of 3 pkts down, "
                                   "0.0 % up, jitter 5.0 ms, queue 83 pkts")
    assert describe_path(PathSpec()) == "rtt 200.0 ms, rate 10.0 Mbit/s, loss 1.0 % per direction, queue 166 pkts"


def test_rows_are_plain_json():
    """The probe writes its checks as JSON: no numpy scalars in them."""
    import json
    from dataclasses import asdict
    rows = ge_loss_checks("down", gilbert(5, 3), 100, [3, 4, 5, 50])
    json.dumps([asdict(c) for c in rows])
