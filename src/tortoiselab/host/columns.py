"""The runs table's columns (runs.parquet, docs/architecture.md, "The runs
table"): each a name, its meaning and a function of a run record. Every
field of the experiment's path, server and client sections and every
parameter of the lab's topologies is a column of its own, so a new setting
reaches the table without a change here."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from pydantic import BaseModel

from tortoiselab.analysis.fidelity import cross_rates_mbit
from tortoiselab.spec import cols
from tortoiselab.spec.cols import METRICS, TOPOLOGY_NAME, TOPOLOGY_PARAMS, topology
from tortoiselab.spec.experiment import ClientCfg, PathCfg, ServerCfg
from tortoiselab.spec.topologies import DEFAULT as DEFAULT_TOPOLOGY

# a run record (host/store.RunRecord; not imported: the store imports this module)
RunRecord = Any


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _setting(v: Any) -> Any:
    """A configuration value as a table cell: scalars as they are, the rest as JSON."""
    return v if v is None or isinstance(v, (str, int, float, bool)) else json.dumps(v, sort_keys=True)


def _fid(r: RunRecord, field: str) -> Any:
    """A field of the run's first fidelity check (the handshake RTT); None without one."""
    return getattr(r.fidelity[0], field) if r.fidelity else None


def _connections_used(r: RunRecord) -> int | None:
    """The capture's connections that carried a request; None for a record
    made before the capture said (no carried_request)."""
    flags = [c.carried_request for c in r.connections]
    return None if r.summary is None or None in flags else sum(map(bool, flags))


def _capture_drops(r: RunRecord) -> int | None:
    drops = [c.dropped_by_kernel for c in (r.capture.server, r.capture.client) if c is not None]
    return sum(d for d in drops if d is not None) if drops else None


def _metric(r: RunRecord, name: str) -> float | None:
    """A metric of the run's summary (a field of spec/measured.LoadSummary), as a number."""
    return _num(getattr(r.summary, name)) if r.summary is not None else None


# figures a loader's summary may carry (tortoiselab.client.summary, the
# nghttp and h2load parsers), with their meaning: spec/cols.py's METRICS
SUMMARY_METRICS = {name: m.meaning for name, m in METRICS.items()}


def _path_columns() -> dict[str, str]:
    return {f"path.{k}": f.description or k for k, f in PathCfg.model_fields.items() if k != "addon"}


def _setting_columns(section: str, model: type[BaseModel]) -> dict[str, str]:
    return {f"{section}.{k}": f.description or k for k, f in model.model_fields.items()}


def _topology_name(cfg: dict | None) -> str:
    return (cfg or {}).get("name") or DEFAULT_TOPOLOGY


def topology_cells(cfg: dict | None) -> dict[str, Any]:
    """A run's topology (its configuration's `topology:`) as the table's
    topology.<param> cells: topology.name (wan when the run names none),
    then each parameter of cols.TOPOLOGY_PARAMS as the run gives it (None
    where it leaves it at its default or its topology has no such one)."""
    return {cols.TOPOLOGY_NAME: _topology_name(cfg),
            **{cols.topology(k): _setting((cfg or {}).get(k)) for k in cols.TOPOLOGY_PARAMS}}


@dataclass(frozen=True)
class Column:
    name: str
    description: str
    get: Callable[[RunRecord], Any]


