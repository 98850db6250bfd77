"""`tortoise map` end to end in the lab (uml backend, virtual clock): the
tortoise file's ci map, Hybla against H-TCP at 50 and 300 ms without loss
(4 runs, about 30 s of lab), its cells, their causes, PLT and rounds from
the captures (as analysis/hyblamodel.py predicts them), and the figure and
map.json written beside the runs (docs/maps.md)."""

import json
import subprocess

import pytest

from tests.conftest import REPO, TORTOISE
from tortoiselab.analysis import hyblamodel as H
from tortoiselab.report.maps import CELL_COLUMNS, map_sections

pytestmark = pytest.mark.lab


def test_the_ci_map_runs_and_is_drawn(tmp_path, lab_kernel):
    results = tmp_path / "results"
    p = subprocess.run([*TORTOISE, "map", str(REPO / "experiments" / "tortoise.yaml"), "--map", "ci",
                        "--results", str(results), "--backend", "uml", "--clock", "virtual", "--jobs", "2"],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    print(p.stdout[-4000:], p.stderr[-4000:])
    assert p.returncode == 0
    assert "map ci -> results/tortoise@map-ci: 2 cells, 4 runs (4 exact" in p.stdout  # the cost, before it ran
    folder = results / "tortoise@map-ci"
    doc = json.loads((folder / "map.json").read_text())
    cells = {c["rtt_ms"]: c for c in doc["cells"]}
    assert set(cells) == {50.0, 300.0} and all(c["exact"] and c["n"] == 1 for c in cells.values())
    # Linux Hybla's first window is RTT / 25 ms segments whatever initcwnd says: 2 at 50 ms, below H-TCP's 10
    # (it loses), 12 at 300 ms (it wins); the causes name those first flights
    assert cells[50.0]["effect_pct"] > 0 and cells[50.0]["label"] == "disagree"
    assert cells[300.0]["effect_pct"] < 0 and cells[300.0]["label"] == "agree"
    assert "htcp: " in cells[50.0]["cause"] and "(10-" in cells[50.0]["cause"]
    assert "hybla: " in cells[300.0]["cause"] and "(12-" in cells[300.0]["cause"]
    # why: at 50 ms Hybla loses a round trip (4 against 3), at 300 ms it saves one (2 against 3), as the model
    # of its slow start says (docs/maps.md); each arm's PLT beside the content download
    for rtt, saved, why in ((50.0, -1, "rounds lost: 1"), (300.0, 1, "rounds saved: 1")):
        c, model = cells[rtt], H.compare(H.LAB_BASE_HTML_BYTES, rtt, 18.8)
        assert (c["rounds_saved"], c["reason"]) == (saved, why) and model["rounds_saved"] == saved
        assert (c["control_rounds"], c["arm_rounds"]) == (model["standard"]["rounds"], model["hybla"]["rounds"])
        assert c["control_plt_ms"] > rtt * 5 and c["arm_plt_ms"] > rtt * 4
        assert (c["plt_change_pct"] > 0) == (saved < 0)
    assert {m["name"] for m in doc["markers"] if m["kind"] == "region"} == {"india-desktop-2017",
                                                                           "china-desktop-2017"}
    png = (folder / "map.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    # the report's section reads it (report/maps.py; the HTML around it: tests/unit/test_report_html.py)
    sec = map_sections(folder)
    assert [s["folder"] for s in sec] == ["tortoise@map-ci"] and sec[0]["png"]
    label, why = CELL_COLUMNS.index("label"), CELL_COLUMNS.index("why")
    assert [(r[label], r[why]) for r in sec[0]["rows"]] == [("disagree", "rounds lost: 1"), ("agree", "rounds saved: 1")]
