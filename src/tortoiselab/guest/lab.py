"""The lab itself: what runs as root next to the emulated network, i.e. inside
the UML guest or, on the native backend, on the host.

One path: client -- s1 -- WAN -- s2 -- server. The emulation sits on the
WAN link only (DESIGN.md §5): netem on s1's WAN port shapes client-to-server
traffic, netem on s2's WAN port shapes server-to-client traffic.
"""

from __future__ import annotations

import ctypes
import functools
import json
import math
import os
import random
import subprocess
import threading
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from tortoiselab.guest import commands as C
from tortoiselab.guest.executor import Executor
from tortoiselab.analysis.parsers import parse_ping, parse_ss_ti
from tortoiselab.spec.pathspec import PathSpec
from tortoiselab.spec.topology import ONE_PATH, Graph

OVS_RUN = Path("/run/openvswitch")
# ovs-vswitchd sizes its handler threads from a CPU count that it caches only
# once the monotonic clock has passed 10 s; started earlier (as on the virtual
# clock, where boot takes no time) it gets 0 handlers and passes no traffic
# (DESIGN.md §2). Waiting costs nothing on the virtual clock.
OVS_MIN_UPTIME_S = 10.5


def available_algorithms() -> list[str]:
    return Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()


def kernel_release() -> str:
    return os.uname().release


def uptime_s() -> float:
    return float(Path("/proc/uptime").read_text().split()[0])


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def sleep_until_monotonic(t_s: float) -> None:
    """Sleep until CLOCK_MONOTONIC reads t_s (an absolute deadline,
    clock_nanosleep TIMER_ABSTIME); at once if it has passed. On the virtual
    clock every later event then happens at the same instant in every run,
    whatever the boot cost: boot took a few microseconds more or less from
    run to run (docs/determinism.md), and a relative sleep carried that on."""
    ns = int(round(t_s * 1e9))
    ts = _Timespec(ns // 10**9, ns % 10**9)
    while True:  # CLOCK_MONOTONIC = 1, TIMER_ABSTIME = 1; restart after a signal
        rc = _libc().clock_nanosleep(1, 1, ctypes.byref(ts), None)
        if rc != 4:  # EINTR
            return


@dataclass
class LabContext:
    """What a task needs: the executor, where to write, and how the lab runs."""

    ex: Executor
    work: Path
    private_ovs: bool  # start our own ovsdb/vswitchd (uml) or use the host's (native)
    switch: str = "ovs"
    seed: int = 1  # the run's seed; every random stream is derived from it


def align_to_grid(step_s: float = 0.5) -> None:
    """Sleep until the next multiple of step_s (at least step_s/2 away) of
    the monotonic clock: two runs that drifted apart by microseconds meet
    again at the same instant (docs/determinism.md)."""
    now = time.monotonic()
    sleep_until_monotonic(math.ceil((now + step_s / 2) / step_s) * step_s)


def seeded_entropy_argv(argv: list[str], entropy_file: Path) -> list[str]:
    """argv run in a mount namespace of its own in which /dev/urandom is
    entropy_file: Open vSwitch seeds its random draws (hash bases, timer
    jitter) from /dev/urandom, so with the run's bytes it makes the same
    choices in every run (docs/determinism.md). Guest only."""
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            f'mount --bind {entropy_file} /dev/urandom && exec "$@"', "ovs", *argv]


