"""The grader's reruns (host/audit.py, `tortoise grade`, every run by
default, `--audit K` a sample) without the lab: which numbers it compares,
what it refuses, what a sample catches, and its wiring into the grade,
with the rerun replaced by the stored run as the lab made it (a copy of the
canned run before its record was edited) and the canned folder's partial
.lab taken as the generators' (host/labcheck.py is tested in
test_labcheck.py). The real reruns are tests/integration/test_grade.py."""

import json
import re
import shutil
from pathlib import Path

from tortoiselab.course import grade, handout
import pytest

from tortoiselab.host import audit, backends, determinism, labcheck

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


@pytest.fixture
def lab_as_made(monkeypatch):
    """The canned folders hold a .lab of manifests only: taken as made."""
    monkeypatch.setattr(labcheck, "check_lab", lambda d, **kw: labcheck.LabCheck(d, files=1))


def test_detection_probability():
    """K of N sampled without replacement: one forged run caught with
    probability K/N, f of them with 1 - C(N-f,K)/C(N,K); issue 50: 2 of 18
    caught one forged run 11 % of the time."""
    assert audit.detection_probability(18, 2) == pytest.approx(2 / 18)
    assert round(audit.detection_probability(18, 2), 2) == 0.11
    assert audit.detection_probability(18, 2, 3) == pytest.approx(1 - (15 * 14) / (18 * 17))
    assert audit.detection_probability(18, 18) == 1.0 and audit.detection_probability(18, 0) == 0.0
    assert audit.detection_probability(5, 9, 1) == 1.0  # more than N: every run
    assert audit.detection_probability(18, 4, 18) == 1.0
    with pytest.raises(ValueError):
        audit.detection_probability(3, 1, 4)
    assert audit.detection_probability(18, 2, 2) == pytest.approx(1 - 120 / 153)  # C(16,2)/C(18,2)
    assert audit.detection_probability(18, 2, 5) == pytest.approx(1 - 78 / 153)  # C(13,2)/C(18,2)
    assert grade.sample_line(18, 2).startswith("a sample: one forged run is caught with probability 2/18 = 11 %, "
                                               "2 forged runs 22 %, 3 forged runs 31 %, 5 forged runs 49 %")


def test_audit_refuses_a_folder_it_cannot_rerun(tmp_path, lab_as_made):
    folder = _folder(tmp_path)
    lab = _lab(tmp_path)
    checks = {c.name: c for c in grade.grade(lab, folder, audit_k=2, audit_seed=1)[0].checks}
    assert not checks["rerun"].ok
    assert checks["rerun"].summary == (f"could not rerun 2 of 2 completed runs: {folder} has no .lab/READY (the site "
                                       "and PKI its runs used): they cannot be rerun as they ran")
    assert "fix: run the lab on the uml backend's virtual clock" in grade.format_grade(lab, [
        grade.Section("x", folder, [checks["rerun"]])])


def test_a_real_clock_run_cannot_be_verified(tmp_path, lab_as_made, monkeypatch):
    folder = _folder(tmp_path)
    (folder / ".lab" / "READY").write_text("ok\n")
    for f in folder.glob("*/run.json"):
        f.write_text(f.read_text().replace('"clock": "virtual"', '"clock": "real"'))
    monkeypatch.setattr(backends, "choose", lambda *a: pytest.fail("no lab is started for real-clock runs"))
    lab = _lab(tmp_path)
    checks = {c.name: c for c in grade.grade(lab, folder)[0].checks}
    r = checks["rerun"]
    assert not r.ok and r.summary == "2 of 2 runs ran on the real clock and cannot be verified"
    assert "b1a05207aa21: ran on the real clock, which no rerun repeats exactly: its numbers cannot be verified" \
        in r.details
    assert "run the lab as its handout says, on the uml backend's virtual clock" in r.fix


