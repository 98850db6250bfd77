"""What the host asks the lab to do: one typed request per lab task.

The host builds a request only as one of these models (host/probe.py,
host/lossresponse.py, host/pageload.py); host/backends.run_task adds where
the task runs (backend, clock, private_ovs, modules_dir) and writes it as
request.json into the run's work folder; the guest reads it back with
`read_request` (`python -m tortoiselab.guest REQUEST.json`,
docs/architecture.md). `task` tells the models apart. Every model forbids
unknown keys, and every default is defined here once: the guest has no
defaults of its own, so a request read back is the request the host sent.

On the virtual clock a run repeats only if the guest does the same things
(docs/determinism.md): what the guest reads from a request decides which
commands run, so a field's meaning must not change silently.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from tortoiselab.spec.browsercfg import browser_problems
# not spec.experiment: the guest imports this module at every boot (docs/speed.md, "Issue 52")
from tortoiselab.spec.sides import ClientCfg, ServerCfg
from tortoiselab.spec.pathspec import PathSpec, describe_errors
from tortoiselab.spec.topologies import TopologyCfg

# the lab's DNS domain: www and static are the page's two origins
LAB_DOMAIN = "lab.test"
WWW = f"www.{LAB_DOMAIN}"


def www_url(path: str) -> str:
    """The URL of a path on the lab's www origin (e.g. objects/1000000.bin)."""
    return f"https://{WWW}/{path.lstrip('/')}"


class RequestError(ValueError):
    """A request.json the guest cannot run; the message names each bad field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LabRequest(_Strict):
    """What every task's request carries: the run's seed and lab settings
    from the task's front-end, then where it runs, from the backend."""

    seed: int = Field(1, ge=0, description="the run's seed: every random stream of the lab derives from it "
                                           "(netem's draws, OVS's entropy, the guest kernel's CRNG)")
    switch: Literal["ovs", "bridge"] = Field("ovs", description="Open vSwitch or the Linux bridge")
    module_params: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="our modules' parameters for this run, by algorithm")
    ro_paths: list[str] = Field(default_factory=list,
                                description="host folders the uml guest mounts read-only (the experiment's site)")
    # set by host/backends.run_task
    backend: Literal["native", "uml"] | None = Field(None, description="where the task runs")
    clock: Literal["real", "virtual"] | None = Field(None, description="the uml guest's clock")
    private_ovs: bool = Field(True, description="the lab starts its own OVS and owns the kernel (uml); "
                                                "else the host's (native)")
    modules_dir: str | None = Field(None, description="our modules built for the lab kernel (uml): insmod them")


# the probe's check of a replayed trace (docs/traces.md): the replay starts
# TRACE_WARMUP_S of trace time before the checked window (the trace loops,
# so before the whole trace comes its own end), time for the bulk transfer's
# slow start to fill the link; the transfer ends TRACE_TAIL_S after it
TRACE_WARMUP_S, TRACE_TAIL_S = 1.0, 0.5
# a loss probe on the wire: tools/udpprobe.py's 100-byte datagram + 8 UDP + 20 IP + 14 Ethernet
PROBE_FRAME_BYTES = 142


class TraceWindow(_Strict):
    """The part of a path's trace the probe replays and checks, in ms of
    the trace (the downlink's; the uplink's when only it is traced)."""

    trace: str = Field(description="the checked trace's name")
    period_ms: int = Field(description="the trace's length: it loops")
    start_ms: int
    end_ms: int

    @property
    def whole(self) -> bool:
        return self.start_ms == 0 and self.end_ms == self.period_ms

    @property
    def replay_from_ms(self) -> int:
        """The trace's instant the replay starts from (its t0)."""
        return (self.start_ms - round(TRACE_WARMUP_S * 1e3)) % self.period_ms

    def bulk_seconds(self) -> float:
        """The bulk transfer under the replay: warm-up, window, tail."""
        return TRACE_WARMUP_S + (self.end_ms - self.start_ms) / 1e3 + TRACE_TAIL_S

    def describe(self) -> str:
        what = "the whole trace" if self.whole else f"a window of the {self.period_ms / 1e3:g}-s trace"
        return (f"{self.trace}, {what}: {self.start_ms / 1e3:g}-{self.end_ms / 1e3:g} s "
                f"({(self.end_ms - self.start_ms) / 1e3:g} s), after {TRACE_WARMUP_S:g} s of warm-up")


