"""One object loaded by our loader in the lab (issue 37): `client.url:
objects/1000000.bin` with `client.loader: loader`, one run on the uml
backend and the virtual clock, through the whole flow: the load, the
runner's wholeness check, the napkin floor, the stored record and the
physics gate. The object is served as application/octet-stream, so the
loader requests it alone and never reads it as HTML (before, the 10 MB
object failed the load with "AssertionError: expected name token";
tests/unit/test_client_objects.py has that failure on the loopback).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import TORTOISE, write_yaml
from tortoiselab.analysis import gates
from tortoiselab.host import store, verify

pytestmark = pytest.mark.lab

EXP = """
name: object
repetitions: 1
seed: 5
path: {{rtt_ms: 40, loss_pct: 0, rate_mbit: 20}}
server: {{cc: cubic, initcwnd_pkts: 10, protocol: h2, tls: "1.3", cert: shared}}
client: {{url: objects/{size}.bin, loader: loader}}
"""


@pytest.mark.parametrize("object_bytes", [1_000_000, 10_000_000])
def test_our_loader_loads_one_binary_object_whole(tmp_path, lab_kernel, object_bytes):
    f = write_yaml(tmp_path, EXP.format(size=object_bytes), "object.yaml")
    results = tmp_path / "results"
    p = subprocess.run([*TORTOISE, "run", str(f), "--results", str(results), "--backend", "uml",
                        "--clock", "virtual"], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    exp_dir = results / "object"
    (stored,) = store.read_records(exp_dir)
    rec = stored.record
    s = rec.summary
    print(f"\nok {rec.ok}, requests {s.requests}, bytes {s.bytes}, ttfb {s.ttfb_ms} ms, "
          f"plt {s.plt_ms} ms, floor {s.floor_ms} ms, plt/floor {s.plt_over_floor}, "
          f"connections {s.connections_opened}")
    assert rec.ok and rec.error is None, rec.error
    assert (s.requests, s.requests_failed, s.assets_found, s.bytes) == (1, 0, 0, object_bytes)
    assert s.connections_opened == 1 and len(rec.connections) == 1
    assert 0 < s.ttfb_ms < s.plt_ms
    # at 20 Mbit/s the body alone is 0.4 us a byte on the wire, after the set-up's round trips
    assert s.plt_ms > object_bytes * 8 / 20e3 + 3 * 40
    assert s.floor_ms and s.plt_over_floor >= 1.0
    har = json.loads((stored.run_dir / "page.har").read_text())
    (entry,) = har["log"]["entries"]
    assert entry["response"]["content"]["mimeType"] == "application/octet-stream"
    assert entry["response"]["content"]["size"] == object_bytes
    manifest = json.loads((exp_dir / ".lab" / "site" / "manifest.json").read_text())
    pki = json.loads((exp_dir / ".lab" / "pki" / "pki.json").read_text())
    assert gates.physics_gate(rec.model_dump(mode="json"), manifest, pki) == []
    assert verify.verify_folder(exp_dir).ok
