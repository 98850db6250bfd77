"""`tortoise grade`: the lab's requirements against synthetic results folders
(run.json records made from the experiment's own expansion, no lab)."""

import json
from pathlib import Path

import pytest

from tortoiselab import cli
from tortoiselab import studies
from tortoiselab.analysis.fidelity import handshake_rtt_check, judged_fidelity
from tortoiselab.course import grade, handout
from tortoiselab.host import manifests
from tortoiselab.spec.experiment import expand, load
from tortoiselab.spec.pathspec import PathSpec

REPO = Path(__file__).resolve().parents[2]

EXP = """
name: toy
repetitions: 6
seed: 3
path: {rtt_ms: 100, loss_pct: 0, rate_mbit: 10}
server: {cc: cubic}
client: {page: tiny.html}
sweep:
  server.cc: [cubic, hybla]
  path.loss_pct: [0, 2]
grids:
  ci: {repetitions: 1, sweep: {server.cc: [cubic, hybla]}}
  reduced: {repetitions: 4}
"""

OTHER = """
name: other
repetitions: 2
path: {rtt_ms: 50, rate_mbit: 10}
client: {page: tiny.html}
sweep:
  server.cc: [reno, reno_beta]
grids:
  reduced: {repetitions: 2}
"""

LAB = """---
title: "Lab 9: a toy"
grid: reduced
min_repetitions: 3
fidelity_ok_share: 0.75
max_failed_share: 0.1
experiments:
  - file: experiments/toy.yaml
{extra}---

# Lab 9

Text.
"""


@pytest.fixture
def repo(tmp_path):
    (tmp_path / "experiments").mkdir()
    (tmp_path / "labs").mkdir()
    (tmp_path / "experiments" / "toy.yaml").write_text(EXP)
    (tmp_path / "experiments" / "other.yaml").write_text(OTHER)
    (tmp_path / "labs" / "09-toy.md").write_text(LAB.format(extra=""))
    return tmp_path


def write_runs(results: Path, exp_file: Path, grid: str, reps: int | None = None, fail=(), off=(), edit=None):
    """Run folders as the runner writes them: experiment.yaml (the file as
    given), <run_id>/run.json and then its manifest.json. fail / off: (point
    label, repetition) pairs that failed / measured the wrong RTT;
    edit(config) changes the configuration the runs claim."""
    exp = load(exp_file, grid=grid)
    folder = results / exp.name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "experiment.yaml").write_text(exp_file.read_text())
    for spec in expand(exp):
        if reps is not None and spec.repetition >= reps:
            continue
        label = handout.point_label(spec.point)
        config = json.loads(json.dumps(spec.config))
        if edit:
            edit(config)
        ok = (label, spec.repetition) not in fail
        fid_ok = (label, spec.repetition) not in off
        rec = {"run_id": spec.run_id, "experiment": exp.name, "repetition": spec.repetition, "seed": spec.seed,
               "point": spec.point, "config": config, "ok": ok, "error": None if ok else "lab: guest timed out",
               "fidelity": [{"quantity": "base RTT", "configured": 100, "expected": 100.2,
                             "measured": 100.2 if fid_ok else 130.0, "low": 99.7, "high": 100.7, "unit": "ms",
                             "ok": fid_ok}] if ok else [],
               "meta": {"backend": "uml", "clock": "virtual"}}
        (folder / spec.run_id).mkdir()
        (folder / spec.run_id / "run.json").write_text(json.dumps(rec))
        manifests.write_manifest(folder / spec.run_id)
    return folder


def graded(repo: Path, results: Path, lab: str = "labs/09-toy.md"):
    """The grade without reruns (--audit 0): the toy records were never run (test_audit.py reruns)."""
    lab_ = handout.load_lab(repo / lab)
    sections = grade.grade(lab_, results, audit_k=0)
    return lab_, sections, {c.name: c for s in sections for c in s.checks}


def test_complete_folder_passes(repo):
    folder = write_runs(repo / "results", repo / "experiments" / "toy.yaml", "reduced")
    lab, sections, checks = graded(repo, folder)
    assert grade.complete(sections)
    assert [c.name for c in sections[0].checks] == ["experiment", "sweep points", "repetitions", "failed runs",
                                                    "fidelity", "lab assets", "physics"]
    text = grade.format_grade(lab, sections)
    assert "complete: every requirement" in text and "MISSING" not in text
    assert "uml backend, virtual clock (16 runs)" in text
    # the results root finds the same folder
    assert grade.grade(lab, repo / "results", audit_k=0)[0].folder == folder


