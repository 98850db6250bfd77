"""`tortoise grade` on real results: the studies' tiny ci folders (run once
per session by the study_results fixture, shared with test_studies.py),
graded by the real lab handouts (which ask for the reduced grid) and by the
same handouts asking for ci."""

import re
import subprocess

import pytest

from tests.conftest import REPO, TORTOISE
from tortoiselab.course import grade
from tortoiselab.course.handout import load_lab

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
