"""Pure functions that return the argv of every command the lab runs.

Nothing here runs anything: tests compare these lists exactly, and one
executor (tortoiselab.guest.executor) runs and logs them.
"""

from __future__ import annotations

from tortoiselab.spec.pathspec import PathSpec


def _num(x: float) -> str:
    """Format a number for tc without float noise: 100.0 -> '100', 0.5 -> '0.5'."""
    s = f"{x:.6f}".rstrip("0").rstrip(".")
    return s if s else "0"


def netem(dev: str, path: PathSpec, loss_pct: float, rate_mbit: float | None = None) -> list[str]:
    """The WAN hop in one direction: netem as the root qdisc of `dev` with
    half the RTT as delay, the direction's random loss, the bottleneck rate
    (netem's rate serializes packets FIFO behind the delay) and a limit that
    holds the delay line plus the queue."""
    rate = path.rate_mbit if rate_mbit is None else rate_mbit
    argv = ["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "netem",
            "limit", str(path.netem_limit_pkts(rate)),
            "delay", f"{_num(path.one_way_ms)}ms"]
    if path.jitter_ms > 0:
        argv += [f"{_num(path.jitter_ms)}ms", "distribution", "normal"]
    if loss_pct > 0:
        argv += ["loss", "random", f"{_num(loss_pct)}%"]
    argv += ["rate", f"{_num(rate)}mbit"]
    return argv


def qdisc_show(dev: str) -> list[str]:
    return ["tc", "-s", "qdisc", "show", "dev", dev]


def offloads_off(dev: str) -> list[str]:
    """TSO/GSO/GRO off: netem must see wire-size packets, not 64 KB ones."""
    return ["ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off"]


def sysctl_set(key: str, value: str | int) -> list[str]:
    return ["sysctl", "-q", "-w", f"{key}={value}"]


def sysctl_get(key: str) -> list[str]:
    return ["sysctl", "-n", key]


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
               rate_mbit: float | None = None) -> list[str]:
    """Re-issue the netem parameters of `netem()` with the PRNG seed set, over
    rtnetlink (tortoiselab.tools.netem_seed): the same seed, the same losses."""
    rate = path.rate_mbit if rate_mbit is None else rate_mbit
    argv = [python, "-m", "tortoiselab.tools.netem_seed", "--dev", dev,
            "--limit", str(path.netem_limit_pkts(rate)),
            "--latency-ns", str(round(path.one_way_ms * 1e6)),
            "--seed", str(seed)]
    if path.jitter_ms > 0:
        argv += ["--jitter-ns", str(round(path.jitter_ms * 1e6))]
    if loss_pct > 0:
        argv += ["--loss-pct", _num(loss_pct)]
    argv += ["--rate-bps", str(round(rate * 1e6))]
    return argv


def derive_seed(seed: int, *labels: str) -> int:
    """A 64-bit seed for one random stream of a run (e.g. the downlink's
    netem), derived from the run's seed and the stream's name."""
    import hashlib

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
    network (DESIGN.md §5)."""
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
