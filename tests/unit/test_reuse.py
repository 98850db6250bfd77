"""`tortoise run --grid G --reuse-from F` (host/reuse.py) on canned runs:
initcwnd's reduced grid plans the two runs of its ci grid (same run ids:
the same configuration, repetition and seed), so it takes them from
results/initcwnd@ci instead of running them again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO
from tortoiselab.host import reuse, store

CANNED = REPO / "tests" / "data" / "runs" / "initcwnd@ci"
EXP = REPO / "experiments" / "initcwnd.yaml"


@pytest.fixture
def results(tmp_path) -> Path:
    shutil.copytree(CANNED, tmp_path / "initcwnd@ci")
    return tmp_path


def test_reduced_takes_the_ci_runs_it_shares(results):
    src = results / "initcwnd@ci"
    before = {p: p.read_bytes() for p in src.glob("*/run.json")}
    taken = reuse.take_locked(EXP, "reduced", "ci", results)
    assert len(taken) == 2
    dst = results / "initcwnd@reduced"
    for rid in taken:
        rec = store.read_record(dst / rid)
        assert rec.experiment == "initcwnd@reduced" and rec.meta.reused_from == "initcwnd@ci"
        assert rec.summary == store.read_record(src / rid).summary
        pcap = next((src / rid).glob("*.pcap"))  # the captures are hard links, not copies
        assert (dst / rid / pcap.name).stat().st_ino == pcap.stat().st_ino
    assert {p: p.read_bytes() for p in src.glob("*/run.json")} == before  # F's records left alone
    df = store.load_runs(dst)
    assert sorted(df["run_id"]) == sorted(taken) and (df["experiment"] == "initcwnd@reduced").all()
    assert reuse.take_locked(EXP, "reduced", "ci", results) == []  # taken once
    assert not list(dst.glob(".reuse-*"))


def test_a_failed_run_is_run_again_not_taken(results):
    rd = store.run_dirs(results / "initcwnd@ci")[0]
    raw = json.loads((rd / "run.json").read_text())
    (rd / "run.json").write_text(json.dumps({**raw, "ok": False, "error": "lab: guest timed out"}))
    taken = reuse.take_locked(EXP, "reduced", "ci", results)
    assert len(taken) == 1 and rd.name not in taken


@pytest.mark.parametrize("grid, src, msg", [
    ("reduced", "reduced", "--reuse-from reduced: the grid being run"),
    ("reduced", "nope", "--reuse-from nope: "),
    ("ci", "reduced", "initcwnd@reduced does not exist (run that grid first"),
])
def test_bad_reuse_from_is_refused_before_anything_is_made(results, grid, src, msg):
    with pytest.raises(reuse.ReuseError, match=msg.replace("(", r"\(")):
        reuse.take_locked(EXP, grid, src, results)
    assert sorted(p.name for p in results.iterdir()) == ["initcwnd@ci"]


@pytest.mark.parametrize("backend, clock, n", [
    ("uml", "virtual", 2), (None, None, 2), ("auto", "auto", 2),
    ("native", "real", 0), ("uml", "real", 0), ("native", None, 0),
])
def test_only_runs_of_the_same_backend_and_clock_are_taken(results, backend, clock, n):
    # the canned runs are uml on the virtual clock: a native run on the real
    # clock has other times, and is run again rather than mixed in
    taken = reuse.take_locked(EXP, "reduced", "ci", results, backend, clock)
    assert len(taken) == n
    assert len(store.run_dirs(results / "initcwnd@reduced")) == n
