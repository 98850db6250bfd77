"""Capacity traces replayed in the UML lab kernel on the virtual clock
(docs/traces.md): a saturating transfer's bytes per 100 ms follow the trace
within 5 % after the first second, the same seed gives the same bytes, and
a bad trace is refused before anything starts."""

import json
import shutil
import subprocess

import pytest

from tests.conftest import TORTOISE, write_yaml
from tests.integration.conftest import lossfree_probe as probe
from tortoiselab.spec.trace import TRACE_DIR

pytestmark = pytest.mark.lab



@pytest.mark.parametrize("name,rtt_ms,queue_ms", [("lte", 50, 500), ("3g", 100, 1000)])
def test_a_replayed_trace_delivers_the_traces_bytes(tmp_path, lab_kernel, name, rtt_ms, queue_ms):
    p, rep = probe(tmp_path / "w", "--rtt-ms", str(rtt_ms), "--trace-down", f"{name}.down",
                   "--trace-up", f"{name}.up", "--trace-queue-ms", str(queue_ms), "--bulk-seconds", "8")
    assert rep is not None, p.stderr
    table = {c["quantity"]: c for c in rep["checks"]}
    for c in rep["checks"]:  # the figures, for the log
        print(f"{c['quantity']:<12} measured {c['measured']:>9} accepted [{c['low']}, {c['high']}] {c['note']}")
    trace = table["trace down"]
    assert trace["measured"] <= 5.0, trace  # mean |delivered - trace| per 100-ms bin, % of the trace
    assert "replay errors" not in trace["note"]
    assert abs(table["base RTT"]["measured"] - rtt_ms) <= max(0.5, 0.01 * rtt_ms)
    assert "bottleneck rate" not in table  # a traced downlink has no fixed rate to check
    assert rep["ok"] and p.returncode == 0


def test_the_same_seed_replays_the_same_bytes_and_a_users_file_works(tmp_path, lab_kernel):
    mine = tmp_path / "traces" / "mine.down"  # under /tmp: the guest sees it through ro_paths
    mine.parent.mkdir()
    shutil.copy(TRACE_DIR / "3g.down", mine)
    bins = []
    for run in ("a", "b"):
        p, rep = probe(tmp_path / run, "--rtt-ms", "80", "--trace-down", str(mine), "--trace-queue-ms", "800",
                       "--bulk-seconds", "4", "--seed", "5")
        assert rep is not None, p.stderr
        task = json.loads((tmp_path / run / "result.json").read_text())["task"]
        bins.append(task["trace"]["samples"]["down"])
        assert task["trace"]["errors"] == []
    assert len(bins[0]) >= 40 and bins[0] == bins[1]


@pytest.mark.parametrize("text,words", [("", "empty"), ("1\n3\n2\n", "line 3"), ("1\nx\n", "line 2")])
def test_a_bad_trace_is_refused_before_anything_starts(tmp_path, lab_kernel, text, words):
    bad = tmp_path / "bad.down"
    bad.write_text(text)
    p, rep = probe(tmp_path / "w", "--trace-down", str(bad), timeout=60)
    assert p.returncode == 2 and rep is None
    assert "trace_down" in p.stderr and words in p.stderr
    assert not (tmp_path / "w").exists()


FEED_ON_LTE = """
name: lte-feed
repetitions: 1
seed: 37
server: {cc: cubic, initcwnd_pkts: 10, protocol: h2, tls: "1.3", cert: shared}
client: {page: feed.html}
path: {rtt_ms: 100, loss_pct: 0, trace_down: lte.down, trace_up: lte.up}
"""


def test_a_traced_page_loads_floor_is_the_traces(tmp_path, lab_kernel):
    """issue 37: a feed load over the LTE trace stored a floor from the
    default 10 Mbit/s (1526 ms against a PLT of 1215 ms: 'beaten'). The
    floor now follows the trace from the instant the page started in it."""
    f = write_yaml(tmp_path, FEED_ON_LTE)
    p = subprocess.run([*TORTOISE, "run", str(f), "--results", str(tmp_path / "r"), "--backend", "uml",
                        "--clock", "virtual"], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    (rec,) = [json.loads(r.read_text()) for r in (tmp_path / "r" / "lte-feed").glob("*/run.json")]
    s = rec["summary"]
    assert 0 <= s["trace_start_ms"] < 50  # the replay starts at the load's start instant
    assert s["floor_model"]["trace_down"] == "lte.down" and s["floor_model"]["trace_start_ms"] == s["trace_start_ms"]
    assert 1.0 <= s["plt_over_floor"] < 1.1, s
