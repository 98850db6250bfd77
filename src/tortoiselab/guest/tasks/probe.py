"""Task `probe`: measure one path against its configuration."""

from __future__ import annotations

from tortoiselab.guest.net import LabContext, mininet_path
from tortoiselab.spec.requests import ProbeRequest

LOSS_PORTS = {"down": 5002, "up": 5003}


def run(ctx: LabContext, req: ProbeRequest) -> dict:
    """Fidelity probe of one path: base RTT (ping), bottleneck rate (bulk
    TCP transfer with loss switched off, so the sender can fill the link),
    one-way loss each direction (paced UDP probes, loss on)."""
    m = req.measure
    with mininet_path(ctx) as lab:
        lab.configure(req.path, server_cc=req.cc, loss_on=False)
        out: dict = {"devices": {"uplink": lab.up_dev, "downlink": lab.down_dev}}
        # RTT: loss off so every ping answers; the delay line is the same
        out["ping"] = lab.ping(m.ping_count, m.ping_interval_s)
        out["bulk"] = lab.bulk(m.bulk_seconds, ss_at_s=1.0)
        lab.set_netem(req.path, loss_on=True)
        out["loss_down"] = lab.udp_loss(lab.server, lab.client, m.loss_probes, m.loss_interval_ms,
                                        port=LOSS_PORTS["down"])
        out["loss_up"] = lab.udp_loss(lab.client, lab.server, m.loss_probes, m.loss_interval_ms,
                                      port=LOSS_PORTS["up"])
        out["qdisc"] = lab.qdisc_stats()
        out["seeds"] = lab.seeds
    return out
