"""Experiment files: every bad value refused with its path, before anything starts."""

import subprocess

import pytest

from tests.conftest import TORTOISE, write_yaml
from tortoiselab.spec.experiment import ExperimentError, expand, load, run_order

GOOD = """
name: t
repetitions: 2
seed: 3
path: {rtt_ms: 100, loss_pct: 1, rate_mbit: 10}
server: {cc: cubic, initcwnd_pkts: 10}
client: {page: tiny.html}
sweep:
  server.cc: [cubic, hybla]
  path.loss_pct: [0, 2]
exclude:
  - {server.cc: hybla, path.loss_pct: 0}
"""


def test_sweep_expands_with_exclude_and_stable_ids(tmp_path):
    exp = load(write_yaml(tmp_path, GOOD))
    runs = expand(exp)
    assert len(runs) == (4 - 1) * 2
    assert len({r.run_id for r in runs}) == len(runs)
    assert [r.run_id for r in expand(load(write_yaml(tmp_path, GOOD)))] == [r.run_id for r in runs]
    assert {(r.point["server.cc"], r.point["path.loss_pct"]) for r in runs} == {
        ("cubic", 0), ("cubic", 2), ("hybla", 2)}
    assert sorted(r.run_id for r in run_order(exp, runs)) == sorted(r.run_id for r in runs)
    r0 = runs[0]
    assert r0.path.rtt_ms == 100 and r0.config["path"]["resolved"]["loss_pct"] == r0.point["path.loss_pct"]


def test_paired_runs_share_seeds_across_arms(tmp_path):
    exp = load(write_yaml(tmp_path, GOOD.replace("seed: 3", "seed: 3\npaired: true")))
    seeds = {}
    for r in expand(exp):
        seeds.setdefault(r.repetition, set()).add(r.seed)
    assert all(len(s) == 1 for s in seeds.values())
    unpaired = {r.seed for r in expand(load(write_yaml(tmp_path, GOOD)))}
    assert len(unpaired) == 6


@pytest.mark.parametrize("change,path", [
    (("client: {page: tiny.html}", "client: {page: tiny.html, colour: red}"), "client.colour"),
    (("path.loss_pct: [0, 2]", "path.loss_pct: [0, 150]"), "path.loss_pct"),
    (("rtt_ms: 100", "rtt_ms: -5"), "path.rtt_ms"),
    (("server.cc: [cubic, hybla]", "server.cc: [cubic, tortoise]"), "sweep.server.cc[1]"),
    (("initcwnd_pkts: 10", "initcwnd_pkts: 0"), "server.initcwnd_pkts"),
    (("client: {page: tiny.html}", "client: {page: tiny.html, cache_hit_ratio: 1.5}"), "client.cache_hit_ratio"),
    (("path: {rtt_ms: 100, loss_pct: 1, rate_mbit: 10}", "path: {region: atlantis-5g}"), "path.region"),
    (("repetitions: 2", "repetitions: 2\nrepetitons: 3"), "repetitons"),
    (("server.cc: [cubic, hybla]", "server.ccc: [cubic]"), "sweep"),
])
def test_validate_names_each_bad_field(tmp_path, change, path):
    f = write_yaml(tmp_path, GOOD.replace(*change))
    with pytest.raises(ExperimentError) as e:
        load(f)
    assert path in str(e.value)
    p = subprocess.run([*TORTOISE, "validate", str(f)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and path in p.stderr


def test_validate_ok(tmp_path):
    p = subprocess.run([*TORTOISE, "validate", str(write_yaml(tmp_path, GOOD))], capture_output=True, text=True)
    assert p.returncode == 0 and "6 runs" in p.stdout


def test_shipped_experiments_validate():
    from pathlib import Path

    for f in sorted((Path(__file__).parents[2] / "experiments").glob("*.yaml")):
        assert expand(load(f)), f


def test_a_file_without_a_name_is_refused_with_the_fix(tmp_path):
    """A missing or bad name said "name: Field required" and no fix (issue 40: the fuzz test never generated a
    file without a name)."""
    f = write_yaml(tmp_path, "\n".join(line for line in GOOD.splitlines() if not line.startswith("name:")))
    fix = "give the experiment a name of lower-case letters, digits, - and _, at most 44 characters"
    with pytest.raises(ExperimentError, match=rf"^name: Field required \(got .*\); {fix} .*e\.g\. name: quick$"):
        load(f)
    with pytest.raises(ExperimentError, match=rf"^name: String should match pattern .*\(got 'Bad Name'\); {fix}"):
        load(write_yaml(tmp_path, GOOD.replace("name: t", "name: Bad Name")))
