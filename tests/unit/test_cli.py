"""Bad input is refused with the field's name before anything starts."""

import argparse
import subprocess

import pytest

from tests.conftest import TORTOISE
from tortoiselab import cli


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
        "load 2.78 s simulated in 24.6 s wall (0.11x real time; the run 13.2 s simulated, 0.5x)")
    # later in a batch: the idle wait for its start instant is simulated time, not load time
    assert _time_budget({"sim_seconds": 81.7, "load_sim_seconds": 2.98, "wall_seconds": 1.5}) == (
        "load 2.98 s simulated in 1.5 s wall (1.99x real time; the run 81.7 s simulated, 54.5x)")
    assert _time_budget({"wall_seconds": 3.0}) == "3.0 s wall"


def test_every_help_page_prints(capsys):
    """`tortoise --help` and each subcommand's: argparse formats help strings
    with %, so a bare "80 % power" made `tortoise --help` raise."""
    parser = cli.build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    for argv in (["--help"], *([name, "--help"] for name in subs)):
        with pytest.raises(SystemExit) as exc:
            cli.main(argv)
        assert exc.value.code == 0, argv
        assert "usage: tortoise" in capsys.readouterr().out, argv


def test_the_process_exits_without_collecting_its_garbage_first():
    """`tortoise ...` (main with this process's own argv) freezes the
    collector before the interpreter's exit, which would otherwise walk
    every object alive (~0.3 s after `tortoise run`); main called with an
    argv list (tests, other Python code) leaves the collector alone."""
    import gc
    import sys

    code = ("import atexit, gc, sys\n"
            "from tortoiselab import cli\n"
            "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0))\n"
            "sys.argv = ['tortoise', 'validate', 'experiments/quick.yaml']\n"
            "sys.exit(cli.main())\n")
    from tortoiselab.project import REPO_DIR

    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO_DIR)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().endswith("frozen True"), p.stdout
    before = gc.get_freeze_count()
    assert cli.main(["validate", str(REPO_DIR / "experiments" / "quick.yaml")]) == 0
    assert gc.get_freeze_count() == before
