"""`tortoise run`'s summary table and exit code (host/runsummary.py) on
stored records (tests/data/runs/initcwnd@ci, copied): a real-clock run
whose measured path was off is stored failed as disturbed, counted, and
exits 4 (issue 35 item 9, issue 38 item 4)."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tortoiselab.analysis.fidelity import disturbance
from tortoiselab.host import runsummary, store

CANNED = Path(__file__).resolve().parents[1] / "data" / "runs" / "initcwnd@ci"
KEYS = ["server.initcwnd_pkts"]


def _edit(run_dir: Path, clock: str, fid_ok: bool | None, ok: bool = True, error: str | None = None) -> dict:
    rec = json.loads((run_dir / "run.json").read_text())
    rec["meta"]["clock"] = clock
    rec["fidelity"][0]["ok"] = fid_ok
    rec["ok"] = ok
    rec["error"] = None if ok else error or "lab: load: the loader timed out"
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
    assert runsummary.exit_code(recs) == 0 and runsummary.disturbed_note(recs) is None
    assert runsummary.summary_rows(_table(folder), KEYS) == [
        ("3", "1", "1", "0", "1215.4", "1215.4", "-"), ("10", "1", "1", "0", "954.4", "954.4", "-")]


def test_a_disturbed_real_clock_run_is_never_ok():
    """The runner's rule (analysis/fidelity.disturbance): on the real clock a
    path measured off its configuration, after the path's own allowances,
    makes the run failed; not on the virtual clock, not when unjudged, not
    within a jittered path's allowance."""
    fid = {"quantity": "base RTT", "expected": 80.257, "measured": 113.088, "low": 79.457, "high": 81.057,
           "unit": "ms", "ok": False}
    rec = {"fidelity": [fid], "path": {"rtt_ms": 80}}
    why = disturbance("real", rec)
    assert why.startswith("disturbed: the real clock's lab did not keep the configured path (base RTT measured "
                          "113.088 ms, expected 80.257") and "--clock virtual" in why
    assert disturbance("virtual", rec) is None
    assert disturbance("real", {**rec, "path": {"rtt_ms": 80, "jitter_ms": 20}}) is None  # within 3 sigma
    assert disturbance("real", {**rec, "fidelity": [{**fid, "ok": None, "note": "not judged"}]}) is None
    assert disturbance("real", {**rec, "fidelity": [{**fid, "ok": True}]}) is None


def test_a_disturbed_run_is_counted_and_exits_4(folder: Path):
    """The attack: --clock real under load, all runs stored ok with
    fidelity_ok False, and neither the table nor the exit code said so.
    Now such a run is stored failed (disturbed): counted, exit 4."""
    a, b = _runs(folder)  # initcwnd 10, 3
    why = disturbance("real", {"fidelity": [{"ok": False, "measured": 90.0, "expected": 80.0}], "path": {}})
    recs = [_edit(a, "real", False, ok=False, error=why), _edit(b, "real", True)]
    rows = runsummary.summary_rows(_table(folder), KEYS)
    assert [r[:4] for r in rows] == [("3", "1", "1", "0"), ("10", "1", "0", "1")]
    assert runsummary.exit_code(recs) == 4
    assert runsummary.disturbed_note(recs).startswith(
        f"1 of 2 runs on the real clock measured a path off its configuration and are stored failed (disturbed: "
        f"{a.name})")


def test_failed_runs_exit_3_before_4_and_unjudged_is_not_off(folder: Path):
    a, b = _runs(folder)
    why = disturbance("real", {"fidelity": [{"ok": False, "measured": 90.0, "expected": 80.0}], "path": {}})
    recs = [_edit(a, "real", False, ok=False, error=why), _edit(b, "real", True, ok=False)]
    assert runsummary.exit_code(recs) == 3
    # a run stored ok counts as ok whatever its fidelity field says (the runner decides at storing)
    recs = [_edit(a, "real", None), _edit(b, "virtual", False)]
    assert runsummary.exit_code(recs) == 0
    assert [r[3] for r in runsummary.summary_rows(_table(folder), KEYS)] == ["0", "0"]


def test_sweep_points_are_labelled_by_the_names_the_experiment_file_uses():
    """A traced path by its trace's name, not its stored {file, name,
    sha256}; a swept topology field by its own column (topology.<param>),
    a count without a decimal point (a CDN set-up and its one-server twin
    are two rows, not one); none as "-" (issue 40, console output)."""
    trace = json.dumps({"file": "topologies/traces/lte.down", "name": "lte.down", "sha256": "af9b"})
    df = pd.DataFrame({
        "server.cc": ["htcp"] * 4, "path.trace_down": [trace, trace, None, None],
        "topology.cdn_rtt_ms": [27.0, None] * 2, "topology.clients": [1.0, 1.0] * 2,
        "ok": [True] * 4, "error": [None] * 4, "plt_ms": [100.0, 200.0, 300.0, 400.0],
        "throughput_mbit": [None] * 4})
    swept = ["server.cc", "path.trace_down", "topology.cdn_rtt_ms", "topology.clients"]
    keys = runsummary.summary_keys(df, swept)
    assert keys == ["path.trace_down", "topology.cdn_rtt_ms"]
    labels = [r[0] for r in runsummary.summary_rows(df, keys)]
    assert labels == ["lte.down 27", "lte.down -", "- 27", "- -"]
    # nothing swept varies (a sweep of one point): one row, by the algorithm
    assert runsummary.summary_keys(df.iloc[:1], swept) == ["server.cc"]


def test_a_topology_swept_in_a_stored_folder_labels_by_the_columns_the_store_makes(folder: Path):
    """The table the store rebuilds from the records has topology.<param>
    columns (host/columns.py), so a sweep over a topology parameter tells
    its points apart with no text parsed: one of the two runs moved onto a
    CDN set-up."""
    run_dir = _runs(folder)[0]
    rec = json.loads((run_dir / "run.json").read_text())
    rec["config"]["topology"] = {"name": "dumbbell", "cdn_rtt_ms": 27, "clients": 2}
    (run_dir / "run.json").write_text(json.dumps(rec, indent=1))
    df = _table(folder)
    assert runsummary.summary_keys(df, ["topology.name", "topology.cdn_rtt_ms", "topology.clients"]) == [
        "topology.name", "topology.cdn_rtt_ms", "topology.clients"]
    labels = [r[0] for r in runsummary.summary_rows(df, ["topology.name", "topology.cdn_rtt_ms"])]
    assert labels == ["dumbbell 27", "wan -"]
