"""The physics gate (analysis/gates.py) on real stored records
(tests/data/runs/<name>@ci with their site and PKI) and on the same records
with a number edited, and its use by the grader (course/grade.py, check
"physics") and the studies (studies/data.load_runs, physics.gate_check):
issue 35, failed attack 4 (halved PLTs graded complete, unflagged in the
verdicts)."""

import copy
import json
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from tortoiselab import cli
from tortoiselab import studies as S
from tortoiselab.analysis.gates import physics_gate
from tortoiselab.course import grade, handout
from tortoiselab.host import audit, manifests

REPO = Path(__file__).resolve().parents[2]
RUNS = REPO / "tests" / "data" / "runs"
FOLDERS = sorted(p for p in RUNS.iterdir() if p.is_dir())


def _rec(folder: str, run_id: str) -> dict:
    return json.loads((RUNS / folder / run_id / "run.json").read_text())


def _site(folder: str):
    return audit.folder_site(RUNS / folder)


def _gate(folder: str, rec: dict) -> list[str]:
    return physics_gate(rec, *_site(folder))


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_real_stored_runs_pass(folder):
    recs = [json.loads(f.read_text()) for f in sorted(folder.glob("*/run.json"))]
    assert recs and audit.gate_runs(folder, recs) == {}


def test_a_lossfree_plt_below_the_floor_is_flagged_whatever_floor_the_record_says():
    rec = _rec("initcwnd@ci", "1072698669c7")  # 130 ms, no loss, no jitter: PLT 954.393, floor 946.336
    rec["summary"]["plt_ms"] = 477.1965
    want = ["PLT 477.197 ms below its napkin floor 946.336 ms on a loss-free path (analysis/napkin.py)"]
    assert _gate("initcwnd@ci", rec) == want
    rec["summary"]["floor_ms"] = 400.0  # the record's own floor edited too: the gate recomputes it
    assert _gate("initcwnd@ci", rec) == want
    rec["summary"]["plt_ms"] = 940.0  # within the model's 1 % slack
    assert _gate("initcwnd@ci", rec) == []


def test_the_floor_gates_only_paths_where_it_is_a_bound():
    rec = _rec("reno_beta@ci", "bcd68441ac3c")  # 2 % loss: a lost packet costs, but the floor is only loss-free's
    rec["summary"]["plt_ms"] = 500.0  # below its floor 609.34, above its RTT 20
    assert _gate("reno_beta@ci", rec) == []
    rec = _rec("tortoise@ci", "7084663580c8")  # 2 ms jitter: a packet may come early
    rec["summary"]["plt_ms"] = 300.0
    assert _gate("tortoise@ci", rec) == []


def test_a_plt_below_the_paths_rtt_is_flagged():
    rec = _rec("tortoise@ci", "7084663580c8")  # 54 ms RTT, 2 ms jitter per direction
    rec["summary"]["plt_ms"] = 40.0
    assert _gate("tortoise@ci", rec) == ["PLT 40 ms below the path's RTT 54 ms"]
    rec["summary"]["plt_ms"] = 46.0  # within 3 sigmas of the round trip's jitter (8.5 ms)
    assert _gate("tortoise@ci", rec) == []
    rec = _rec("initcwnd@ci", "1072698669c7")
    rec["summary"]["repeat"]["plt_ms"] = 65.0
    rec["summary"]["ttfb_ms"] = 100.0
    assert _gate("initcwnd@ci", rec) == ["TTFB 100 ms below the path's RTT 130 ms",
                                         "second load's PLT 65 ms below the path's RTT 130 ms"]


def test_bytes_that_are_not_the_pages_are_flagged():
    rec = _rec("initcwnd@ci", "1072698669c7")
    rec["summary"]["bytes"] = 80000
    assert _gate("initcwnd@ci", rec) == ["bytes 80000, the page article.html is 160000 bytes (site manifest)"]
    rec = _rec("coalescing@ci", "902b168b050c")  # feed.html: the document and its objects
    rec["summary"]["bytes"] += 1
    assert _gate("coalescing@ci", rec) == ["bytes 861529, the page feed.html is 861528 bytes (site manifest)"]
    rec["summary"]["bytes"] -= 1
    rec["config"]["client"]["page"] = "nope.html"
    assert _gate("coalescing@ci", rec) == ["the page nope.html is not in the site's manifest"]


def test_h2load_bytes_and_a_throughput_above_the_bottleneck():
    rec = _rec("cubic_plus@ci", "00b746c28ece")  # 3 x objects/50000.bin at 20 Mbit/s
    rec["summary"]["data_bytes"] = 75000
    rec["summary"]["throughput_mbit"] = 40.0
    assert _gate("cubic_plus@ci", rec) == ["h2load data_bytes 75000, 3 requests x 50000 bytes expected",
                                           "throughput_mbit 40 above the path's rate 20 Mbit/s"]


def test_without_the_sites_manifest():
    rec = _rec("initcwnd@ci", "1072698669c7")
    _, pki = _site("initcwnd@ci")
    rec["summary"]["bytes"] = 80000  # a copy without .lab (docs/course-labs.md): nothing to check bytes against
    assert physics_gate(rec, None, pki) == []
    rec["summary"]["plt_ms"] = 477.0  # nor the floor (the record's own may be an older model's)
    assert physics_gate(rec, None, pki) == []
    rec["summary"]["plt_ms"] = 100.0  # the path's RTT is in the record's configuration
    assert physics_gate(rec, None, pki) == ["PLT 100 ms below the path's RTT 130 ms"]
    assert physics_gate({**rec, "ok": False}, None, pki) == []  # a failed run carries no number to gate


