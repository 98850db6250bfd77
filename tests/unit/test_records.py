"""Records that show tampering (host/verify.py, `tortoise verify`) and
damaged records (every reader names the run, the file and the fix; a
resume moves the run aside and redoes it), on real stored runs
(tests/data/runs, stored again with manifests: results_copy.py)."""

from __future__ import annotations

import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pytest

from tests.unit.results_copy import CANNED, stored_copy, tree
from tests.unit.test_grade import EXP, LAB, write_runs
from tortoiselab import cli
from tortoiselab.host import manifests, runner, setaside, store, verify
from tortoiselab.host.errors import RunnerError
from tortoiselab.spec.experiment import expand, load, run_order

NAME = "initcwnd@ci"


@pytest.fixture
def folder(tmp_path) -> Path:
    return stored_copy(NAME, tmp_path / "results")


def _ids(folder: Path) -> list[str]:
    return [d.name for d in store.run_dirs(folder)]


def _named(folder: Path) -> set[str]:
    return {p.run for p in verify.verify_folder(folder).problems if p.run}


def _set_table_cell(folder: Path, run_id: str, col: str, value) -> None:
    f = folder / store.TABLE
    df = pd.read_parquet(f)
    df.loc[df["run_id"] == run_id, col] = value
    df.to_parquet(f, index=False)


def test_a_stored_folder_verifies_clean(folder, capsys):
    check = verify.verify_folder(folder)
    assert check.ok and check.runs == 2 and check.notes == []
    m = json.loads((folder / _ids(folder)[0] / manifests.MANIFEST).read_text())
    assert m["format"] == 1 and m["algorithm"] == "sha256"
    assert sorted(m["files"]) == ["cwnd.json", "run.json", "server.pcap"]
    assert cli.main(["verify", str(folder)]) == 0
    assert "2 runs, ok" in capsys.readouterr().out


def test_a_tampered_plt_in_runs_parquet_only_is_caught(folder, capsys):
    """Attack 3: hybla's plt_ms set to 1.0 in runs.parquet only."""
    a, b = _ids(folder)
    true_plt = store.read_record(folder / a).summary.plt_ms
    _set_table_cell(folder, a, "plt_ms", 1.0)
    df, rebuilt = store.read_table(folder)
    assert rebuilt and df.set_index("run_id").loc[a, "plt_ms"] == true_plt
    check = verify.verify_folder(folder)
    assert _named(folder) == {a} and check.damaged == {}  # the records are whole: the table alone lies
    (p,) = check.problems
    assert p.file == folder / store.TABLE and "plt_ms: the table says 1.0, the record " + repr(true_plt) in p.what
    assert "--rebuild-table" in p.fix
    assert cli.main(["verify", str(folder)]) == 1
    assert f"run {a}: {folder / store.TABLE}" in capsys.readouterr().out
    # the report uses the records' value and says the table was rebuilt
    assert cli.main(["report", str(folder), "--out", str(folder.parent / "r.html")]) == 0
    out = capsys.readouterr().out
    assert "runs.parquet does not match the run records" in out and "rebuilt in memory" in out
    assert " 1.0 " not in out.split("ratio")[-1]
    assert cli.main(["verify", str(folder), "--rebuild-table"]) == 0
    assert not store.read_table(folder)[1]


def test_any_cell_of_the_table_is_compared(folder):
    a, _ = _ids(folder)
    for col, value in (("ok", False), ("server.cc", "reno"), ("error", "edited"), ("fidelity_ok", False),
                       ("path.rtt_ms", float("nan"))):
        f = stored_copy(NAME, folder.parent / col.replace(".", "_"))
        _set_table_cell(f, a, col, value)
        assert store.read_table(f)[1], col
        assert _named(f) == {a}, col


