"""One experiment per results folder (issue 35, item 6; host/versions.py):
a folder whose stored experiment expands to other runs than the file is
refused before anything is made; the same file, its shards, --runs-file and
--limit are taken. Real results folders, made by run_experiment with
--limit 0 (the lab's assets, the lock, experiment.yaml, runs.parquet: no
lab boots)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import experiment_yaml
from tortoiselab.host.errors import RunnerError
from tortoiselab.host.runner import run_experiment
from tortoiselab.spec.experiment import expand, load

SAME = {"name": "same", "sweep.server.cc": ["cubic", "reno"], "grids": {"ci": {"repetitions": 2}}}
EXP = experiment_yaml("unit", SAME)


@pytest.fixture
def files(tmp_path, monkeypatch):
    """The experiment with RTT 50 and with RTT 300; a kernel file for
    backends.choose (no lab boots: every run here has --limit 0)."""
    kernel = tmp_path / "kernel"
    kernel.write_bytes(b"")
    monkeypatch.setenv("TORTOISE_KERNEL", str(kernel))
    monkeypatch.chdir(tmp_path)
    f50, f300 = tmp_path / "e50.yaml", tmp_path / "e300.yaml"
    f50.write_text(EXP)
    f300.write_text(experiment_yaml("unit", {**SAME, "path.rtt_ms": 300}))
    return f50, f300


def _tree(d: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(d)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in sorted(d.rglob("*"))}


def _run(f: Path, results: Path, **kw) -> dict:
    return run_experiment(f, results, backend="uml", limit=0, **kw)


def _refusal(results: Path, grid: str = "") -> str:
    return (f"results: {results.resolve()}/same{grid} holds another version of experiment same (path.rtt_ms: 50 in "
            "its experiment.yaml, 300 in this file); use a new `name` in the file or another --results folder "
            "(nothing is pooled across versions)")


def test_an_edited_experiment_is_refused_before_anything_is_made(files, tmp_path):
    """Seen: the same name, RTT 50 then 300, into one folder: "4 of 2 runs
    complete", each arm's p50 pooled from both RTTs."""
    f50, f300 = files
    results = tmp_path / "results"
    _run(f50, results)
    stored = json.loads((results / "same" / "experiment.json").read_text())
    assert stored["experiment"] == "same" and stored["runs"] == 2 and len(stored["sha256"]) == 64
    before = _tree(results)
    with pytest.raises(RunnerError) as e:
        _run(f300, results)
    assert str(e.value) == _refusal(results)
    assert _tree(results) == before  # nothing made, nothing touched
    # the same file is taken, whole or in slices
    assert _run(f50, results)["total"] == 2
    assert _run(f50, results, shard=(2, 2))["total"] == 2
    ids = tmp_path / "ids.txt"
    ids.write_text(expand(load(f50))[0].run_id + "\n")
    assert _run(f50, results, runs_file=ids)["total"] == 2
    assert json.loads((results / "same" / "experiment.json").read_text()) == stored


def test_a_grid_folder_holds_its_grid_version(files, tmp_path):
    f50, f300 = files
    results = tmp_path / "results"
    _run(f50, results, grid="ci")
    before = _tree(results)
    with pytest.raises(RunnerError) as e:
        _run(f300, results, grid="ci")
    assert str(e.value) == _refusal(results, "@ci")
    assert _tree(results) == before
    _run(f300, results)  # the file's own sweep goes to results/same: a folder of its own
    # the grid's runs change, its settings' dump too
    f50.write_text(experiment_yaml("unit", {**SAME, "grids": {"ci": {"repetitions": 3}}}))
    with pytest.raises(RunnerError, match=r"holds another version of experiment same \(repetitions: 2 in its "
                                          r"experiment\.yaml, 3 in this file\)"):
        _run(f50, results, grid="ci")


def test_a_folder_from_before_the_hash_is_judged_by_its_experiment_yaml(files, tmp_path):
    f50, f300 = files
    old = tmp_path / "results" / "same"
    old.mkdir(parents=True)
    (old / "experiment.yaml").write_text(f50.read_text())
    with pytest.raises(RunnerError) as e:
        _run(f300, tmp_path / "results")
    assert str(e.value) == _refusal(tmp_path / "results")
    assert sorted(p.name for p in old.iterdir()) == ["experiment.yaml"]  # no hash written for the other version
    _run(f50, tmp_path / "results")
    assert json.loads((old / "experiment.json").read_text())["runs"] == 2


def test_a_folder_without_experiment_files_holding_other_runs_is_refused(files, tmp_path):
    f50, _ = files
    old = tmp_path / "results" / "same"
    (old / "0123456789ab").mkdir(parents=True)
    with pytest.raises(RunnerError, match=r"holds another version of experiment same \(runs 0123456789ab are not in "
                                          r"this file's sweep\)"):
        _run(f50, tmp_path / "results")
    assert sorted(p.name for p in old.iterdir()) == ["0123456789ab"]


def test_a_damaged_record_is_named_with_the_fix(files, tmp_path):
    f50, _ = files
    old = tmp_path / "results" / "same"
    old.mkdir(parents=True)
    (old / "experiment.json").write_text("{not json")
    with pytest.raises(RunnerError) as e:
        _run(f50, tmp_path / "results")
    assert str(e.value) == (f"results: {old.resolve()}/experiment.json is not a record of an experiment's runs; move "
                            "it away if the folder holds this file's runs (its experiment.yaml is then compared), or "
                            "give --results another folder")


def test_the_version_is_the_sorted_run_ids_and_the_name():
    from tortoiselab.host.versions import version

    a = version("same", ["b", "a"])
    assert a == version("same", ["a", "b"]) and a["runs"] == 2
    assert a["sha256"] != version("same@ci", ["a", "b"])["sha256"] != version("same", ["a"])["sha256"]
