"""Records on the lab (host/verify.py): a run stored by the runner carries
a manifest that verifies; a run whose run.json was truncated is moved
aside by the next `tortoise run` (kept in .damaged/) and redone, and
runs.parquet is rebuilt with it."""

from __future__ import annotations

import json
import subprocess

import pandas as pd
import pytest

from tests.conftest import TORTOISE, experiment_yaml, write_yaml
from tortoiselab.host import manifests, store, verify

pytestmark = pytest.mark.lab

EXP = experiment_yaml("tiny", {"name": "records", "seed": 5, "sweep.server.cc": ["cubic", "reno"]})


def _run(f, results):
    return subprocess.run([*TORTOISE, "run", str(f), "--results", str(results), "--backend", "uml",
                           "--clock", "virtual"], capture_output=True, text=True, timeout=900)


def test_a_truncated_record_is_moved_aside_and_redone(tmp_path, lab_kernel):
    f = write_yaml(tmp_path, EXP, "records.yaml")
    results = tmp_path / "results"
    exp_dir = results / "records"
    p = _run(f, results)
    assert p.returncode == 0, p.stderr[-2000:]
    check = verify.verify_folder(exp_dir)
    assert check.ok and check.runs == 2 and check.notes == [], check.problems
    a, b = [d.name for d in store.run_dirs(exp_dir)]
    files = json.loads((exp_dir / a / manifests.MANIFEST).read_text())["files"]
    assert {"run.json", "config.json", "server.pcap", "client.pcap", "page.har"} <= set(files)
    rec = exp_dir / a / store.RECORD
    whole = rec.read_bytes()
    rec.write_bytes(whole[:200])
    v = subprocess.run([*TORTOISE, "verify", str(exp_dir)], capture_output=True, text=True, timeout=120)
    assert v.returncode == 1 and f"run {a}: {rec}: unreadable run record" in v.stdout
    p = _run(f, results)
    assert p.returncode == 0, p.stderr[-2000:]
    (aside,) = (exp_dir / store.DAMAGED).iterdir()
    assert f"moved a damaged run aside (kept) and redid it: {a} -> {aside}" in p.stdout
    assert (aside / store.RECORD).read_bytes() == whole[:200]  # kept as it was
    assert verify.verify_folder(exp_dir).ok
    redone = store.read_record(exp_dir / a)
    assert redone.ok and json.loads(whole)["summary"]["plt_ms"] == redone.summary.plt_ms  # virtual clock
    df = pd.read_parquet(exp_dir / store.TABLE)
    assert sorted(df["run_id"]) == [a, b] and not store.read_table(exp_dir)[1]