@contextmanager
def private_ovs(ex: Executor, seed: int | None = None) -> Iterator[None]:
    """ovsdb-server + ovs-vswitchd with their files under /run (a tmpfs in
    the guest); stopped by the pids they recorded. With a seed, both read
    bytes derived from it as /dev/urandom."""
    OVS_RUN.mkdir(parents=True, exist_ok=True)
    db = OVS_RUN / "conf.db"

    def daemon(argv: list[str]) -> list[str]:
        if seed is None:
            return argv
        entropy = OVS_RUN / "entropy"
        if not entropy.exists():
            entropy.write_bytes(random.Random(C.derive_seed(seed, "ovs", "entropy")).randbytes(4096))
        return seeded_entropy_argv(argv, entropy)

    ex.run(["ovsdb-tool", "create", str(db), "/usr/share/openvswitch/vswitch.ovsschema"])
    ex.run(daemon(["ovsdb-server", str(db), f"--remote=punix:{OVS_RUN}/db.sock",
                   f"--pidfile={OVS_RUN}/ovsdb-server.pid", "--detach", "--no-chdir",
                   f"--log-file={OVS_RUN}/ovsdb-server.log"]))
    ex.run(["ovs-vsctl", "--no-wait", "init"])
    # vswitchd counts its handler threads right only after 10 s of uptime
    # (docs/determinism.md); the absolute deadline also aligns every run
    sleep_until_monotonic(OVS_MIN_UPTIME_S)
    ex.run(daemon(["ovs-vswitchd", f"unix:{OVS_RUN}/db.sock", f"--pidfile={OVS_RUN}/ovs-vswitchd.pid",
                   "--detach", "--no-chdir", f"--log-file={OVS_RUN}/ovs-vswitchd.log"]))
    align_to_grid()  # vswitchd's start-up work is over; every run goes on from the same instant
    try:
        yield
    finally:
        for name in ("ovs-vswitchd", "ovsdb-server"):
            pidfile = OVS_RUN / f"{name}.pid"
            if pidfile.exists():
                try:
                    os.kill(int(pidfile.read_text().strip()), 15)
                except (ProcessLookupError, ValueError):
                    pass


@contextmanager
def mininet_path(ctx: LabContext, graph: Graph = ONE_PATH) -> Iterator["PathLab"]:
    """Build the graph in Mininet and stop it again, also on error."""
    from mininet.log import setLogLevel
    from mininet.net import Mininet
    from mininet.node import OVSSwitch
    from mininet.nodelib import LinuxBridge

    setLogLevel("warning")
    switch_cls = OVSSwitch if ctx.switch == "ovs" else LinuxBridge
    if ctx.private_ovs:
        # uml: the guest's own kernel. No IPv6 anywhere, from the first
        # namespace on: Mininet makes the hosts' namespaces and links as soon
        # as they are added, and a new namespace otherwise starts with IPv6
        # on, whose DAD, router solicitations and MLD reports wait random
        # delays; those woke the kernel's workers at random moments and moved
        # the run by microseconds (docs/determinism.md). devconf_inherit_init_net=1:
        # new namespaces copy the root's all/default settings. Switch ports are
        # born without IPv6 too (turning it off port by port woke vswitchd).
        ctx.ex.run(C.sysctl_set("net.core.devconf_inherit_init_net", 1))
        for key in ("all", "default"):
            ctx.ex.run(C.sysctl_set(f"net.ipv6.conf.{key}.disable_ipv6", 1))
    net = Mininet(topo=None, build=False, controller=None, autoSetMacs=True,
                  autoStaticArp=True, waitConnected=False)
    nodes = {}
    for h in graph.hosts:
        nodes[h.name] = net.addHost(h.name, ip=h.ip)
    for s in graph.switches:
        opts = {"failMode": "standalone"} if ctx.switch == "ovs" else {}
        nodes[s] = net.addSwitch(s, cls=switch_cls, **opts)
    links = {}
    for i, (a, b) in enumerate(graph.links, 1):
        # switch ports get fixed MACs (hosts get theirs from autoSetMacs): the
        # kernel's random ones decided when OVS re-picked a bridge's own MAC
        # as ports joined, work that took more time in some runs (docs/determinism.md)
        macs = {f"addr{k}": f"02:00:00:00:{i:02x}:{k:02x}" for k, n in ((1, a), (2, b)) if n in graph.switches}
        links[(a, b)] = net.addLink(nodes[a], nodes[b], **macs)
    try:
        net.build()
        net.start()
        yield PathLab(ctx, net, nodes, links, graph.wan)
    finally:
        net.stop()


