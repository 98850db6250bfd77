"""`tortoise grade` on real results: the studies' tiny ci folders (run once
per session by the study_results fixture, shared with test_studies.py),
graded by the real lab handouts (which ask for the reduced grid) and by the
same handouts asking for ci."""

import json
import re
import shutil
import subprocess

import pytest

from tests.conftest import REPO, TORTOISE
from tests.unit.test_labcheck import cut_article
from tortoiselab.course import grade
from tortoiselab.course.handout import load_lab
from tortoiselab.host import manifests, verify

pytestmark = pytest.mark.lab


def _as_ci(handout: str, tmp_path):
    """The lab's handout with its requirements moved to the ci grid."""
    text = (REPO / "labs" / handout).read_text()
    text = re.sub(r"^grid: reduced$", "grid: ci", text, count=1, flags=re.M)
    text = re.sub(r"^(\s*)min_repetitions: \d+$", r"\1min_repetitions: 1", text, flags=re.M)
    # the reduced grid's declared counts (front matter runs: / repetitions:) do not hold for ci
    text = re.sub(r"^\s*(runs|repetitions): \d+\n", "", text, flags=re.M)
    p = tmp_path / handout
    p.write_text(text)
    return load_lab(p, repo=REPO)


@pytest.mark.parametrize("study, handout", [("initcwnd", "04-initcwnd.md"), ("coalescing", "02-coalescing.md")])
def test_grade_on_ci_results(study, handout, study_results, tmp_path):
    folder = study_results(study) / f"{study}@ci"
    # the real lab asks for the reduced grid: ci results are not the lab, and the grader says how to fix it
    p = subprocess.run([*TORTOISE, "grade", f"labs/{handout}", str(folder)], capture_output=True, text=True,
                       cwd=REPO, timeout=120)
    assert p.returncode == 1, p.stdout + p.stderr
    assert f"runs of '{study}@ci', not '{study}@reduced'" in p.stdout
    assert f"tortoise run experiments/{study}.yaml --grid reduced" in p.stdout
    # the same requirements on the ci grid: complete (real run.json records, real fidelity)
    lab = _as_ci(handout, tmp_path)
    sections = grade.grade(lab, folder)  # every run rerun on the virtual clock: the same numbers
    assert grade.complete(sections), grade.format_grade(lab, sections)
    assert {c.name: c for c in sections[0].checks}["rerun"].ok
    print("\n" + grade.format_grade(lab, sections))


def _edit_plt(run_dir, factor: float = 1.0, value: float | None = None) -> tuple[float, float]:
    f = run_dir / "run.json"
    rec = json.loads(f.read_text())
    old = rec["summary"]["plt_ms"]
    rec["summary"]["plt_ms"] = round(old * factor, 3) if value is None else value
    f.write_text(json.dumps(rec))
    return old, rec["summary"]["plt_ms"]


def _lab_copy(study_results, tmp_path):
    """A copy of lab 4's ci runs with the lab's files (handout on the ci grid, experiments) beside it."""
    folder = tmp_path / "results" / "initcwnd@ci"
    shutil.copytree(study_results("initcwnd") / "initcwnd@ci", folder)
    lab = _as_ci("04-initcwnd.md", tmp_path)
    (tmp_path / "labs").mkdir()
    shutil.copy(lab.path, tmp_path / "labs" / "04-initcwnd.md")
    shutil.copytree(REPO / "experiments", tmp_path / "experiments")
    return folder, lab


def _rewrite_manifest(run_dir):
    """A careful forger rewrites the run's manifest too: verify passes."""
    (run_dir / manifests.MANIFEST).unlink()
    manifests.write_manifest(run_dir)


