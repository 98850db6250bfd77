"""Pure functions that return the argv of every command the lab runs.

Nothing here runs anything: tests compare these lists exactly, and one
executor (tortoiselab.guest.executor) runs and logs them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from tortoiselab.spec.lossmodel import gilbert
from tortoiselab.spec.pathspec import PathSpec


def _num(x: float) -> str:
    """Format a number for tc without float noise: 100.0 -> '100', 0.5 -> '0.5'."""
    s = f"{x:.6f}".rstrip("0").rstrip(".")
    return s if s else "0"


def netem(dev: str, path: PathSpec, loss_pct: float, rate_mbit: float | None = None,
          burst_pkts: float | None = None, traced: str | None = None) -> list[str]:
    """The WAN hop in one direction: netem as the root qdisc of `dev` with
    half the RTT as delay, the direction's loss (random, or with a mean
    burst length the Simple Gilbert model: spec/lossmodel.py), the
    bottleneck rate and a limit that holds the delay line plus the queue.

    netem's rate also keeps the packets in order under jitter: each packet
    leaves no earlier than the one before it (netem_enqueue in
    sch_netem.c: time_to_send = max(now + delay, last's) + its
    transmission time), so jitter delays packets without reordering them.
    A direction that replays a trace (traced: "down" or "up") has no netem
    rate: its child is the link (trace_link)."""
    rate = path.rate_mbit if rate_mbit is None else rate_mbit
    limit = path.trace_netem_limit_pkts(traced) if traced else path.netem_limit_pkts(rate)
    argv = ["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "netem",
            "limit", str(limit),
            "delay", f"{_num(path.one_way_ms)}ms"]
    if path.jitter_ms > 0:
        argv += [f"{_num(path.jitter_ms)}ms", "distribution", "normal"]
    if loss_pct > 0 and burst_pkts is None:
        argv += ["loss", "random", f"{_num(loss_pct)}%"]
    elif loss_pct > 0:
        argv += gilbert(loss_pct, burst_pkts).tc_args()
    if not traced:
        argv += ["rate", f"{_num(rate)}mbit"]
    return argv


def trace_link(dev: str, rate_Bps: int, queue_pkts: int, new: bool = True) -> list[list[str]]:
    """A traced link behind netem (docs/traces.md): HTB 10: as netem's
    child, its one class 10:1 (every packet; rate = ceil, burst one frame)
    whose rate guest/replay.py changes at each segment of the trace, and a
    pfifo of queue_pkts as the link's buffer: packets beyond it are dropped
    there, after the delay line. An HTB has no change operation: on a link
    that has one (new=False) only its class and buffer are set again."""
    rate = f"{rate_Bps * 8}bit"
    htb = [["tc", "qdisc", "replace", "dev", dev, "parent", "1:1", "handle", "10:", "htb", "default", "1"]]
    return htb * new + [
        ["tc", "class", "replace", "dev", dev, "parent", "10:", "classid", "10:1", "htb", "rate", rate,
         "ceil", rate, "burst", "1514b", "cburst", "1514b", "quantum", "1514"],
        ["tc", "qdisc", "replace", "dev", dev, "parent", "10:1", "handle", "11:", "pfifo", "limit", str(queue_pkts)],
    ]


def trace_link_remove(dev: str) -> list[str]:
    """netem without a child again (its own tfifo), for an untraced load."""
    return ["tc", "qdisc", "del", "dev", dev, "parent", "1:1", "handle", "10:"]


def qdisc_show(dev: str) -> list[str]:
    return ["tc", "-s", "qdisc", "show", "dev", dev]


def offloads_off(dev: str) -> list[str]:
    """TSO/GSO/GRO off: netem must see wire-size packets, not 64 KB ones."""
    return ["ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off"]


def sysctl_set(key: str, value: str | int) -> list[str]:
    return ["sysctl", "-q", "-w", f"{key}={value}"]


def route_window(prefix: str, dev: str, initcwnd: int | None, initrwnd: int | None,
                 ssthresh: int | None = None) -> list[str]:
    """Per-host initial windows live on the route (napkin article: `ip route
    change ... initcwnd N initrwnd N`); so does an initial ssthresh."""
    argv = ["ip", "route", "replace", prefix, "dev", dev]
    if ssthresh is not None:
        argv += ["ssthresh", str(ssthresh)]
    if initcwnd is not None:
        argv += ["initcwnd", str(initcwnd)]
    if initrwnd is not None:
        argv += ["initrwnd", str(initrwnd)]
    return argv


def ping(dst: str, count: int, interval_s: float, timeout_s: float = 3.0) -> list[str]:
    return ["ping", "-n", "-c", str(count), "-i", _num(interval_s), "-W", _num(timeout_s), dst]


def ss_tcp_info(port: int) -> list[str]:
    """TCP sockets with internal info (algorithm, cwnd) whose source port is `port`."""
    return ["ss", "-t", "-i", "-n", "state", "established", f"( sport = :{port} )"]


def netem_seed(dev: str, path: PathSpec, loss_pct: float, seed: int, python: str,
               rate_mbit: float | None = None, burst_pkts: float | None = None,
               traced: str | None = None) -> list[str]:
    """Re-issue the netem parameters of `netem()` with the PRNG seed set, over
    rtnetlink (tortoiselab.tools.netem_seed): the same seed, the same losses.
    A Gilbert model is sent again too: a netem change without it would
    fall back to random loss (netem_change in sch_netem.c)."""
    rate = path.rate_mbit if rate_mbit is None else rate_mbit
    limit = path.trace_netem_limit_pkts(traced) if traced else path.netem_limit_pkts(rate)
    argv = [python, "-m", "tortoiselab.tools.netem_seed", "--dev", dev,
            "--limit", str(limit),
            "--latency-ns", str(round(path.one_way_ms * 1e6)),
            "--seed", str(seed)]
    if path.jitter_ms > 0:
        argv += ["--jitter-ns", str(round(path.jitter_ms * 1e6))]
    if loss_pct > 0 and burst_pkts is None:
        argv += ["--loss-pct", _num(loss_pct)]
    elif loss_pct > 0:
        argv += ["--loss-ge", *(_num(v) for v in gilbert(loss_pct, burst_pkts).percents())]
    if not traced:
        argv += ["--rate-bps", str(round(rate * 1e6))]
    return argv


def derive_seed(seed: int, *labels: str) -> int:
    """A 64-bit seed for one random stream of a run (e.g. the downlink's
    netem), derived from the run's seed and the stream's name."""
    h = hashlib.sha256(f"{seed}:{':'.join(labels)}".encode()).digest()
    return int.from_bytes(h[:8], "big")


def drop_nth_data_segment(dev: str, src_ip: str, n: int, frame_ip_len: int = 1500) -> list[list[str]]:
    """A deterministic, single loss: on ingress of switch port `dev`, the n-th
    full-size IPv4 TCP segment from `src_ip` (IP total length frame_ip_len)
    is dropped, and no other. A gact action with a deterministic counter
    passes every segment but hands each n-th one on (pipe) to a policer whose
    bucket holds one packet and refills over ~64 s: it drops the first one it
    sees and passes the later ones, retransmissions included. The switch
    port, not the sender's interface, so the sender sees a loss in the
    network (docs/architecture.md). drop_filter_remove takes it away again."""
    if not 1 <= n <= 10000:
        raise ValueError("n: tc's gact counts 1 to 10000")
    return [
        ["tc", "qdisc", "replace", "dev", dev, "ingress"],
        ["tc", "filter", "add", "dev", dev, "parent", "ffff:", "protocol", "ip", "prio", "1", "u32",
         "match", "ip", "src", f"{src_ip}/32", "match", "ip", "protocol", "6", "0xff",
         "match", "u16", str(frame_ip_len), "0xffff", "at", "2",
         "action", "gact", "ok", "random", "determ", "pipe", str(n),
         "action", "police", "rate", "200bit", "burst", "1600", "mtu", "2000", "conform-exceed", "ok/drop"],
    ]


def insmod(path: str, params: dict[str, str]) -> list[str]:
    return ["insmod", path, *[f"{k}={v}" for k, v in sorted(params.items())]]


def rmmod(module: str) -> list[str]:
    return ["rmmod", module]


def modprobe(module: str) -> list[str]:
    """Load an installed module (e.g. one DKMS built for the VM's kernel)."""
    return ["modprobe", module]


def drop_filter_remove(dev: str) -> list[str]:
    """Remove drop_nth_data_segment's ingress qdisc and its filter (and with
    them the filter's counter); fails harmlessly where there is none."""
    return ["tc", "qdisc", "del", "dev", dev, "ingress"]


def drop_filter_stats(dev: str) -> list[str]:
    """drop_nth_data_segment's filter with its counters (parsers.parse_tc_filter_drops)."""
    return ["tc", "-s", "filter", "show", "dev", dev, "ingress"]


# --- addresses and routes ----------------------------------------------------

def addr_add(dev: str, ip: str, prefix_len: int = 8) -> list[str]:
    return ["ip", "addr", "add", f"{ip}/{prefix_len}", "dev", dev]


def neigh_permanent(ip: str, mac: str, dev: str) -> list[str]:
    """A static ARP entry: the client reaches a second address of the server
    without asking (Mininet's autoStaticArp knows only the first)."""
    return ["ip", "neigh", "replace", ip, "lladdr", mac, "dev", dev, "nud", "permanent"]


def route_show() -> list[str]:
    return ["ip", "route", "show"]


# --- the guest's own set-up ---------------------------------------------------

def bind_mount(src: str | Path, dst: str | Path) -> list[str]:
    return ["mount", "--bind", str(src), str(dst)]


def kernel_log() -> list[str]:
    return ["dmesg"]


# mount the file "$1" over /dev/urandom, then run the rest of the arguments:
# the path is an argument of the script, never part of its text
_ENTROPY_SCRIPT = 'mount --bind "$1" /dev/urandom && shift && exec "$@"'


def seeded_entropy(argv: list[str], entropy_file: str | Path) -> list[str]:
    """argv run in a mount namespace of its own in which /dev/urandom is
    entropy_file: Open vSwitch seeds its random draws (hash bases, timer
    jitter) from /dev/urandom, so with the run's bytes it makes the same
    choices in every run (docs/determinism.md). Guest only."""
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", _ENTROPY_SCRIPT, "ovs",
            str(entropy_file), *argv]


# --- Open vSwitch (the lab's own, uml) ---------------------------------------

OVS_SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"


def ovsdb_create(db: str | Path) -> list[str]:
    return ["ovsdb-tool", "create", str(db), OVS_SCHEMA]


def ovsdb_server(run_dir: str | Path, db: str | Path) -> list[str]:
    return ["ovsdb-server", str(db), f"--remote=punix:{run_dir}/db.sock", f"--pidfile={run_dir}/ovsdb-server.pid",
            "--detach", "--no-chdir", f"--log-file={run_dir}/ovsdb-server.log"]


def ovs_init() -> list[str]:
    return ["ovs-vsctl", "--no-wait", "init"]


def ovs_vswitchd(run_dir: str | Path) -> list[str]:
    return ["ovs-vswitchd", f"unix:{run_dir}/db.sock", f"--pidfile={run_dir}/ovs-vswitchd.pid",
            "--detach", "--no-chdir", f"--log-file={run_dir}/ovs-vswitchd.log"]


# --- our tools, the web tier and the loaders ---------------------------------

def switch_forget_macs(switch: str, name: str) -> list[str]:
    """Empty one lab switch's MAC learning table (OVS: fdb/flush of that
    bridge only, never the host's others; Linux bridge: fdb_flush), so that
    a load meets the switches as a fresh lab does: its first frame to an
    unknown MAC is flooded, in every run alike."""
    if switch == "ovs":
        return ["ovs-appctl", "fdb/flush", name]
    return ["ip", "link", "set", "dev", name, "type", "bridge", "fdb_flush"]


def tool(python: str, module: str, *args: str) -> list[str]:
    """One of the lab's tools (tortoiselab.tools.<module>: bulk, udpprobe, ...)."""
    return [python, "-m", f"tortoiselab.tools.{module}", *args]


def tcpdump(dev: str, out: str | Path, user: str = "root", snaplen: int = 128, buffer_kb: int = 8192) -> list[str]:
    """A capture of TCP and DNS: short snaplen, large buffer, no name
    lookups, packet-buffered so that a stop loses nothing. `-Z user`: the
    user tcpdump switches to and hands the capture file to; the owner of the
    folder it writes into (guest/webtier.py), because through hostfs the
    host refuses a chown to anyone else when the lab runs as an unprivileged
    user ("Couldn't change ownership of savefile")."""
    return ["tcpdump", "-i", dev, "-n", "-s", str(snaplen), "-B", str(buffer_kb), "--immediate-mode",
            "-U", "-Z", user, "-w", str(out), "tcp or udp port 53"]


def dnsmasq(listen: str, names: dict[str, str], pidfile: str | Path, logfile: str | Path) -> list[str]:
    """An authoritative-only DNS server for the lab's names: no upstream, no
    /etc/hosts, no cache surprises (every answer comes from --address).
    --local per name: a query of another type (AAAA, HTTPS) for a lab name
    gets an empty answer (NOERROR), as from a real authoritative server,
    not REFUSED; Chromium asks for the HTTPS record beside the address
    (RFC 9460) and, refused, asked again and waited about 20 ms more on a
    100 ms path (docs/browser.md). Address answers stay as they were."""
    argv = ["dnsmasq", "--keep-in-foreground", "--no-resolv", "--no-hosts", "--no-poll",
            f"--listen-address={listen}", "--bind-interfaces", "--port=53", "--cache-size=0",
            "--user=root", f"--pid-file={pidfile}", f"--log-facility={logfile}", "--log-queries"]
    argv += [f"--address=/{name}/{ip}" for name, ip in sorted(names.items())]
    argv += [f"--local=/{name}/" for name in sorted(names)]
    return argv


def page_loader(python: str, url: str, *, ca: str, protocol: str, cache_hit_ratio: float, seed: int,
                timeout_s: float, har: str | Path, summary: str | Path, dns_server: str | None = None,
                resolve: dict[str, str] | None = None, coalescing: bool = True, tls: str | None = None,
                repeat_after_s: float | None = None, cache_unit: str = "asset",
                schedule: str | None = None, origin_protocols: dict[str, str] | None = None) -> list[str]:
    """Our loader (tortoiselab.client): names through the lab's DNS server
    (dns_server) or fixed (resolve: name -> address); --cache-unit only when
    it is not the loader's default (asset), so earlier runs' argv stay;
    --schedule when the run has one (a page: chromium or eager; a load of
    one object by url has none, and its argv stays); --origin-protocol for
    each origin whose protocol is not `protocol` (an imported site's that
    mixes h2 and HTTP/1.1)."""
    argv = [python, "-m", "tortoiselab.client", url, "--ca", ca, "--protocol", protocol,
            "--cache-hit-ratio", str(cache_hit_ratio), "--seed", str(seed), "--timeout", str(timeout_s),
            "--har", str(har), "--summary", str(summary)]
    if dns_server is not None:
        argv += ["--dns-server", dns_server]
    else:
        argv += [x for n, ip in sorted((resolve or {}).items()) for x in ("--resolve", f"{n}:{ip}")]
    if not coalescing:
        argv.append("--no-coalescing")
    if cache_unit != "asset":
        argv += ["--cache-unit", cache_unit]
    if tls:
        argv += ["--tls", tls]
    if repeat_after_s:
        argv += ["--repeat-after", str(repeat_after_s)]
    if schedule is not None:
        argv += ["--schedule", schedule]
    argv += [x for o, p in sorted((origin_protocols or {}).items()) if p != protocol
             for x in ("--origin-protocol", f"{o}={p}")]
    return argv


def browser_loader(python: str, url: str, *, ca: str | Path, resolve: dict[str, str], timeout_s: float,
                   har: str | Path, summary: str | Path, protocol: str | None = None,
                   fault: str | None = None, dns_server: str | None = None, profile_dir: str | Path | None = None,
                   prime: bool = False) -> list[str]:
    """Chromium as a page loader (tortoiselab.browser), as the first process
    of a PID namespace of its own: when it ends, or `unshare` is killed at
    the executor's timeout (--kill-child), the kernel ends every process
    left in the namespace (the Playwright driver, Chromium and its helpers),
    whatever process groups they made. --mount-proc: /proc shows the
    namespace's own processes, which the loader ends by pid on its way out.
    Names: through dns_server (cold: the names of `resolve` are left to it)
    or the static map `resolve` (warm). profile_dir: the profile a priming
    load (prime) leaves for the measured load (a warm page view)."""
    argv = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc",
            python, "-m", "tortoiselab.browser", url, "--ca", str(ca), "--timeout", str(timeout_s),
            "--har", str(har), "--summary", str(summary)]
    if dns_server is not None:
        argv += ["--dns-server", dns_server] + [x for n in sorted(resolve) for x in ("--lab-name", n)]
    else:
        argv += [x for n, ip in sorted(resolve.items()) for x in ("--resolve", f"{n}:{ip}")]
    if protocol:
        argv += ["--protocol", protocol]
    if fault:
        argv += ["--fault", fault]
    if profile_dir is not None:
        argv += ["--profile-dir", str(profile_dir)] + (["--prime"] if prime else [])
    return argv


def nghttp(url: str) -> list[str]:
    """nghttp2's client: -a fetches the page's same-origin assets the way it
    parses them, -n discards bodies, -s prints per-request timings. It
    resolves through the system resolver and does not verify certificates."""
    return ["nghttp", "-nas", url]


def h2load(url: str, requests: int) -> list[str]:
    """Bulk throughput as the Stony Brook paper measures it: h2load over one
    connection, requests one after another (-c 1 -m 1)."""
    return ["h2load", "-n", str(requests), "-c", "1", "-m", "1", url]
