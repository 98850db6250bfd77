"""Shards of a sweep (--shard i/N) and the per-run claims that let shards
share one results folder: disjoint slices whose union is the sweep, clear
errors for bad specs, and cleaning that never touches a live shard's work."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import TORTOISE
from tortoiselab.host import sites, slurm
from tortoiselab.spec.experiment import Experiment, expand, load
from tortoiselab.host.errors import RunnerError
from tortoiselab.host.locks import claim, clean_stale, experiment_lock, probe_claim
from tortoiselab.host.shards import parse_shard, read_run_list, shard_slice

EXP = Experiment(name="sh", repetitions=5, seed=2, path={"rtt_ms": 50, "loss_pct": 1, "rate_mbit": 10},
                 client={"page": "tiny.html"},
                 sweep={"server.cc": ["cubic", "reno", "hybla"], "path.loss_pct": [0, 1]})


def test_three_shards_are_disjoint_even_and_cover_the_sweep():
    ids = [r.run_id for r in expand(EXP)]
    assert len(ids) == 30
    slices = [set(shard_slice(ids, (k, 3))) for k in (1, 2, 3)]
    assert [len(x) for x in slices] == [10, 10, 10]
    assert not (slices[0] & slices[1]) and not (slices[0] & slices[2]) and not (slices[1] & slices[2])
    assert slices[0] | slices[1] | slices[2] == set(ids)


@pytest.mark.parametrize("n", [1, 4, 7, 30, 31])
def test_slices_differ_in_size_by_one_at_most(n):
    ids = [r.run_id for r in expand(EXP)]
    sizes = [len(shard_slice(ids, (k, n))) for k in range(1, n + 1)]
    assert sum(sizes) == 30 and max(sizes) - min(sizes) <= 1


def test_a_runs_slice_does_not_depend_on_what_is_pending():
    ids = [r.run_id for r in expand(EXP)]
    done = set(ids[::3])  # whatever is complete, each pending run keeps its slice
    for k in (1, 2, 3, 4):
        assert {i for i in shard_slice(ids, (k, 4)) if i not in done} == set(shard_slice(ids, (k, 4))) - done
    assert shard_slice(ids, (1, 1)) == ids


def test_run_list_keeps_its_order_and_refuses_strangers(tmp_path):
    ids = [r.run_id for r in expand(EXP)]
    f = tmp_path / "runs.txt"
    f.write_text("\n".join([ids[5], ids[2], "", ids[9]]) + "\n")
    assert read_run_list(f, ids) == [ids[5], ids[2], ids[9]]
    f.write_text(f"{ids[1]}\nfeedfacecafe\n")
    with pytest.raises(RunnerError, match=r"^runs-file: 1 run id\(s\) .* not in this sweep \(first: feedfacecafe\)"):
        read_run_list(f, ids)
    f.write_text(f"{ids[1]}\n{ids[1]}\n")
    with pytest.raises(RunnerError, match="^runs-file: .* lists a run id twice"):
        read_run_list(f, ids)
    with pytest.raises(RunnerError, match="^runs-file: cannot read"):
        read_run_list(tmp_path / "missing.txt", ids)


@pytest.mark.parametrize("spec, words", [
    ("4/3", "i must be between 1 and N=3"), ("0/2", "i must be between 1 and N=2"),
    ("1/0", "N (the number of slices) must be at least 1"), ("2", "give i/N"), ("a/b", "give i/N"),
    ("1/2/3", "give i/N"), ("", "give i/N")])
def test_bad_shard_specs_name_the_field(spec, words):
    with pytest.raises(RunnerError) as e:
        parse_shard(spec)
    assert str(e.value).startswith("shard: ") and words in str(e.value)


def test_good_shard_specs():
    assert parse_shard("2/3") == (2, 3) and parse_shard(" 1 / 1 ") == (1, 1)


def test_cli_bad_shard_fails_before_anything_is_made(tmp_path):
    f = tmp_path / "e.yaml"
    f.write_text("name: e\nclient: {page: tiny.html}\n")
    p = subprocess.run([*TORTOISE, "run", str(f), "--shard", "3/2", "--results", str(tmp_path / "res")],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "shard: i must be between 1 and N=2" in p.stderr
    assert not (tmp_path / "res").exists()


@pytest.mark.parametrize("opts, field", [
    ({"parallelism": 0}, "array-parallelism"), ({"time_limit": "2 hours"}, "time"), ({"mem": "2GB"}, "mem"),
    ({"partition": "a b"}, "partition")])
def test_bad_slurm_options_name_the_field(opts, field):
    args = {"partition": None, "parallelism": 2, "time_limit": None, "mem": None, **opts}
    with pytest.raises(RunnerError) as e:
        slurm.check_options(**args)
    assert str(e.value).startswith(f"{field}: ")


def test_good_slurm_options():
    for t in ("30", "10:00", "2:00:00", "1-0", "1-12:30", "1-12:30:00"):
        slurm.check_options("lab,debug", 4, t, "2G")


def test_slurm_options_without_the_slurm_executor_are_refused(tmp_path):
    f = tmp_path / "e.yaml"
    f.write_text("name: e\nclient: {page: tiny.html}\n")
    p = subprocess.run([*TORTOISE, "run", str(f), "--time", "1:00:00", "--results", str(tmp_path / "res")],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "time: only with --executor slurm" in p.stderr


HOLDER = """
import sys, time
from pathlib import Path
from tortoiselab.host.locks import claim, note
with claim(Path(sys.argv[1]), sys.argv[2]) as fh:
    note(fh, "start somehost 1")
    print("held", flush=True)
    time.sleep(60)