def test_an_edited_run_json_is_named(folder, capsys):
    a, b = _ids(folder)
    f = folder / a / store.RECORD
    raw = json.loads(f.read_text())
    raw["summary"]["plt_ms"] = raw["summary"]["plt_ms"] / 2
    f.write_text(json.dumps(raw, indent=1, sort_keys=True))
    check = verify.verify_folder(folder)
    assert set(check.damaged) == {a} and _named(folder) == {a}
    assert any(p.file == f and "changed since the run was stored" in p.what for p in check.problems)
    assert cli.main(["verify", str(folder.parent)]) == 1
    assert f"{NAME}: 2 runs, 1 failing: {a}" in capsys.readouterr().out
    # the report refuses, naming the run, the file and the fix; --skip-damaged goes on without it
    assert cli.main(["report", str(folder), "--out", str(folder.parent / "r.html")]) == 2
    err = capsys.readouterr().err
    assert f"1 damaged runs ({NAME}/{a})" in err and str(f) in err and "fix: `tortoise run" in err
    assert cli.main(["report", str(folder), "--out", str(folder.parent / "r.html"), "--skip-damaged"]) == 0
    out = capsys.readouterr().out
    assert f"left out (damaged): {NAME}/{a}: run.json: changed" in out
    assert store.run_dirs(folder) == [folder / a, folder / b]  # outside the block every run is read again


def test_a_deleted_manifest_of_a_new_record_is_damage_an_old_folder_is_adopted_by_name(folder, tmp_path, capsys):
    a, b = _ids(folder)
    (folder / a / manifests.MANIFEST).unlink()
    assert set(verify.verify_folder(folder).damaged) == {a}
    old = tmp_path / "old"
    old.mkdir()
    shutil.copytree(CANNED / NAME, old / NAME)  # format 1, as stored before manifests: none, no table
    for rid in (a, b):
        (old / NAME / rid / manifests.MANIFEST).unlink()
    check = verify.verify_folder(old / NAME)
    assert {p.run for p in check.problems} == {a, b} and not check.damaged  # named; a resume does not redo them
    assert cli.main(["verify", str(old / NAME)]) == 1
    out = capsys.readouterr().out
    assert f"run {a}: {old / NAME / a / manifests.MANIFEST}: missing: nothing shows its files are those stored" in out
    assert f"`tortoise verify {old / NAME} --adopt-unmanifested` writes their manifests" in out
    assert cli.main(["report", str(old / NAME), "--out", str(tmp_path / "r.html")]) == 2  # refused, as damaged
    assert f"2 damaged runs ({NAME}/{a}, {NAME}/{b})" in capsys.readouterr().err
    # adopted by name: the manifests are written over the files as they are, and said so
    assert cli.main(["verify", str(old / NAME), "--adopt-unmanifested"]) == 0
    out = capsys.readouterr().out
    assert f"adopted {old / NAME / a}: wrote its manifest.json over its files as they are now (trusted" in out
    assert verify.verify_folder(old / NAME).ok
    # the table of an old folder is still checked against its records
    store.rebuild_table(old / NAME)
    _set_table_cell(old / NAME, a, "plt_ms", 1.0)
    assert _named(old / NAME) == {a}


def test_a_record_downgraded_to_before_manifests_is_not_verified(folder, tmp_path, capsys):
    """Seen (issue 35 audit, session 8): format_version 3 in run.json,
    summary.plt_ms halved, manifest.json removed: `tortoise verify
    --rebuild-table` exited 0 and report and grade took the run."""
    a, b = _ids(folder)
    f = folder / a / store.RECORD
    raw = json.loads(f.read_text())
    raw["format_version"], raw["summary"]["plt_ms"] = 3, raw["summary"]["plt_ms"] / 2
    f.write_text(json.dumps(raw, indent=1, sort_keys=True))
    (folder / a / manifests.MANIFEST).unlink()
    assert cli.main(["verify", str(folder), "--rebuild-table"]) == 1
    out = capsys.readouterr().out
    assert f"{NAME}: 2 runs, 1 failing: {a}" in out
    assert f"run {a}: {folder / a / manifests.MANIFEST}: missing: nothing shows its files are those stored (its " \
           "record says format 3" in out
    assert cli.main(["report", str(folder), "--out", str(tmp_path / "r.html")]) == 2
    assert f"1 damaged runs ({NAME}/{a})" in capsys.readouterr().err
    assert cli.main(["report", str(folder), "--out", str(tmp_path / "r.html"), "--skip-damaged"]) == 0
    assert f"left out (damaged): {NAME}/{a}: manifest.json: missing" in capsys.readouterr().out
    # adopt takes only what has no other problem: here it is the user's word that the files are as stored
    (folder / b / manifests.MANIFEST).unlink()
    (folder / b / "cwnd.json").write_text("[]")
    assert cli.main(["verify", str(folder), "--adopt-unmanifested"]) == 1
    out = capsys.readouterr().out
    assert f"adopted {folder / a}" in out and f"adopted {folder / b}" not in out  # b: format 5, damaged