class PathLab:
    """A running one-path lab: configure it, then measure over it."""

    def __init__(self, ctx: LabContext, net, nodes: dict, links: dict, wan_key: tuple[str, str]) -> None:
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
        ex.run(C.sysctl_set("net.ipv4.tcp_allowed_congestion_control", " ".join(available_algorithms())))
        for node, dev in self.all_intfs():
            host = node if node in self.net.hosts else None
            ex.run(C.offloads_off(dev), host=host)
        for host, cc in ((self.client, client_cc), (self.server, server_cc)):
            ex.run(C.sysctl_set("net.ipv4.tcp_no_metrics_save", 1), host=host)
            ex.run(C.sysctl_set("net.ipv4.tcp_congestion_control", cc), host=host)
        if initcwnd is not None or initrwnd is not None or ssthresh is not None:
            for host in (self.client, self.server):
                ex.run(C.route_window("10.0.0.0/8", host.defaultIntf().name, initcwnd, initrwnd,
                                      ssthresh if host is self.server else None), host=host)
        self.set_netem(path, loss_on)

    def quiet_ipv6(self) -> None:
        """IPv6 off on every lab interface. The lab's traffic is IPv4; IPv6
        router solicitations, DAD and MLD reports go out on random timers for
        seconds after a link comes up, and each one that crosses netem takes
        a draw from its PRNG, so two runs with one seed would lose different
        packets (seen here: the uplink's losses shifted by one)."""
        for host in self.net.hosts:
            for key in ("all", "default"):
                self.ex.run(C.sysctl_set(f"net.ipv6.conf.{key}.disable_ipv6", 1), host=host)
        for node, dev in self.all_intfs():
            if node not in self.net.hosts:
                self.ex.run(C.sysctl_set(f"net.ipv6.conf.{dev}.disable_ipv6", 1))

    def set_netem(self, path: PathSpec, loss_on: bool = True) -> None:
        """netem on both WAN ports, each with its own seeded PRNG (derived from
        the run's seed), so that a rerun draws the same losses."""
        import sys

        for dev, direction, loss, rate in ((self.up_dev, "up", path.loss_up, path.rate_up),
                                           (self.down_dev, "down", path.loss_down_pct, path.rate_mbit)):
            loss = loss if loss_on else 0.0
            self.ex.run(C.netem(dev, path, loss, rate))
            seed = C.derive_seed(self.seed, "netem", direction)
            self.ex.run(C.netem_seed(dev, path, loss, seed, sys.executable, rate))
            self.seeds[f"netem_{direction}"] = seed

    # --- measurements ---------------------------------------------------

    def ping(self, count: int, interval_s: float) -> dict:
        out = self.ex.run(C.ping(self.server.IP(), count, interval_s), host=self.client, check=False,
                          timeout=count * interval_s + 60)
        r = parse_ping(out)
        return {"transmitted": r.transmitted, "received": r.received, "rtts_ms": list(r.rtts_ms),
                "min_ms": r.min_ms, "avg_ms": r.avg_ms, "max_ms": r.max_ms, "raw": out}

    def _tool(self, host, module: str, *args: str) -> subprocess.Popen:
        import sys
        return self.ex.start([sys.executable, "-m", f"tortoiselab.tools.{module}", *args], host)

    def bulk(self, seconds: float, port: int = 5001, sample_s: float = 0.1,
             ss_at_s: float | None = None, nbytes: int | None = None) -> dict:
        """Server-to-client bulk transfer; samples the downlink bottleneck's
        byte counter (the frames that left the queue) every `sample_s`."""
        size = ["--bytes", str(nbytes)] if nbytes is not None else []
        srv = self._tool(self.server, "bulk", "serve", "--port", str(port), "--seconds", str(seconds), *size)
        if srv.stdout.readline().strip() != "listening":
            raise RuntimeError(f"bulk server did not start: {srv.stderr.read()}")
        counter = Path(f"/sys/class/net/{self.down_dev}/statistics/tx_bytes")
        samples: list[tuple[float, int]] = []
        ss_text: list[str] = []
        stop = threading.Event()

        def sample() -> None:
            t0 = time.monotonic()
            while not stop.is_set():
                samples.append((round(time.monotonic() - t0, 6), int(counter.read_text())))
                stop.wait(sample_s)

        th = threading.Thread(target=sample, daemon=True)
        cli = self._tool(self.client, "bulk", "fetch", "--host", self.server.IP(), "--port", str(port), *size)
        th.start()
        if ss_at_s is not None:
            time.sleep(ss_at_s)
            ss_text.append(self.ex.run(C.ss_tcp_info(port), host=self.server))
        cout, cerr = cli.communicate(timeout=seconds + 120)
        sout, serr = srv.communicate(timeout=60)
        stop.set()
        th.join()
        if cli.returncode != 0 or srv.returncode != 0:
            raise RuntimeError(f"bulk transfer failed: client {cerr.strip()} server {serr.strip()}")
        result = {"client": json.loads(cout.strip().splitlines()[-1]),
                  "server": json.loads(sout.strip().splitlines()[-1]),
                  "samples": samples}
        if ss_text:
            socks = parse_ss_ti(ss_text[0])
            result["ss"] = [s.__dict__ for s in socks]
            result["ss_raw"] = ss_text[0]
        return result

    def udp_loss(self, sender, receiver, count: int, interval_ms: float, port: int = 5002) -> dict:
        rcv = self._tool(receiver, "udpprobe", "recv", "--port", str(port), "--idle", "3",
                         "--count", str(count))
        if rcv.stdout.readline().strip() != "listening":
            raise RuntimeError(f"udp receiver did not start: {rcv.stderr.read()}")
        snd = self._tool(sender, "udpprobe", "send", "--host", receiver.IP(), "--port", str(port),
                         "--count", str(count), "--interval-ms", str(interval_ms))
        sout, serr = snd.communicate(timeout=count * interval_ms / 1e3 + 120)
        rout, rerr = rcv.communicate(timeout=120)
        if snd.returncode != 0 or rcv.returncode != 0:
            raise RuntimeError(f"udp probe failed: {serr.strip()} {rerr.strip()}")
        r = json.loads(rout.strip().splitlines()[-1])
        return {"sent": json.loads(sout.strip().splitlines()[-1])["sent"],
                "received": r["received"], "lost_seqs": r.get("lost_seqs", [])}

    def qdisc_stats(self) -> dict:
        return {dev: self.ex.run(C.qdisc_show(dev)) for dev in (self.up_dev, self.down_dev)}


