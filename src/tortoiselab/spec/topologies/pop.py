"""pop: client - short access link - edge PoP - long backhaul - origin, as
LinkedIn and CDNs deploy (docs/topologies.md).

    client - s1 == access (the path) == s2 - server (the PoP), dns
                                         s2 == backhaul == s3 - origin

The client reaches the PoP (`server`, whose congestion control is the
experiment's server.cc) over the access link, which carries the
experiment's `path`; the PoP reaches the origin over the backhaul, shaped by
this topology's backhaul_* parameters, with origin_cc on the origin: the
two legs can run different algorithms. Mininet's CLI (topologies/pop.py):

    sudo .venv/bin/python /usr/bin/mn --custom topologies/pop.py --topo pop,rtt_ms=20,backhaul_rtt_ms=150 --link tc
"""

from pydantic import Field, field_validator

from tortoiselab.spec.pathspec import PathSpec, stock_algorithm
from tortoiselab.spec.topology import MN_ONLY_RATE, MN_ONLY_RTT, WEB_PATH, Graph, Host, TopoParams, mn_shaping

ORIGIN = Host("origin", "10.0.3.1/8")


class Params(TopoParams):
    backhaul_rtt_ms: float = Field(150.0, ge=0, le=10_000, description="the PoP-origin round-trip time, ms")
    backhaul_rate_mbit: float = Field(100.0, gt=0, le=1000, description="the backhaul's rate, Mbit/s")
    backhaul_loss_pct: float = Field(0.0, ge=0, le=100, description="the backhaul's random loss per direction, %")
    origin_cc: str = Field("cubic", description="the origin's congestion control (the backhaul's sender)")
    rtt_ms: float = MN_ONLY_RTT
    rate_mbit: float = MN_ONLY_RATE

    @field_validator("origin_cc")
    @classmethod
    def _stock(cls, v: str) -> str:
        return stock_algorithm(v)

    def backhaul_path(self) -> PathSpec:
        return PathSpec(rtt_ms=self.backhaul_rtt_ms, rate_mbit=self.backhaul_rate_mbit,
                        loss_pct=self.backhaul_loss_pct)

    def mn_links(self) -> dict[str, dict]:
        return {"wan": mn_shaping(self.rtt_ms, self.rate_mbit),
                "backhaul": mn_shaping(self.backhaul_rtt_ms, self.backhaul_rate_mbit)}


def graph(params: Params, web: bool = True) -> Graph:
    """WEB_PATH (the PoP in the server's place) and the origin behind a
    third switch; the s2-s3 link is the backhaul."""
    base = WEB_PATH.hosts if web else WEB_PATH.hosts[:2]
    links = [link for link in WEB_PATH.links if web or "dns" not in link]
    return Graph(hosts=(*base, ORIGIN), switches=(*WEB_PATH.switches, "s3"),
                 links=(*links, ("s2", "s3"), ("s3", "origin")), wan=WEB_PATH.wan,
                 roles=(("origin", "origin"),), backhaul=("s2", "s3"))