def _columns() -> list[Column]:
    """The schema of runs.parquet, in column order. Every field of the
    experiment's path, server and client sections is a column of its own
    (path values as they resolved), so a new setting reaches the table
    without a change here."""
    out = [
        Column(cols.RUN_ID, "the run's id: hash of its resolved configuration and repetition", lambda r: r.run_id),
        Column("experiment", "experiment name (<name>@<grid> for a grid)", lambda r: r.experiment),
        Column("repetition", "0-based repetition", lambda r: r.repetition),
        Column("seed", "the run's seed", lambda r: str(r.seed)),
        Column(cols.OK, "the measurement is whole (every request answered, every sample taken)", lambda r: r.ok),
        Column("error", "what failed, if anything", lambda r: r.error),
    ]
    for name, desc in _path_columns().items():
        key = name.split(".", 1)[1]
        if key == "region":
            out.append(Column(name, "region profile, if any", lambda r: (r.config.get("path") or {}).get("region")))
        else:
            out.append(Column(name, f"configured {desc} (as resolved)",
                               lambda r, k=key: _setting(_resolved_path(r).get(k))))
    out.append(Column("topology", "the topology and its parameters as tortoise probe --topology takes them "
                       "(dumbbell,bulk_flows=2,clients=2); wan when the run names none",
                       lambda r: _topology(r.config.get("topology"))))
    out.append(Column(TOPOLOGY_NAME, "the topology (a file in topologies/; wan when the run names none)",
                       lambda r: _topology_name(r.config.get("topology"))))
    for k in TOPOLOGY_PARAMS:  # topology_cells, column by column
        out.append(Column(topology(k), f"the topology's {k} as the run gives it (none: the topology's default, "
                           "or a topology without it)",
                           lambda r, k=k: _setting((r.config.get("topology") or {}).get(k))))
    for section, model in (("server", ServerCfg), ("client", ClientCfg)):
        for name, desc in _setting_columns(section, model).items():
            key = name.split(".", 1)[1]
            out.append(Column(name, desc, lambda r, s=section, k=key: _setting((r.config.get(s) or {}).get(k))))
    for k, desc in SUMMARY_METRICS.items():
        out.append(Column(k, desc, lambda r, k=k: _metric(r, k)))
    out += [
        Column("cross_bulk_mbit", "the bulk cross flows' throughput during the page load (shared bottleneck)",
               lambda r: _cross_rate(r, "bulk")),
        Column("cross_web_mbit", "the background page loads' throughput during the page load",
               lambda r: _cross_rate(r, "web")),
        Column("tcp_rtt_ms", "smallest TCP handshake RTT in the server capture", lambda r: _fid(r, "measured")),
        Column(cols.FIDELITY_OK, "measured RTT within tolerance", lambda r: _fid(r, "ok")),  # not a column
        Column("capture_drops", "packets tcpdump's kernel buffer dropped (both sides)", _capture_drops),
        Column("tcp_connections", "TCP connections the client opened (the server capture's, spare connects "
               "included)", lambda r: len(r.connections) if r.summary is not None else None),
        Column("tcp_connections_used", "of them, those that carried a request (analysis/tcpconn.carried_request)",
               _connections_used),
    ]
    for k in ("backend", "clock", "kernel_release", "sim_seconds", "wall_seconds", "started", "ended"):
        out.append(Column(k, RUN_META_DOC[k], lambda r, k=k: getattr(r.meta, k)))
    return out


def _topology(cfg: dict | None) -> str:
    if not cfg:
        return "wan"
    return ",".join([cfg["name"], *(f"{k}={cfg[k]}" for k in sorted(cfg) if k != "name")])


def _resolved_path(r: RunRecord) -> dict:
    """The path that ran: config.path.resolved (the id form's), else the record's path."""
    resolved = (r.config.get("path") or {}).get("resolved")
    return resolved if isinstance(resolved, dict) else r.path.model_dump(mode="json")


def _cross_rate(r: RunRecord, kind: str) -> float | None:
    if r.cross is None or r.cross.load_window_s is None:
        return None
    return cross_rates_mbit(r.cross.model_dump(mode="json"), *r.cross.load_window_s)[kind]


RUN_META_DOC = {"backend": "native | uml", "clock": "real | virtual", "kernel_release": "lab kernel",
                "sim_seconds": "guest time of the run", "wall_seconds": "wall time of the run",
                "started": "UTC start", "ended": "UTC end"}
SCHEMA = _columns()
COLUMNS = {c.name: c.description for c in SCHEMA}
# path columns that are not numbers: the region's name, a trace (its file, name and sha256 as JSON)
TEXT_PATH = (cols.REGION, cols.TRACE_DOWN, cols.TRACE_UP)
NUMERIC = [c for c in COLUMNS if c.startswith("path.") and c not in TEXT_PATH] + list(SUMMARY_METRICS) + [
    cols.INITCWND, "server.initrwnd_pkts", cols.CACHE_HIT_RATIO, "sim_seconds", "wall_seconds",
    "cross_bulk_mbit", "cross_web_mbit", "tcp_connections", "tcp_connections_used",
    *(cols.topology(k) for k, number in cols.TOPOLOGY_PARAMS.items() if number)]


def row(record: RunRecord) -> dict:
    """One run as a row of the runs table."""
    return {c.name: c.get(record) for c in SCHEMA}
