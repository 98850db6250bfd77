"""The shared experiments tests derive theirs from (tests/data/experiments,
tests/conftest.py experiment_yaml): each is valid, and a change says
exactly what differs."""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import EXPERIMENTS, experiment_yaml, write_yaml
from tortoiselab.spec.experiment import expand, load

BASES = sorted(p.stem for p in EXPERIMENTS.glob("*.yaml"))


@pytest.mark.parametrize("base", BASES)
def test_each_shared_experiment_is_valid_and_named_as_its_file(tmp_path, base):
    exp = load(write_yaml(tmp_path, experiment_yaml(base)))
    assert exp.name == base and expand(exp)


def test_changes_set_a_field_replace_an_entry_or_remove_it():
    base = yaml.safe_load((EXPERIMENTS / "two-arms.yaml").read_text())
    doc = yaml.safe_load(experiment_yaml("two-arms", {"name": "x", "path.loss_pct": 0.5, "client": {"page": "feed.html"},
                                                      "sweep.server.cc": ["cubic", "reno"], "seed": None,
                                                      "server.initcwnd_pkts": None, "topology.name": "dumbbell"}))
    expected = {**base, "name": "x", "path": {**base["path"], "loss_pct": 0.5}, "client": {"page": "feed.html"},
                "sweep": {"server.cc": ["cubic", "reno"]}, "server": {"cc": "cubic"}, "topology": {"name": "dumbbell"}}
    del expected["seed"]
    assert doc == expected


def test_a_comment_is_the_first_line_and_an_unknown_base_is_named():
    text = experiment_yaml("tiny", comment="why this file")
    assert text.startswith("# why this file\nname: tiny\n")
    with pytest.raises(FileNotFoundError, match=r"no shared experiment 'nope': \[.*'tiny'.*\]"):
        experiment_yaml("nope")