def test_default_grade_reruns_every_run_and_names_edits(study_results, tmp_path):
    """Issue 35, failed attack 4, and issue 50, "a small, consistent forgery
    passes the grade": a copy of lab 4's runs (ci grid, virtual clock) with
    one PLT halved (below its napkin floor: the physics gate names it) and
    the other's plt_ms, plt_from_request_ms and content_download_ms scaled
    by 0.995 (numbers physics allows, 0.6 % above the floor of this page at
    IW 10: only a rerun can tell; the issue's 0.97 on lab 4's reduced grid
    is in docs/faults.md), manifests and
    table rewritten so that verify passes. `tortoise grade` without options
    reruns every run on the virtual clock and fails naming each run with its
    stored and rerun numbers (before: "complete" without --audit)."""
    folder, lab = _lab_copy(study_results, tmp_path)
    scaled, halved = sorted(p.parent.name for p in folder.glob("*/run.json"))
    h_old, h_new = _edit_plt(folder / halved, 0.5)
    f = folder / scaled / "run.json"
    honest = f.read_text()
    rec = json.loads(honest)
    s_old = {k: rec["summary"][k] for k in ("plt_ms", "plt_from_request_ms", "content_download_ms")}
    rec["summary"].update({k: round(v * 0.995, 3) for k, v in s_old.items()})
    f.write_text(json.dumps(rec))
    for d in (folder / halved, folder / scaled):
        _rewrite_manifest(d)
    subprocess.run([*TORTOISE, "verify", str(folder), "--rebuild-table"], capture_output=True, cwd=tmp_path, timeout=120)
    assert verify.verify_folder(folder, lab=True).ok
    p = subprocess.run([*TORTOISE, "grade", "labs/04", str(folder)], capture_output=True, text=True, cwd=tmp_path,
                       timeout=600)
    print(p.stdout + p.stderr)
    assert p.returncode == 1, p.stdout + p.stderr
    assert f"[MISSING] physics: 1 of 2 completed runs have numbers no run can measure: {halved}" in p.stdout
    assert "[MISSING] rerun: 2 of 2 runs rerun on the virtual clock differ from their records: " in p.stdout
    assert f"{halved} (" in p.stdout and f"plt_ms: stored {h_new}, rerun {h_old}" in p.stdout
    for k, v in s_old.items():
        assert f"{k}: stored {round(v * 0.995, 3)}, rerun {v}" in p.stdout, k
    assert not list(folder.glob(".verify-*"))
    # the runs as the lab made them pass every rerun; a sample of one says what it catches
    _edit_plt(folder / halved, value=h_old)
    f.write_text(honest)
    ok = grade.grade(lab, folder)
    assert grade.complete(ok), grade.format_grade(lab, ok)
    one = {c.name: c for c in grade.grade(lab, folder, audit_k=1, audit_seed=5)[0].checks}["rerun"]
    assert one.ok and "1 of 2 completed runs (seed 5)" in one.summary
    assert "one forged run is caught with probability 1/2 = 50 %" in one.details[0]


def test_a_tampered_site_is_named_and_refused(study_results, tmp_path):
    """Issue 50, "a tampered site passes an audited grade": article.html cut
    from 160,000 to 39,667 bytes and .lab/site/manifest.json made to agree.
    `tortoise run` refuses to use it (before: the runs were made with the
    cut page, PLT 18-64 % lower), verify fails naming both files, grade and
    report refuse the folder naming them (every run used that site), and
    --skip-damaged leaves every run out."""
    folder, lab = _lab_copy(study_results, tmp_path)
    site = folder / ".lab" / "site"
    cut_article(site)
    named = "article.html: 39,667 bytes, the generator makes 160,000 bytes"
    runs = sorted(p.parent.name for p in folder.glob("*/run.json"))
    (folder / runs[0]).rename(tmp_path / runs[0])  # a run to do again: refused before it starts
    p = subprocess.run([*TORTOISE, "run", "experiments/initcwnd.yaml", "--grid", "ci", "--backend", "uml",
                        "--results", str(folder.parent)], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert p.returncode == 2 and named in p.stderr and "fresh folder" in p.stderr, p.stdout + p.stderr
    assert not (folder / runs[0]).exists() and not list(folder.glob(".*.tmp-*"))
    (tmp_path / runs[0]).rename(folder / runs[0])
    p = subprocess.run([*TORTOISE, "verify", str(folder)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert p.returncode == 1 and ".lab failing" in p.stdout and named in p.stdout, p.stdout
    assert "manifest.json: 76,733 bytes" in p.stdout or "site/manifest.json" in p.stdout
    for argv in (["grade", "labs/04", str(folder)], ["report", str(folder), "--out", str(tmp_path / "r.html")]):
        p = subprocess.run([*TORTOISE, *argv], capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert p.returncode == 2 and named in p.stderr and all(r in p.stderr for r in runs), p.stdout + p.stderr
        assert "Traceback" not in p.stderr
    p = subprocess.run([*TORTOISE, "grade", "labs/04", str(folder), "--skip-damaged"], capture_output=True,
                       text=True, cwd=tmp_path, timeout=300)
    assert p.returncode == 1 and f"left out (damaged): initcwnd@ci/{runs[1]}: made with {folder / '.lab'}" in p.stdout
    # through the API (no admission first): the lab assets check fails and nothing is rerun
    checks = {c.name: c for c in grade.grade(lab, folder)[0].checks}
    assert not checks["lab assets"].ok and any(named in d for d in checks["lab assets"].details)
    assert checks["rerun"].summary.startswith("not rerun: the folder's .lab differs")
