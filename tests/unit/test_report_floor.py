"""The report's floor table on a hand-made results folder: floors as the
runs recorded them, or computed for runs stored before the runner recorded
them, grouped per object-size class (no lab)."""

import json

import pytest

from tests.conftest import experiment_yaml
from tests.unit.test_napkin import MANIFEST, PKI, _config
from tortoiselab.analysis import gates, napkin
from tortoiselab import report

EXP = experiment_yaml("two-arms", {"name": "floor-unit", "seed": None, "server": None, "path.loss_pct": 0})


def _results(tmp_path, with_floor: bool):
    d = tmp_path / "floor-unit"
    (d / ".lab" / "site").mkdir(parents=True)
    (d / ".lab" / "pki").mkdir()
    manifest = json.loads(json.dumps(MANIFEST))
    manifest["pages"]["tiny.html"]["size_class"] = {"name": "tiny", "label": "objects < 1 KB"}
    (d / ".lab" / "site" / "manifest.json").write_text(json.dumps(manifest))
    (d / ".lab" / "pki" / "pki.json").write_text(json.dumps(PKI))
    (d / "experiment.yaml").write_text(EXP)
    plts = {("cubic", 0): 615.4, ("cubic", 1): 620.0, ("hybla", 0): 711.6, ("hybla", 1): 700.0}
    for (cc, rep), plt in plts.items():
        cfg = _config()
        cfg["server"]["cc"] = cc
        summary = {"plt_ms": plt, "bytes": gates.page_bytes(manifest, cfg["client"])}  # the page's bytes
        if with_floor:
            f = napkin.run_floor(cfg, manifest, PKI)["floor_ms"]
            summary.update(floor_ms=f, plt_over_floor=napkin.ratio(plt, f))
        rid = f"{cc[0]}{rep:011d}"
        (d / rid).mkdir()
        (d / rid / "run.json").write_text(json.dumps({
            "run_id": rid, "experiment": "floor-unit", "repetition": rep, "seed": rep, "point": {"server.cc": cc},
            "config": cfg, "ok": True, "error": None, "summary": summary, "meta": {"clock": "virtual"}}))
    return d


@pytest.mark.parametrize("with_floor", [True, False], ids=["recorded", "computed"])
def test_floor_table_per_class_and_arm(tmp_path, with_floor):
    ctx = report.load_context(_results(tmp_path, with_floor))
    t = report.floor_table(ctx)
    assert list(t["server.cc"]) == ["cubic", "hybla"]
    assert list(t["object_class"]) == ["tiny (objects < 1 KB)"] * 2 and list(t["runs"]) == [2, 2]
    cubic = napkin.run_floor(_config(), MANIFEST, PKI)["floor_ms"]
    assert t.iloc[0]["floor_ms"] == pytest.approx(cubic)
    assert t.iloc[0]["ratio_min"] == pytest.approx(615.4 / cubic) and t.iloc[0]["ratio_max"] == pytest.approx(620 / cubic)
    assert (ctx.df["plt_over_floor"] - ctx.df["plt_ms"] / ctx.df["floor_ms"]).abs().max() < 1e-3
    text = report.format_floor_table(t)
    assert "tiny (objects < 1 KB)" in text and f"{615.4 / cubic:.4f}" in text and "virtual" in text


def test_floor_table_without_floors(tmp_path):
    d = _results(tmp_path, with_floor=False)
    (d / ".lab" / "site" / "manifest.json").unlink()  # nothing to compute from
    ctx = report.load_context(d)
    assert ctx.df["floor_ms"].isna().all() and len(report.floor_table(ctx)) == 0
    assert "no ok run" in report.format_floor_table(report.floor_table(ctx))
