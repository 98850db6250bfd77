"""Sensitivity maps without the lab (docs/maps.md): a map's spec checked
with the field and the fix named, its expansion into an ordinary sweep
(loss-free cells once, lossy ones with repetitions, arms paired), its cells
and labels from a table, the markers' places on the figure, and the study
files' maps."""

import json
import math

import numpy as np
import pandas as pd
import pytest
import yaml

from tests.conftest import write_yaml

from tortoiselab.analysis.mapfigure import draw_map, position
from tortoiselab.project import REPO_DIR as REPO
from tortoiselab.spec.experiment import Experiment, ExperimentError, apply_grid, expand, load
from tortoiselab.spec.maps import LOSS_AXIS, RTT_AXIS, draws_nothing
from tortoiselab.spec.pathspec import PathSpec
from tortoiselab.studies import maps as M

BASE = """\
name: m
repetitions: 3
seed: 1
server: {cc: htcp, initcwnd_pkts: 10}
client: {page: base.html}
path: {rtt_ms: 100, loss_pct: 0, rate_mbit: 10}
sweep:
  server.cc: [htcp, hybla]
grids:
  ci: {repetitions: 1}
maps:
  hy:
    compare: server.cc
    control: htcp
    arms: [hybla]
    metric: content_download_ms
    rtt_ms: [25, 100, 300]
    loss_pct: [0, 2]
    repetitions: 6
    regions: [india-desktop-2017]
    markets: [india-desktop-2017]
    users: 5
"""


def _file(tmp_path, extra: str = "", drop: str | None = None):
    lines = [ln for ln in BASE.splitlines() if drop is None or not ln.strip().startswith(drop + ":")]
    return write_yaml(tmp_path, "\n".join(lines) + "\n" + extra)


# --- the spec ---------------------------------------------------------------------


def test_a_map_is_a_grid_whose_loss_free_cells_run_once(tmp_path):
    exp = load(_file(tmp_path), grid="map-hy")
    runs = expand(exp)
    assert exp.name == "m@map-hy" and exp.paired
    per_cell = {}
    for r in runs:
        key = (r.point["server.cc"], r.point[RTT_AXIS], r.point[LOSS_AXIS][0])
        per_cell[key] = per_cell.get(key, 0) + 1
    assert {k: v for k, v in per_cell.items() if k[2] == 0} == {(a, rtt, 0.0): 1 for a in ("htcp", "hybla")
                                                               for rtt in (25, 100, 300)}
    assert {v for k, v in per_cell.items() if k[2] == 2} == {6}
    assert len(runs) == 2 * (3 + 3 * 6)
    # loss both ways, whatever the fixed path's loss_up_pct; paired: the arms share a repetition's seed
    lossy = [r for r in runs if r.point[LOSS_AXIS][0] == 2]
    assert all(r.path.loss_up == 2 for r in lossy)
    seeds = {(r.point[RTT_AXIS], r.repetition, r.point["server.cc"]): r.seed for r in lossy}
    assert all(seeds[(rtt, rep, "htcp")] == seeds[(rtt, rep, "hybla")] for rtt, rep, _ in seeds)


def test_the_file_own_sweep_and_grids_are_unchanged_by_a_map(tmp_path):
    with_map = expand(load(_file(tmp_path)))
    f2 = write_yaml(tmp_path, BASE.split("maps:")[0], "plain.yaml")
    assert [r.run_id for r in with_map] == [r.run_id for r in expand(load(f2))]


def test_a_jittery_path_is_not_exact(tmp_path):
    runs = expand(load(_file(tmp_path, "    path: {jitter_ms: 2}\n"), grid="map-hy"))
    assert len(runs) == 2 * 3 * (1 + 1) * 6  # every cell with repetitions: jitter draws random delays


