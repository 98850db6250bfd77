"""Bad input is refused with the field's name before anything starts."""

import subprocess

import pytest

from tests.conftest import TORTOISE


@pytest.mark.parametrize("args,field", [
    (["--rtt-ms", "-5"], "path.rtt_ms"),
    (["--loss-pct", "101"], "path.loss_pct"),
    (["--rate-mbit", "0"], "path.rate_mbit"),
    (["--cc", "tortoise"], "cc: unknown congestion control algorithm 'tortoise'"),
])
def test_bad_path_refused_before_anything_starts(tmp_path, args, field):
    work = tmp_path / "work"
    p = subprocess.run([*TORTOISE, "probe", "--backend", "uml", "--work", str(work), *args],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    assert field in p.stderr
    assert not work.exists()  # nothing was created


def test_each_run_prints_its_time_budget():
    from tortoiselab.cli import _time_budget

    assert _time_budget({"sim_seconds": 13.2, "load_sim_seconds": 2.776, "wall_seconds": 24.6}) == (
        "13.20 s simulated (2.78 s of it the load) in 24.6 s wall: 0.54x real time")
    assert _time_budget({"wall_seconds": 3.0}) == "3.0 s wall"