def test_a_truncated_run_json_is_named_by_every_reader(folder, capsys):
    a, b = _ids(folder)
    f = folder / a / store.RECORD
    f.write_bytes(f.read_bytes()[:300])
    with pytest.raises(store.DamagedRecord) as e:
        store.read_record(folder / a)
    msg = str(e.value)
    assert msg.startswith(f"run {a}: {f}: unreadable run record") and "fix: `tortoise run " in msg
    assert f"{folder / 'experiment.yaml'} --grid ci --results {folder.parent}`" in msg and ".damaged" in msg
    assert set(verify.verify_folder(folder).damaged) == {a}
    assert cli.main(["show", a, "--results", str(folder.parent)]) == 2
    assert f"run {a}: {f}: unreadable run record" in capsys.readouterr().err
    assert cli.main(["ls", "--results", str(folder.parent)]) == 0
    assert "1/2 done, 0 failed, 0 running, 0 interrupted, 1 damaged (tortoise verify" in capsys.readouterr().out
    assert cli.main(["report", str(folder), "--out", str(folder.parent / "r.html")]) == 2
    assert f"run {a}: {f}: unreadable run record" in capsys.readouterr().err


def test_garbage_runs_parquet_is_rebuilt_from_the_records(folder, capsys):
    (folder / store.TABLE).write_bytes(b"PAR1 not a table")
    df, rebuilt = store.read_table(folder)
    assert rebuilt and sorted(df["run_id"]) == _ids(folder)
    assert store.table_of(st.record for st in store.read_records(folder)).equals(df)
    check = verify.verify_folder(folder)
    (p,) = check.problems
    assert p.run is None and p.file == folder / store.TABLE and p.what.startswith("unreadable")
    assert p.fix.startswith(f"`tortoise verify {folder} --rebuild-table`")
    assert cli.main(["report", str(folder), "--out", str(folder.parent / "r.html")]) == 0
    assert "rebuilt in memory from the records" in capsys.readouterr().out
    assert cli.main(["verify", str(folder)]) == 1
    assert cli.main(["verify", str(folder), "--rebuild-table"]) == 0
    assert verify.verify_folder(folder).ok


def test_grade_never_turns_an_unreadable_record_into_a_run(tmp_path, monkeypatch, capsys):
    (tmp_path / "experiments").mkdir()
    (tmp_path / "labs").mkdir()
    (tmp_path / "experiments" / "toy.yaml").write_text(EXP)
    (tmp_path / "labs" / "09-toy.md").write_text(LAB.format(extra=""))
    monkeypatch.chdir(tmp_path)
    folder = write_runs(Path("results"), Path("experiments/toy.yaml"), "reduced")
    bad = store.run_dirs(folder)[0]
    (bad / store.RECORD).write_text('{"run_id": "')
    assert cli.main(["grade", "labs/09", "--audit", "0"]) == 2
    err = capsys.readouterr().err
    assert f"1 damaged runs (toy@reduced/{bad.name}); refused" in err and "fix: `tortoise run" in err
    assert cli.main(["grade", "labs/09", "--skip-damaged", "--audit", "0"]) == 0  # 3 of 4 repetitions are enough
    out = capsys.readouterr().out
    assert "runs of 'None'" not in out and f"left out (damaged): toy@reduced/{bad.name}: run.json" in out