def test_too_few_repetitions_and_a_missing_point(repo):
    exp_file = repo / "experiments" / "toy.yaml"
    folder = write_runs(repo / "results", exp_file, "reduced", reps=2)
    # one whole point missing: remove its runs
    exp = load(exp_file, grid="reduced")
    gone = [s.run_id for s in expand(exp) if s.point == {"server.cc": "hybla", "path.loss_pct": 2}]
    for rid in gone:
        if (folder / rid).exists():
            for f in (folder / rid).iterdir():
                f.unlink()
            (folder / rid).rmdir()
    lab, sections, checks = graded(repo, folder)
    assert not grade.complete(sections)
    assert not checks["sweep points"].ok
    assert checks["sweep points"].details == ["server.cc=hybla, path.loss_pct=2"]
    assert "1 of 4 required points" in checks["sweep points"].summary
    assert not checks["repetitions"].ok
    assert "server.cc=cubic, path.loss_pct=0: 2 of 3" in checks["repetitions"].details
    assert "tortoise run experiments/toy.yaml --grid reduced" in checks["repetitions"].fix
    assert checks["experiment"].ok and checks["failed runs"].ok
    text = grade.format_grade(lab, sections)
    assert "[MISSING] repetitions" in text and "not complete: 2 requirements missing" in text


def test_failed_runs_are_listed_and_do_not_count(repo):
    fail = {("server.cc=hybla, path.loss_pct=2", r) for r in (0, 1)}
    folder = write_runs(repo / "results", repo / "experiments" / "toy.yaml", "reduced", fail=fail)
    _, sections, checks = graded(repo, folder)
    assert not checks["failed runs"].ok  # 2 of 16 = 12.5 % > 10 %
    assert "2 of 16 runs failed" in checks["failed runs"].summary
    assert all("lab: guest timed out" in d for d in checks["failed runs"].details)
    assert "tortoise show RUN_ID" in checks["failed runs"].fix
    assert not checks["repetitions"].ok  # 4 - 2 = 2 completed < 3
    assert checks["repetitions"].details == ["server.cc=hybla, path.loss_pct=2: 2 of 3 (2 failed)"]


@pytest.mark.parametrize("failed_reps, max_share, ok", [
    ((3,), "0.1", True),       # 1 of 16 failed: it stands in for the point's 4th completed run
    ((2, 3), "0.1", False),    # 2 of 16 = 12.5 % > 10 %: the failed-runs check fails, so nothing stands in
    ((1, 2, 3), "0.5", False),  # the share holds, but 1 of 4 completed: less than half
])
def test_failed_runs_stand_in_for_repetitions_within_the_share(repo, failed_reps, max_share, ok):
    lab = LAB.format(extra="").replace("min_repetitions: 3", "min_repetitions: 4")
    (repo / "labs" / "09-toy.md").write_text(lab.replace("max_failed_share: 0.1", f"max_failed_share: {max_share}"))
    fail = {("server.cc=hybla, path.loss_pct=2", r) for r in failed_reps}
    folder = write_runs(repo / "results", repo / "experiments" / "toy.yaml", "reduced", fail=fail)
    _, _, checks = graded(repo, folder)
    assert checks["repetitions"].ok is ok
    if ok:
        assert "(1 of them with failed runs standing in" in checks["repetitions"].summary
    else:
        assert checks["repetitions"].details == [f"server.cc=hybla, path.loss_pct=2: {4 - len(failed_reps)} of 4 "
                                                 f"({len(failed_reps)} failed)"]


def test_fidelity_share(repo):
    off = {(lbl, r) for lbl in ("server.cc=cubic, path.loss_pct=0", "server.cc=hybla, path.loss_pct=0")
           for r in range(3)}  # 6 of 16 off: 62 % < 75 %
    folder = write_runs(repo / "results", repo / "experiments" / "toy.yaml", "reduced", off=off)
    _, sections, checks = graded(repo, folder)
    assert not checks["fidelity"].ok
    assert "10 of 16 completed runs" in checks["fidelity"].summary
    assert "measured 130.0 ms, expected 100.2" in checks["fidelity"].details[0]
    assert [c.name for c in sections[0].checks if not c.ok] == ["fidelity"]


def test_other_grid_is_not_the_lab(repo):
    folder = write_runs(repo / "results", repo / "experiments" / "toy.yaml", "ci")
    _, sections, checks = graded(repo, folder)
    assert sections[0].folder == folder  # graded, not skipped
    assert not checks["experiment"].ok
    assert "2 runs of 'toy@ci', not 'toy@reduced'" in checks["experiment"].details
    assert "another grid" in checks["experiment"].fix
    assert not checks["sweep points"].ok  # none of the ci runs counts for reduced


