"""`make reproduce` (scripts/reproduce.sh) as control flow, with a fake
`tortoise` (the script finds it as $VENV/bin/tortoise) that logs its
arguments: a run that failed honestly (exit 3) is counted and every step
still runs, the report comes last and the script's exit status is the
report's (5 = cli.NO_DATA_EXIT: a claim lacks data); bad input (exit 2)
stops the reproduction there."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from tortoiselab import cli

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "reproduce.sh"
GRID = "powered,reduced"

FAKE = """#!/usr/bin/env bash
echo "$*" >> "$FAKE_LOG"
case $1 in
    run) exit "$FAKE_RUN_EXIT" ;;
    map) exit 3 ;;
    report) exit "$FAKE_REPORT_EXIT" ;;
esac
exit 0
"""


def _experiments() -> list[str]:
    """The Makefile's STUDY_EXPERIMENTS, as `make reproduce` passes them."""
    text = (REPO / "Makefile").read_text().replace("\\\n", " ")
    return re.search(r"^STUDY_EXPERIMENTS := (.*)$", text, re.M).group(1).split()


def _reproduce(tmp_path: Path, run_exit: int) -> tuple[subprocess.CompletedProcess, list[str]]:
    """scripts/reproduce.sh GRID 2 STUDY_EXPERIMENTS in a scratch folder
    holding the experiment files, with the fake tortoise; its result and
    the fake's calls, in order."""
    shutil.copytree(REPO / "experiments", tmp_path / "experiments")
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    fake = tmp_path / "venv" / "bin" / "tortoise"
    fake.write_text(FAKE)
    fake.chmod(0o755)
    log = tmp_path / "calls.log"
    env = {**os.environ, "VENV": str(tmp_path / "venv"), "FAKE_LOG": str(log), "FAKE_RUN_EXIT": str(run_exit),
           "FAKE_REPORT_EXIT": str(cli.NO_DATA_EXIT)}
    r = subprocess.run(["bash", str(SCRIPT), GRID, "2", *_experiments()], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    return r, log.read_text().splitlines() if log.exists() else []


def _defines(e: str, grid: str) -> bool:
    return re.search(rf"^  {grid}:", (REPO / "experiments" / f"{e}.yaml").read_text(), re.M) is not None


def test_failed_runs_are_counted_every_step_runs_and_the_exit_is_the_reports(tmp_path):
    r, calls = _reproduce(tmp_path, run_exit=3)
    assert r.returncode == cli.NO_DATA_EXIT, r.stderr
    want = []
    for e in _experiments():  # the list's last grid first, a later one reusing the one before
        prev = None
        for g in reversed(GRID.split(",")):
            if _defines(e, g):
                want.append(f"run experiments/{e}.yaml --grid {g}" + (f" --reuse-from {prev}" if prev else "")
                            + " --jobs 2")
                prev = g
    want.append("run experiments/coalescing.yaml --grid browser --jobs 2")
    want.append("run experiments/cubic_plus.yaml --grid paper --jobs 2")  # CUBIC+'s loss-free sweeps (issue 51)
    want += [f"run experiments/{e}.yaml --grid sensitivity --jobs 2"
             for e in ("tortoise-population", "coalescing-population")]
    want.append("population-sensitivity tortoise-population coalescing-population --write")
    want += [f"map experiments/{e}.yaml --jobs 2" for e in _experiments()
             if re.search(r"^maps:", (REPO / "experiments" / f"{e}.yaml").read_text(), re.M)]
    want.append(f"report --reproduction --grid {GRID}")
    assert calls == want
    assert "stopped with exit" not in r.stderr
    assert r.stdout.count("some runs failed or a path was judged off") == len(want) - 2  # every run and map


def test_bad_input_stops_the_reproduction(tmp_path):
    r, calls = _reproduce(tmp_path, run_exit=2)
    assert r.returncode == 2 and len(calls) == 1 and calls[0].startswith("run ")
    assert "stopped with exit 2" in r.stderr
