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
from tortoiselab.course import grade
from tortoiselab.course.handout import load_lab
from tortoiselab.host import verify

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
    sections = grade.grade(lab, folder)
    assert grade.complete(sections), grade.format_grade(lab, sections)
    print("\n" + grade.format_grade(lab, sections))


def _edit_plt(run_dir, factor: float = 1.0, value: float | None = None) -> tuple[float, float]:
    f = run_dir / "run.json"
    rec = json.loads(f.read_text())
    old = rec["summary"]["plt_ms"]
    rec["summary"]["plt_ms"] = round(old * factor, 3) if value is None else value
    f.write_text(json.dumps(rec))
    return old, rec["summary"]["plt_ms"]


def test_audit_fails_on_an_edited_plt(study_results, tmp_path):
    """Issue 35, failed attack 4: halved PLTs in run.json were graded
    complete. A copy of lab 4's runs (ci grid, virtual clock) with one PLT
    halved (below its napkin floor: the physics gate names it) and one
    raised by 10 % (a number physics allows: only a rerun can tell);
    `tortoise grade --audit 2` reruns both on the virtual clock and fails
    the grade naming each run with its stored and rerun PLT."""
    folder = tmp_path / "results" / "initcwnd@ci"
    shutil.copytree(study_results("initcwnd") / "initcwnd@ci", folder)
    lab = _as_ci("04-initcwnd.md", tmp_path)
    (tmp_path / "labs").mkdir()
    shutil.copy(lab.path, tmp_path / "labs" / "04-initcwnd.md")
    shutil.copytree(REPO / "experiments", tmp_path / "experiments")
    halved, raised = sorted(p.parent.name for p in folder.glob("*/run.json"))
    h_old, h_new = _edit_plt(folder / halved, 0.5)
    r_old, r_new = _edit_plt(folder / raised, 1.1)
    for d in (folder / halved, folder / raised):  # a careful forger rewrites the manifests too: verify passes
        (d / verify.MANIFEST).unlink()
        verify.write_manifest(d)
    assert verify.verify_folder(folder, table=False).ok
    p = subprocess.run([*TORTOISE, "grade", "labs/04", str(folder), "--audit", "2", "--audit-seed", "5"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=600)
    print(p.stdout + p.stderr)
    assert p.returncode == 1, p.stdout + p.stderr
    assert f"[MISSING] physics: 1 of 2 completed runs have numbers no run can measure: {halved}" in p.stdout
    assert f"[MISSING] audit: 2 of 2 runs rerun on the virtual clock (seed 5) differ from their records: " in p.stdout
    assert f"{halved} (" in p.stdout and f"plt_ms: stored {h_new}, rerun {h_old}" in p.stdout
    assert f"{raised} (" in p.stdout and f"plt_ms: stored {r_new}, rerun {r_old}" in p.stdout
    assert "rerun" in p.stdout and not list(folder.glob(".verify-*"))
    # the runs as the lab made them pass the audit
    _edit_plt(folder / halved, value=h_old)
    _edit_plt(folder / raised, value=r_old)
    ok = grade.grade(lab, folder, audit_k=1, audit_seed=5)
    assert grade.complete(ok), grade.format_grade(lab, ok)