# --- tasks: what a request.json asks the lab to do ------------------------

def task_probe(ctx: LabContext, req: dict) -> dict:
    """Fidelity probe of one path: base RTT (ping), bottleneck rate (bulk
    TCP transfer with loss switched off, so the sender can fill the link),
    one-way loss each direction (paced UDP probes, loss on)."""
    path = PathSpec(**req["path"])
    cc = req.get("cc", "cubic")
    m = req.get("measure", {})
    with mininet_path(ctx) as lab:
        lab.configure(path, server_cc=cc, loss_on=False)
        out: dict = {"devices": {"uplink": lab.up_dev, "downlink": lab.down_dev}}
        # RTT: loss off so every ping answers; the delay line is the same
        out["ping"] = lab.ping(m.get("ping_count", 20), m.get("ping_interval_s", 0.2))
        out["bulk"] = lab.bulk(m.get("bulk_seconds", 10.0), ss_at_s=1.0)
        lab.set_netem(path, loss_on=True)
        n, gap = m.get("loss_probes", 4000), m.get("loss_interval_ms", 2.0)
        out["loss_down"] = lab.udp_loss(lab.server, lab.client, n, gap, port=5002)
        out["loss_up"] = lab.udp_loss(lab.client, lab.server, n, gap, port=5003)
        out["qdisc"] = lab.qdisc_stats()
        out["seeds"] = lab.seeds
    return out


def task_cc_check(ctx: LabContext, req: dict) -> dict:
    """Select each algorithm for the server host in turn and confirm from
    `ss -ti` on the server that a live connection uses it."""
    path = PathSpec(**req["path"])
    algos = req.get("algorithms") or available_algorithms()
    seen = {}
    with mininet_path(ctx) as lab:
        lab.configure(path, server_cc="cubic", loss_on=True)
        for i, cc in enumerate(algos):
            # DCTCP runs only on connections that negotiated ECN (RFC 8257 §3);
            # without it the kernel falls back to "dctcp-reno"
            ctx.ex.run(C.sysctl_set("net.ipv4.tcp_ecn", 1 if cc == "dctcp" else 2), host=lab.client)
            ctx.ex.run(C.sysctl_set("net.ipv4.tcp_congestion_control", cc), host=lab.server)
            r = lab.bulk(req.get("seconds", 1.5), port=6000 + i, ss_at_s=0.8)
            seen[cc] = {"sockopt": r["server"]["cc"],
                        "ss": [s["algorithm"] for s in r.get("ss", [])],
                        "bytes": r["client"]["bytes"]}
    return {"algorithms": seen}


def module_params_now(algorithm: str) -> dict[str, str]:
    d = Path(f"/sys/module/tcp_{algorithm}/parameters")
    return {p.name: p.read_text().strip() for p in sorted(d.iterdir())} if d.is_dir() else {}


