"""The probe's fidelity table counts only whole measurements (host/probe.py
evaluate): as many pings and probes as asked for, bytes moved."""

from __future__ import annotations

from tortoiselab.host.probe import evaluate
from tortoiselab.spec.pathspec import PathSpec
from tortoiselab.spec.requests import ProbeMeasure

P = PathSpec(rtt_ms=200, rate_mbit=10, loss_pct=1)
M = ProbeMeasure(ping_count=20, loss_probes=4000)


def _task(pings: int = 20, sent: int = 4000, received: int = 3960, nbytes: int = 12_000_000) -> dict:
    samples = [(t * 0.1, int(t * 0.1 * 10e6 / 8 * 1.0)) for t in range(0, 101)]  # 10 Mbit/s on the link
    return {"ping": {"transmitted": pings, "received": pings, "min_ms": 200.2},
            "bulk": {"client": {"bytes": nbytes, "seconds": 10.0}, "samples": samples},
            "loss_down": {"sent": sent, "received": received}, "loss_up": {"sent": 4000, "received": 3960}}


def test_a_whole_probe_passes():
    checks = evaluate(P, _task(), M)
    assert [c.ok for c in checks] == [True, True, True, True], [c.note for c in checks]


def test_fewer_probes_than_asked_is_not_a_measurement():
    down = evaluate(P, _task(sent=1000, received=990), M)[2]
    assert not down.ok and down.note.startswith("only 1000 of 4000 probes sent: not a whole measurement")
    rtt = evaluate(P, _task(pings=3), M)[0]
    assert not rtt.ok and "only 3 of 20 pings" in rtt.note


def test_a_bulk_transfer_that_moved_nothing_fails_the_rate():
    rate = evaluate(P, _task(nbytes=0), M)[1]
    assert not rate.ok and rate.note == "the bulk transfer moved no bytes"
