"""The emulated network: Open vSwitch, the Mininet graph and the running
lab over it (PathLab), configured and measured through the executor.

One path: client -- s1 -- WAN -- s2 -- server (docs/architecture.md). The
emulation sits on the WAN link only: netem on s1's WAN port shapes
client-to-server traffic, netem on s2's WAN port shapes server-to-client
traffic.
"""

from __future__ import annotations

import json
import random
import resource
import subprocess
import sys
import threading
import time
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable, Iterator

from mininet.log import setLogLevel
from mininet.nodelib import LinuxBridge

from tortoiselab.analysis.parsers import parse_ping, parse_ss_ti
from tortoiselab.guest import commands as C
from tortoiselab.guest.clock import HostWall, align_to_grid, sleep_until_monotonic
from tortoiselab.guest.executor import Executor, netns_of
from tortoiselab.guest.labnet import BatchMininet, BatchOVSSwitch, PrivateOVSSwitch
from tortoiselab.guest.modules import available_algorithms
from tortoiselab.guest.offloads import offloads_off
from tortoiselab.guest.replay import ReplayLink, TraceReplay
from tortoiselab.guest.topo import GraphTopo
from tortoiselab.spec.hostspec import SETTINGS, HostSpec
from tortoiselab.spec.pathspec import PathSpec
from tortoiselab.spec.topology import ONE_PATH, Graph
from tortoiselab.tools import netem_seed

OVS_RUN = Path("/run/openvswitch")
# ovs-vswitchd sizes its handler threads from a CPU count that it caches only
# once the monotonic clock has passed 10 s; started earlier (as on the virtual
# clock, where boot takes no time) it gets 0 handlers and passes no traffic
# (docs/determinism.md). Waiting costs nothing on the virtual clock.
OVS_MIN_UPTIME_S = 10.5
# how long one of our tools may run beyond the time its work should take,
# and how long a server gets to finish once its client has
TOOL_GRACE_S = 120.0
SERVER_EXIT_S = 60.0
LAB_PREFIX = "10.0.0.0/8"  # every lab address (spec/topology.py)
# settings of the root namespace that PathLab.configure changes: on the
# native backend (the host's kernel) mininet_path puts them back afterwards
ROOT_SYSCTLS = ("net.ipv4.tcp_allowed_congestion_control",)
# the soft open-file limit Mininet's node shells start under (the kernel's
# default): see shells_under_default_fd_limit
SHELL_NOFILE = 1024


@dataclass
class LabContext:
    """What a task needs: the executor, where to write, and how the lab runs
    (from the request: guest/__main__.py)."""

    ex: Executor
    work: Path
    private_ovs: bool  # start our own ovsdb/vswitchd (uml) or use the host's (native)
    switch: str  # ovs or bridge
    seed: int  # the run's seed; every random stream is derived from it
    wall: HostWall | None = None  # the host's clock, for the time budget only


def _entropy_file(seed: int) -> Path:
    """Bytes derived from the run's seed, for OVS's /dev/urandom."""
    entropy = OVS_RUN / "entropy"
    if not entropy.exists():
        entropy.write_bytes(random.Random(C.derive_seed(seed, "ovs", "entropy")).randbytes(4096))
    return entropy


@contextmanager
def private_ovs(ex: Executor, seed: int | None = None) -> Iterator[None]:
    """ovsdb-server + ovs-vswitchd with their files under /run (a tmpfs in
    the guest). With a seed, both read bytes derived from it as
    /dev/urandom. They run on until the guest powers off: the lab's own
    kernel, thrown away then, with every result written before (stopping
    them cost the boot's end their exit work)."""
    OVS_RUN.mkdir(parents=True, exist_ok=True)
    db = OVS_RUN / "conf.db"

    def daemon(argv: list[str]) -> list[str]:
        return argv if seed is None else C.seeded_entropy(argv, _entropy_file(seed))

    ex.run(C.ovsdb_create(db))
    ex.run(daemon(C.ovsdb_server(OVS_RUN, db)))
    ex.run(C.ovs_init())
    # vswitchd counts its handler threads right only after 10 s of uptime
    # (docs/determinism.md); the absolute deadline also aligns every run
    sleep_until_monotonic(OVS_MIN_UPTIME_S)
    ex.run(daemon(C.ovs_vswitchd(OVS_RUN)))
    align_to_grid()  # vswitchd's start-up work is over; every run goes on from the same instant
    yield


