"""Cross traffic on a running lab (docs/topologies.md): the flows of
spec/crosstraffic.schedule driven by tools/crosstraffic.py, one sending
process in the cross_tx host and one fetching process per receiving host.

While the context lasts the flows run; on leaving, every fetcher is told
to stop (its stdin closed) and reports each flow's bytes and its byte
counts every 100 ms; the server is stopped the same way.
"""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import contextmanager
from typing import Iterator

from tortoiselab.guest import commands as C
from tortoiselab.guest.executor import Executor
from tortoiselab.spec.crosstraffic import CROSS_PORT, CrossParams, schedule

SAMPLE_MS = 100
STOP_S = 60.0  # a fetcher or the server gets this long to finish once told to


class CrossRun:
    """The flows of one cross-traffic run and, once it is over, what they moved."""

    def __init__(self, flows: list[dict], t0_s: float) -> None:
        self.flows = flows
        self.t0_s = t0_s
        self.by_host: dict[str, dict] = {}
        self.errors: list[str] = []

    def result(self) -> dict:
        """Every flow with its bytes; samples per receiving host (t s from
        t0, the bytes of that host's flows in their order)."""
        every = [f for r in self.by_host.values() for f in r.get("flows", [])]
        flows = [f for f in every if f["end_s"] is not None]  # arrivals after the end never started
        return {"t0_s": self.t0_s, "flows": flows, "not_started": len(every) - len(flows), "errors": self.errors,
                "samples": {h: {"ids": [f["id"] for f in r.get("flows", [])], "samples": r.get("samples", [])}
                            for h, r in self.by_host.items()},
                "bytes": {"bulk": sum(f["bytes"] for f in flows if f["kind"] == "bulk"),
                          "web": sum(f["bytes"] for f in flows if f["kind"] == "web")}}


@contextmanager
def cross_traffic(ex: Executor, nodes: dict, tx: str, params: CrossParams, seed: int, t0_s: float,
                  horizon_s: float, work) -> Iterator[CrossRun]:
    """The cross traffic of `params` from t0_s (CLOCK_MONOTONIC, absolute),
    its arrivals drawn from `seed` up to horizon_s after t0_s."""
    flows = [f.as_dict() for f in schedule(params, seed, horizon_s)]
    run = CrossRun(flows, t0_s)
    if not flows:
        yield run
        return
    server = ex.start(C.tool(sys.executable, "crosstraffic", "serve", "--port", str(CROSS_PORT)), nodes[tx],
                      stdin=True)
    fetchers: dict[str, subprocess.Popen] = {}
    try:
        if server.stdout.readline().strip() != "listening":
            raise RuntimeError(f"cross-traffic server did not start: {server.stderr.read()}")
        for host in dict.fromkeys(f["host"] for f in flows):
            file = work / f"cross-{host}.json"
            file.write_text(json.dumps([f for f in flows if f["host"] == host]), encoding="utf-8")
            fetchers[host] = ex.start(C.tool(sys.executable, "crosstraffic", "fetch", "--host", nodes[tx].IP(),
                                             "--port", str(CROSS_PORT), "--flows", str(file), "--t0",
                                             f"{t0_s:.6f}", "--sample-ms", str(SAMPLE_MS)), nodes[host], stdin=True)
        yield run
    finally:
        for host, proc in fetchers.items():
            out, err = _finish(proc)
            try:
                run.by_host[host] = json.loads(out.strip().splitlines()[-1])
            except (ValueError, IndexError):
                run.errors.append(f"{host}: no report ({err.strip()[-300:]})")
        _finish(server)


def _finish(proc: subprocess.Popen) -> tuple[str, str]:
    try:
        return proc.communicate(input="", timeout=STOP_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()
