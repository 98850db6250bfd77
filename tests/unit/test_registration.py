"""Claims registered with the runs they judged (studies/registration.py):
a claim changed after its runs were judged is marked; registry.json is
written without following a link and a malformed one is not trusted."""

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from tortoiselab import studies as S
from tortoiselab.host.safefs import LinkRefused
from tortoiselab.studies import registration as G
from tortoiselab.studies import registry as R

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"


@pytest.fixture
def results(tmp_path):
    root = tmp_path / "runs"
    shutil.copytree(RUNS / "initcwnd@ci", root / "initcwnd@ci")
    return root


def _judge(results):
    return G.record_judged(results, "ci", {"initcwnd": S.evaluate("initcwnd", results, "ci")})


def test_a_claim_changed_after_its_runs_were_judged_is_marked(results, monkeypatch):
    first = _judge(results)["initcwnd"]
    assert not any(v.changed for v in first)
    entries = json.loads((results / G.REGISTRY).read_text())["claims"]
    judged = [v.claim_id for v in first if v.verdict != "no data"]
    assert judged and all(len(entries[c]) == 1 for c in judged)
    assert not any(v.changed for v in _judge(results)["initcwnd"])  # the same claims again: nothing changed
    # the rule of one claim edited after its data was judged
    study = R.STUDIES["initcwnd"]
    edited = tuple(dataclasses.replace(c, rule=c.rule + " (edited)") if c.id == judged[0] else c
                   for c in study.claims)
    monkeypatch.setitem(R.STUDIES, "initcwnd", dataclasses.replace(study, claims=edited))
    again = {v.claim_id: v for v in _judge(results)["initcwnd"]}
    assert "judged on" in again[judged[0]].changed and G.claim_hash(edited[0]) != ""
    assert all(not again[c].changed for c in judged[1:])


def test_registry_json_is_never_written_through_a_link(results, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (results / G.REGISTRY).symlink_to(victim)
    with pytest.raises(LinkRefused):
        _judge(results)
    assert victim.read_text() == "keep"


def test_a_malformed_registry_is_set_aside_not_trusted(results):
    (results / G.REGISTRY).write_text('{"format": 1, "claims": "not a table"}')
    out = _judge(results)["initcwnd"]
    assert not any(v.changed for v in out)
    assert isinstance(json.loads((results / G.REGISTRY).read_text())["claims"], dict)
