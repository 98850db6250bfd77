"""Deterministic mode (docs/determinism.md): a small sweep run twice on the
virtual clock, into two results folders (of another depth and length: a
run does not depend on where its results lie), gives identical PLT, bytes,
retransmission counts and identical server-side packets (time to the
microsecond, sizes, flags, relative sequence numbers and TCP timestamps);
then `tortoise run --verify-determinism` reruns one of them and agrees.
The passes here are `--batch 1`, every run in a lab boot of its own
(docs/determinism.md, "Batches"): the same runs alone in the reverse order
are identical to them, and the same runs in one boot (in both orders) are
compared with them for what a batch changes. The runner's default,
batches fixed by the experiment file, resumed and sharded:
tests/integration/test_determinism_batches.py.

The two passes run side by side (one runner each, --jobs 1: two labs at
once, as --jobs 2 would), for two reasons: it shows that the load of the
machine does not matter on the virtual clock, and both passes run the same
code (other work may edit the project meanwhile, and a run is repeatable
only with the same code: see guest.code_digest)."""

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import TORTOISE, experiment_yaml
from tortoiselab.host import determinism as D

pytestmark = pytest.mark.lab

# eager: every request of the page leaves at once, so a run's segments do not depend on when earlier responses
# arrived; under the default schedule (chromium) a shift of microseconds in a later run of a boot can regroup
# requests into segments and so meet other loss draws (docs/determinism.md, "What is guaranteed")
EXP = experiment_yaml("feed", {"name": "determinism", "repetitions": 2, "client.schedule": "eager",
                               "sweep": {"server.cc": ["cubic", "hybla"], "path.loss_pct": [2, 5]}})