def _fake_lab(monkeypatch, folder: Path, lab_made: Path) -> list[list[str]]:
    """The rerun replaced by copies of the runs as the lab made them; returns each boot's loads."""
    monkeypatch.setattr(backends, "choose", lambda b, c, ccs: backends.BackendInfo("uml", "virtual"))
    boots: list[list[str]] = []

    def rerun(loads, out, *args, replay=(), **kw):
        assert out.parent == folder and out.name.startswith(".verify-") or out.parent.parent == folder
        boots.append([spec.run_id for spec in loads])
        for spec in loads:
            if spec.run_id not in replay:
                shutil.copytree(lab_made / spec.run_id, out / spec.run_id)

    monkeypatch.setattr(determinism, "run_batch", rerun)
    return boots


def test_audit_names_the_edited_run_and_its_numbers(tmp_path, monkeypatch, lab_as_made):
    folder = _folder(tmp_path)
    (folder / ".lab" / "READY").write_text("ok\n")
    lab_made = tmp_path / "as-the-lab-made-them"
    shutil.copytree(CANNED, lab_made)
    f = folder / "1072698669c7" / "run.json"
    rec = json.loads(f.read_text())
    rec["summary"]["plt_ms"] = 990.0  # above the floor: only a rerun can tell
    f.write_text(json.dumps(rec))
    boots = _fake_lab(monkeypatch, folder, lab_made)
    lab = _lab(tmp_path)
    checks = {c.name: c for c in grade.grade(lab, folder)[0].checks}  # the default: every run
    assert sorted(r for b in boots for r in b) == ["1072698669c7", "b1a05207aa21"]
    a = checks["rerun"]
    assert not a.ok and checks["physics"].ok
    assert a.summary == ("1 of 2 runs rerun on the virtual clock differ from their records: 1072698669c7")
    assert a.details == ["1072698669c7 (cc=cubic, rtt_ms=130, initcwnd_pkts=10, tls=1.3, cert=shared, "
                         "slow_start_after_idle=False, rep 0): plt_ms: stored 990.0, rerun 954.393"]
    assert not list(folder.glob(".verify-*"))
    # one run sampled, chosen by the seed; the same seed, the same run; the line says what a sample catches
    one = {c.name: c for c in grade.grade(lab, folder, audit_k=1, audit_seed=7)[0].checks}["rerun"]
    again = {c.name: c for c in grade.grade(lab, folder, audit_k=1, audit_seed=7)[0].checks}["rerun"]
    wall = re.compile(r"\d+\.\d s\)")  # the rerun's wall time, not part of the choice
    assert wall.sub("", one.summary) == wall.sub("", again.summary)
    assert "1 of 2 completed runs (seed 7)" in one.summary
    assert one.details[0].startswith("a sample: one forged run is caught with probability 1/2 = 50 %, 2 forged "
                                     "runs 100 %")
    # --audit 0: no rerun, and the grade says its numbers are unverified
    none = grade.grade(lab, folder, audit_k=0)
    assert "rerun" not in {c.name for c in none[0].checks}
    assert "its numbers unverified: no run was rerun, --audit 0" in grade.format_grade(lab, none)


def test_runs_of_one_batch_rerun_in_one_boot(tmp_path, monkeypatch, lab_as_made):
    """Every run of a batch rerun by one boot of it, up to its last chosen
    run (the others replayed), not one boot per run: a full rerun costs what
    the runs did."""
    folder = _folder(tmp_path)
    (folder / ".lab" / "READY").write_text("ok\n")
    ids = sorted(p.parent.name for p in folder.glob("*/run.json"))
    for i, rid in enumerate(ids):  # the two canned runs as one batch
        for d in (folder, tmp_path / "made"):
            if d.name == "made" and not d.exists():
                shutil.copytree(CANNED, d)
            f = d / rid / "run.json"
            rec = json.loads(f.read_text())
            rec["meta"]["batch"] = {"index": i, "size": 2, "boot_sim_seconds": 0.0, "runs": ids}
            f.write_text(json.dumps(rec))
    boots = _fake_lab(monkeypatch, folder, tmp_path / "made")
    lab = _lab(tmp_path)
    checks = {c.name: c for c in grade.grade(lab, folder)[0].checks}
    assert boots == [ids], (boots, checks["rerun"])
    assert checks["rerun"].ok, checks["rerun"]
