"""Topologies as pure graphs; tortoiselab.guest.net builds them in Mininet."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Host:
    name: str
    ip: str


@dataclass(frozen=True)
class Graph:
    hosts: tuple[Host, ...]
    switches: tuple[str, ...]
    links: tuple[tuple[str, str], ...]
    wan: tuple[str, str]  # the one link that carries the emulation

    def validate(self) -> None:
        names = {h.name for h in self.hosts} | set(self.switches)
        for a, b in self.links:
            if a not in names or b not in names:
                raise ValueError(f"link {a}-{b} names a node that is not in the graph")
        if self.wan not in self.links:
            raise ValueError(f"wan link {self.wan} is not one of the links")


# client -- s1 -- WAN -- s2 -- server
ONE_PATH = Graph(
    hosts=(Host("client", "10.0.0.1/8"), Host("server", "10.0.0.2/8")),
    switches=("s1", "s2"),
    links=(("client", "s1"), ("s1", "s2"), ("s2", "server")),
    wan=("s1", "s2"),
)


# The web path: as ONE_PATH, plus a DNS server on the server's side of the
# WAN (every lookup pays the path's round trip, like a cold lookup at a far
# authoritative server). The server also answers on a second address
# (SERVER_IP2) for the "two IPs" resolution scenario.
WEB_PATH = Graph(
    hosts=(Host("client", "10.0.0.1/8"), Host("server", "10.0.0.2/8"), Host("dns", "10.0.0.53/8")),
    switches=("s1", "s2"),
    links=(("client", "s1"), ("s1", "s2"), ("s2", "server"), ("s2", "dns")),
    wan=("s1", "s2"),
)
SERVER_IP2 = "10.0.0.3"