class ProbeMeasure(_Strict):
    """How long and how often the probe measures."""

    ping_count: int = Field(20, ge=1)
    ping_interval_s: float = Field(0.2, gt=0)
    bulk_seconds: float = Field(10.0, gt=0, description="the bulk transfer of an untraced path (a traced one's "
                                                        "lasts its trace window)")
    loss_probes: int = Field(4000, ge=1, description="UDP probes per direction")
    loss_interval_ms: float = Field(2.0, gt=0)
    trace_window_s: tuple[float, float] | None = Field(
        None, description="a traced path: the part of its trace the probe replays and checks, (start, end) in "
                          "seconds of the trace; None: the whole trace")

    def loss_interval(self, path: PathSpec, direction: str) -> float:
        """The loss probes' spacing in ms in a direction: loss_interval_ms,
        wider on a traced link (which runs at its trace's mean rate while the
        probes run) so that the probes take at most half of that rate and
        half of netem's delay line in front of it (PathSpec.
        trace_netem_limit_pkts counts full-size frames): a probe lost is
        then the path's random loss, not an overflow (tools/udpprobe.py)."""
        trace = path.trace(direction)
        if trace is None:
            return self.loss_interval_ms
        by_rate = 2 * PROBE_FRAME_BYTES * 1e3 / trace.mean_frame_rate_Bps()
        line_pkts = path.trace_netem_limit_pkts(direction) - path.trace_queue(direction) - 8
        by_line = 2 * (path.one_way_ms + 4 * path.jitter_ms) / max(1, line_pkts)
        return round(max(self.loss_interval_ms, by_rate, by_line), 3)

    def trace_window(self, path: PathSpec) -> TraceWindow | None:
        """The trace window of a traced path (None for an untraced one);
        ValueError naming the field when it does not fit the trace."""
        trace = path.trace_down or path.trace_up
        if trace is None:
            return None
        period = trace.period_ms
        start, end = (0, period) if self.trace_window_s is None else \
            (round(self.trace_window_s[0] * 1e3), round(self.trace_window_s[1] * 1e3))
        if not 0 <= start < end <= period:
            raise ValueError(f"measure.trace_window_s (--trace-window): {self.trace_window_s}; give START_S END_S "
                             f"with 0 <= START_S < END_S <= {period / 1e3:g} (the length of {trace.name}), "
                             "or leave it out for the whole trace")
        return TraceWindow(trace=trace.name, period_ms=period, start_ms=start, end_ms=end)


class ProbeRequest(LabRequest):
    """Measure one path against its configuration (RTT, rate, loss)."""

    task: Literal["probe"] = "probe"
    path: PathSpec
    topology: TopologyCfg | None = Field(None, description="topologies/<name>.py and its parameters; None: wan "
                                         "(the path already carries what the topology sets: TopologyCfg.apply)")
    cc: str = Field("cubic", description="the server's congestion control algorithm")
    measure: ProbeMeasure = Field(default_factory=ProbeMeasure)

    @model_validator(mode="after")
    def _window_fits_the_trace(self) -> "ProbeRequest":
        self.measure.trace_window(self.path)
        return self


class CcCheckRequest(LabRequest):
    """Select each algorithm on the server; read back what the socket and ss say."""

    task: Literal["cc_check"] = "cc_check"
    path: PathSpec
    algorithms: list[str] | None = Field(None, description="None: every algorithm the lab kernel has")
    seconds: float = Field(1.5, gt=0, description="each algorithm's bulk transfer")


class LossArm(_Strict):
    """One arm of the loss response: an algorithm, its module parameters and
    how many segments its transfer sends."""

    label: str
    cc: str
    params: dict[str, str] = Field(default_factory=dict)
    segments: int = Field(ge=1)


class LossResponseRequest(LabRequest):
    """One bulk transfer per arm over a loss-free path where exactly the
    drop_nth full-size data segment is dropped."""

    task: Literal["loss_response"] = "loss_response"
    path: PathSpec
    drop_nth: int = Field(ge=1, le=10000, description="tc's gact counts 1 to 10000")
    arms: list[LossArm]


class ModuleCheckRequest(LabRequest):
    """Unload and load our modules and offer them bad parameter values."""

    task: Literal["module_check"] = "module_check"
    bad_params: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="values the modules must refuse, by algorithm (not checked here)")


# the longest a command in the lab guest may run (its own watchdog; the
# host's fires a boot's worth later)
MAX_COMMAND_S = 3 * 3600.0


class CommandRequest(LabRequest):
    """Run one command as root in the lab guest, in the run's work folder
    (relative paths are the work folder's, the one place the guest may
    write), with our modules loaded and Open vSwitch running as a Debian
    host's service would: e.g. `tortoise run --backend native`, the native
    backend on the lab kernel (docs/architecture.md)."""

    task: Literal["command"] = "command"
    argv: list[str] = Field(min_length=1, description="the command and its arguments, as exec sees them")
    timeout_s: float = Field(600.0, gt=0, le=MAX_COMMAND_S,
                             description="wall time the command may take before its process group is killed")


_TIMEOUT = ClientCfg.model_fields["timeout_s"]


