"""The results store (host/store/) on canned run folders: tests/data/runs
holds the CI study grids as the runner wrote them before the store existed
(format 1: no format_version), with their server captures, the
experiment's site manifest and PKI description."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tortoiselab.host import store
from tortoiselab.spec.experiment import ClientCfg, ServerCfg

CANNED = Path(__file__).resolve().parents[1] / "data" / "runs"


@pytest.fixture
def runs(tmp_path) -> Path:
    """A writable copy of the canned results root."""
    dst = tmp_path / "results"
    shutil.copytree(CANNED, dst)
    return dst


def _folders() -> list[Path]:
    return sorted(p for p in CANNED.iterdir() if p.is_dir())


def test_canned_folders_are_format_1():
    for d in _folders():
        for rd in store.run_dirs(d):
            assert "format_version" not in json.loads((rd / "run.json").read_text())


@pytest.mark.parametrize("folder", _folders(), ids=lambda p: p.name)
def test_an_old_folder_loads_through_upgrade(folder):
    recs = store.read_records(folder)
    assert recs and all(st.record.format_version == store.FORMAT_VERSION for st in recs)
    df = store.load_runs(folder)
    assert list(df.columns) == [*store.COLUMNS, "run_dir"]
    assert len(df) == len(recs) == len(list(folder.glob("*/run.json")))
    assert df["run_id"].is_unique and df["ok"].all()
    assert (df["experiment"] == folder.name).all()
    assert (df["clock"] == "virtual").all() and (df["backend"] == "uml").all()
    # the path as it resolved, numbers as numbers
    assert pd.api.types.is_float_dtype(df["path.rtt_ms"]) and df["path.rtt_ms"].notna().all()


def test_upgrade_computes_the_floor_an_older_runner_did_not_store(runs):
    """Format 1 records written before the runner stored PLT floors get the
    floor the runner computes now, from the experiment's site and PKI."""
    folder = runs / "coalescing@ci"
    rd = store.run_dirs(folder)[0]
    raw = json.loads((rd / "run.json").read_text())
    stored = raw["summary"]["floor_ms"], raw["summary"]["plt_over_floor"]
    assert stored[0] is not None
    for k in ("floor_ms", "plt_over_floor", "floor_model"):
        del raw["summary"][k]
    del raw["config"]["path"]["resolved"]  # the oldest records had the path only at the top
    (rd / "run.json").write_text(json.dumps(raw))
    rec = store.read_record(rd)
    assert (rec.summary.floor_ms, rec.summary.plt_over_floor) == pytest.approx(stored)
    assert rec.config["path"]["resolved"] == raw["path"]
    row = store.load_runs(folder).set_index("run_id").loc[rd.name]
    assert row["floor_ms"] == pytest.approx(stored[0]) and row["path.rtt_ms"] == raw["path"]["rtt_ms"]


def test_upgrade_without_the_lab_assets_says_why(runs):
    folder = runs / "initcwnd@ci"
    shutil.rmtree(folder / ".lab")
    rd = store.run_dirs(folder)[0]
    raw = json.loads((rd / "run.json").read_text())
    del raw["summary"]["floor_ms"]
    (rd / "run.json").write_text(json.dumps(raw))
    rec = store.read_record(rd)
    assert rec.summary.floor_ms is None and "floor not computed" in rec.summary.floor_model.why


def test_a_newer_format_is_refused_by_name(runs):
    rd = store.run_dirs(runs / "tortoise@ci")[0]
    raw = json.loads((rd / "run.json").read_text())
    raw["format_version"] = store.FORMAT_VERSION + 1
    (rd / "run.json").write_text(json.dumps(raw))
    with pytest.raises(store.StoreError, match=f"format_version {store.FORMAT_VERSION + 1} is newer"):
        store.read_record(rd)


def test_write_then_read_is_the_same_record(tmp_path):
    rec = store.read_record(store.run_dirs(CANNED / "reno_beta@ci")[0])
    out = tmp_path / rec.run_id
    out.mkdir()
    store.write_record(out, rec)
    again = store.read_record(out)
    assert again == rec and json.loads((out / "run.json").read_text())["format_version"] == store.FORMAT_VERSION


def test_a_record_with_an_unknown_key_is_refused_naming_it(tmp_path):
    rec = store.read_record(store.run_dirs(CANNED / "reno_beta@ci")[0]).model_dump(mode="json")
    rec["meta"]["cwnd_samples"] = []
    with pytest.raises(ValueError, match="cwnd_samples"):
        store.write_record(tmp_path, rec)
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "run.json").write_text(json.dumps({**rec, "meta": {}, "surprise": 1, "format_version": 2}))
    with pytest.raises(store.StoreError, match=r"x/run.json: surprise: Extra inputs are not permitted"):
        store.read_record(tmp_path / "x")


