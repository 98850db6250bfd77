"""`tortoise report` applies the physics gate (analysis/gates.py) as the
grade and the studies do: a run whose numbers no run can measure is left
out of every statistic of the report and listed with the reason (issue 35,
failed attack 4: halved PLTs shown as if measured).

A real stored folder (tests/data/runs/initcwnd@ci, with its .lab site),
stored again with manifests; one run's PLT is halved in run.json and its
manifest.json and runs.parquet are rewritten to match, as someone editing
the folder with care would: `tortoise verify` passes, only physics tells."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.results_copy import stored_copy
from tortoiselab import cli, report
from tortoiselab.report.context import fidelity_summary, runs_summary
from tortoiselab.host import manifests, store

NAME = "initcwnd@ci"
EDITED, OTHER = "1072698669c7", "b1a05207aa21"  # 130 ms, no loss: PLT 954.393 ms, floor 946.336 ms
REASON = "PLT 477.197 ms below its napkin floor 946.336 ms on a loss-free path (analysis/napkin.py)"


@pytest.fixture
def edited(tmp_path) -> Path:
    exp = stored_copy(NAME, tmp_path / "results")
    f = exp / EDITED / store.RECORD
    raw = json.loads(f.read_text())
    raw["summary"]["plt_ms"] = raw["summary"]["plt_ms"] / 2
    f.write_text(json.dumps(raw, indent=1, sort_keys=True))
    (exp / EDITED / manifests.MANIFEST).unlink()
    manifests.write_manifest(exp / EDITED)
    store.rebuild_table(exp)
    return exp


def test_the_edit_passes_verify(edited, capsys):
    assert cli.main(["verify", str(edited)]) == 0, capsys.readouterr().out


def test_the_report_leaves_a_run_that_fails_the_physics_gate_out_and_names_it(edited, capsys):
    assert cli.main(["report", str(edited)]) == 0
    out = capsys.readouterr().out
    assert f"{EDITED}: {REASON}" in out and "physics gate" in out, out
    assert "477.2" not in out  # the floor table printed has only the other run
    page = (edited / "report.html").read_text()
    assert "fail the physics gate" in page and EDITED in page and "below its napkin floor 946.336 ms" in page

    ctx = report.load_context(edited)
    assert ctx.gated == {EDITED: [REASON]}
    ok = dict(zip(ctx.df["run_id"], ctx.df["ok"]))
    assert ok == {EDITED: False, OTHER: True}
    assert any(EDITED in n and REASON in n and "physics gate" in n for n in ctx.notes), ctx.notes
    # every statistic: the floor table, the runs per sweep point, the figures' runs
    t = report.floor_table(ctx)
    assert int(t["runs"].sum()) == 1 and 477.1965 not in set(t["plt_ms"])
    summary = runs_summary(ctx, n_resamples=200)
    assert list(summary["runs"]) == [1, 1] and sorted(summary["ok"]) == [0, 1]
    assert sorted(summary["n_plt"]) == [0, 1]
    # a failed run is a run whose record says so; a gated one is listed apart, with its reason
    fid = fidelity_summary(ctx)
    assert fid["failed_runs"] == [] and fid["physics_gated"] == [{"run": EDITED, "reason": REASON}]


def test_a_folder_whose_runs_pass_reports_as_before(tmp_path):
    ctx = report.load_context(stored_copy(NAME, tmp_path / "results"))
    assert ctx.gated == {} and not any("physics" in n for n in ctx.notes)
    assert list(ctx.df["ok"]) == [True, True] and int(report.floor_table(ctx)["runs"].sum()) == 2