def set_module_params(ex: Executor, algorithm: str, params: dict[str, str]) -> dict[str, str]:
    """Write our module's parameters through sysfs (new connections take
    them; live ones keep the snapshot they took at start) and read them back."""
    for k, v in params.items():
        f = Path(f"/sys/module/tcp_{algorithm}/parameters/{k}")
        t0 = time.monotonic()
        try:
            f.write_text(str(v))
            rc, err = 0, ""
        except OSError as exc:
            rc, err = exc.errno or 1, str(exc)
        ex.record("root", ["write", str(f), str(v)], rc, "", err, t0)
        if rc:
            raise RuntimeError(f"module parameter {algorithm}.{k}={v} refused by the module: {err}")
    return module_params_now(algorithm)


def load_modules(ex: Executor, modules_dir: str, params: dict[str, dict[str, str]]) -> dict:
    """insmod our congestion control modules (tcp_*.ko) with this run's
    parameters; return {algorithm: parameters as the module reports them}."""
    loaded = {}
    for ko in sorted(Path(modules_dir).glob("tcp_*.ko")):
        alg = ko.stem[len("tcp_"):]
        if alg not in available_algorithms():
            ex.run(C.insmod(str(ko), params.get(alg, {})))
        elif params.get(alg):
            set_module_params(ex, alg, params[alg])
        loaded[alg] = module_params_now(alg)
    return loaded


def requested_algorithms(req: dict) -> set[str]:
    """Every algorithm a request names: `cc` values anywhere in it and the
    keys of its module_params."""
    found: set[str] = set(req.get("module_params", {}))

    def walk(o: object) -> None:
        if isinstance(o, dict):
            for k, v in o.items():
                if k == "cc" and isinstance(v, str):
                    found.add(v)
                else:
                    walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(req)
    return found


@contextmanager
def host_modules(ex: Executor, needed: set[str], params: dict[str, dict[str, str]]) -> Iterator[dict]:
    """Our modules on the native backend, where the kernel is the host's and
    outlives the task: modprobe the ones this task needs that are not loaded
    (DKMS installs them in the VM), set this run's parameters, and on the way
    out put back the values found and unload only what this task loaded.
    Yields {algorithm: parameters as the module reports them}."""
    from tortoiselab.spec.ccparams import OUR_MODULES

    loaded_here, before, now = [], {}, {}
    try:
        for alg in sorted(a for a in needed if a in OUR_MODULES):
            if alg not in available_algorithms():
                ex.run(C.modprobe(f"tcp_{alg}"))
                loaded_here.append(alg)
            before[alg] = module_params_now(alg)
            now[alg] = set_module_params(ex, alg, params[alg]) if params.get(alg) else module_params_now(alg)
        yield now
    finally:
        for alg, old in before.items():
            if alg in loaded_here:
                continue
            changed = {k: v for k, v in old.items() if k in params.get(alg, {})}
            if changed:
                set_module_params(ex, alg, changed)
        for alg in loaded_here:
            ex.run(C.rmmod(f"tcp_{alg}"), check=False)


def task_loss_response(ctx: LabContext, req: dict) -> dict:
    """One bulk transfer per arm (algorithm + module parameters) over a
    loss-free path where exactly one data segment is dropped, by a
    deterministic filter, once the window has grown; the kernel's cwnd and
    ssthresh at every ACK come from the tcp:tcp_probe tracepoint."""
    from tortoiselab.guest import trace

    path = PathSpec(**req["path"])
    nth = int(req["drop_nth"])
    mss = 1448
    out: dict = {"arms": []}
    with mininet_path(ctx) as lab:
        lab.configure(path, server_cc="cubic", loss_on=False)
        dev = lab.server_port
        for i, arm in enumerate(req["arms"]):
            cc = arm["cc"]
            params = set_module_params(ctx.ex, cc, arm["params"]) if arm.get("params") else module_params_now(cc)
            ctx.ex.run(C.sysctl_set("net.ipv4.tcp_congestion_control", cc), host=lab.server)
            ctx.ex.run(["tc", "qdisc", "del", "dev", dev, "ingress"], check=False)  # a fresh counter
            for argv in C.drop_nth_data_segment(dev, lab.server.IP(), nth):
                ctx.ex.run(argv)
            port = 7000 + i
            with trace.tcp_probe(port) as tr:
                r = lab.bulk(0, port=port, nbytes=int(arm["segments"]) * mss, sample_s=1.0)
            stats = ctx.ex.run(["tc", "-s", "filter", "show", "dev", dev, "ingress"])
            smp = tr.samples()
            out["arms"].append({
                "label": arm.get("label", cc), "cc": cc, "params": params,
                "server_cc": r["server"]["cc"], "bytes": r["client"]["bytes"], "seconds": r["client"]["seconds"],
                "filter_stats": stats,
                "samples": [[s.t, s.snd_cwnd, s.ssthresh, s.srtt_us, s.snd_una, s.snd_nxt] for s in smp],
            })
    return out


