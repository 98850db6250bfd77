"""`tortoise run`'s summary table and exit code (host/runsummary.py) on
stored records (tests/data/runs/initcwnd@ci, copied): a real-clock run
whose measured path was off is counted and exits 4 (issue 35 item 9)."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tortoiselab.host import runsummary, store

CANNED = Path(__file__).resolve().parents[1] / "data" / "runs" / "initcwnd@ci"
KEYS = ["server.initcwnd_pkts"]


def _edit(run_dir: Path, clock: str, fid_ok: bool | None, ok: bool = True) -> dict:
    rec = json.loads((run_dir / "run.json").read_text())
    rec["meta"]["clock"] = clock
    rec["fidelity"][0]["ok"] = fid_ok
    rec["ok"] = ok
    rec["error"] = None if ok else "lab: load: the loader timed out"
    (run_dir / "run.json").write_text(json.dumps(rec, indent=1))
    return rec


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    exp = tmp_path / "initcwnd@ci"
    shutil.copytree(CANNED, exp)
    return exp


def _runs(exp: Path) -> list[Path]:
    return sorted(d for d in exp.iterdir() if (d / "run.json").is_file())


def _table(exp: Path) -> pd.DataFrame:
    return pd.read_parquet(store.rebuild_table(exp))


def test_virtual_clock_runs_all_faithful_exit_0(folder: Path):
    recs = [json.loads((d / "run.json").read_text()) for d in _runs(folder)]
    assert runsummary.exit_code(recs) == 0 and runsummary.unfaithful_note(recs) is None
    assert runsummary.summary_rows(_table(folder), KEYS) == [
        ("3", "1", "1", "0", "1215.4", "1215.4", "-"), ("10", "1", "1", "0", "954.4", "954.4", "-")]


def test_a_real_clock_run_off_its_path_is_counted_and_exits_4(folder: Path):
    """The attack: --clock real under load, all runs stored ok with
    fidelity_ok False, and neither the table nor the exit code said so."""
    a, b = _runs(folder)  # initcwnd 10, 3
    recs = [_edit(a, "real", False), _edit(b, "real", True)]
    rows = runsummary.summary_rows(_table(folder), KEYS)
    assert [r[:4] for r in rows] == [("3", "1", "1", "0"), ("10", "1", "1", "1")]
    assert runsummary.exit_code(recs) == 4
    assert runsummary.unfaithful_note(recs).startswith(
        f"1 of 2 runs on the real clock measured a path off its configuration (fidelity_ok false: {a.name}); ")


def test_failed_runs_exit_3_before_4_and_unjudged_is_not_off(folder: Path):
    a, b = _runs(folder)
    recs = [_edit(a, "real", False), _edit(b, "real", True, ok=False)]
    assert runsummary.exit_code(recs) == 3
    # not judged (every handshake waited out a retransmission timeout), or the virtual clock: not off
    recs = [_edit(a, "real", None), _edit(b, "virtual", False)]
    assert runsummary.exit_code(recs) == 0
    assert [r[3] for r in runsummary.summary_rows(_table(folder), KEYS)] == ["0", "0"]