@pytest.mark.parametrize("extra, drop, words", [
    ("    compare: path.rtt_ms\n", "compare", ["maps.hy", "compare", "own axes"]),
    ("    compare: server.nope\n", "compare", ["maps.hy", "server.nope"]),
    ("    repetitions: 4\n", "repetitions", ["maps.hy.repetitions", "at least 6", "2/2^4"]),
    ("    arms: [htcp]\n", "arms", ["maps.hy", "is the control"]),
    ("    arms: [hyblah]\n", "arms", ["maps.hy", "hyblah", "unknown congestion control"]),
    ("    rtt_ms: [100, 25]\n", "rtt_ms", ["maps.hy.rtt_ms", "ascending"]),
    ("    regions: [atlantis]\n", "regions", ["maps.hy.regions", "atlantis", "india-desktop-2017"]),
    ("    markets: [atlantis]\n", "markets", ["maps.hy.markets", "atlantis"]),
    ("    size: {client.page: [a.html], client.url: [x]}\n", None, ["maps.hy.size", "one axis"]),
    ("    colour: red\n", None, ["maps.hy.colour"]),
])
def test_a_bad_map_is_refused_naming_the_field(tmp_path, extra, drop, words):
    with pytest.raises(ExperimentError) as exc:
        load(_file(tmp_path, extra, drop))
    assert all(w in str(exc.value) for w in words), str(exc.value)


def test_a_map_named_as_a_grid_is_refused(tmp_path):
    with pytest.raises(ExperimentError, match="maps.hy: its grid .map-hy. is also under grids"):
        load(write_yaml(tmp_path, BASE.replace("  ci: {repetitions: 1}", "  map-hy: {repetitions: 1}"), "g.yaml"))


def test_an_unknown_map_grid_names_the_maps(tmp_path):
    with pytest.raises(ExperimentError, match="map-hy"):
        load(_file(tmp_path), grid="map-nope")


def test_draws_nothing():
    assert draws_nothing(PathSpec(rtt_ms=50, loss_pct=0), {})
    assert not draws_nothing(PathSpec(rtt_ms=50, loss_pct=0, loss_up_pct=1), {})
    assert not draws_nothing(PathSpec(rtt_ms=50, loss_pct=0, jitter_ms=1), {})
    assert not draws_nothing(PathSpec(rtt_ms=50, loss_pct=0), {"topology": {"web_loads_per_s": 0.5}})


def test_every_study_file_has_a_map_that_expands():
    """Each study's maps as its file defines them (the whole file is loaded by test_studies; here only the
    maps are expanded, which keeps this test to a second): small enough for make reproduce."""
    for f in ("tortoise", "coalescing", "cubic_plus", "reno_beta", "initcwnd"):
        exp = Experiment(**yaml.safe_load((REPO / "experiments" / f"{f}.yaml").read_text()))
        assert exp.maps, f
        for name in exp.maps:
            assert 0 < len(expand(apply_grid(exp, f"map-{name}"))) <= 300, (f, name)


# --- cells and labels -------------------------------------------------------------


def _table(rows):
    """A tidy() table from (arm, rtt, loss, repetition, value) tuples."""
    return pd.DataFrame([{"arm_key": json.dumps(a), "rtt_ms": float(r), "loss_pct": float(lo), "size": "",
                          "repetition": rep, "content_download_ms": v, "ok": True} for a, r, lo, rep, v in rows])


