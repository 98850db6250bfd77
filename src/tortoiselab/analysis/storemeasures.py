"""What the runner measures of a run when it stores it (host/runner._from_lab),
from the load's result and the captures moved into the run folder: the
configured path against the one measured (the TCP handshakes' round trip:
analysis/fidelity.py), and the capture figures every loader gets alike: the
DNS lookups in the client capture (analysis/dnstime.py) and, for h2load, the
steady throughput from the server capture's ACKs (analysis/flights.py).
The runner orchestrates; these are the measurements (issue 53)."""

from __future__ import annotations

from pathlib import Path

from tortoiselab.analysis import dnstime
from tortoiselab.analysis.fidelity import Check, disturbance, handshake_rtt_check
from tortoiselab.analysis.flights import pcap_steady_throughput_mbit
from tortoiselab.spec.pathspec import PathSpec


def path_fidelity(clock: str, path: PathSpec, config: dict, cross: dict | None,
                  connections: list[dict]) -> tuple[Check, str | None]:
    """(the handshake RTT check of the run's path, why the run is no
    measurement of that path or None: fidelity.disturbance)."""
    rtts = [c["tcp_rtt_ms"] for c in connections if c.get("tcp_rtt_ms")]
    fid = handshake_rtt_check(path, rtts, len(connections))
    off = disturbance(clock, {"fidelity": [fid.as_dict()], "path": path.model_dump(), "config": config,
                              "cross": cross})
    return fid, off


def capture_figures(loader: str, run_dir: Path) -> dict:
    """The summary fields measured from the run folder's captures: h2load's
    steady_throughput_mbit, and dns_capture_ms(_per_host) when there is a
    client capture (the same ruler for every loader)."""
    out: dict = {}
    if loader == "h2load":
        out["steady_throughput_mbit"] = pcap_steady_throughput_mbit(run_dir / "server.pcap")
    if (run_dir / "client.pcap").exists():
        per_host = dnstime.lookups_ms(run_dir / "client.pcap")
        out["dns_capture_ms_per_host"] = per_host
        out["dns_capture_ms"] = round(sum(per_host.values()), 3)
    return out
