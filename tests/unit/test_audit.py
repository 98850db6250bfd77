"""The grader's audit (host/audit.py, `tortoise grade --audit K`) without
the lab: which numbers it compares, what it refuses, and its wiring into
the grade, with the rerun replaced by the stored run as the lab made it
(a copy of the canned run before its record was edited). The real reruns
are tests/integration/test_grade.py::test_audit_fails_on_an_edited_plt."""

import json
import re
import shutil
from pathlib import Path

from tortoiselab.course import grade, handout
from tortoiselab.host import audit, backends, determinism

REPO = Path(__file__).resolve().parents[2]
CANNED = REPO / "tests" / "data" / "runs" / "initcwnd@ci"


def test_number_diffs_name_each_number():
    rec = json.loads((CANNED / "1072698669c7" / "run.json").read_text())
    edited = json.loads(json.dumps(rec))
    edited["summary"]["plt_ms"] = 990.0
    edited["summary"]["repeat"]["plt_ms"] = 1.5
    edited["fidelity"][0]["measured"] = 131.0
    assert audit.number_diffs(edited, rec) == ["plt_ms: stored 990.0, rerun 954.393",
                                               "repeat.plt_ms: stored 1.5, rerun 219.727",
                                               "fidelity.0.measured: stored 131.0, rerun 130.083"]
    assert audit.number_diffs(rec, rec) == []
    assert audit.value_at(rec, "fidelity.3.measured") is None and audit.value_at(rec, "summary.nope.x") is None


def _lab(tmp_path: Path):
    text = (REPO / "labs" / "04-initcwnd.md").read_text()
    text = re.sub(r"^grid: reduced$", "grid: ci", text, count=1, flags=re.M)
    text = re.sub(r"^\s*(runs|repetitions): \d+\n", "", text, flags=re.M)
    p = tmp_path / "04-initcwnd.md"
    p.write_text(text)
    return handout.load_lab(p, repo=REPO)


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "results" / "initcwnd@ci"
    shutil.copytree(CANNED, folder)
    return folder


def test_audit_refuses_a_folder_it_cannot_rerun(tmp_path):
    folder = _folder(tmp_path)
    lab = _lab(tmp_path)
    checks = {c.name: c for c in grade.grade(lab, folder, audit_k=2, audit_seed=1)[0].checks}
    assert not checks["audit"].ok
    assert checks["audit"].summary == (f"could not rerun 2 runs (seed 1): {folder} has no .lab/READY (the site and "
                                       "PKI its runs used): they cannot be rerun as they ran")
    (folder / ".lab" / "READY").write_text("ok\n")
    f = folder / "b1a05207aa21" / "run.json"
    f.write_text(f.read_text().replace('"clock": "virtual"', '"clock": "real"'))
    checks = {c.name: c for c in grade.grade(lab, folder, audit_k=2, audit_seed=1)[0].checks}
    assert "runs b1a05207aa21 did not run on the virtual clock" in checks["audit"].summary
    assert "fix: run the lab on the uml backend's virtual clock" in grade.format_grade(lab, [
        grade.Section("x", folder, [checks["audit"]])])


def test_audit_names_the_edited_run_and_its_numbers(tmp_path, monkeypatch):
    folder = _folder(tmp_path)
    (folder / ".lab" / "READY").write_text("ok\n")
    lab_made = tmp_path / "as-the-lab-made-them"
    shutil.copytree(CANNED, lab_made)
    f = folder / "1072698669c7" / "run.json"
    rec = json.loads(f.read_text())
    rec["summary"]["plt_ms"] = 990.0  # above the floor: only a rerun can tell
    f.write_text(json.dumps(rec))
    monkeypatch.setattr(backends, "choose", lambda b, c, ccs: backends.BackendInfo("uml", "virtual"))
    reran = []

    def rerun(loads, out, *args, **kw):
        assert out.parent == folder and out.name.startswith(".verify-")
        for spec in loads:
            reran.append(spec.run_id)
            shutil.copytree(lab_made / spec.run_id, out / spec.run_id)

    monkeypatch.setattr(determinism, "run_batch", rerun)
    lab = _lab(tmp_path)
    checks = {c.name: c for c in grade.grade(lab, folder, audit_k=2, audit_seed=7)[0].checks}
    assert sorted(reran) == ["1072698669c7", "b1a05207aa21"]
    a = checks["audit"]
    assert not a.ok and checks["physics"].ok
    assert a.summary == ("1 of 2 runs rerun on the virtual clock (seed 7) differ from their records: 1072698669c7")
    assert a.details == ["1072698669c7 (cc=cubic, rtt_ms=130, initcwnd_pkts=10, tls=1.3, cert=shared, "
                         "slow_start_after_idle=False, rep 0): plt_ms: stored 990.0, rerun 954.393"]
    assert not list(folder.glob(".verify-*"))
    # one run audited, chosen by the seed; the same seed, the same run
    one = {c.name: c for c in grade.grade(lab, folder, audit_k=1, audit_seed=7)[0].checks}["audit"]
    again = {c.name: c for c in grade.grade(lab, folder, audit_k=1, audit_seed=7)[0].checks}["audit"]
    wall = re.compile(r"\d+\.\d s\)")  # the audit's wall time, not part of the choice
    assert wall.sub("", one.summary) == wall.sub("", again.summary)
