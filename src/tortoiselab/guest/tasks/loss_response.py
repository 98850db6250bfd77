"""Task `loss_response`: each arm's reaction to exactly one loss, from the
kernel's own cwnd (tcp:tcp_probe)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from tortoiselab.guest import commands as C
from tortoiselab.guest import trace
from tortoiselab.guest.executor import Executor
from tortoiselab.guest.modules import module_params_now, set_module_params
from tortoiselab.guest.net import LabContext, mininet_path
from tortoiselab.spec.requests import LossResponseRequest

MSS = 1448  # payload of a full-size segment (1500-byte IP packet, timestamps on)
FIRST_PORT = 7000
SAMPLE_S = 1.0  # the byte counter; the cwnd comes from the tracepoint


@contextmanager
def one_drop(ex: Executor, dev: str, src_ip: str, nth: int) -> Iterator[None]:
    """The deterministic filter that drops the nth full-size data segment
    from src_ip on dev's ingress, with a fresh counter; removed on the way out."""
    for argv in C.drop_nth_data_segment(dev, src_ip, nth):
        ex.run(argv)
    try:
        yield
    finally:
        ex.run(C.drop_filter_remove(dev), check=False)


def run(ctx: LabContext, req: LossResponseRequest) -> dict:
    """One bulk transfer per arm (algorithm + module parameters) over a
    loss-free path where exactly one data segment is dropped, by a
    deterministic filter, once the window has grown; the kernel's cwnd and
    ssthresh at every ACK come from the tcp:tcp_probe tracepoint."""
    ex = ctx.ex
    out: dict = {"arms": []}
    with mininet_path(ctx) as lab:
        lab.configure(req.path, server_cc="cubic", loss_on=False)
        dev = lab.server_port
        for i, arm in enumerate(req.arms):
            params = set_module_params(ex, arm.cc, arm.params) if arm.params else module_params_now(arm.cc)
            ex.run(C.sysctl_set("net.ipv4.tcp_congestion_control", arm.cc), host=lab.server)
            port = FIRST_PORT + i
            with one_drop(ex, dev, lab.server.IP(), req.drop_nth):
                with trace.tcp_probe(port, restore=not ctx.private_ovs) as tr:  # native: the host's tracing
                    r = lab.bulk(0, port=port, nbytes=arm.segments * MSS, sample_s=SAMPLE_S)
                stats = ex.run(C.drop_filter_stats(dev))
            out["arms"].append({
                "label": arm.label, "cc": arm.cc, "params": params,
                "server_cc": r["server"]["cc"], "bytes": r["client"]["bytes"], "seconds": r["client"]["seconds"],
                "filter_stats": stats,
                "samples": [[s.t, s.snd_cwnd, s.current_ssthresh, s.srtt_us, s.snd_una, s.snd_nxt] for s in tr.samples()],
            })
    return out
