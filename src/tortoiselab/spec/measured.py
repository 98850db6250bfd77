"""What a run measured, as typed models: the parts of a stored run record
(host/store.RunRecord, run.json) that the lab writes. The guest checks its
loader's summary against LoadSummary before it writes a load's result
(guest/tasks/pageload.py), and the store validates every part again when
it writes or reads a record, so a stored record holds no free-form object
(tests/unit/test_record_schema.py; docs/architecture.md, "Results folders").

- LoadSummary: the loader's summary. Every metric of spec/cols.METRICS is a
  field of its own (the table's metric columns are read from these fields),
  and so is every other key a loader writes (ours: client/summary.py and
  client/loader.py; nghttp and h2load: guest/loaders/, analysis/parsers.py;
  Chromium: browser/summary.py), with the figures the store adds (the PLT
  floor: analysis/napkin.run_floor; the capture's DNS and steady
  throughput: analysis/storemeasures.py).
- ServerConnection: a connection of the server capture as the record keeps
  it (analysis/flights.handshake_summary); FidelityCheck: a row of the
  fidelity table (analysis/fidelity.Check); CaptureCounts: tcpdump's
  counters; CrossTraffic: a shared bottleneck's flows (guest/cross.py);
  CdnPart: the CDN set-up's second server (guest/cdn.py); StoredPath: the
  resolved path (spec/pathspec.PathSpec's fields, kept without its checks,
  which read the trace files a record only names); LoadCpu: the lab's host
  CPU over the load (host/labcpu.py).
- Where a part truly is names to scalars (sysctls, tool versions, seeds,
  phases, DNS time per host), it is a typed mapping; a run's sweep point
  and configuration are the run id's form (spec/idform.py) and stay that
  JSON tree, typed as JsonTree, as they were hashed.

Numbers keep the type the lab wrote (an int stays an int), so a record read
and written again is the same record (the same runs give the same numbers).
Models forbid unknown keys: a loader that adds a figure adds its field here.
"""

from __future__ import annotations

from typing import Union

from pydantic import BaseModel, ConfigDict
from typing_extensions import TypeAliasType

Num = Union[int, float]  # as the lab wrote it: 0 stays 0, 0.5 stays 0.5
Scalar = Union[str, int, float, bool, None]
# a sweep point's or a configuration's values as the run id hashed them (spec/idform.py)
JsonTree = TypeAliasType("JsonTree", "Union[str, int, float, bool, None, list[JsonTree], dict[str, JsonTree]]")


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- the loader's summary -----------------------------------------------------------


class ClientConnection(_Part):
    """A connection as the loader saw it (ours: client/summary.py; Chromium:
    browser/summary.connections, which knows id, origin(s), remote, protocol
    and requests only)."""

    id: int | str
    origin: str | None = None
    origins: list[str] = []
    host: str | None = None
    remote_ip: str | None = None
    remote_port: int | None = None
    local_port: int | None = None
    remote: str | None = None  # Chromium: ip:port
    protocol: str | None = None  # Chromium: h2, http/1.1
    alpn: str | None = None
    tls_version: str | None = None
    cipher: str | None = None
    opened_at_ms: Num | None = None
    connect_ms: Num | None = None
    tls_ms: Num | None = None
    requests: int | None = None
    error: str | None = None


class CoalescingDecision(_Part):
    """Our loader's choice for a request of another origin (client/loader.py)."""

    origin: str
    connection: str | None = None
    reuse: bool
    reason: str


class RepeatView(_Part):
    """A second view of the page on the first's connections (client/loader.py)."""

    idle_s: Num | None = None
    ok: bool | None = None
    error: str | None = None
    requests: int | None = None
    bytes: int | None = None
    plt_ms: Num | None = None
    plt_from_request_ms: Num | None = None
    content_download_ms: Num | None = None
    ttfb_ms: Num | None = None
    connections_opened: int | None = None
    connection_ids: list[str] = []


class ScheduleEntry(_Part):
    """A request's issue, send, headers and done instants (ms from page
    start) and priorities (browser/summary.schedule, client/loader.py)."""

    url: str
    type: str | None = None
    priority: str | None = None
    priority_final: str | None = None
    issued: Num | None = None
    sent: Num | None = None
    headers: Num | None = None
    done: Num | None = None