def test_cells_exact_and_lossy(tmp_path):
    m = load(_file(tmp_path)).maps["hy"]
    rng = np.random.default_rng(1)
    rows = [("htcp", 25, 0, 0, 100.0), ("hybla", 25, 0, 0, 120.0),   # exact, the arm slower: disagree
            ("htcp", 300, 0, 0, 900.0), ("hybla", 300, 0, 0, 600.0),  # exact, faster: agree
            ("htcp", 100, 0, 0, 400.0), ("hybla", 100, 0, 0, 400.1),  # exact tie: within tie_pct (0.5 %)
            ("htcp", 50, 0, 0, 400.0), ("hybla", 50, 0, 0, 397.9)]    # beyond it: agree
    for rep in range(8):
        c = 1000 * (1 + rng.random())
        rows += [("htcp", 300, 2, rep, c), ("hybla", 300, 2, rep, c * 0.7)]            # lossy, always faster
        rows += [("htcp", 25, 2, rep, c), ("hybla", 25, 2, rep, c * (1.1 if rep % 2 else 0.9))]  # mixed
    rows += [("htcp", 100, 2, 0, 500.0)]  # the arm's runs all failed: no pair
    rows += [("htcp", 150, 2, rep, 100.0 + rep) for rep in range(8)]  # a value of 0 has no log ratio
    rows += [("hybla", 150, 2, rep, 0.0 if rep == 0 else 50.0 + rep) for rep in range(8)]
    cs = M.cells(_table(rows), m).set_index(["rtt_ms", "loss_pct"])
    assert cs.loc[(25, 0), "label"] == "disagree" and cs.loc[(25, 0), "effect_pct"] == pytest.approx(20)
    assert cs.loc[(300, 0), "label"] == "agree" and cs.loc[(300, 0), "exact"]
    assert cs.loc[(100, 0), "label"] == "not testable here" and cs.loc[(100, 0), "letter"] == "="
    assert cs.loc[(50, 0), "label"] == "agree"
    lossy = cs.loc[(300, 2)]
    assert lossy["label"] == "agree" and not lossy["exact"] and lossy["n"] == 8
    assert lossy["effect_pct"] == pytest.approx(-30) and lossy["high_pct"] < 0
    assert cs.loc[(25, 2), "label"] == "inconclusive" and cs.loc[(25, 2), "letter"] == "?"
    assert cs.loc[(100, 2), "label"] == "not testable here" and cs.loc[(100, 2), "n"] == 0
    assert cs.loc[(150, 2), "n"] == 7 and "1 pairs with a value of 0 left out" in cs.loc[(150, 2), "why"]


def test_a_claimed_range_labels_a_smaller_effect(tmp_path):
    m = load(_file(tmp_path, "    claimed_pct: [-7, -5]\n")).maps["hy"]
    cs = M.cells(_table([("htcp", 25, 0, 0, 100.0), ("hybla", 25, 0, 0, 99.0)]), m)
    assert cs["label"].tolist() == ["smaller than claimed"]


def test_markers_are_the_profiles_and_the_drawn_users(tmp_path):
    m = load(_file(tmp_path)).maps["hy"]
    mk = M.markers(m)
    assert [x for x in mk if x["kind"] == "region"] == [
        {"kind": "region", "name": "india-desktop-2017", "rtt_ms": 54.0, "loss_pct": 0.0}]
    assert len([x for x in mk if x["kind"] == "user"]) == 5


# --- the figure -------------------------------------------------------------------


@pytest.mark.parametrize("value, want", [(25, (0.5, True)), (300, (2.5, True)), (62.5, (1.0, True)),
                                         (10, (0.1, False)), (900, (2.9, False))])
def test_marker_position(value, want):
    x, inside = position(value, [25, 100, 300])
    assert (round(x, 6), inside) == want


def test_the_figure_is_written(tmp_path):
    cs = pd.DataFrame([{"size": "", "arm": '"hybla"', "rtt_ms": r, "loss_pct": lo, "effect_pct": e,
                        "low_pct": e - 5, "high_pct": e + 5, "exact": lo == 0, "letter": "A"}
                       for r, lo, e in [(25, 0, 10.0), (300, 0, -50.0), (25, 2, math.nan), (300, 2, -20.0)]])
    marks = [{"kind": "region", "name": "x", "rtt_ms": 54, "loss_pct": 0}, {"kind": "user", "name": "y",
                                                                           "rtt_ms": 500, "loss_pct": 9}]
    png, svg = draw_map(cs, marks, tmp_path / "map", "t", "plt_ms")
    assert png.stat().st_size > 5000 and svg.read_text().startswith("<?xml")