class LoadClient(ClientCfg):
    """An experiment's client settings (ClientCfg) as one load runs them:
    `url` is the full URL (host/pageload resolves ClientCfg's path on www),
    with the loader's seed and how it resolves names."""

    url: str | None = Field(None, description="the full URL to load; None: the page on www")
    # ClientCfg's bounds and default (the int 120), but a whole number given
    # stays one: the loader's --timeout carries the value as written, as it
    # did before the typed requests (the guest's argv is part of the run)
    timeout_s: Annotated[int | float, *_TIMEOUT.metadata] = Field(_TIMEOUT.default, description=_TIMEOUT.description)
    seed: int = Field(1, ge=0, description="the loader's seed (cache-hit choices)")
    tls_client: Literal["1.3", "1.2"] | None = Field(None, description="the loader's TLS version; None: its own")
    browser_fault: Literal["hang", "crash"] | None = Field(
        None, description="tests of the bounds only: the chromium loader stops (hang) or kills (crash) the "
                          "browser's processes before it navigates")

    def target(self) -> str:
        return self.url or www_url(self.page)

    @model_validator(mode="after")
    def _site_loads(self) -> "LoadClient":
        """(ClientCfg's, replaced) a load of an imported site has its page's
        full URL in url (host/pageload.load_client)."""
        return self


class LoadSpec(_Strict):
    """One page load: the server's settings (an experiment's ServerCfg) and
    the client's; in a batch (several runs in one boot) also the run's own
    path and seed, so that each load draws what its run alone would."""

    label: str
    server: ServerCfg = Field(default_factory=ServerCfg)
    client: LoadClient = Field(default_factory=LoadClient)
    seed: int | None = Field(None, ge=0, description="this load's run seed (netem's draws per direction); "
                                                    "None: the request's")
    path: PathSpec | None = Field(None, description="this load's path (netem on the WAN ports); None: the request's")

    @model_validator(mode="after")
    def _browser(self) -> "LoadSpec":
        problems = browser_problems(self.server, self.client)
        if self.client.loader == "chromium" and self.client.tls_client is not None:
            problems.append("client.tls_client: the chromium loader offers what Chromium offers; leave it out")
        if self.client.browser_fault is not None and self.client.loader != "chromium":
            problems.append("client.browser_fault: only for loader chromium")
        if problems:
            raise ValueError("; ".join(problems))
        return self


class PageLoadRequest(LabRequest):
    """A sequence of page loads in one lab boot."""

    task: Literal["pageload"] = "pageload"
    path: PathSpec
    topology: TopologyCfg | None = Field(None, description="the batch's topology (one per boot); None: wan")
    loads: list[LoadSpec]
    site_dir: str | None = Field(None, description="the experiment's site, made on the host; None: the guest "
                                                   "makes one from site_seed")
    pki_dir: str | None = Field(None, description="the experiment's PKI (with site_dir)")
    site_seed: int = Field(1, ge=0, description="the page generator's seed when the guest makes the site")
    imported_dir: str | None = Field(None, description="an imported site served instead of the generated one "
                                     "(docs/your-own-site.md): a folder made on the host with site.json, "
                                     "bodies/ and pki/; each load's client.url is its page")
    load_spacing_s: float = Field(
        0.0, ge=0, le=3600, description="in a batch, each load after the first starts a whole number of these "
        "after the first one, and at least settle_s after the previous one ended (docs/determinism.md: the "
        "kernel's timers round to the same instants); 0: on the next half-second")
    settle_s: float = Field(0.0, ge=0, le=3600, description="the quiet time a load leaves before the next "
                            "(TIME_WAIT is 60 s in Linux); virtual time costs almost nothing")

    @model_validator(mode="after")
    def _site_with_pki(self) -> "PageLoadRequest":
        if (self.site_dir is None) != (self.pki_dir is None):
            raise ValueError("site_dir and pki_dir: give both (the experiment's) or neither (the guest makes them)")
        return self


AnyRequest = Annotated[Union[ProbeRequest, CcCheckRequest, LossResponseRequest, ModuleCheckRequest,
                             PageLoadRequest, CommandRequest], Field(discriminator="task")]
REQUEST_MODELS: tuple[type[LabRequest], ...] = (ProbeRequest, CcCheckRequest, LossResponseRequest,
                                                 ModuleCheckRequest, PageLoadRequest, CommandRequest)
_ADAPTER: TypeAdapter[AnyRequest] = TypeAdapter(AnyRequest)


def task_name(model: type[LabRequest]) -> str:
    """The `task` a request model stands for (its discriminator's default)."""
    return model.model_fields["task"].default


def read_request(text: str | bytes) -> LabRequest:
    """A request.json as its task's model; RequestError naming each bad
    field (e.g. ``pageload.loads.0.client.colour: Extra inputs are not permitted``)."""
    try:
        return _ADAPTER.validate_json(text)
    except ValidationError as exc:
        # one line per error; an empty location is the request itself: its task is missing or unknown
        lines = [line if err["loc"] else "task: " + line.split(": ", 1)[-1]
                 for err, line in zip(exc.errors(), describe_errors(exc).splitlines())]
        raise RequestError("\n".join(f"request.json: {line}" for line in lines)) from None