def test_a_run_copied_in_from_another_experiment_is_named_and_left_out(tmp_path, monkeypatch, capsys):
    """Seen (issue 35 audit, session 8): an initcwnd run folder, manifest and
    all, copied into tortoise@ci: verify "3 runs, ok", ls "3/2 done", report
    a traceback (report/plots.py: a float among the strata labels)."""
    results = tmp_path / "results"
    exp, other = stored_copy("tortoise@ci", results), stored_copy(NAME, tmp_path / "elsewhere")
    foreign = _ids(other)[0]
    shutil.copytree(other / foreign, exp / foreign)
    assert verify.verify_folder(other).ok  # whole where it came from
    assert cli.main(["verify", str(exp)]) == 1
    out = capsys.readouterr().out
    assert f"tortoise@ci: 3 runs, 1 failing: {foreign}" in out
    assert (f"run {foreign}: {exp / foreign}: not a run of tortoise@ci (no run of its experiment.yaml's sweep has "
            "this id): copied from elsewhere?") in out and f"fix: move it out of {exp}" in out
    assert not verify.verify_folder(exp).damaged  # a resume leaves it where it is: not a run of its sweep
    assert cli.main(["ls", "--results", str(results)]) == 0
    out = capsys.readouterr().out
    assert "tortoise@ci              2/2 done, 0 failed" in out and "1 not of this experiment (left out)" in out
    html = tmp_path / "r.html"
    assert cli.main(["report", str(exp), "--out", str(html)]) == 2  # refused, no traceback
    err = capsys.readouterr().err
    assert f"1 damaged runs (tortoise@ci/{foreign}); refused" in err and "not a run of tortoise@ci" in err
    assert cli.main(["report", str(exp), "--out", str(html), "--skip-damaged"]) == 0
    assert f"left out (damaged): tortoise@ci/{foreign}: not a run of tortoise@ci" in capsys.readouterr().out
    # without its experiment.yaml the folder's runs are told by their records' experiment
    (exp / "experiment.yaml").unlink()
    check = verify.verify_folder(exp)
    assert {p.run for p in check.problems} == {foreign}
    assert any("checked by their records' experiment name" in n for n in check.notes)
    # grade: the same
    (tmp_path / "experiments").mkdir()
    (tmp_path / "labs").mkdir()
    (tmp_path / "experiments" / "toy.yaml").write_text(EXP)
    (tmp_path / "labs" / "09-toy.md").write_text(LAB.format(extra=""))
    monkeypatch.chdir(tmp_path)
    toy = write_runs(Path("results"), Path("experiments/toy.yaml"), "reduced")
    shutil.copytree(other / foreign, toy / foreign)
    assert cli.main(["grade", "labs/09", "--audit", "0"]) == 2
    assert f"1 damaged runs (toy@reduced/{foreign}); refused" in capsys.readouterr().err
    assert cli.main(["grade", "labs/09", "--skip-damaged", "--audit", "0"]) == 0
    assert f"left out (damaged): toy@reduced/{foreign}: not a run of toy@reduced" in capsys.readouterr().out


def test_plan_resume_moves_the_damaged_aside_and_redoes_them():
    ids = ["a", "b", "c", "d"]
    assert setaside.plan_resume(ids, completed={"a", "b", "c"}, damaged={"b"}) == (["b", "d"], ["b"])
    assert setaside.plan_resume(ids, completed=set(ids), damaged=set()) == ([], [])


def test_resume_moves_a_truncated_record_aside(folder):
    """host/runner.run_experiment's first step before it computes the
    pending runs: the damaged run's folder goes to .damaged/ whole, so the
    run is pending again; the good one stays."""
    a, b = _ids(folder)
    f = folder / a / store.RECORD
    f.write_bytes(f.read_bytes()[:300])
    before = tree(folder / a)
    exp = load(folder / "experiment.yaml", grid="ci")
    mine = run_order(exp, expand(exp))
    assert {a, b} <= {r.run_id for r in mine}
    moved = setaside.move_damaged_aside(folder, [r.run_id for r in mine], sliced=False)
    (aside,) = (folder / store.DAMAGED).iterdir()
    assert moved == [f"{a} -> {aside}"] and aside.name.startswith(f"{a}-")
    assert tree(aside) == before  # kept as it was
    assert not store.completed(folder, a) and store.completed(folder, b)
    assert [r.run_id for r in mine if not store.completed(folder, r.run_id)] == [a]
    assert verify.verify_folder(folder, table=False).ok
    store.rebuild_table(folder)  # as the runner does at the end: no longer stopped by the damaged record
    assert list(pd.read_parquet(folder / store.TABLE)["run_id"]) == [b]
    assert setaside.move_damaged_aside(folder, [r.run_id for r in mine], sliced=False) == []