def test_an_unreadable_record_is_named_and_a_listing_goes_on(runs):
    folder = runs / "tortoise-screen@ci"
    bad = store.run_dirs(folder)[0]
    (bad / "run.json").write_text("{ not json")
    with pytest.raises(store.StoreError, match=rf"{bad.name}/run.json: unreadable run record"):
        store.read_records(folder)
    got = store.read_records(folder, strict=False)
    bad_ones = [st for st in got if st.record is None]
    assert len(got) == len(store.run_dirs(folder)) and len(bad_ones) == 1
    assert bad_ones[0].run_dir == bad and "unreadable run record" in bad_ones[0].error


def test_every_setting_of_the_experiment_is_a_column():
    """A new field of ServerCfg or ClientCfg reaches runs.parquet without a
    change to the store (docs/architecture.md, "Where to add things")."""
    for section, model in (("server", ServerCfg), ("client", ClientCfg)):
        for name in model.model_fields:
            assert f"{section}.{name}" in store.COLUMNS


def test_runs_table_is_rebuilt_the_same_and_a_stale_one_is_noticed(runs):
    folder = runs / "coalescing@ci"
    (folder / "runs.parquet").unlink(missing_ok=True)
    a = pd.read_parquet(store.rebuild_table(folder))
    b = pd.read_parquet(store.rebuild_table(folder))
    pd.testing.assert_frame_equal(a, b)
    assert list(a.columns) == list(store.COLUMNS) and list(a["run_id"]) == sorted(a["run_id"])
    df, rebuilt = store.read_table(folder)
    assert not rebuilt and len(df) == len(a)
    shutil.rmtree(store.run_dirs(folder)[0])
    df, rebuilt = store.read_table(folder)
    assert rebuilt and len(df) == len(a) - 1


def test_a_runs_table_of_the_columns_before_is_rebuilt_never_trusted(tmp_path):
    """A runs.parquet written before the table had topology.<param>
    columns (only the text column topology) disagrees with the records:
    read_table rebuilds the table in memory, with the topology's parameters
    as columns (a folder's existing results pick them up), and a table
    rewritten by rebuild_table is read as it is."""
    folder = tmp_path / "coalescing@ci"
    shutil.copytree(CANNED / "coalescing@ci", folder)
    cdn = store.run_dirs(folder)[0]
    rec = json.loads((cdn / "run.json").read_text())
    rec["config"]["topology"] = {"name": "dumbbell", "cdn_rtt_ms": 27, "clients": 2}
    (cdn / "run.json").write_text(json.dumps(rec))
    before = store.table_of(st.record for st in store.read_records(folder))
    before.drop(columns=[c for c in before if c.startswith("topology.")]).to_parquet(folder / store.TABLE, index=False)
    df, rebuilt = store.read_table(folder)
    assert rebuilt and list(df.columns) == list(store.COLUMNS)
    row = df.set_index("run_id").loc[cdn.name]
    assert (row["topology"], row["topology.name"], row["topology.cdn_rtt_ms"], row["topology.clients"]) == (
        "dumbbell,cdn_rtt_ms=27,clients=2", "dumbbell", 27, 2)
    others = df[df["run_id"] != cdn.name]
    assert len(others) and (others["topology.name"] == "wan").all() and others["topology.cdn_rtt_ms"].isna().all()
    store.rebuild_table(folder)
    again, rebuilt = store.read_table(folder)
    assert not rebuilt and list(again["topology.name"]) == list(df["topology.name"])


def test_extra_columns_come_after_the_table_and_before_run_dir():
    df = store.load_runs(CANNED / "tortoise@ci", extra={"n_conns": lambda r: len(r.connections)})
    assert list(df.columns)[-2:] == ["n_conns", "run_dir"] and (df["n_conns"] >= 1).all()
    only = store.run_dirs(CANNED / "tortoise@ci")[0].name
    assert list(store.load_runs(CANNED / "tortoise@ci", run_ids={only})["run_id"]) == [only]


def test_current_runs_leaves_out_runs_of_an_earlier_version_of_the_grid(tmp_path):
    """A folder keeps the runs of earlier versions of its experiment file;
    the notebooks read only those the file's grid has now (as the verdicts
    do), with the sweep point the grid gives them now."""
    from tortoiselab import studies
    d = tmp_path / "tortoise@ci"
    shutil.copytree(CANNED / "tortoise@ci", d)
    first = sorted(p.name for p in d.iterdir() if not p.name.startswith(".") and p.is_dir())[0]
    shutil.copytree(d / first, d / "0123456789ab")  # a run id the ci grid does not have (any more)
    rec = json.loads((d / "0123456789ab" / "run.json").read_text())
    rec["run_id"] = "0123456789ab"
    (d / "0123456789ab" / "run.json").write_text(json.dumps(rec))
    assert "0123456789ab" in set(studies.load_runs(d)["run_id"])
    now = studies.current_runs(d)
    assert set(now["run_id"]) == studies.current_run_ids("experiments/tortoise.yaml", "ci")
