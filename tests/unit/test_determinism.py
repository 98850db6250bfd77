"""Deterministic mode's pure parts: normalized packets, fingerprints,
comparisons, the sample, the code digest, the seeds record, refusals."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tortoiselab.analysis.conntable import analyze_pcap
from tortoiselab.host import backends, store, umlcmd
from tortoiselab.host import determinism as D
from tortoiselab.host.provenance import run_seeds
from tortoiselab.spec.pathspec import PathSpec

DATA = Path(__file__).resolve().parent.parent / "data"


def test_packets_are_normalized():
    p = D.pcap_packets(DATA / "flights_iw10.pcap")
    syn, synack, ack = p[0], p[1], p[2]
    # connection 0, client to server first; seq relative to each side's ISN,
    # ack relative to the peer's; TSval relative to the side's first
    assert syn[1:6] == ("tcp", 0, "c2s", 60, 2) and syn[6] == 0 and syn[7] is None
    assert synack[1:4] == ("tcp", 0, "s2c") and synack[6] == 0 and synack[7] == 1
    assert ack[6] == 1 and ack[7] == 1 and ack[9] == 100  # 100 ms after the SYN's TSval
    assert all(isinstance(x[0], int) for x in p)  # microseconds, exact
    assert p == D.pcap_packets(DATA / "flights_iw10.pcap")


def test_retransmissions_counted_from_the_server_capture():
    def counted(name: str) -> dict:
        return D.retransmissions(analyze_pcap(DATA / name, keep_series=False))

    assert counted("flights_drop1_iw10.pcap")["total"] == 1
    assert counted("flights_iw10.pcap")["total"] == 0


def _fp(pcap: str = "flights_iw10.pcap", **kw) -> D.Fingerprint:
    base = D.Fingerprint(run_id="r1", ok=True, plt_ms=1234.567, bytes=1000, retransmissions={"total": 0},
                         packets=D.pcap_packets(DATA / pcap), seeds={"netem_down": 5})
    return replace(base, **kw)


def test_compare_identical_and_each_kind_of_difference():
    a = _fp()
    assert D.compare_fingerprints(a, _fp()).identical and D.compare_fingerprints(a, _fp()).max_dt_us == 0
    assert "plt_ms: 1234.567 vs 1234.568" in D.compare_fingerprints(a, _fp(plt_ms=1234.568)).differences
    assert any(d.startswith("bytes") for d in D.compare_fingerprints(a, _fp(bytes=999)).differences)
    assert any(d.startswith("seed netem_down") for d in D.compare_fingerprints(a, _fp(seeds={"netem_down": 6})).differences)
    shifted = list(a.packets)
    shifted[5] = (shifted[5][0] + 1, *shifted[5][1:])  # one packet 1 us late
    c = D.compare_fingerprints(a, _fp(packets=shifted))
    assert not c.identical and c.max_dt_us == 1 and c.packets_differing == 1
    assert "first #5 (time)" in c.differences[-1]
    c = D.compare_fingerprints(a, _fp(packets=a.packets[:-1]))
    assert any("164 vs 163 packets" in d for d in c.differences)
    other = D.compare_fingerprints(a, _fp("flights_drop1_iw10.pcap"))
    assert not other.identical and other.packets_differing > 0


def _fake_run(exp_dir: Path, run_id: str, ok: bool = True, clock: str = "virtual") -> None:
    d = exp_dir / run_id
    d.mkdir(parents=True)
    _record(d, run_id, ok=ok, meta={"clock": clock})


def _record(d: Path, run_id: str, **fields) -> None:
    """A whole run.json (determinism reads records through the store)."""
    store.write_record(d, {"run_id": run_id, "experiment": "v", "repetition": 0, "seed": 1, "config": {},
                           "path": PathSpec().model_dump(), "ok": True, **fields})


def test_sample_is_seeded_and_only_completed_ok_runs(tmp_path):
    ids = [f"{i:012x}" for i in range(10)]
    for i, r in enumerate(ids[:8]):
        _fake_run(tmp_path, r, ok=i != 3)
    s = D.sample_runs(tmp_path, ids, 3, seed=5)
    assert s == D.sample_runs(tmp_path, ids, 3, seed=5) and len(set(s)) == 3
    assert ids[3] not in s and not set(s) & set(ids[8:])
    assert len(D.sample_runs(tmp_path, ids, 50, seed=5)) == 7


def test_code_digest_of_the_guest():
    import tortoiselab.guest.__main__ as guest

    d = guest.code_digest()
    assert len(d) == 64 and d == guest.code_digest()  # the same code, the same digest


def test_run_seeds(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"seed": 4}))
    s = run_seeds(11, 11, tmp_path, "exp", {"netem_up": 1, "netem_down": 2}, "virtual")
    assert s == {"run": 11, "client": 11, "site": 4, "pki": "exp", "netem_down": 2, "netem_up": 1,
                 "virtual_epoch_s": umlcmd.VIRTUAL_EPOCH_S}
    assert "virtual_epoch_s" not in run_seeds(11, 11, tmp_path / "none", "exp", {}, "real")


EXP = """
name: v
seed: 3
path: {rtt_ms: 100, loss_pct: 2}
sweep:
  server.cc: [cubic, reno]