# --- the report's section ---------------------------------------------------------


def test_the_report_finds_the_maps_beside_a_study_folder(tmp_path):
    from tortoiselab.report.maps import map_sections

    cells = [{"size": "", "arm": '"hybla"', "rtt_ms": 300.0, "loss_pct": 0.0, "n": 1, "exact": True,
              "effect_pct": -93.8, "low_pct": -93.8, "high_pct": -93.8, "label": "agree", "cause": "hybla: ...",
              "control_plt_ms": 1813.577, "arm_plt_ms": 1524.453, "plt_change_pct": -15.94, "control_rounds": 3.0,
              "arm_rounds": 2.0, "rounds_saved": 1.0, "reason": "rounds saved: 1"},
             {"size": "", "arm": '"hybla"', "rtt_ms": 300.0, "loss_pct": 1.0, "n": 8, "exact": False,
              "effect_pct": -62.9, "low_pct": -85.9, "high_pct": -28.4, "label": "agree", "cause": ""}]
    folder = tmp_path / "tortoise@map-hybla"
    folder.mkdir()
    (folder / "map.json").write_text(json.dumps({"title": "t", "compare": "server.cc", "arms": ["hybla"],
                                                 "control": "htcp", "metric": "plt_ms", "cells": cells}))
    (folder / "map.png").write_bytes(b"\x89PNG fake")
    (tmp_path / "tortoise@reduced").mkdir()
    (tmp_path / "coalescing@map-x").mkdir()  # another experiment's map folder, not drawn: neither is shown
    for d in ("tortoise@reduced", "tortoise@map-hybla"):
        secs = map_sections(tmp_path / d)
        assert [s["folder"] for s in secs] == ["tortoise@map-hybla"]
        assert secs[0]["rows"] == [["", '"hybla"', "300", "0", "1", "-93.8", "exact", "1813.6 -> 1524.5", "-15.9",
                                    "3 -> 2", "rounds saved: 1", "agree", "hybla: ..."],
                                   # a map.json drawn before the PLT and rounds were read: "-" there
                                   ["", '"hybla"', "300", "1", "8", "-62.9", "[-85.9, -28.4]", "- -> -", "-",
                                    "- -> -", "-", "agree", ""]]
        assert len(secs[0]["columns"]) == len(secs[0]["rows"][0])
        assert secs[0]["png"] and secs[0]["svg"] == ""
    assert map_sections(tmp_path / "coalescing@reduced") == []


@pytest.mark.parametrize("value, want", [("hybla", "hybla"), (True, "true"), (10, "10"),
                                         ({"reno_beta": {"beta": 0.9}}, "beta=0.9"),
                                         (["cubic_plus", {"cubic_plus": {"n": 6, "rtt_aware": 1}}],
                                          "cubic_plus n=6 rtt_aware=1")])
def test_short_names_of_compare_values(value, want):
    assert M.short(value) == want


# --- PLT and round trips beside the metric: why a cell differs --------------------


def _why_table(rows):
    """A tidy() table from (arm, rtt, loss, repetition, metric, plt, rounds) tuples."""
    return pd.DataFrame([{"arm_key": json.dumps(a), "rtt_ms": float(r), "loss_pct": float(lo), "size": "",
                          "repetition": rep, "content_download_ms": v, "plt_ms": p, M.ROUNDS: k, "ok": True}
                         for a, r, lo, rep, v, p, k in rows])


