"""cellular: a last mile whose downlink and uplink capacity follow a trace,
with a deep buffer (bufferbloat); client - s1 - last mile - s2 - server.

The graph is wan's; the last mile is the emulated link replaying the
traces (docs/traces.md: HTB under netem, one thread changing its rate at
every segment on the virtual clock). The path's delay and loss stay; its
rate is the trace's. Mininet's CLI (topologies/cellular.py; a fixed rate:
mn cannot replay a trace):

    sudo .venv/bin/python /usr/bin/mn --custom topologies/cellular.py --topo cellular --link tc
"""

from pydantic import Field, field_validator

from tortoiselab.spec.trace import Trace
from tortoiselab.spec.topology import MN_ONLY_RATE, MN_ONLY_RTT, ONE_PATH, WEB_PATH, Graph, TopoParams, mn_shaping


class Params(TopoParams):
    trace_down: str = Field("lte.down", min_length=1, description="the downlink's mahimahi trace: a shipped "
                            "name (lte.down, 3g.down) or a file")
    trace_up: str = Field("lte.up", min_length=1, description="the uplink's trace: lte.up, 3g.up or a file")
    buffer_ms: float = Field(500.0, gt=0, le=60_000, description="the deep buffer, in ms at the trace's mean "
                             "rate (500 ms: bufferbloat)")
    rtt_ms: float = MN_ONLY_RTT
    rate_mbit: float = MN_ONLY_RATE

    @field_validator("trace_down", "trace_up")
    @classmethod
    def _readable(cls, v: str) -> str:
        Trace.model_validate(v)  # a missing, empty or unsorted file is refused here, naming the line
        return v

    def path_update(self) -> dict:
        return {"trace_down": self.trace_down, "trace_up": self.trace_up, "trace_queue_ms": self.buffer_ms}

    def mn_links(self) -> dict[str, dict]:
        return {"wan": {**mn_shaping(self.rtt_ms, self.rate_mbit), "max_queue_size": 1000}}


def graph(params: Params, web: bool = True) -> Graph:
    return WEB_PATH if web else ONE_PATH