def _no_ipv6_from_birth(ex: Executor) -> None:
    """uml: the guest's own kernel. No IPv6 anywhere, from the first
    namespace on: Mininet makes the hosts' namespaces and links as soon as
    they are added, and a new namespace otherwise starts with IPv6 on, whose
    DAD, router solicitations and MLD reports wait random delays; those woke
    the kernel's workers at random moments and moved the run by microseconds
    (docs/determinism.md). devconf_inherit_init_net=1: new namespaces copy
    the root's all/default settings. Switch ports are born without IPv6 too
    (turning it off port by port woke vswitchd)."""
    ex.sysctl({"net.core.devconf_inherit_init_net": 1, "net.ipv6.conf.all.disable_ipv6": 1,
               "net.ipv6.conf.default.disable_ipv6": 1})


@contextmanager
def shells_under_default_fd_limit() -> Iterator[None]:
    """Mininet starts each node's shell through `mnexec -c`, which closes
    every file descriptor below the soft RLIMIT_NOFILE one by one; Mininet
    raises that limit to 16384 (mininet.util.fixLimits), so each node cost
    16k system calls: about 165 ms in the UML lab kernel, 70 % of building
    a topology (docs/kernel-7.3.md, "Mininet's node shells"). The shells run
    only Mininet's own configuration commands, so they start under the
    kernel's default limit; the lab's own processes, which this process
    starts through Node.popen after the nodes exist, keep Mininet's. (Our
    descriptors are close-on-exec, Python's default, so none above the
    lower limit reaches a shell.)"""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, SHELL_NOFILE), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@contextmanager
def mininet_path(ctx: LabContext, graph: Graph = ONE_PATH) -> Iterator["PathLab"]:
    """Build the graph in Mininet and stop it again, also on error."""
    setLogLevel("warning")
    ovs = PrivateOVSSwitch if ctx.private_ovs else BatchOVSSwitch
    if ctx.private_ovs:
        _no_ipv6_from_birth(ctx.ex)
    # native: the host's kernel outlives the lab; what configure() changes
    # in its root namespace goes back as it was (uml: the lab's own kernel)
    restore = {} if ctx.private_ovs else ctx.ex.read_sysctls(ROOT_SYSCTLS)
    switch = partial(ovs, failMode="standalone", ex=ctx.ex) if ctx.switch == "ovs" else LinuxBridge
    # the graph's commands batched (guest/labnet.py): a few processes, not one per setting
    net = BatchMininet(ctx.ex, topo=None, build=False, switch=switch, controller=None, autoSetMacs=True,
                       autoStaticArp=True, waitConnected=False)
    with shells_under_default_fd_limit():  # each node's shell starts here
        net.buildFromTopo(GraphTopo(graph))  # the graph's hosts, switches and links, in its order
    nodes = {n.name: n for n in (*net.hosts, *net.switches)}
    links = {(link.intf1.node.name, link.intf2.node.name): link for link in net.links}
    try:
        net.build()
        net.start()
        yield PathLab(ctx, net, nodes, links, graph.wan, graph.backhaul)
    finally:
        # uml: the lab's kernel, thrown away at power-off, and every result
        # is written by now: no teardown (its commands cost the boot's end)
        if not ctx.private_ovs:
            net.stop()
        if restore:
            ctx.ex.sysctl({k: v for k, v in restore.items() if v})


def _offloads_off_in(host, dev: str) -> None:
    """`ethtool -K dev tso off gso off gro off` in the host's namespace (the
    root's for None), from this process."""
    with netns_of(host):
        offloads_off(dev)