def test_edited_experiment_names_the_field(repo):
    def edit(cfg):
        cfg["server"]["initcwnd_pkts"] = 30

    folder = write_runs(repo / "results", repo / "experiments" / "toy.yaml", "reduced", edit=edit)
    _, _, checks = graded(repo, folder)
    c = checks["experiment"]
    assert not c.ok
    assert "16 runs are not at any point of the lab's grid; they differ in:" in c.details
    assert "  server.initcwnd_pkts: yours 30, the lab's 10 (16 runs)" in c.details
    assert "git diff experiments/toy.yaml" in c.fix


def test_a_changed_seed_is_named(repo):
    mine = repo / "mine.yaml"
    mine.write_text(EXP.replace("seed: 3", "seed: 4"))
    folder = write_runs(repo / "results", mine, "reduced")
    _, _, checks = graded(repo, folder)
    assert not checks["experiment"].ok
    assert checks["experiment"].details == [
        "experiment.yaml: seed: yours 4, the lab's 3",
        "16 runs have the lab's settings but not its run ids (another seed: the experiment's seed was changed)"]
    assert checks["repetitions"].ok  # the runs themselves are at the lab's points


def test_extra_repetitions_are_fine(repo):
    more = repo / "more.yaml"  # the same experiment with a reduced grid of 5 repetitions
    more.write_text(EXP.replace("reduced: {repetitions: 4}", "reduced: {repetitions: 5}"))
    folder = write_runs(repo / "results", more, "reduced")
    _, sections, checks = graded(repo, folder)
    assert grade.complete(sections)
    assert "20 runs, all of toy@reduced" in checks["experiment"].summary
    fewer = repo / "fewer.yaml"
    fewer.write_text(EXP.replace("reduced: {repetitions: 4}", "reduced: {repetitions: 3}"))
    folder = write_runs(repo / "results2", fewer, "reduced")
    _, sections, checks = graded(repo, folder)
    assert checks["experiment"].details == ["experiment.yaml: repetitions: yours 3, the lab's 4"]
    assert grade.complete(sections)  # the runs decide: 3 repetitions = min_repetitions


def test_two_experiments_from_a_sibling_folder(repo):
    lab = LAB.format(extra="  - file: experiments/other.yaml\n    min_repetitions: 2\n")
    (repo / "labs" / "10-two.md").write_text(lab)
    toy = write_runs(repo / "results", repo / "experiments" / "toy.yaml", "reduced")
    _, sections, _ = graded(repo, toy, "labs/10-two.md")
    assert [s.folder for s in sections] == [toy, repo / "results" / "other@reduced"]
    assert sections[0].ok and not sections[1].ok
    assert sections[1].checks[0].name == "results folder"
    assert "tortoise run experiments/other.yaml --grid reduced" in sections[1].checks[0].fix
    other = write_runs(repo / "results", repo / "experiments" / "other.yaml", "reduced")
    sections = grade.grade(handout.load_lab(repo / "labs" / "10-two.md"), other, audit_k=0)
    assert [s.folder for s in sections] == [toy, other] and grade.complete(sections)


def test_find_lab(repo):
    labs = repo / "labs"
    assert handout.find_lab(str(labs / "09-toy.md")) == labs / "09-toy.md"
    assert handout.find_lab(str(labs / "09-toy")) == labs / "09-toy.md"
    assert handout.find_lab(str(labs / "09")) == labs / "09-toy.md"
    with pytest.raises(handout.GradeError, match=r"LAB .*07.*no such lab handout; give one of 09-toy.md"):
        handout.find_lab(str(labs / "07"), labs_dir=labs)


@pytest.mark.parametrize("extra, message", [
    ("    require: {server.initcwnd_pkts: [10]}\n", r"experiments\[0\]\.require\.server\.initcwnd_pkts: not a sweep axis"),
    ("    require: {server.cc: [bbr]}\n", r"require\.server\.cc: \['bbr'\] not in the grid's values"),
    ("    min_repetitions: 5\n", r"min_repetitions: 5, but grid 'reduced' of experiments/toy.yaml has only 4"),
    ("    grid: full\n", r"experiments\[0\]: experiments/toy.yaml with grid 'full': grid: toy has no grid 'full'"),
])
def test_bad_lab_requirements_name_the_field(repo, extra, message):
    (repo / "labs" / "11-bad.md").write_text(LAB.format(extra=extra))
    with pytest.raises(handout.GradeError, match=message):
        handout.load_lab(repo / "labs" / "11-bad.md")