class ResourceTiming(_Part):
    """A Resource Timing entry as Chromium gave it (browser/summary.py, TIMING_FIELDS)."""

    name: str
    protocol: str | None = None
    startTime: Num | None = None  # noqa: N815 (the W3C names)
    domainLookupStart: Num | None = None  # noqa: N815
    connectStart: Num | None = None  # noqa: N815
    secureConnectionStart: Num | None = None  # noqa: N815
    connectEnd: Num | None = None  # noqa: N815
    requestStart: Num | None = None  # noqa: N815
    responseStart: Num | None = None  # noqa: N815
    responseEnd: Num | None = None  # noqa: N815


class Images(_Part):
    """The page's images as Chromium decoded them (browser/summary.image_figures)."""

    count: int
    decoded: int
    not_decoded: list[str] = []


class FloorModel(_Part):
    """The napkin model's parts of a floor (analysis/napkin.page_floor_ms),
    or why there is no floor."""

    why: str | None = None
    total_ms: Num | None = None
    rtt_ms: Num | None = None
    rtts: int | None = None
    dns_rtts: int | None = None
    tcp_rtts: int | None = None
    tls_rtts: int | None = None
    document_rounds: int | None = None
    second_origin_rtts: int | None = None
    object_rounds: int | None = None
    document_window: Num | None = None
    serialization_ms: Num | None = None
    objects_first_window: Num | None = None
    growth: Num | None = None
    trace_down: str | None = None  # a traced path: the trace and where in it the load started
    trace_start_ms: Num | None = None
    trace_mbit_over_floor: Num | None = None
    # an imported site's floor (analysis/napkin.imported_floor): the document's connection and the busiest other
    document_connection_bytes: int | None = None
    document_connection_rounds: int | None = None
    other_connection_bytes: int | None = None
    other_connection_start_ms: Num | None = None
    other_connection_rounds: int | None = None
    other_connections_left_out: int | None = None
    imported_site: str | None = None


class LoadSummary(_Part):
    """The loader's summary of one page load, with the figures the store adds
    (module docstring). Every field is optional: each loader writes its own."""

    # the metrics (spec/cols.METRICS), each a column of the runs table
    plt_ms: Num | None = None
    floor_ms: Num | None = None
    plt_over_floor: Num | None = None
    plt_from_request_ms: Num | None = None
    content_download_ms: Num | None = None
    ttfb_ms: Num | None = None
    dns_capture_ms: Num | None = None
    connections_opened: int | None = None
    reuse_ratio: Num | None = None
    bytes: int | None = None
    throughput_mbit: Num | None = None
    steady_throughput_mbit: Num | None = None
    # the load as asked for and how it went
    loader: str | None = None  # Chromium's summary names itself
    url: str | None = None
    protocol: str | None = None
    coalescing: bool | None = None
    cache_hit_ratio: Num | None = None
    seed: int | None = None
    schedule: str | list[ScheduleEntry] | None = None  # ours: the schedule asked for; Chromium: as it ran
    ok: bool | None = None
    error: str | None = None
    errors: list[str] = []
    started_at: str | None = None
    assets_found: int | None = None
    cached_urls: list[str] = []
    requests: int | None = None
    requests_failed: int | None = None
    connections_reused: int | None = None
    connections: list[ClientConnection] = []
    dns_ms: Num | None = None
    dns_ms_per_host: dict[str, Num] = {}
    dns_capture_ms_per_host: dict[str, Num] = {}
    tcp_connect_ms: dict[str, Num] = {}  # connection id -> ms
    tls_handshake_ms: dict[str, Num] = {}
    repeat: RepeatView | None = None
    tls_version_requested: str | None = None
    resolver: str | None = None
    timeout_s: Num | None = None
    coalescing_decisions: list[CoalescingDecision] = []
    misdirected_retries: int | None = None
    retried_requests: int | None = None
    trace_start_ms: Num | None = None  # a traced path: the load's start in the trace (docs/traces.md)
    floor_model: FloorModel | None = None
    # nghttp and h2load (analysis/parsers.py)
    rc: int | None = None
    raw: str | None = None  # the tool's output, read by the runner's checks and not stored
    stderr: str | None = None
    seconds: Num | None = None
    req_per_s: Num | None = None
    succeeded: int | None = None
    failed: int | None = None
    errored: int | None = None
    timeout: int | None = None
    total_bytes: int | None = None
    data_bytes: int | None = None
    status_2xx: int | None = None
    status_3xx: int | None = None
    status_4xx: int | None = None
    status_5xx: int | None = None
    # Chromium (browser/summary.py, guest/loaders/chromium.py)
    browser_version: str | None = None
    browser_seconds: Num | None = None  # the browser process's run time (browser/__main__.py)
    cache: str | None = None  # cold | warm | priming
    requests_from_cache: int | None = None
    plt_onload_ms: Num | None = None
    resolution: str | None = None
    protocols: dict[str, int] = {}  # next-hop protocol -> resources
    resource_timings: list[ResourceTiming] = []
    images: Images | None = None
    console_errors: list[str] = []
    leftover_processes: list[list[Scalar]] = []
    exit_code: int | None = None
    processes_left: list[str] | None = None


