"""The batch as the unit of reproduction (docs/determinism.md, "Batches"),
on the runner's defaults (batches of at most 16, near-equal, fixed by the
experiment file): the
same sweep run whole (--jobs 2), resumed after an interruption inside a
batch (--limit 3, then the rest) and sharded (--shard 1/2 and 2/2 side by
side) gives the same records run by run: PLT, bytes, retransmissions and
every server-side packet to the microsecond, each run at the same place of
the same batch. --verify-determinism reruns a run's batch up to the run and
agrees. --batch 1 keeps the run-alone identity: its runs are the same runs
alone in the reverse order, and each default batch's first run is its run
alone.

A small sweep (tiny page, 2 % loss, cubic and hybla, 5 repetitions: 10
runs, two batches of 5) so that the passes take a minute each."""

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import TORTOISE, experiment_yaml
from tortoiselab.host import determinism as D

pytestmark = pytest.mark.lab

EXP = experiment_yaml("two-arms", {"name": "batchdet", "repetitions": 5,
                                   "path": {"rtt_ms": 60, "loss_pct": 2, "rate_mbit": 10}})


def _tortoise(args: list[str], f: Path, results: Path) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.monotonic()
    p = subprocess.run([*TORTOISE, "run", str(f), "--results", str(results), "--backend", "uml",
                        "--clock", "virtual", *args], capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stdout + p.stderr
    return round(time.monotonic() - t0, 1), p


def _side_by_side(argss: list[list[str]], f: Path, results: Path) -> float:
    t0 = time.monotonic()
    procs = [subprocess.Popen([*TORTOISE, "run", str(f), "--results", str(results), "--backend", "uml",
                               "--clock", "virtual", *a], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for a in argss]
    for p in procs:
        out, _ = p.communicate(timeout=1800)
        assert p.returncode == 0, out
    return round(time.monotonic() - t0, 1)


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory, lab_kernel):
    d = tmp_path_factory.mktemp("batchdet")
    f = d / "batchdet.yaml"
    f.write_text(EXP)
    walls = {}
    walls["whole"], _ = _tortoise(["--jobs", "2"], f, d / "whole")
    walls["resumed (--limit 3)"], _ = _tortoise(["--limit", "3"], f, d / "resumed")
    walls["resumed (the rest)"], _ = _tortoise(["--jobs", "2"], f, d / "resumed")
    walls["sharded (1/2 and 2/2 side by side)"] = _side_by_side([["--shard", "1/2"], ["--shard", "2/2"]], f,
                                                                d / "sharded")
    walls["--batch 1 --jobs 2"], _ = _tortoise(["--batch", "1", "--jobs", "2"], f, d / "alone")
    print("wall seconds:", json.dumps(walls))
    return f, {k: d / k / "batchdet" for k in ("whole", "resumed", "sharded", "alone")}


def _runs(exp_dir: Path) -> list[str]:
    return sorted(p.parent.name for p in exp_dir.glob("*/run.json"))


def _batch(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())["meta"]["batch"]


def _compare(a: Path, b: Path, ids: list[str]) -> list:
    comps = [D.compare_fingerprints(D.fingerprint(a / r), D.fingerprint(b / r)) for r in ids]
    if any(c.a.code != c.b.code for c in comps):
        pytest.skip("the lab's code changed while the test ran; rerun it")
    return comps


def test_the_default_batches_are_fixed_by_the_experiment(sweeps):
    _f, d = sweeps
    ids = _runs(d["whole"])
    assert len(ids) == 10 and all(_runs(d[k]) == ids for k in d)
    metas = {r: _batch(d["whole"] / r) for r in ids}
    assert len({m["id"] for m in metas.values()}) == 2
    assert sorted(m["size"] for m in metas.values()) == [5] * 10  # 10 runs: 5 + 5, not 8 + 2
    for r, m in metas.items():
        assert m["runs"][m["index"]] == r
        for k in ("resumed", "sharded"):  # the same batch, the same place, whoever ran it
            o = _batch(d[k] / r)
            assert (o["id"], o["index"], o["runs"]) == (m["id"], m["index"], m["runs"]), (k, r)
        assert _batch(d["alone"] / r)["size"] == 1
    # the resumed batch loaded its first three runs again, and they gave their stored PLT and bytes
    replayed = [(r, _batch(d["resumed"] / r)) for r in ids if _batch(d["resumed"] / r)["replayed"]]
    assert replayed and all(len(m["replayed"]) == 3 and m["replays_differing"] == [] for _r, m in replayed)
    assert not any(_batch(d[k] / r)["replayed"] for k in ("whole", "sharded") for r in ids)


def test_resumed_and_sharded_sweeps_are_the_whole_sweep(sweeps):
    """Run by run, to the microsecond: an interruption or a split does not
    change a number."""
    _f, d = sweeps
    ids = _runs(d["whole"])
    for k in ("resumed", "sharded"):
        comps = _compare(d["whole"], d[k], ids)
        assert all(c.a.ok and c.b.ok for c in comps)
        bad = [f"{c.run_id}: " + "; ".join(c.differences) for c in comps if not c.identical]
        print(f"whole vs {k}: {len(comps) - len(bad)} of {len(comps)} identical")
        assert not bad, bad
    comps = _compare(d["whole"], d["whole"], ids)
    other = D.compare_fingerprints(comps[0].a, comps[1].a)  # the comparison does see a difference
    assert not other.identical


def test_batch_one_keeps_the_run_alone_identity(sweeps, tmp_path_factory):
    """--batch 1 runs are runs alone in any order, and a default batch's
    first run is its run alone (its later runs are not: "What a batch
    cannot reset")."""
    from tortoiselab.host import backends
    from tortoiselab.host.provenance import tool_versions
    from tortoiselab.host.runner import run_one
    from tortoiselab.spec.experiment import expand, load, run_order

    f, d = sweeps
    exp = load(f)
    runs = list(reversed(run_order(exp, expand(exp))))[:2]
    rev = tmp_path_factory.mktemp("batchdet-rev") / exp.name
    rev.mkdir()
    info = backends.choose("uml", "virtual", ["cubic", "hybla"])
    lab = d["whole"] / ".lab"
    for r in runs:
        assert run_one(r, rev, info, lab / "site", lab / "pki", tool_versions())["ok"]
    comps = _compare(d["alone"], rev, [r.run_id for r in runs])
    assert all(c.identical for c in comps), [c.differences for c in comps]
    firsts = [r for r in _runs(d["whole"]) if _batch(d["whole"] / r)["index"] == 0]
    assert len(firsts) == 2
    comps = _compare(d["alone"], d["whole"], firsts)
    assert all(c.identical for c in comps), [c.differences for c in comps]
    later = _compare(d["alone"], d["whole"], [r for r in _runs(d["whole"]) if r not in firsts])
    print(f"--batch 1 vs the default batches: first runs {len(firsts)} of {len(firsts)} identical, later runs "
          f"{sum(c.identical for c in later)} of {len(later)} identical")


def test_verify_determinism_reruns_the_batch_up_to_the_run(sweeps):
    f, d = sweeps
    a = d["resumed"]
    t0 = time.monotonic()
    p = subprocess.run([*TORTOISE, "run", str(f), "--results", str(a.parent), "--backend", "uml",
                        "--clock", "virtual", "--verify-determinism", "3"], capture_output=True, text=True,
                       timeout=1800)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "3 of 3 runs identical" in p.stdout
    print(f"verify-determinism 3 on the resumed folder: {time.monotonic() - t0:.1f} s")
    assert len(_runs(a)) == 10 and not list(a.glob(".*.tmp-*")) and not list(a.glob(".verify-*"))