"""


def _stale_folder(exp_dir: Path, run_id: str) -> Path:
    tmp = exp_dir / f".{run_id}.tmp-99999-1"
    (tmp / "lab").mkdir(parents=True)
    return tmp


def test_clean_stale_spares_a_live_shards_work_and_removes_a_dead_ones(tmp_path):
    exp_dir = tmp_path / "exp"
    exp_dir.mkdir()
    live, dead = "aaaaaaaaaaaa", "bbbbbbbbbbbb"
    live_tmp, dead_tmp = _stale_folder(exp_dir, live), _stale_folder(exp_dir, dead)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(exp_dir), live], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with claim(exp_dir, dead) as fh:  # an owner that finished with the claim (or died)
            fh.write("start otherhost 4242 t\n")
        with probe_claim(exp_dir, live) as (free, _):
            assert not free
        done = clean_stale(exp_dir)
        assert live_tmp.exists(), "a live shard's work was removed"
        assert not dead_tmp.exists()
        assert any(dead in line for line in done)
        holder.kill()
        holder.wait()
        with probe_claim(exp_dir, live) as (free, last):
            assert free and last.startswith("start somehost 1 ")
        clean_stale(exp_dir, run_ids={dead})  # a shard cleans only its own slice
        assert live_tmp.exists()
        clean_stale(exp_dir)
        assert not live_tmp.exists()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_a_claim_waits_for_its_holder():
    import tempfile
    import threading

    with tempfile.TemporaryDirectory() as d:
        exp_dir = Path(d)
        order = []
        with claim(exp_dir, "cccccccccccc"):
            def second():
                with claim(exp_dir, "cccccccccccc"):
                    order.append("2nd")

            t = threading.Thread(target=second)
            t.start()
            time.sleep(0.3)
            order.append("1st done")
        t.join(5)
        assert order == ["1st done", "2nd"]


def test_shards_share_the_experiment_lock_a_plain_runner_does_not(tmp_path):
    with experiment_lock(tmp_path / "e", shared=True), experiment_lock(tmp_path / "e", shared=True):
        with pytest.raises(RunnerError, match="another runner is working"):
            with experiment_lock(tmp_path / "e"):
                pass
    with experiment_lock(tmp_path / "e"):
        assert f"pid {os.getpid()}" in (tmp_path / "e" / ".lock").read_text()
        with pytest.raises(RunnerError, match=f"pid {os.getpid()}"):
            with experiment_lock(tmp_path / "e", shared=True):
                pass


def test_slurm_passes_the_sites_on(tmp_path, monkeypatch):
    """`tortoise run --executor slurm` with runs of client.site: the site is
    checked before a job goes, and every array task gets --sites with the
    folder's absolute path (the nodes must find the same one)."""
    repo = Path(__file__).resolve().parents[2]
    sites.import_har(repo / "tests" / "data" / "har" / "multi-origin.har", tmp_path / "sites", "shop")
    runs = expand(load(repo / "experiments" / "your-site.yaml", grid="ci"))
    monkeypatch.chdir(tmp_path)
    assert slurm.imported_sites(tmp_path / "exp", runs, Path("sites")) == tmp_path / "sites"
    with pytest.raises(RunnerError, match="no imported site of that name; make it with `tortoise site import"):
        slurm.imported_sites(tmp_path / "exp", runs, tmp_path / "nosites")
    (tmp_path / "staged" / ".lab" / "imported" / "shop").mkdir(parents=True)
    # a copy staged in the results folder already: the runner checks it
    assert slurm.imported_sites(tmp_path / "staged", runs, tmp_path / "nosites") == tmp_path / "nosites"
    assert slurm.imported_sites(tmp_path / "exp", [r for r in runs if r.settings.client.site is None],
                                tmp_path) is None
    script = slurm.batch_script(tmp_path / "sub", tmp_path / "e.yaml", tmp_path / "res", 2, "virtual", "ci",
                                tmp_path / "k", 4, tmp_path / "sites")
    line = next(x for x in script.splitlines() if " -m tortoiselab.cli run " in x)
    assert line.endswith(f"--grid ci --sites {tmp_path / 'sites'}"), line
    assert "--sites" not in slurm.batch_script(tmp_path / "sub", tmp_path / "e.yaml", tmp_path / "res", 2,
                                               "virtual", "ci", tmp_path / "k", 4)