# --- the captures, the path and its checks ------------------------------------------


class CaptureCounts(_Part):
    """tcpdump's counters of one capture."""

    captured: int | None = None
    received_by_filter: int | None = None
    dropped_by_kernel: int | None = None


class Captures(_Part):
    """tcpdump's counters per side."""

    server: CaptureCounts | None = None
    client: CaptureCounts | None = None


class FlightSize(_Part):
    segments: int
    bytes: int


class ServerConnection(_Part):
    """A connection of a server capture as the record keeps it
    (analysis/flights.handshake_summary)."""

    client: str
    server: str
    carried_request: bool | None = None
    tcp_rtt_ms: Num | None = None
    tls_version: str | None = None
    tls_ms: Num | None = None
    tls_rtts: int | None = None
    server_flights_before_finished: list[FlightSize] = []


class FidelityCheck(_Part):
    """A row of the fidelity table, configured against measured (analysis/fidelity.Check)."""

    quantity: str
    configured: Num
    expected: Num
    measured: Num
    low: Num
    high: Num
    unit: str
    ok: bool | None  # None: not judged (the note says why)
    note: str = ""


class TraceRef(_Part):
    """A capacity trace as a record names it (spec/trace.Trace's fields)."""

    file: str
    name: str
    sha256: str


class StoredPath(_Part):
    """The resolved path of a run (spec/pathspec.PathSpec's fields, as its
    model_dump gave them; tests/unit/test_record_schema.py keeps the two alike)."""

    rtt_ms: Num
    loss_pct: Num
    loss_up_pct: Num | None = None
    rate_mbit: Num
    rate_up_mbit: Num | None = None
    loss_burst_pkts: Num | None = None
    loss_burst_up_pkts: Num | None = None
    jitter_ms: Num = 0.0
    queue_pkts: int | None = None
    trace_down: TraceRef | None = None
    trace_up: TraceRef | None = None
    trace_queue_ms: Num | None = None


# --- cross traffic and the CDN -------------------------------------------------------


class CrossFlow(_Part):
    """One cross flow (guest/cross.py, spec/crossflows.py)."""

    id: str
    kind: str  # bulk | web
    cc: str | None = None
    start_s: Num | None = None
    first_byte_s: Num | None = None
    end_s: Num | None = None
    bytes: int = 0
    done: bool | None = None
    error: str | None = None


class CrossSamples(_Part):
    """A receiving host's samples: (t s from t0, its flows' bytes in the order of ids)."""

    ids: list[str] = []
    samples: list[tuple[Num, list[Num]]] = []


class CrossTraffic(_Part):
    """A shared bottleneck's cross traffic during the load (guest/cross.CrossRun.result)."""

    t0_s: Num | None = None
    flows: list[CrossFlow] = []
    not_started: int = 0
    errors: list[str] = []
    samples: dict[str, CrossSamples] = {}  # receiving host -> its samples
    bytes: dict[str, int] = {}  # bulk | web -> bytes moved
    load_window_s: list[Num] | None = None  # the page load's window on the cross traffic's clock


class ServedBy(_Part):
    """What one host served of the page (analysis/servedby.py)."""

    requests: int = 0
    bytes: int = 0
    connections: int = 0
    hosts: list[str] = []


class CdnPart(_Part):
    """The CDN set-up's CDN host (spec/cdn.py, guest/cdn.cdn_result)."""

    host: str
    ip: str
    sysctls: dict[str, str] = {}  # its TCP settings as read back
    capture: CaptureCounts | None = None
    connections: list[ServerConnection] = []
    served_by: dict[str, ServedBy] = {}  # server | cdn -> what it served
    misplaced: list[str] = []


class LoadCpu(_Part):
    """uml: the lab's host CPU seconds over the load, by group
    (host/labcpu.load_cpu; docs/speed.md), or why there are none."""

    why: str | None = None
    kernel_s: Num | None = None
    ended_s: Num | None = None
    standing_s: Num | None = None
    set_up_s: Num | None = None
    new_s: Num | None = None
    total_s: Num | None = None
    wall_s: Num | None = None
    lag_ms: list[Num] = []