def test_each_cell_gives_both_arms_plt_and_the_rounds_saved(tmp_path):
    """The lab's hybla map at 100 and 300 ms (docs/maps.md): at 100 ms both arms take 3 rounds and the content
    download's -8.4 % is serialization (PLT -0.8 %); at 300 ms Hybla saves a round trip."""
    m = load(_file(tmp_path)).maps["hy"]
    rows = [("htcp", 100, 0, 0, 106.953, 613.577, 3), ("hybla", 100, 0, 0, 97.997, 608.488, 3),
            ("htcp", 300, 0, 0, 306.954, 1813.577, 3), ("hybla", 300, 0, 0, 19.117, 1524.453, 2),
            ("htcp", 25, 0, 0, 100.0, 500.0, 3), ("hybla", 25, 0, 0, 100.2, 500.3, 3)]  # a tie
    for rep in range(6):  # lossy: the rounds saved are the median of the pairs' differences
        rows += [("htcp", 300, 2, rep, 400.0 + rep, 2000.0 + rep, 4 + rep % 2), ("hybla", 300, 2, rep, 200.0,
                                                                                    1800.0, 3)]
    cs = M.cells(_why_table(rows), m).set_index(["rtt_ms", "loss_pct"])
    c = cs.loc[(100, 0)]
    assert (c["control_plt_ms"], c["arm_plt_ms"]) == (613.577, 608.488)
    assert c["plt_change_pct"] == pytest.approx(100 * (608.488 / 613.577 - 1)) and abs(c["plt_change_pct"]) < 1
    assert (c["control_rounds"], c["arm_rounds"], c["rounds_saved"]) == (3, 3, 0)
    assert c["reason"] == "same rounds: serialization / window sizes" and c["label"] == "agree"
    c = cs.loc[(300, 0)]
    assert (c["rounds_saved"], c["reason"]) == (1, "rounds saved: 1")
    assert cs.loc[(25, 0), "reason"] == "same rounds: a tie"
    c = cs.loc[(300, 2)]
    assert (c["control_rounds"], c["arm_rounds"], c["rounds_saved"], c["rounds_pairs"]) == (4.5, 3, 1.5, 6)
    assert c["reason"] == "median rounds saved: 1.5"
    assert c["plt_change_pct"] == pytest.approx(np.median([100 * (1800 / (2000 + r) - 1) for r in range(6)]))
    lines = M.summary_lines(m, cs.reset_index().assign(cause=""))
    assert "613.6 -> 608.5" in lines[2] and "3 -> 3" in lines[2] and "serialization" in lines[2]


def test_a_cell_without_captures_says_so(tmp_path):
    m = load(_file(tmp_path)).maps["hy"]
    cs = M.cells(_table([("htcp", 25, 0, 0, 100.0), ("hybla", 25, 0, 0, 130.0)]), m)  # no plt, no rounds
    assert math.isnan(cs["rounds_saved"].iloc[0]) and math.isnan(cs["control_plt_ms"].iloc[0])
    assert cs["reason"].tolist() == ["rounds: no capture"]


@pytest.mark.parametrize("saved, change, exact, want", [
    (1.0, -90.0, True, "rounds saved: 1"), (-4.0, 130.0, True, "rounds lost: 4"),
    (0.0, -8.0, True, "same rounds: serialization / window sizes"), (0.0, 0.3, True, "same rounds: a tie"),
    (0.5, -30.0, False, "median rounds saved: 0.5"),
    (0.0, -30.0, False, "same median rounds: serialization, window sizes or loss recovery")])
def test_reason(saved, change, exact, want):
    assert M.reason(saved, change, 0.5, exact) == want


def test_rounds_from_a_real_capture():
    """The canned tortoise@ci runs (India desktop, 54 ms): Hybla's base HTML in 4 rounds (2-5-17-20 segments),
    H-TCP's in 3 (10-20-16); every data round of the connection, the GOAWAY's included, is one more."""
    runs = REPO / "tests" / "data" / "runs" / "tortoise@ci"
    assert M.run_rounds(runs / "30662112464e", first_response=True) == 4
    assert M.run_rounds(runs / "7084663580c8", first_response=True) == 3
    assert M.run_rounds(runs / "7084663580c8", first_response=False) == 4