def test_lab_without_front_matter(repo):
    (repo / "labs" / "12-plain.md").write_text("# no front matter\n")
    with pytest.raises(handout.GradeError, match="no front matter"):
        handout.load_lab(repo / "labs" / "12-plain.md")
    (repo / "labs" / "13-typo.md").write_text(LAB.format(extra="").replace("min_repetitions", "min_reps"))
    with pytest.raises(handout.GradeError, match="front matter: min_reps: Extra inputs are not permitted"):
        handout.load_lab(repo / "labs" / "13-typo.md")


def test_require_limits_the_points(repo):
    (repo / "labs" / "14-part.md").write_text(LAB.format(extra="    require: {path.loss_pct: [0]}\n"))
    exp_file = repo / "experiments" / "toy.yaml"
    folder = write_runs(repo / "results", exp_file, "reduced")
    for s in expand(load(exp_file, grid="reduced")):  # drop every loss-2 run
        if s.point["path.loss_pct"] == 2:
            (folder / s.run_id / "run.json").unlink()
    _, sections, checks = graded(repo, folder, "labs/14-part.md")
    assert grade.complete(sections), grade.format_grade(handout.load_lab(repo / "labs" / "14-part.md"), sections)
    assert "all 2 required points" in checks["sweep points"].summary


def test_cli_exit_codes(repo, monkeypatch, capsys):
    monkeypatch.chdir(repo)
    assert cli.main(["grade", "labs/09", "results", "--audit", "0"]) == 2  # no results yet: a named argument error
    assert "RESULTS results: no such folder" in capsys.readouterr().err
    write_runs(Path("results"), Path("experiments/toy.yaml"), "reduced", reps=1)
    assert cli.main(["grade", "labs/09", "--audit", "0"]) == 1
    out = capsys.readouterr().out
    assert "[MISSING] repetitions" in out and "fix: tortoise run experiments/toy.yaml --grid reduced" in out
    write_runs(Path("results2"), Path("experiments/toy.yaml"), "reduced")
    assert cli.main(["grade", "labs/09-toy.md", "results2/toy@reduced", "--audit", "0"]) == 0
    assert "its numbers unverified: no run was rerun, --audit 0" in capsys.readouterr().out
    assert cli.main(["grade", "labs/09-toy.md", "results2/toy@reduced", "--audit", "0", "--jobs", "0"]) == 2
    assert "--jobs: give a whole number >= 1" in capsys.readouterr().err
    assert cli.main(["grade", "labs/nope"]) == 2
    assert "LAB 'labs/nope'" in capsys.readouterr().err
    Path("afile").write_text("x")
    assert cli.main(["grade", "labs/09", "afile"]) == 2
    assert "RESULTS afile: is a file" in capsys.readouterr().err


def test_run_command_names_a_results_root_other_than_results(repo):
    folder = write_runs(repo / "elsewhere", repo / "experiments" / "toy.yaml", "reduced", reps=1)
    _, _, checks = graded(repo, folder)
    assert f"--results {repo / 'elsewhere'}" in checks["repetitions"].fix


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "labs").glob("[0-9]*.md")))
def test_the_repository_labs_load(name):
    """Every lab handout's requirements match its experiments and grids."""
    lab = handout.load_lab(REPO / "labs" / name)
    assert lab.spec.expected_minutes and lab.spec.expected_minutes <= 30
    assert lab.spec.notebook and (REPO / lab.spec.notebook).exists()
    study = studies.STUDIES[lab.spec.study]
    assert study.notebook == lab.spec.notebook
    # a lab grades the study's single-path grids; the screen and the populations of users are the report's
    # (and a lab's "going further")
    optional = {f for f in study.experiments if f.endswith("-population.yaml")} | {"experiments/tortoise-screen.yaml"}
    assert {le.file for le in lab.experiments} >= set(study.experiments) - optional
    for le in lab.experiments:
        assert le.required and le.min_repetitions <= le.exp.repetitions


def test_fidelity_allows_for_jitter():
    """One handshake RTT on a jittered path: within 3 sigma of the round trip
    counts; the recorded verdict stands without jitter."""
    fid = {"quantity": "base RTT", "expected": 80.257, "measured": 113.088, "low": 79.457, "high": 81.057,
           "unit": "ms", "ok": False}
    jittered = {"fidelity": [fid], "path": {"rtt_ms": 80, "jitter_ms": 20}}  # 3 * 20 * sqrt(2) = 84.9 ms
    ok, why, how = judged_fidelity(jittered)
    assert ok is True and how == "jitter" and "jitter 20 ms allows +-84.9 ms" in why
    assert judged_fidelity({"fidelity": [fid], "path": {"rtt_ms": 80, "jitter_ms": 5}})[0] is False  # +-21.2
    assert judged_fidelity({"fidelity": [fid], "path": {"rtt_ms": 80}})[:3:2] == (False, "")
    assert judged_fidelity({"fidelity": [{**fid, "ok": True}], "path": {"jitter_ms": 20}})[::2] == (True, "")
    assert judged_fidelity({"fidelity": []}) == (None, "no fidelity measurement", "")
    c = grade.check_fidelity([{"run_id": "a", **jittered}, {"run_id": "b", "fidelity": [{**fid, "ok": True}]}], 0.9)
    assert c.ok and c.summary.endswith("(100%; 90% needed; 1 of them within the path's jitter)")


