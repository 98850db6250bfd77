"""The physicist's checks (studies/physics.py) on canned server captures
(tests/data/runs): the slow-start check's delayed-ACK explanation is read
from the capture and bounded, and hybla's check counts only runs that can
show rho."""

import shutil
from pathlib import Path

import pandas as pd
import pytest

from tortoiselab.analysis import flights
from tortoiselab.studies import physics as P
from tortoiselab.studies.connections import first_conn, transfer

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("physics") / "runs"
    shutil.copytree(RUNS, root)  # reading captures writes a cache beside them
    return root


def test_a_second_flight_short_by_one_late_ack_is_explained(runs):
    """coalescing@ci: flights 10, 18, 18 at IW 10. The capture shows 9 of
    the first flight's 10 segments ACKed before the third flight and the
    last one only after (a delayed ACK): 2 x 1 explains 20 - 18, and no
    more."""
    d = runs / "coalescing@ci" / "902b168b050c"
    c = first_conn(d)
    tf = transfer(c)
    v = flights.slow_start_verdicts(tf, 10)
    assert [f["segments"] for f in tf] == [10, 18, 18] and v[1]["reason"] == "short"
    assert P._late_acks_explain(str(d), c, tf, v)
    worse = [v[0], {**v[1], "segments": 16}, *v[2:]]  # 4 short: more than one late ACK can explain
    assert not P._late_acks_explain(str(d), c, tf, worse)
    fine = [v[0], {**v[1], "reason": "doubled"}, *v[2:]]
    assert not P._late_acks_explain(str(d), c, tf, fine)


def test_slow_start_and_hybla_checks_on_the_canned_runs(runs):
    checks = {c.name: c for c in P.physics_checks(runs / "coalescing@ci")}
    ss = checks[P.SLOW_START]
    assert ss.ok and ss.n == 2 and "delayed ACK" in ss.detail
    # tortoise@ci's hybla run: a 1-packet handshake flight at rho 2 is sent
    # whole whatever the window: not telling, so nothing is checked
    hy = {c.name: c for c in P.physics_checks(runs / "tortoise@ci")}[P.HYBLA]
    assert hy.n == 0 and hy.ok is None and "not telling" in hy.detail


@pytest.mark.parametrize("hs_ms, sample, rtt, rounds", [
    (31.4, 18.7, 28.0, 1),  # jitter: a short first sample would have made it 2
    (62.0, 60.0, 28.0, 1),  # a queue behind cross traffic: the sample is the yardstick
    (58.0, 27.0, 28.0, 2),  # a real second round trip stays one
])
def test_tls_round_trips_are_counted_against_the_longer_of_the_paths_rtt_and_the_sample(hs_ms, sample, rtt, rounds):
    hs = P.PhysicsCheck("handshake", None, "", "", 0)
    c = {"tls": {"version": "1.3", "handshake_ms": hs_ms}, "handshake_rtts": {"tcp": 1, "tls": 9},
         "tcp_rtt_ms": sample}
    P._check_handshake(hs, pd.Series({"run_id": "r", "path.rtt_ms": rtt}), c, 10, 1281, True)
    assert hs.n == 1 and (hs.failures == []) == (rounds == 1)
    if rounds != 1:
        assert "2 round trips, expected 1" in hs.failures[0]
