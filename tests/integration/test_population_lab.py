"""The tortoise-population ci grid in the lab (uml backend, virtual clock):
two users of India mobile drawn from topologies/populations.yaml, each
loading the page with htcp and with hybla. The runs must be whole, paired
on the user (the same path and netem seed in both arms) and carry their
draw, and the statistics over users must read them (docs/population.md)."""

import json
import subprocess

import pytest

from tests.conftest import REPO, TORTOISE
from tortoiselab.spec.experiment import expand, load
from tortoiselab.spec.population import draw_users
from tortoiselab.studies.population import load_population_runs, population_change, population_quantiles

pytestmark = pytest.mark.lab

EXP = REPO / "experiments" / "tortoise-population.yaml"


def test_population_ci_grid_runs_whole_paired_and_recorded(tmp_path, lab_kernel):
    res = subprocess.run([*TORTOISE, "run", str(EXP), "--grid", "ci", "--results", str(tmp_path),
                          "--jobs", "1", "--backend", "uml", "--clock", "virtual"],
                         capture_output=True, text=True, timeout=1800, cwd=REPO)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    runs = expand(load(EXP, grid="ci"))
    df = load_population_runs(tmp_path / "tortoise-population@ci", {r.run_id for r in runs})
    assert len(df) == len(runs) == 4
    assert df["ok"].all(), df[["run_id", "error"]]
    assert (df["clock"] == "virtual").all() and (df["backend"] == "uml").all()

    users = draw_users("india-mobile-2017", 2, seed=3)
    for i, u in enumerate(users):
        rows = df[df["population.user"] == i]
        assert sorted(rows["server.cc"]) == ["htcp", "hybla"]
        assert rows["seed"].nunique() == 1  # one netem seed for the user's arms
        for _, r in rows.iterrows():
            rec = json.loads((tmp_path / "tortoise-population@ci" / r["run_id"] / "run.json").read_text())
            assert rec["config"]["population"] == u.record()
            assert rec["path"] == u.path.model_dump()  # the path the lab ran is the user's draw
            assert r["path.rtt_ms"] == u.path.rtt_ms and r["client.host"] == "mobile"
            assert r["population.warm"] == u.warm
            if u.warm:  # the measured load is the second, on the first's connection
                assert r["plt2_ms"] > 0 and r["repeat_new_conns"] == 0
            else:
                assert r["plt2_ms"] != r["plt2_ms"]  # NaN: one load only
            # netem ran the user's loss model: Gilbert for a bursty user
            assert rec["config"]["path"]["resolved"]["loss_burst_pkts"] == u.path.loss_burst_pkts

    m = population_change(df, "plt_ms", "arm", "htcp", "hybla", market="india-mobile-2017", n_resamples=500)
    assert m.n == 2 and m.value == m.value
    q = population_quantiles(df, "plt_ms", "arm")
    assert list(q["users"]) == [2, 2] and list(q["failed"]) == [0, 0]
    print(m.text(), m.detail)
    print(q.to_string())
