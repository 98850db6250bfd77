"""The napkin floor is a lower bound: on every loss-free page load stored in
tests/data/runs (the studies' canned ci-grid runs), measured PLT / floor >= 1,
the floor recomputed by today's model (analysis.napkin.run_floor) from the
run's configuration, site and PKI. The integration twin runs a loss-free grid
on the virtual clock (tests/integration/test_studies.py)."""

import json
from pathlib import Path

import pytest

from tortoiselab.analysis import napkin

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"


def _loss_free_loads():
    out = []
    for rj in sorted(RUNS.glob("*/*/run.json")):
        r = json.loads(rj.read_text())
        cfg = r["config"]
        path = (cfg.get("path") or {}).get("resolved") or cfg.get("path") or {}
        if r["ok"] and not path.get("loss_pct") and r["summary"].get("plt_ms"):
            out.append(pytest.param(rj, id=f"{rj.parent.parent.name}/{rj.parent.name}"))
    return out


LOADS = _loss_free_loads()


def test_the_canned_runs_have_loss_free_loads_and_the_articles_case():
    names = [p.id for p in LOADS]
    assert len(names) >= 6, names
    cases = [json.loads(p.values[0].read_text())["config"]["server"] for p in LOADS]
    assert any(s.get("initcwnd_pkts") == 3 and s.get("tls") == "1.2" and s.get("cert") == "large" for s in cases)


@pytest.mark.parametrize("run_json", LOADS)
def test_measured_plt_is_at_or_above_the_floor(run_json):
    r = json.loads(run_json.read_text())
    lab = run_json.parent.parent / ".lab"
    manifest = json.loads((lab / "site" / "manifest.json").read_text())
    pki = json.loads((lab / "pki" / "pki.json").read_text())
    f = napkin.run_floor(r["config"], manifest, pki, r["summary"].get("cached_urls") or ())
    assert f["floor_ms"], f.get("why")
    ratio = r["summary"]["plt_ms"] / f["floor_ms"]
    assert ratio >= 1, (f"{run_json.parent.name}: PLT {r['summary']['plt_ms']} ms below the floor "
                        f"{f['floor_ms']} ms ({f['model']})")