class PathLab:
    """A running one-path lab: configure it, then measure over it."""

    def __init__(self, ctx: LabContext, net, nodes: dict, links: dict, wan_key: tuple[str, str],
                 backhaul_key: tuple[str, str] | None = None) -> None:
        self.ctx, self.net, self.nodes = ctx, net, nodes
        self.client, self.server = nodes["client"], nodes["server"]
        wan = links[wan_key]
        # the switch port the server's packets enter the network through
        self.server_port = next(l.intf1.name if l.intf2.node is self.server else l.intf2.name
                                for l in links.values() if self.server in (l.intf1.node, l.intf2.node))
        # the WAN link's two ports: egress of s1's shapes the uplink,
        # egress of s2's shapes the downlink (server -> client)
        self.up_dev, self.down_dev = wan.intf1.name, wan.intf2.name
        self.seed = ctx.seed
        self.seeds: dict[str, int] = {}
        self.traced_devs: set[str] = set()  # WAN ports whose netem has a traced link as its child
        # each end host's own settings (Mininet's: spec/hostspec.py), put back for a load that sets none
        self.host_defaults = {h.name: self.ex.read_sysctls(tuple(SETTINGS.values()), host=h)
                              for h in (self.client, self.server)}
        # a second emulated link (pop's backhaul): its ports (up: toward the far end) and its path
        self.backhaul_devs = None if backhaul_key is None else (links[backhaul_key].intf1.name,
                                                                links[backhaul_key].intf2.name)
        self.backhaul_path: PathSpec | None = None
        # a topology that splits the path over both links (the dumbbell's CDN): TopoParams.legs
        self.legs: Callable[[PathSpec], tuple[PathSpec, PathSpec | None]] | None = None

    @property
    def ex(self) -> Executor:
        return self.ctx.ex

    def all_intfs(self) -> list[tuple[object, str]]:
        out = []
        for node in self.nodes.values():
            for intf in node.intfList():
                if intf.name != "lo":
                    out.append((node, intf.name))
        return out

    def configure(self, path: PathSpec, server_cc: str, client_cc: str = "cubic",
                  initcwnd: int | None = None, initrwnd: int | None = None,
                  loss_on: bool = True, ssthresh: int | None = None) -> None:
        ex = self.ex
        self.quiet_ipv6()
        # a non-initial netns may only pick allowed algorithms (EPERM otherwise)
        ex.sysctl({"net.ipv4.tcp_allowed_congestion_control": " ".join(available_algorithms())})
        for node, dev in self.all_intfs():
            host = node if node in self.net.hosts else None
            # ethtool's request made in this process (guest/offloads.py): no process per interface
            ex.in_process(C.offloads_off(dev), lambda h=host, d=dev: _offloads_off_in(h, d),
                          where=host.name if host is not None else "root")
        for host, cc in ((self.client, client_cc), (self.server, server_cc)):
            ex.sysctl({"net.ipv4.tcp_no_metrics_save": 1, "net.ipv4.tcp_congestion_control": cc}, host=host)
        if initcwnd is not None or initrwnd is not None or ssthresh is not None:
            for host in (self.client, self.server):
                ex.run(C.route_window(LAB_PREFIX, host.defaultIntf().name, initcwnd, initrwnd,
                                      ssthresh if host is self.server else None), host=host)
        self.set_netem(path, loss_on)

    def set_hosts(self, client: HostSpec, server: HostSpec) -> None:
        """Each end host's TCP settings (docs/hosts.md) written into its
        namespace in this process: what the load asks for, and for what it
        leaves unset the value the host was born with, wherever an earlier
        load of the boot changed it. A load that sets nothing on hosts as
        they were born writes nothing: its steps are those of the code before
        hosts could be set."""
        for host, spec in ((self.client, client), (self.server, server)):
            asked = spec.sysctls()
            now = self.ex.read_sysctls(tuple(SETTINGS.values()), host=host)
            restore = {k: v for k, v in self.host_defaults[host.name].items()
                       if k not in asked and v.split() != now[k].split()}
            if asked or restore:
                self.ex.sysctl({**asked, **restore}, host=host)

    def forget_macs(self) -> None:
        """Every lab switch's MAC table emptied (before each page load: an
        earlier load in the same boot would otherwise have taught the
        switches where the DNS server is, and the first query would not be
        flooded as in a run alone)."""
        for sw in self.net.switches:
            self.ex.run(C.switch_forget_macs(self.ctx.switch, sw.name))

    def quiet_ipv6(self) -> None:
        """IPv6 off on every lab interface. The lab's traffic is IPv4; IPv6
        router solicitations, DAD and MLD reports go out on random timers for
        seconds after a link comes up, and each one that crosses netem takes
        a draw from its PRNG, so two runs with one seed would lose different
        packets (seen here: the uplink's losses shifted by one)."""
        for host in self.net.hosts:
            self.ex.sysctl({f"net.ipv6.conf.{key}.disable_ipv6": 1 for key in ("all", "default")}, host=host)
        for node, dev in self.all_intfs():
            if node not in self.net.hosts:
                self.ex.sysctl({f"net.ipv6.conf.{dev}.disable_ipv6": 1})

    def set_netem(self, path: PathSpec, loss_on: bool = True, seed: int | None = None) -> dict[str, int]:
        """netem on both WAN ports, each with its own seeded PRNG (derived from
        the run's seed: the lab's, or a batch's load's), so that a rerun draws
        the same losses (random, or a Gilbert model's, whose chain the seeded
        change also starts afresh in Good); returns the PRNG seeds by direction."""
        seeds = {}
        path, second = self.legs(path) if self.legs is not None else (path, self.backhaul_path)
        for dev, direction, loss, rate, burst in (
                (self.up_dev, "up", path.loss_up, path.rate_up, path.burst_up_pkts),
                (self.down_dev, "down", path.loss_down_pct, path.rate_mbit, path.burst_down_pkts)):
            loss = loss if loss_on else 0.0
            traced = direction if path.trace(direction) is not None else None
            self.ex.run(C.netem(dev, path, loss, rate, burst, traced=traced))
            self._trace_link(dev, path, traced)
            seeds[f"netem_{direction}"] = C.derive_seed(self.seed if seed is None else seed, "netem", direction)
            # the WAN ports are in the guest's root namespace: the tool's own main, in this process
            argv = C.netem_seed(dev, path, loss, seeds[f"netem_{direction}"], sys.executable, rate, burst,
                                traced=traced)
            self.ex.in_process(argv, lambda a=argv: netem_seed.main(a[3:]))
        if self.backhaul_devs is not None and second is not None:
            seeds.update(self._backhaul_netem(second, loss_on, self.seed if seed is None else seed))
        if seed is None:
            self.seeds.update(seeds)
        return seeds

    def _backhaul_netem(self, path: PathSpec, loss_on: bool, seed: int) -> dict[str, int]:
        """netem on the second link's two ports (pop's backhaul, the CDN
        set-up's PoP leg), seeded as the WAN's are."""
        seeds = {}
        for dev, direction, loss, rate, burst in (
                (self.backhaul_devs[0], "up", path.loss_up, path.rate_up, path.burst_up_pkts),
                (self.backhaul_devs[1], "down", path.loss_down_pct, path.rate_mbit, path.burst_down_pkts)):
            loss = loss if loss_on else 0.0
            self.ex.run(C.netem(dev, path, loss, rate, burst))
            key = f"netem_backhaul_{direction}"
            seeds[key] = C.derive_seed(seed, "netem", f"backhaul-{direction}")
            argv = C.netem_seed(dev, path, loss, seeds[key], sys.executable, rate, burst)
            self.ex.in_process(argv, lambda a=argv: netem_seed.main(a[3:]))
        return seeds

    def _trace_link(self, dev: str, path: PathSpec, traced: str | None) -> None:
        """A traced direction's link as netem's child, at the trace's mean
        rate until a replay runs (docs/traces.md); taken away again for a
        path without a trace in that direction."""
        if traced:
            trace = path.trace(traced)
            for argv in C.trace_link(dev, trace.mean_frame_rate_Bps(), path.trace_queue(traced),
                                     new=dev not in self.traced_devs):
                self.ex.run(argv)
            self.traced_devs.add(dev)
        elif dev in self.traced_devs:
            self.ex.run(C.trace_link_remove(dev))
            self.traced_devs.discard(dev)

    def replay(self, path: PathSpec, t0_s: float, sample_ms: int | None = None,
               offset_ms: int = 0) -> AbstractContextManager:
        """The path's traces replayed on their links from t0_s (monotonic
        clock, absolute), from their instant offset_ms, while the context
        lasts (guest/replay.py); nothing for a path without a trace."""
        links = [ReplayLink(dev, path.trace(d)) for dev, d in ((self.down_dev, "down"), (self.up_dev, "up"))
                 if path.trace(d) is not None]
        return TraceReplay(self.ex, links, t0_s, sample_ms, offset_ms) if links else nullcontext(None)

    # --- measurements ---------------------------------------------------

    def ping(self, count: int, interval_s: float, src=None, dst=None) -> dict:
        src, dst = src or self.client, dst or self.server
        out = self.ex.run(C.ping(dst.IP(), count, interval_s), host=src, check=False,
                          timeout=count * interval_s + TOOL_GRACE_S)
        r = parse_ping(out)
        return {"transmitted": r.transmitted, "received": r.received, "rtts_ms": list(r.rtts_ms),
                "min_ms": r.min_ms, "avg_ms": r.avg_ms, "max_ms": r.max_ms, "raw": out}

    @contextmanager
    def _tool(self, host, module: str, *args: str) -> Iterator[subprocess.Popen]:
        """One of our tools running in a Mininet host; killed if the caller
        fails before it has finished."""
        proc = self.ex.start(C.tool(sys.executable, module, *args), host)
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()

    def bulk(self, seconds: float, port: int = 5001, sample_s: float = 0.1,
             ss_at_s: float | None = None, nbytes: int | None = None, sender=None, receiver=None,
             counter_dev: str | None = None) -> dict:
        """Server-to-client bulk transfer (or sender-to-receiver); samples the
        downlink bottleneck's byte counter (the frames that left the queue;
        or counter_dev's) every `sample_s`."""
        size = ["--bytes", str(nbytes)] if nbytes is not None else []
        sender, receiver = sender or self.server, receiver or self.client
        counter = Path(f"/sys/class/net/{counter_dev or self.down_dev}/statistics/tx_bytes")
        samples: list[tuple[float, int]] = []
        stop = threading.Event()

        def sample() -> None:
            t0 = time.monotonic()
            while not stop.is_set():
                samples.append((round(time.monotonic() - t0, 6), int(counter.read_text(encoding="utf-8"))))
                stop.wait(sample_s)

        ss_text = None
        with ExitStack() as stack:
            srv = stack.enter_context(self._tool(sender, "bulk", "serve", "--port", str(port),
                                                 "--seconds", str(seconds), *size))
            if srv.stdout.readline().strip() != "listening":
                raise RuntimeError(f"bulk server did not start: {srv.stderr.read()}")
            th = threading.Thread(target=sample, daemon=True)
            cli = stack.enter_context(self._tool(receiver, "bulk", "fetch", "--host", sender.IP(),
                                                 "--port", str(port), *size))
            th.start()
            stack.callback(th.join)
            stack.callback(stop.set)
            if ss_at_s is not None:
                time.sleep(ss_at_s)
                ss_text = self.ex.run(C.ss_tcp_info(port), host=sender)
            cout, cerr = cli.communicate(timeout=seconds + TOOL_GRACE_S)
            sout, serr = srv.communicate(timeout=SERVER_EXIT_S)
        if cli.returncode != 0 or srv.returncode != 0:
            raise RuntimeError(f"bulk transfer failed: client {cerr.strip()} server {serr.strip()}")
        result = {"client": json.loads(cout.strip().splitlines()[-1]),
                  "server": json.loads(sout.strip().splitlines()[-1]),
                  "samples": samples}
        if ss_text is not None:
            result["ss"] = [s.__dict__ for s in parse_ss_ti(ss_text)]
            result["ss_raw"] = ss_text
        return result

    def udp_loss(self, sender, receiver, count: int, interval_ms: float, port: int = 5002) -> dict:
        with ExitStack() as stack:
            rcv = stack.enter_context(self._tool(receiver, "udpprobe", "recv", "--port", str(port),
                                                 "--idle", "3", "--count", str(count)))
            if rcv.stdout.readline().strip() != "listening":
                raise RuntimeError(f"udp receiver did not start: {rcv.stderr.read()}")
            snd = stack.enter_context(self._tool(sender, "udpprobe", "send", "--host", receiver.IP(),
                                                 "--port", str(port), "--count", str(count),
                                                 "--interval-ms", str(interval_ms)))
            sout, serr = snd.communicate(timeout=count * interval_ms / 1e3 + TOOL_GRACE_S)
            rout, rerr = rcv.communicate(timeout=TOOL_GRACE_S)
        if snd.returncode != 0 or rcv.returncode != 0:
            raise RuntimeError(f"udp probe failed: {serr.strip()} {rerr.strip()}")
        r = json.loads(rout.strip().splitlines()[-1])
        return {"sent": json.loads(sout.strip().splitlines()[-1])["sent"],
                "received": r["received"], "lost_seqs": r.get("lost_seqs", []), "reordered": r.get("reordered")}

    def qdisc_stats(self) -> dict:
        return {dev: self.ex.run(C.qdisc_show(dev)) for dev in (self.up_dev, self.down_dev)}