LOSSFREE = [("initcwnd@ci", "1072698669c7"), ("initcwnd@ci", "b1a05207aa21")]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(LOSSFREE), st.floats(0.0001, 0.985), st.floats(1.0, 3.0))
def test_scaling_a_lossfree_plt(run, low, high):
    """Below 99 % of the floor (here: of the measured PLT, which is above
    it) is flagged; a measured PLT made longer never is."""
    folder, rid = run
    rec = _rec(folder, rid)
    plt = rec["summary"]["plt_ms"]
    slow = copy.deepcopy(rec)
    slow["summary"]["plt_ms"] = plt * high
    assert _gate(folder, slow) == []
    floor = re.search(r"floor ([\d.]+) ms", str(_gate(folder, {**rec, "summary": {**rec["summary"], "plt_ms": 1.0}})))
    rec["summary"]["plt_ms"] = float(floor.group(1)) * low
    assert any("below its napkin floor" in r for r in _gate(folder, rec))


# --- the grader and the studies -----------------------------------------------------


def _ci_lab(tmp_path: Path):
    """Lab 4 with its requirements on the ci grid (the canned runs' grid)."""
    text = (REPO / "labs" / "04-initcwnd.md").read_text()
    text = re.sub(r"^grid: reduced$", "grid: ci", text, count=1, flags=re.M)
    text = re.sub(r"^\s*(runs|repetitions): \d+\n", "", text, flags=re.M)
    for sub in ("labs", "experiments"):
        (tmp_path / sub).mkdir()
    shutil.copy(REPO / "experiments" / "initcwnd.yaml", tmp_path / "experiments")
    p = tmp_path / "labs" / "04-initcwnd.md"
    p.write_text(text)
    return p, handout.load_lab(p)


def _halve(run_dir: Path) -> None:
    """PLT halved in run.json, and the manifest written again to match (what
    `tortoise verify` cannot tell from a stored run: the gate's to catch)."""
    f = run_dir / "run.json"
    rec = json.loads(f.read_text())
    rec["summary"]["plt_ms"] = round(rec["summary"]["plt_ms"] / 2, 3)
    f.write_text(json.dumps(rec))
    (run_dir / manifests.MANIFEST).unlink()
    manifests.write_manifest(run_dir)


def test_grade_fails_on_a_halved_plt_naming_the_run(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "initcwnd@ci"
    shutil.copytree(RUNS / "initcwnd@ci", folder)
    lab_file, lab = _ci_lab(tmp_path)
    sections = grade.grade(lab, folder, audit_k=0)  # no reruns here: the physics gate alone
    assert grade.complete(sections), grade.format_grade(lab, sections)
    _halve(folder / "1072698669c7")
    sections = grade.grade(lab, folder, audit_k=0)
    assert not grade.complete(sections)
    physics = {c.name: c for c in sections[0].checks}["physics"]
    assert physics.summary == "1 of 2 completed runs have numbers no run can measure: 1072698669c7"
    assert physics.details == ["1072698669c7: PLT 477.197 ms below its napkin floor 946.336 ms on a loss-free path "
                               "(analysis/napkin.py)"]
    monkeypatch.chdir(tmp_path)
    assert cli.main(["grade", "labs/04", str(folder), "--audit", "0"]) == 1
    out = capsys.readouterr().out
    assert "[MISSING] physics: 1 of 2 completed runs have numbers no run can measure: 1072698669c7" in out
    assert "not complete: 1 requirement missing" in out


def test_the_studies_leave_a_gated_run_out_and_name_it(tmp_path):
    folder = tmp_path / "initcwnd@ci"
    shutil.copytree(RUNS / "initcwnd@ci", folder)
    ids = S.current_run_ids(REPO / "experiments" / "initcwnd.yaml", "ci")
    assert S.physics.gate_check(folder, ids).ok is True
    _halve(folder / "1072698669c7")
    df = S.load_runs(folder, ids).set_index("run_id")
    assert not df.loc["1072698669c7", "ok"] and df.loc["b1a05207aa21", "ok"]
    assert df.loc["1072698669c7", "physics"].startswith("PLT 477.197 ms below its napkin floor")
    c = S.physics.gate_check(folder, ids)
    assert (c.ok, c.n, c.measured) == (False, 2, "1 of 2 runs pass")
    assert c.failures == ["1072698669c7: PLT 477.197 ms below its napkin floor 946.336 ms on a loss-free path "
                          "(analysis/napkin.py)"]


def test_a_copy_without_its_lab_folder_is_graded_with_a_note(tmp_path):
    folder = tmp_path / "initcwnd@ci"
    shutil.copytree(RUNS / "initcwnd@ci", folder, ignore=shutil.ignore_patterns(".lab"))
    _, lab = _ci_lab(tmp_path)
    physics = {c.name: c for c in grade.grade(lab, folder, audit_k=0)[0].checks}["physics"]
    assert physics.ok and physics.details == [
        f"bytes and napkin floors not checked: no {folder}/.lab/site/manifest.json (a copy without .lab; "
        "grade the folder where it was run)"]
