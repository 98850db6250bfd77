"""Topologies as pure graphs; tortoiselab.lab builds them in Mininet."""

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
