"""The connections table on the lab (issue 40, Build 2): the guest parses
server.pcap once after the load and writes connections.json beside it
(guest/tasks/pageload.py _collect); the runner stores it with the run, in
its manifest; host/store/captures.py reads it, the same connections the
capture parses to; the record's connections are the table's."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import TORTOISE, experiment_yaml, write_yaml
from tortoiselab.analysis import conntable
from tortoiselab.analysis.flights import handshake_summary
from tortoiselab.host import manifests, store, verify
from tortoiselab.host.store import captures

pytestmark = pytest.mark.lab


def test_the_guest_writes_the_table_and_the_store_keeps_it(tmp_path, lab_kernel, monkeypatch):
    f = write_yaml(tmp_path, experiment_yaml("tiny", {"name": "conntable"}), "conntable.yaml")
    results = tmp_path / "results"
    p = subprocess.run([*TORTOISE, "run", str(f), "--results", str(results), "--backend", "uml", "--clock", "virtual"],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    monkeypatch.setenv(captures.CACHE_ENV, str(tmp_path / "cache"))  # after the run: the lab kernel is in it
    exp_dir = results / "conntable"
    (run,) = store.run_dirs(exp_dir)
    assert verify.verify_folder(exp_dir).ok
    assert conntable.TABLE in json.loads((run / manifests.MANIFEST).read_text())["files"]
    table = json.loads((run / conntable.TABLE).read_text())
    assert table["format"] == conntable.TABLE_FORMAT and table["connections"]
    parsed = conntable.capture_table(run / "server.pcap")
    assert table == json.loads(json.dumps(parsed))  # made in the guest from these very bytes
    assert captures.connections(run) == table["connections"]
    assert not (tmp_path / "cache").exists()  # read, not parsed on the host
    rec = store.read_record(run)
    assert [c.model_dump() for c in rec.connections] == [handshake_summary(c) for c in table["connections"]]
