"""Task `cc_check`: is the algorithm the server selects the one its
connections use?"""

from __future__ import annotations

from tortoiselab.guest import commands as C
from tortoiselab.guest.modules import available_algorithms
from tortoiselab.guest.net import LabContext, mininet_path
from tortoiselab.spec.requests import CcCheckRequest

FIRST_PORT = 6000
SS_AT_S = 0.8  # into each transfer: the connection is established and sending


def run(ctx: LabContext, req: CcCheckRequest) -> dict:
    """Select each algorithm for the server host in turn and confirm from
    `ss -ti` on the server that a live connection uses it."""
    algos = req.algorithms or available_algorithms()
    seen = {}
    with mininet_path(ctx) as lab:
        lab.configure(req.path, server_cc="cubic", loss_on=True)
        for i, cc in enumerate(algos):
            # DCTCP runs only on connections that negotiated ECN (RFC 8257 §3);
            # without it the kernel falls back to "dctcp-reno"
            ctx.ex.run(C.sysctl_set("net.ipv4.tcp_ecn", 1 if cc == "dctcp" else 2), host=lab.client)
            ctx.ex.run(C.sysctl_set("net.ipv4.tcp_congestion_control", cc), host=lab.server)
            r = lab.bulk(req.seconds, port=FIRST_PORT + i, ss_at_s=SS_AT_S)
            seen[cc] = {"sockopt": r["server"]["cc"],
                        "ss": [s["algorithm"] for s in r.get("ss", [])],
                        "bytes": r["client"]["bytes"]}
    return {"algorithms": seen}
