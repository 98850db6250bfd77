"""The runs table's column names, in one place: the store, the report, the
studies, the figures and the notebooks read columns by these names
(docs/architecture.md, "The runs table").

- A setting's column is ``<section>.<field>`` of the experiment file
  (spec/experiment.py's PathCfg, ServerCfg, ClientCfg); tests/unit/test_cols.py
  checks that every name here is a column of the table, so a renamed field
  fails there, not later as an empty selection. This module imports nothing
  of the project: every layer may use it.
- A metric's column is its name in the loader's summary: ``METRICS`` holds
  each with its meaning and, for those the report shows per sweep point, its
  axis label. host/columns.py makes the table's columns from it, so a new
  metric is one entry here plus the code that measures it.
- A topology parameter's column is ``topology.<param>`` (``topology(field)``:
  the run's ``topology:`` as its configuration gives it, ``topology.name``
  ``wan`` for a run that names none); ``TOPOLOGY_PARAMS`` lists every
  parameter of the lab's topologies (spec/topologies/) (tests/unit/test_cols.py checks the
  list against them), and host/columns.py makes a column of each.
- A claim filters runs by a mapping keyed by these names (studies/measure.py
  ``where``: ``{cols.REGION: "india-desktop-2017", cols.PAGE: "base.html"}``);
  ``where_column`` refuses a key that is no column of the table, naming it,
  so a misspelt filter fails instead of selecting nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

SECTIONS = ("path", "server", "client")

# the run's own columns: its id (spec/experiment.py), whether its measurement is whole and passed the
# physics gate (host/columns.py, analysis/gates.py), and whether the path measured as configured
# (analysis/fidelity.py)
RUN_ID, OK, FIDELITY_OK = "run_id", "ok", "fidelity_ok"


def setting(section: str, field: str) -> str:
    """The column of an experiment file's setting (section.field)."""
    if section not in SECTIONS:
        raise KeyError(f"{section}: no such section ({', '.join(SECTIONS)})")
    return f"{section}.{field}"


def topology(field: str) -> str:
    """The column of a topology parameter (topology.field; field "name":
    the topology's name)."""
    if not field or "." in field:
        raise KeyError(f"{field!r}: a topology parameter is one name, e.g. cdn_rtt_ms")
    return f"topology.{field}"


# the settings the code reads by name
CC = setting("server", "cc")
INITCWND = setting("server", "initcwnd_pkts")
MODULE_PARAMS = setting("server", "module_params")
TLS = setting("server", "tls")
CERT = setting("server", "cert")
SLOW_START_AFTER_IDLE = setting("server", "slow_start_after_idle")
REGION = setting("path", "region")
RTT = setting("path", "rtt_ms")
LOSS = setting("path", "loss_pct")
LOSS_UP = setting("path", "loss_up_pct")
RATE = setting("path", "rate_mbit")
TRACE_DOWN = setting("path", "trace_down")
TRACE_UP = setting("path", "trace_up")
PAGE = setting("client", "page")
URL = setting("client", "url")
COALESCING = setting("client", "coalescing")
CACHE_HIT_RATIO = setting("client", "cache_hit_ratio")
RESOLUTION = setting("client", "resolution")
LOADER = setting("client", "loader")

# every parameter of the lab's topologies (spec/topologies/*.py Params but mn --custom's only fields) -> whether it
# is a number: each is a column (host/columns.py); tests/unit/test_cols.py checks this against the files
TOPOLOGY_PARAMS = {
    "trace_down": False, "trace_up": False, "buffer_ms": True,  # cellular
    "clients": True, "bulk_flows": True, "bulk_cc": False, "bulk_start_s": True, "web_loads_per_s": True,
    "web_page_bytes": True, "lead_s": True, "cdn_rtt_ms": True, "cdn_cc": False,  # dumbbell
    "backhaul_rtt_ms": True, "backhaul_rate_mbit": True, "backhaul_loss_pct": True, "origin_cc": False,  # pop
}

# the topology parameters the code reads by name
TOPOLOGY_NAME = topology("name")
CDN_RTT = topology("cdn_rtt_ms")
CLIENTS = topology("clients")
BULK_FLOWS = topology("bulk_flows")
WEB_LOADS = topology("web_loads_per_s")


@dataclass(frozen=True)
class Metric:
    name: str  # the column, as the loader's summary names it
    meaning: str
    label: str | None = None  # the report's axis label; None: not plotted per sweep point


METRICS = {m.name: m for m in (
    Metric("plt_ms", "page start (incl. DNS, TCP, TLS) to last byte", "PLT (ms)"),
    Metric("floor_ms", "napkin-model floor of the PLT (tortoiselab.analysis.napkin.run_floor)"),
    Metric("plt_over_floor", "measured PLT / floor (>= 1)"),
    Metric("plt_from_request_ms", "first request sent to last byte"),
    Metric("content_download_ms", "first byte of the base HTML to last byte"),
    Metric("ttfb_ms", "time to first byte"),
    Metric("dns_capture_ms", "DNS lookups in the client capture, per name first query to its address answer, "
                             "summed (analysis/dnstime.py: the same ruler for every loader)"),
    Metric("connections_opened", "connections that carried the page's requests, as the loader counts them (the "
                                 "capture's: tcp_connections, tcp_connections_used)"),
    Metric("reuse_ratio", "coalesced share of 2nd-origin requests"),
    Metric("bytes", "response body bytes"),
    Metric("throughput_mbit", "h2load throughput: body bytes over the whole transfer (slow start included)",
           "throughput (Mbit/s)"),
    Metric("steady_throughput_mbit", "h2load runs: throughput of the second half of the bytes, from the server "
                                     "capture's ACKs (analysis/flights.steady_throughput_mbit)"),
)}


def metric(name: str) -> str:
    """A metric's column; KeyError when METRICS has no such metric."""
    if name not in METRICS:
        raise KeyError(f"{name}: no such metric ({', '.join(METRICS)})")
    return name


PLT, FLOOR, CDT, THROUGHPUT = metric("plt_ms"), metric("floor_ms"), metric("content_download_ms"), \
    metric("throughput_mbit")


def reported_metrics() -> tuple[tuple[str, str], ...]:
    """(column, axis label) of the metrics the report shows per sweep point."""
    return tuple((m.name, m.label) for m in METRICS.values() if m.label)


def where_column(name: str, columns) -> str:
    """name, when the runs table (its columns) has that column: a key of a
    claim's filter (studies/measure.py where). KeyError naming the key
    otherwise (a name spelt with "__" for "." is told the dotted one)."""
    if name in columns:
        return name
    hint = f"; columns are spelled with dots: {name.replace('__', '.')!r}" if "__" in name else ""
    raise KeyError(f"where: {name!r} is no column of the runs table (spec/cols.py names them){hint}")