def test_fidelity_allows_for_the_queue_of_cross_traffic():
    """With cross traffic the handshake waits in the queue the other flows
    built: up to both directions' full buffers above the expected RTT, never
    below it (a run of the lab's US rich condition: 78 packets at 18.7 and
    3.7 Mbit/s, 50.5 + 255.4 ms)."""
    fid = {"quantity": "base RTT", "expected": 28.174, "measured": 87.268, "low": 27.674, "high": 28.674,
           "unit": "ms", "ok": False}
    path = {"rtt_ms": 28, "jitter_ms": 2, "queue_pkts": 78, "rate_mbit": 18.7, "rate_up_mbit": 3.7}
    cross = {"config": {"topology": {"bulk_flows": 1, "web_loads_per_s": 0.5}}, "path": path}
    ok, why, how = judged_fidelity({"fidelity": [fid], **cross})
    assert ok is True and how == "queue" and "queue allows up to +305.9 ms" in why
    assert judged_fidelity({"fidelity": [fid], "path": path})[0] is False  # no cross traffic: 59 ms is off
    # a path shorter than configured is off, queue or not (beyond the jitter allowance of 8.5 ms)
    assert judged_fidelity({"fidelity": [{**fid, "measured": 19.0}], **cross})[0] is False
    assert judged_fidelity({"fidelity": [{**fid, "measured": 400.0}], **cross})[0] is False  # more than full buffers
    recorded = {"fidelity": [fid], "path": path, "cross": {"flows": [{"id": "bulk0"}]}}
    assert judged_fidelity(recorded)[2] == "queue"
    c = grade.check_fidelity([{"run_id": "a", "fidelity": [fid], **cross}], 0.9)
    assert c.ok and c.summary.endswith("(100%; 90% needed; 1 of them within the queue of the cross traffic)")


def test_fidelity_queue_of_a_path_without_queue_pkts_is_one_bdp():
    """A path that names no queue has the lab's default, one BDP: the
    cubic_plus-fairness dumbbell (100 ms, 20 Mbit/s: 166 frames, 100.5 ms
    each way). Its handshakes behind the bulk flows measured 128 to 197 ms
    (labs-check of lab 3); before, the allowance read 0 ms and failed them."""
    fid = {"quantity": "base RTT", "expected": 100.056, "measured": 196.714, "low": 99.056, "high": 101.056,
           "unit": "ms", "ok": False}
    rec = {"fidelity": [fid], "path": {"rtt_ms": 100, "loss_pct": 0, "rate_mbit": 20, "queue_pkts": None},
           "config": {"topology": {"bulk_flows": 2, "web_loads_per_s": 0.5}}}
    ok, why, how = judged_fidelity(rec)
    assert ok is True and how == "queue" and "queue allows up to +201.1 ms" in why, why
    assert judged_fidelity({**rec, "fidelity": [{**fid, "measured": 310.0}]})[0] is False  # beyond both buffers


def test_a_run_whose_every_handshake_waited_is_not_judged():
    """Issue 35 item 9: a run whose only handshake lost its SYN-ACK (1138 ms
    at 1 % loss) is not judged by the runner (ok None); the grade neither
    counts it against the lab's fidelity share nor for it."""
    path = PathSpec(rtt_ms=100, rate_mbit=10, loss_pct=1)
    lost = {"run_id": "a", "path": path.model_dump(), "fidelity": [handshake_rtt_check(path, [1138.0], 1).as_dict()]}
    good = {"run_id": "b", "path": path.model_dump(), "fidelity": [handshake_rtt_check(path, [100.2], 1).as_dict()]}
    ok, why, how = judged_fidelity(lost)
    assert (ok, how) == (None, "not judged") and "waited out a retransmission timeout" in why
    c = grade.check_fidelity([lost, good], 0.9)
    assert c.ok and c.summary == ("1 of 1 completed runs measured the configured path (100%; 90% needed); "
                                  "1 not judged (every handshake waited out a retransmission timeout)")