@pytest.fixture(scope="module")
def two_passes(tmp_path_factory, lab_kernel):
    d = tmp_path_factory.mktemp("det")
    f = d / "determinism.yaml"
    f.write_text(EXP)
    procs = [subprocess.Popen([*TORTOISE, "run", str(f), "--results", str(d / name), "--backend", "uml",
                               "--clock", "virtual", "--jobs", "1", "--batch", "1"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for name in ("a", "bb/ccc")]
    for p in procs:
        out, _ = p.communicate(timeout=1800)
        assert p.returncode == 0, out
    return f, d / "a" / "determinism", d / "bb" / "ccc" / "determinism"


def _runs(exp_dir: Path) -> list[str]:
    return sorted(p.parent.name for p in exp_dir.glob("*/run.json"))


def _comparisons(a: Path, b: Path) -> list:
    assert _runs(a) == _runs(b) and len(_runs(a)) == 8
    comps = [D.compare_fingerprints(D.fingerprint(a / r), D.fingerprint(b / r)) for r in _runs(a)]
    codes = {(c.a.code, c.b.code) for c in comps}
    if any(x != y for x, y in codes):
        pytest.skip(f"the lab's code changed while the test ran ({codes}); rerun it")
    return comps


def _batch_meta(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())["meta"]["batch"]


def _headers(p: tuple) -> tuple:
    """A packet's fields but its time and, for TCP, its timestamps option."""
    return p[1:-2] if p[1] == "tcp" else p[1:]


def test_two_virtual_clock_passes_are_identical(two_passes):
    """Every run the same in both passes: PLT, bytes, retransmissions, and
    every server-side packet (time to the microsecond, size, flags, relative
    sequence numbers, TCP timestamps). Checked field by field first, so that
    a failure says what moved."""
    _f, a, b = two_passes
    comps = _comparisons(a, b)
    for c in comps:
        assert c.a.ok and c.b.ok
        assert c.a.bytes == c.b.bytes and c.a.retransmissions == c.b.retransmissions, c.run_id
        assert [_headers(p) for p in c.a.packets] == [_headers(p) for p in c.b.packets], c.run_id
        assert c.identical, f"{c.run_id}: " + "; ".join(c.differences)
        assert c.max_dt_us == 0 and c.a.packets == c.b.packets and c.a.plt_ms == c.b.plt_ms
    # the guest's CRNG followed the run's seed in both boots (its boot id is a draw from it)
    for r in _runs(a):
        ids = [json.loads((x / r / "run.json").read_text())["meta"]["guest_boot_id"] for x in (a, b)]
        assert ids[0] and ids[0] == ids[1], r
    # not trivially equal: the loss draws differ between runs and do cause retransmissions
    assert len({c.a.plt_ms for c in comps}) == len(comps)
    assert all(c.a.retransmissions["total"] > 0 for c in comps)
    assert all(len(c.a.packets) > 500 for c in comps)
    # and the comparison does see a difference where there is one
    other = D.compare_fingerprints(comps[0].a, comps[1].b)
    assert not other.identical and other.packets_differing > 0


def test_runs_record_their_seeds(two_passes):
    _f, a, _b = two_passes
    recs = [json.loads((a / r / "run.json").read_text()) for r in _runs(a)]
    for rec in recs:
        s = rec["meta"]["seeds"]
        assert s["run"] == rec["seed"] == s["client"]
        assert s["netem_up"] != s["netem_down"]
        assert s["site"] == 1 and s["pki"] == "determinism"
        assert s["virtual_epoch_s"] == 1893456000
        assert len(rec["meta"]["code"]) == 64  # the digest of the code that ran in the guest
    # not paired: every run its own seed, so its own netem draws
    assert len({r["meta"]["seeds"]["netem_down"] for r in recs}) == len(recs)


def test_verify_determinism_cli(two_passes):
    f, a, _b = two_passes
    before = sorted(x.name for x in a.parent.parent.iterdir())
    p = subprocess.run([*TORTOISE, "run", str(f), "--results", str(a.parent), "--backend", "uml",
                        "--clock", "virtual", "--verify-determinism", "1"], capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "1 of 1 runs identical" in p.stdout
    # stored runs untouched, nothing added to the results folder, the scratch inside it removed
    assert len(_runs(a)) == 8 and not list(a.glob(".*.tmp-*")) and not list(a.glob(".verify-*"))
    assert sorted(x.name for x in a.parent.parent.iterdir()) == before
    r = subprocess.run([*TORTOISE, "run", str(f), "--results", str(a.parent), "--backend", "uml",
                        "--clock", "real", "--verify-determinism"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "virtual clock" in r.stderr


def test_runs_alone_in_either_order_are_identical(two_passes, tmp_path_factory):
    """--batch 1 is a boot per run (every run of both passes alone), and a run alone does not depend on which
    runs came before it: the last two runs of the sweep, run alone in the
    reverse order, are the passes' runs to the microsecond."""
    from tortoiselab.host import backends
    from tortoiselab.host.provenance import tool_versions
    from tortoiselab.host.runner import run_one
    from tortoiselab.spec.experiment import expand, load, run_order

    f, a, b = two_passes
    for x in (a, b):
        assert all(_batch_meta(x / r)["size"] == 1 for r in _runs(x))
    exp = load(f)
    runs = list(reversed(run_order(exp, expand(exp))))[:2]
    rev = tmp_path_factory.mktemp("det-rev") / exp.name
    rev.mkdir()
    info = backends.choose("uml", "virtual", ["cubic", "hybla"])
    for r in runs:
        rec = run_one(r, rev, info, a / ".lab" / "site", a / ".lab" / "pki", tool_versions())
        assert rec["ok"], rec["error"]
    for r in runs:
        c = D.compare_fingerprints(D.fingerprint(a / r.run_id), D.fingerprint(rev / r.run_id))
        if c.a.code != c.b.code:
            pytest.skip("the lab's code changed while the test ran; rerun it")
        assert c.identical, f"{r.run_id}: " + "; ".join(c.differences)


# what a run's place in a boot changes when --batch asks for batches on the
# virtual clock (docs/determinism.md, "Batches"): packet times by
# microseconds and, from there, where the server's writes were cut into
# segments; its PLT by at most 0.05 ms in this sweep. On the virtual clock
# this test gives the same figures every time for the same code.
BATCH_MAX_PLT_MS = 0.2


@pytest.fixture(scope="module")
def in_a_batch(two_passes, tmp_path_factory):
    """The sweep's runs in one boot, in the runner's order and in the
    reverse order (runner.run_batch, as --batch 8 plans them)."""
    from tortoiselab.host import backends
    from tortoiselab.host.provenance import tool_versions
    from tortoiselab.host.runner import run_batch
    from tortoiselab.spec.experiment import expand, load, run_order

    f, a, _b = two_passes
    d = tmp_path_factory.mktemp("det-batch")
    exp = load(f)
    info = backends.choose("uml", "virtual", ["cubic", "hybla"])
    out = []
    for name, runs in (("forward", run_order(exp, expand(exp))), ("reversed", None)):
        runs = runs if runs is not None else list(reversed(run_order(exp, expand(exp))))
        dest = d / name / exp.name
        dest.mkdir(parents=True)
        recs = run_batch(runs, dest, info, a / ".lab" / "site", a / ".lab" / "pki", tool_versions())
        assert [r["run_id"] for r in recs] == [r.run_id for r in runs] and all(r["ok"] for r in recs)
        out.append(dest)
    return a, *out


def test_a_batch_changes_a_run_by_microseconds_only(in_a_batch):
    """Each run alone (the passes), in a boot's batch in the runner's order
    and in the reverse order: the same outcome (load ok, bytes, packet
    count, retransmissions by kind: the same losses), the PLT within 0.2
    ms; a boot's first run is its run alone to the microsecond, packet by
    packet. The later runs of a boot are not (why: docs/determinism.md,
    "Batches"), hence batches fixed by the experiment file, so that a run
    is always rerun after the same runs."""
    alone, batch, rev = in_a_batch
    ids = _runs(alone)
    assert _runs(batch) == ids == _runs(rev)
    same_headers, worst_plt, identical = 0, 0.0, 0
    for r in ids:
        fa = D.fingerprint(alone / r)
        assert _batch_meta(alone / r)["size"] == 1 and _batch_meta(batch / r)["size"] == 8
        for other in (batch, rev):
            c = D.compare_fingerprints(fa, D.fingerprint(other / r))
            if fa.code != c.b.code:
                pytest.skip("the lab's code changed while the test ran; rerun it")
            assert c.a.ok and c.b.ok and c.a.bytes == c.b.bytes, r
            assert c.a.retransmissions == c.b.retransmissions and len(c.a.packets) == len(c.b.packets), r
            assert abs(c.a.plt_ms - c.b.plt_ms) <= BATCH_MAX_PLT_MS, f"{r} in {other.parent.name}: " + \
                "; ".join(c.differences)
            same_headers += [_headers(x) for x in c.a.packets] == [_headers(x) for x in c.b.packets]
            worst_plt = max(worst_plt, abs(c.a.plt_ms - c.b.plt_ms))
            identical += c.identical
    for other in (batch, rev):  # the first load of a boot is its run alone, to the microsecond
        r = next(r for r in ids if _batch_meta(other / r)["index"] == 0)
        c = D.compare_fingerprints(D.fingerprint(alone / r), D.fingerprint(other / r))
        assert c.identical, f"{r}: " + "; ".join(c.differences)
    print(f"alone vs in a batch: {identical} of {2 * len(ids)} identical, {same_headers} with every packet's "
          f"headers equal, largest PLT difference {worst_plt:.3f} ms")