def test_move_aside_refuses_a_damaged_folder_that_is_a_link(folder, tmp_path):
    a, _ = _ids(folder)
    victim = tmp_path / "victim"
    victim.mkdir()
    (folder / store.DAMAGED).symlink_to(victim)
    with pytest.raises(RunnerError, match=r"\.damaged is not a folder .*a link"):
        setaside.move_aside(folder, a)
    assert list(victim.iterdir()) == [] and store.completed(folder, a)
    (folder / store.DAMAGED).unlink()
    out = setaside.move_aside(folder, a, now=datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=timezone.utc))
    assert out == folder / ".damaged" / f"{a}-20260102T030405000006Z" and (out / store.RECORD).exists()


def test_manifest_differences_are_exact():
    listed = {"run.json": {"bytes": 3, "sha256": "a" * 64}, "x.pcap": {"bytes": 1, "sha256": "b" * 64}}
    now = {"run.json": {"bytes": 4, "sha256": "c" * 64}, "stray": {"bytes": 0, "sha256": "d" * 64}}
    assert manifests.manifest_differences(listed, now) == [
        ("run.json", "changed since the run was stored (3 bytes, sha256 aaaaaaaaaaaa.. in the manifest; 4 bytes, "
                     "sha256 cccccccccccc.. now)"),
        ("stray", "not in the manifest (added after the run was stored)"),
        ("x.pcap", "missing (the manifest lists it)")]
    assert manifests.manifest_differences(listed, listed) == []


def test_write_manifest_refuses_links_and_an_existing_manifest(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    (d / "run.json").write_text("{}")
    (d / "link").symlink_to(tmp_path)
    with pytest.raises(store.StoreError, match="link is not a regular file"):
        manifests.write_manifest(d)
    (d / "link").unlink()
    manifests.write_manifest(d)
    with pytest.raises(FileExistsError):
        manifests.write_manifest(d)
    assert os.path.getsize(d / manifests.MANIFEST) > 0


def test_the_reproduction_refuses_damaged_runs_or_leaves_them_out(tmp_path, capsys):
    root = tmp_path / "runs"
    shutil.copytree(CANNED, root, ignore=shutil.ignore_patterns("tortoise@ci"))
    folder = stored_copy("tortoise@ci", root)
    a = _ids(folder)[0]
    (folder / a / "stray.txt").write_text("added later")
    out = tmp_path / "REPRODUCTION.md"
    argv = ["report", "--reproduction", "--grid", "ci", "--results", str(root), "--out", str(out)]
    assert cli.main(argv) == 2 and not out.exists()
    err = capsys.readouterr().err
    assert f"tortoise report --reproduction: 1 damaged runs (tortoise@ci/{a})" in err
    assert f"{folder / a / 'stray.txt'}: not in the manifest" in err
    # written, with exit 5: on the ci grid most seed sentences lack data (cli.NO_DATA_EXIT)
    assert cli.main([*argv, "--skip-damaged"]) == cli.NO_DATA_EXIT and out.exists()
    assert f"left out (damaged): tortoise@ci/{a}: stray.txt: not in the manifest" in capsys.readouterr().out


def test_a_fifo_or_a_link_in_a_run_folder_is_named_never_opened(folder, tmp_path):
    a, b = _ids(folder)
    (folder / a / store.RECORD).unlink()
    os.mkfifo(folder / a / store.RECORD)  # reading it would block for ever
    (tmp_path / "victim.json").write_text("{}")
    (folder / b / manifests.MANIFEST).unlink()
    (folder / b / manifests.MANIFEST).symlink_to(tmp_path / "victim.json")
    check = verify.verify_folder(folder, table=False)
    assert set(check.damaged) == {a, b}
    assert {(p.run, p.file.name) for p in check.problems if "not a regular file" in p.what} == {
        (a, store.RECORD), (b, manifests.MANIFEST)}
