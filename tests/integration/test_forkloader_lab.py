"""Our loader's fork server in the lab (guest/forkloader.py): on the real
clock a boot's loads fork from one loader process started once, each load
is recorded as the argv it ran, and each run is as whole as one whose
loader started on its own; on the virtual clock every load still starts
its own Python (docs/determinism.md, "Batches")."""

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import TORTOISE, write_yaml

pytestmark = pytest.mark.lab

EXP = """
name: forked
repetitions: 2
seed: 3
path: {rtt_ms: 100, loss_pct: 0, rate_mbit: 20}
server: {cc: cubic, initcwnd_pkts: 10}
client: {page: small.html}
sweep:
  server.cc: [cubic, hybla]
"""


def _run(tmp_path: Path, clock: str) -> list[dict]:
    f = write_yaml(tmp_path, EXP, "forked.yaml")
    p = subprocess.run([*TORTOISE, "run", str(f), "--results", str(tmp_path / clock), "--backend", "uml",
                        "--clock", clock, "--jobs", "1", "--batch", "4"], capture_output=True, text=True,
                       timeout=900)
    # on the real clock 4 is whole too: every run stored ok, a path judged off on a busy host (README,
    # "Exit codes"); this test is about the loader's processes, and checks each run's ok below
    assert p.returncode in ((0, 4) if clock == "real" else (0,)), p.stdout + p.stderr
    runs = sorted((tmp_path / clock / "forked").glob("*/run.json"))
    assert len(runs) == 4
    return [json.loads(r.read_text()) | {"_dir": r.parent} for r in runs]


def _loader_lines(run: dict) -> list[str]:
    return [line for line in (run["_dir"] / "commands.log").read_text().splitlines()
            if "tortoiselab.client" in line]


def test_real_clock_loads_fork_from_one_loader_process(tmp_path, lab_kernel):
    runs = _run(tmp_path, "real")
    assert all(r["ok"] for r in runs), [r.get("error") for r in runs]
    assert {r["meta"]["batch"]["size"] for r in runs} == {4}
    last = max(runs, key=lambda r: r["meta"]["batch"]["index"])
    lines = _loader_lines(last)  # the boot's commands up to its last load
    assert sum("tortoiselab.client.forkserver" in line for line in lines) == 1
    forked = [line for line in lines if "(forked)" in line]
    assert len(forked) == 4 and all("rc=0" in line for line in forked)
    for r in runs:
        # a real load: DNS, TCP, TLS and the page over a 100 ms path take several round trips
        assert r["summary"]["plt_ms"] > 300 and r["summary"]["requests_failed"] == 0, r["summary"]
        # real time: later loads follow after a short gap, not the virtual clock's 61 s and more
        assert r["meta"]["phases"].get("wait", 0) < 10, r["meta"]["phases"]


def test_virtual_clock_loads_start_their_own_loader(tmp_path, lab_kernel):
    runs = _run(tmp_path, "virtual")
    assert all(r["ok"] for r in runs)
    last = max(runs, key=lambda r: r["meta"]["batch"]["index"])
    lines = _loader_lines(last)
    assert not any("forkserver" in line or "(forked)" in line for line in lines)
    assert len(lines) == 4
