"""Mininet's graph built with a few batched commands instead of a process
per setting (docs/speed.md, "The topology phase").

In the lab guest every command is a process, and a process costs
milliseconds of the host's wall time there. Mininet configures a lab one
setting at a time: a veth pair per `ip link add`, then an `ifconfig` to
bring each end up, three more to give each host its MAC, one for its
address and one for its loopback, an `arp -s` per pair of hosts, an
`ovs-vsctl` per switch. Here the same state comes from one `ip -batch`
in the guest's root namespace (every veth pair, each end born in its
node's namespace with its MAC, the root-side ends up), one `ip -batch`
per host (loopback, address, interface up, a permanent neighbour entry
per other host: Mininet's `autoStaticArp`) and one `ovs-vsctl`
transaction for all the switches. Mininet's node shells, its Python
objects and its teardown (`Mininet.stop`) are unchanged.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from mininet.link import Intf, Link
from mininet.net import Mininet
from mininet.node import OVSSwitch

from tortoiselab.guest.executor import Executor


@dataclass(frozen=True)
class VethEnd:
    """One end of a veth pair: its name, MAC, and the pid of a process in
    the network namespace it lives in (None: the guest's root namespace)."""

    name: str
    mac: str
    netns_pid: int | None


def veth_lines(pairs: list[tuple[VethEnd, VethEnd]]) -> list[str]:
    """`ip -batch` lines, for the root namespace, that make every pair with
    each end in its namespace under its name and MAC, then bring up the
    ends that stay in the root namespace (an end in a host's namespace is
    brought up there: host_lines)."""
    def end(e: VethEnd) -> str:
        where = "" if e.netns_pid is None else f" netns {e.netns_pid}"
        return f"name {e.name} address {e.mac}{where}"

    made = [f"link add {end(a)} type veth peer {end(b)}" for a, b in pairs]
    up = [f"link set dev {e.name} up" for pair in pairs for e in pair if e.netns_pid is None]
    return made + up


def host_lines(devs: list[str], address: tuple[str, str] | None,
               neighbours: list[tuple[str, str]]) -> list[str]:
    """`ip -batch` lines, for a host's namespace: its loopback up, the
    address (cidr, dev) if any, with the broadcast address ifconfig gives
    it, every interface in devs up, then for each (ip, mac) of neighbours a
    permanent neighbour entry on the address's interface (what `arp -s`
    makes: Mininet's static ARP, without ARP traffic)."""
    lines = ["link set dev lo up"]
    if address is not None:
        lines.append(f"address add {address[0]} broadcast + dev {address[1]}")
    lines += [f"link set dev {d} up" for d in devs]
    if address is not None:
        lines += [f"neighbour replace {ip} lladdr {mac} dev {address[1]} nud permanent" for ip, mac in neighbours]
    return lines


def ovs_vsctl_argv(commands: list[str]) -> list[str]:
    """One `ovs-vsctl` transaction of the commands Mininet queued for its
    switches (each a string of `--`-separated ovs-vsctl commands, as
    Mininet would hand to a shell)."""
    return ["ovs-vsctl", *[word for cmd in commands for word in shlex.split(cmd)]]


class QuietIntf(Intf):
    """A Mininet interface that runs nothing when made: the lab's batches
    (BatchMininet.configHosts) configure it."""

    def config(self, mac: str | None = None, ip: str | None = None, ifconfig: Any = None, up: bool = True,
               **_params: Any) -> dict:
        return {}


class BatchLink(Link):
    """A Mininet link whose veth pair BatchMininet.configHosts makes, with
    every other pair, in one batch."""

    @classmethod
    def makeIntfPair(cls, *args: Any, **kwargs: Any) -> None:
        return None


class BatchMininet(Mininet):
    """Mininet with its hosts configured by batches (the module's
    docstring); links must be BatchLinks with QuietIntfs, and a host's
    link end must carry the host's own MAC (guest/topo.py's GraphTopo gives it)."""

    def __init__(self, ex: Executor, **kwargs: Any) -> None:
        self.ex = ex
        super().__init__(link=BatchLink, intf=QuietIntf, **kwargs)

    def configHosts(self) -> None:
        pairs = [tuple(VethEnd(i.name, i.MAC(), i.node.pid if i.node.inNamespace else None)
                       for i in (link.intf1, link.intf2)) for link in self.links]
        if pairs:
            self.ex.run(["ip", "-batch", "-"], stdin=_text(veth_lines(pairs)))
        addresses = {}  # host -> (cidr, dev): Mininet's config of a host's default interface
        for host in self.hosts:
            intf = host.defaultIntf()
            if intf is not None and host.params.get("ip"):
                intf.ip, intf.prefixLen = host.params["ip"].split("/")
                addresses[host] = (host.params["ip"], intf.name)
        for host in self.hosts:
            neighbours = [(o.IP(), o.MAC()) for o in self.hosts
                          if o is not host and o in addresses] if self.autoStaticArp else []
            devs = [i.name for i in host.intfList() if i.name != "lo"]
            lines = host_lines(devs, addresses.get(host), neighbours)
            self.ex.run(["ip", "-batch", "-"], host=host, stdin=_text(lines))

    def staticArp(self) -> None:
        """Done in configHosts' batch of each host."""


class BatchOVSSwitch(OVSSwitch):
    """Mininet's Open vSwitch switch, started with every other switch in
    one ovs-vsctl transaction (logged by the executor given as `ex`)."""

    def __init__(self, name: str, ex: Executor, **params: Any) -> None:
        self.ex = ex
        super().__init__(name, batch=True, **params)

    @classmethod
    def batchStartup(cls, switches: tuple, run: Any = None) -> tuple:
        cmds = [cmd for s in switches for cmd in s.commands]
        if cmds:
            switches[0].ex.run(ovs_vsctl_argv(cmds))
        for s in switches:
            s.commands, s.batch = [], False
        return switches


class PrivateOVSSwitch(BatchOVSSwitch):
    """uml: the lab's own Open vSwitch, which guest/net.py private_ovs has
    just started and initialised its database with (`ovs-vsctl --no-wait
    init`). Mininet's set-up checks (two more ovs-vsctl processes: that the
    database answers, and its version, for quirks of versions before 1.10
    of 2013) are left out, and the switch has no shell: it lives in the
    root namespace, its ports come up in the batches, it starts by the
    transaction and the uml lab is not torn down (guest/net.py
    mininet_path), so the shell would only bring up the loopback, which
    runs in the root namespace through the executor instead (cmd)."""

    @classmethod
    def setup(cls) -> None:
        return None

    def startShell(self, mnopts: Any = None) -> None:
        self.shell = None

    def cmd(self, *args: Any, **kwargs: Any) -> str:
        """What Mininet would run in this switch's shell, run in the root
        namespace as one process (no shell): its output and errors."""
        _rc, out, err = self.ex.capture(shlex.split(" ".join(str(a) for a in args)))
        return out + err

    @classmethod
    def isOldOVS(cls) -> bool:
        return False


def _text(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)