def task_module_check(ctx: LabContext, req: dict) -> dict:
    """Our modules: listed once loaded, gone after rmmod, back after insmod;
    bad parameter values refused by the module itself (insmod and sysfs),
    with the module's own message in the kernel log."""
    mods = sorted(Path(req["modules_dir"]).glob("tcp_*.ko"))
    out: dict = {}
    for ko in mods:
        alg, mod = ko.stem[len("tcp_"):], ko.stem
        r: dict = {"listed_at_start": alg in available_algorithms()}
        r["rmmod_rc"] = _rc(ctx.ex, C.rmmod(mod))
        r["listed_after_rmmod"] = alg in available_algorithms()
        r["insmod_rc"] = _rc(ctx.ex, C.insmod(str(ko), {}))
        r["listed_after_insmod"] = alg in available_algorithms()
        r["defaults"] = module_params_now(alg)
        bad = req.get("bad_params", {}).get(alg, {})
        r["bad"] = {}
        for k, v in bad.items():
            _rc(ctx.ex, C.rmmod(mod))
            rc_ins = _rc(ctx.ex, C.insmod(str(ko), {k: v}))
            loaded = alg in available_algorithms()
            if not loaded:
                _rc(ctx.ex, C.insmod(str(ko), {}))
            before = module_params_now(alg).get(k)
            try:
                Path(f"/sys/module/{mod}/parameters/{k}").write_text(v)
                sysfs = "accepted"
            except OSError as exc:
                sysfs = f"refused: {exc.strerror}"
            r["bad"][f"{k}={v}"] = {"insmod_rc": rc_ins, "loaded_with_it": loaded, "sysfs": sysfs,
                                    "value_kept": module_params_now(alg).get(k) == before}
        out[alg] = r
    log = subprocess.run(["dmesg"], capture_output=True, text=True).stdout
    return {"modules": out, "kernel_log": [ln for ln in log.splitlines()
                                            if "tcp_" in ln or "reno_beta" in ln or "cubic_plus" in ln]}


def _rc(ex: Executor, argv: list[str]) -> int:
    ex.run(argv, check=False)
    return ex.records[-1]["rc"]


TASKS = {"probe": task_probe, "cc_check": task_cc_check, "loss_response": task_loss_response,
         "module_check": task_module_check}


def run_task(ctx: LabContext, req: dict) -> dict:
    if req["task"] == "pageload":
        from tortoiselab.guest.weblab import task_pageload as task
    else:
        task = TASKS[req["task"]]
    result = {"kernel_release": kernel_release(), "uptime_start_s": uptime_s()}
    if ctx.private_ovs:  # uml: a draw from the guest's CRNG; the same in every boot of a run when seeded
        result["boot_id"] = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    with ExitStack() as stack:
        if req.get("modules_dir"):  # uml: the guest's own kernel, ours to change
            result["modules"] = load_modules(ctx.ex, req["modules_dir"], req.get("module_params", {}))
        elif req.get("backend") == "native":  # the host's kernel: restored afterwards
            result["modules"] = stack.enter_context(
                host_modules(ctx.ex, requested_algorithms(req), req.get("module_params", {})))
        result.update({"available_cc": available_algorithms(), "switch": ctx.switch})
        if ctx.switch == "ovs" and ctx.private_ovs:
            stack.enter_context(private_ovs(ctx.ex, ctx.seed))
        elif ctx.private_ovs and req.get("clock") == "virtual":  # uml, Linux bridge: the same alignment point
            sleep_until_monotonic(OVS_MIN_UPTIME_S)
        result["task"] = task(ctx, req)
    result["uptime_end_s"] = uptime_s()
    return result