"""


def test_verify_refuses_the_real_clock_and_empty_results(tmp_path, monkeypatch):
    from tortoiselab.spec.experiment import expand, load

    f = tmp_path / "v.yaml"
    f.write_text(EXP)
    with pytest.raises(D.DeterminismError, match="run the experiment first"):
        D.verify(f, tmp_path / "results")
    exp_dir = tmp_path / "results" / "v"
    (exp_dir / ".lab").mkdir(parents=True)
    (exp_dir / ".lab" / "READY").write_text("ok\n")
    for r in expand(load(f)):
        _fake_run(exp_dir, r.run_id, clock="real")
    monkeypatch.setattr(backends, "choose", lambda b, c, ccs: backends.BackendInfo("uml", c if c != "auto" else "virtual"))
    with pytest.raises(D.DeterminismError, match="virtual clock"):
        D.verify(f, tmp_path / "results", clock="real")
    with pytest.raises(D.DeterminismError, match="stored runs: real clock"):
        D.verify(f, tmp_path / "results")
    with pytest.raises(D.DeterminismError, match="at least 1"):
        D.verify(f, tmp_path / "results", n=0)


LINKED = """
name: v
seed: 3
path: {rtt_ms: 100, loss_pct: 2}
sweep:
  server.cc+path.rtt_ms: [[cubic, 100], [hybla, 50]]
  server.initcwnd_pkts: [10]
"""


def test_linked_axes_are_labelled_field_by_field():
    assert D.point_label({"server.cc+path.rtt_ms": ["hybla", 50], "server.initcwnd_pkts": 10}) == \
        "cc=hybla, rtt_ms=50, initcwnd_pkts=10"
    assert D.point_label({"server.cc": "cubic"}) == "cc=cubic" and D.point_label({}) == ""


def test_verify_reruns_inside_the_results_folder_and_removes_them_when_runs_differ(tmp_path, monkeypatch, capsys):
    """Issue 35, weak attack: the scratch folder was a sibling of --results
    and was kept when runs differed; linked axes came out as
    "rtt_ms=['hybla', 50]". Now: <exp>/.verify-<pid>, removed, the
    differences printed, the point labelled field by field."""
    import argparse
    import os

    from tortoiselab.host import store
    from tortoiselab.spec.experiment import expand, load

    f = tmp_path / "v.yaml"
    f.write_text(LINKED)
    results = tmp_path / "results"
    exp_dir = results / "v"
    (exp_dir / ".lab").mkdir(parents=True)
    (exp_dir / ".lab" / "READY").write_text("ok\n")
    for r in expand(load(f)):
        _fake_run(exp_dir, r.run_id)
    monkeypatch.setattr(backends, "choose", lambda b, c, ccs: backends.BackendInfo("uml", "virtual"))
    seen = []

    def rerun(loads, out, *args, **kw):  # the rerun of a run whose record says PLT None: 123.0 now
        seen.append(out)
        assert store.run_dirs(exp_dir) and all(d.parent == exp_dir for d in store.run_dirs(exp_dir))
        for spec in loads:
            (out / spec.run_id).mkdir()
            _record(out / spec.run_id, spec.run_id, summary={"plt_ms": 123.0})

    monkeypatch.setattr(D, "run_batch", rerun)
    a = argparse.Namespace(file=str(f), results=str(results), verify_determinism=2, jobs=1, backend="uml",
                           clock="virtual", grid=None)
    assert D.cli_verify(a) == 3
    assert seen and all(o == exp_dir.resolve() / f".verify-{os.getpid()}" for o in seen)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results", "v.yaml"]  # nothing beside the results
    assert not list(exp_dir.glob(".verify-*"))  # and nothing left inside
    out = capsys.readouterr().out
    assert "plt_ms: None vs 123.0" in out and "0 of 2 runs identical" in out
    assert "cc=cubic, rtt_ms=100, initcwnd_pkts=10, rep 0" in out and "cc=hybla, rtt_ms=50, initcwnd_pkts=10, rep 0" in out
    assert "reruns kept" not in out


def test_scratch_folder_is_removed_on_error_and_refuses_one_that_exists(tmp_path):
    import os

    with pytest.raises(RuntimeError):
        with D.scratch_folder(tmp_path) as d:
            assert d == tmp_path / f".verify-{os.getpid()}" and d.is_dir()
            (d / "x").write_text("x")
            raise RuntimeError("a rerun failed")
    assert [p.name for p in tmp_path.iterdir()] == [".setup.lock"]  # the folder's own lock, as the runner's
    (tmp_path / f".verify-{os.getpid()}").mkdir()
    with pytest.raises(D.DeterminismError, match=r"exists .*remove it \(rm -r "):
        with D.scratch_folder(tmp_path):
            pass
    assert (tmp_path / f".verify-{os.getpid()}").is_dir()  # not ours: left alone
