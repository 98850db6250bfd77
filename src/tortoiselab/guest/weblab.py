"""The web tier in the lab: Apache httpd (mod_http2, mod_ssl) on the server
host, dnsmasq on the dns host, captures on the server's side, and page loads
from the client host (our loader, or nghttp / curl as cross-checks).

Runs inside the lab (the UML guest); `task_pageload` is registered as the
lab task "pageload".
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from tortoiselab.guest import commands as C
from tortoiselab.guest.lab import LabContext, PathLab, align_to_grid, mininet_path
from tortoiselab.spec.pathspec import PathSpec
from tortoiselab.spec.topology import SERVER_IP2, WEB_PATH

DOMAIN = "lab.test"
WWW, STATIC = f"www.{DOMAIN}", f"static.{DOMAIN}"
DNS_IP = "10.0.0.53"


# names for failure tests: no host answers at DEAD_IP; the server's
# certificates do not cover OTHER
DEAD, OTHER = f"dead.{DOMAIN}", f"other.{DOMAIN}"
DEAD_IP = "10.0.0.99"


def resolution(scenario: str, server_ip: str) -> dict[str, str]:
    """Where the hostnames point: www and static on the same server address
    (coalescing possible) or on two addresses of the server (not possible)."""
    extra = {DEAD: DEAD_IP, OTHER: server_ip}
    if scenario == "same-ip":
        return {WWW: server_ip, STATIC: server_ip, **extra}
    if scenario == "two-ip":
        return {WWW: server_ip, STATIC: SERVER_IP2, **extra}
    raise ValueError(f"resolution: unknown scenario {scenario!r}; use same-ip or two-ip")


def dnsmasq_argv(listen: str, names: dict[str, str], pidfile: str, logfile: str) -> list[str]:
    """An authoritative-only DNS server for the lab's names: no upstream, no
    /etc/hosts, no cache surprises (every answer comes from --address)."""
    argv = ["dnsmasq", "--keep-in-foreground", "--no-resolv", "--no-hosts", "--no-poll",
            f"--listen-address={listen}", "--bind-interfaces", "--port=53", "--cache-size=0",
            "--user=root", f"--pid-file={pidfile}", f"--log-facility={logfile}", "--log-queries"]
    argv += [f"--address=/{name}/{ip}" for name, ip in sorted(names.items())]
    return argv


def tcpdump_argv(dev: str, out: str, snaplen: int = 128, buffer_kb: int = 8192) -> list[str]:
    """Server-side capture: short snaplen, large buffer, no name lookups,
    packet-buffered so that a stop loses nothing."""
    return ["tcpdump", "-i", dev, "-n", "-s", str(snaplen), "-B", str(buffer_kb), "--immediate-mode",
            "-U", "-w", out, "tcp or udp port 53"]


class WebLab:
    """Server processes of one lab boot; stopped by recorded pids."""

    def __init__(self, ctx: LabContext, lab: PathLab, nodes: dict, site: Path, pki: dict) -> None:
        self.ctx, self.lab, self.nodes, self.site, self.pki = ctx, lab, nodes, site, pki
        self.run = Path("/run/tortoise-web")
        self.run.mkdir(parents=True, exist_ok=True)
        self.apache_key: tuple | None = None
        self.dns_key: tuple | None = None
        self.dns_proc: subprocess.Popen | None = None

    # --- apache -----------------------------------------------------------
    def apache(self, protocol: str, tls: str, cert: str) -> None:
        from tortoiselab.web import apache

        key = (protocol, tls, cert)
        if key == self.apache_key:
            return
        self.stop_apache()
        run_dir = self.run / f"httpd-{protocol}-{tls}-{cert}"
        run_dir.mkdir(parents=True, exist_ok=True)
        conf = apache.write_httpd_conf(run_dir, site_dir=self.site, pki=self.pki, cert_variant=cert,
                                       protocols=protocol, tls=tls,
                                       listen=[self.lab.server.IP(), SERVER_IP2], domain=DOMAIN)
        self.ctx.ex.run(apache.apache_argv(conf), host=self.lab.server, timeout=120)
        # httpd writes its pid file once it listens
        apache.wait_for_pid(apache.pid_file(run_dir), timeout=60, error_log=run_dir / apache.ERROR_LOG)
        self.apache_pidfile = apache.pid_file(run_dir)
        self.apache_key = key

    def stop_apache(self) -> None:
        from tortoiselab.web import apache

        if self.apache_key is None:
            return
        apache.stop_by_pidfile(self.apache_pidfile, timeout=30)
        self.apache_key = None

    # --- dns --------------------------------------------------------------
    def dns(self, names: dict[str, str]) -> None:
        key = tuple(sorted(names.items()))
        if key == self.dns_key:
            return
        self.stop_dns()
        argv = dnsmasq_argv(DNS_IP, names, str(self.run / "dnsmasq.pid"), str(self.run / "dnsmasq.log"))
        self.dns_proc = self.ctx.ex.start(argv, self.nodes["dns"])
        time.sleep(0.2)
        if self.dns_proc.poll() is not None:
            raise RuntimeError(f"dnsmasq exited: {self.dns_proc.stderr.read()}")
        self.dns_key = key

    def stop_dns(self) -> None:
        if self.dns_proc is not None and self.dns_proc.poll() is None:
            self.dns_proc.terminate()
            self.dns_proc.wait(timeout=10)
        self.dns_proc, self.dns_key = None, None

    def stop(self) -> None:
        self.stop_apache()
        self.stop_dns()


def _guest_name_files(work: Path) -> tuple[Path, Path]:
    """In the UML guest only: bind-mount files of the work folder over
    /etc/hosts and /etc/resolv.conf, for tools that use the system resolver
    (nghttp, curl). This must happen before Mininet makes its hosts: each
    host gets a private copy of the mount table at birth. Later loads only
    rewrite the files' contents (same inodes). The mounts exist in the
    guest's kernel alone; the host's files are untouched."""
    hosts, resolv = work / "guest-hosts", work / "guest-resolv.conf"
    hosts.write_text("127.0.0.1 localhost\n")
    resolv.write_text(f"nameserver {DNS_IP}\noptions timeout:2 attempts:2\n")
    for src, dst in ((hosts, "/etc/hosts"), (resolv, "/etc/resolv.conf")):
        subprocess.run(["mount", "--bind", str(src), dst], check=True)
    return hosts, resolv


def _write_names(hosts: Path, names: dict[str, str]) -> None:
    with open(hosts, "r+") as fh:  # same inode: the bind mounts keep pointing at it
        fh.truncate(0)
        fh.write("127.0.0.1 localhost\n" + "".join(f"{ip} {n}\n" for n, ip in sorted(names.items())))


def _tcpdump_stop(proc: subprocess.Popen) -> dict:
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    import re

    stats = {k: int(v) for v, k in re.findall(r"(\d+) packets? (captured|received by filter|dropped by kernel)", err)}
    return {"captured": stats.get("captured"), "received_by_filter": stats.get("received by filter"),
            "dropped_by_kernel": stats.get("dropped by kernel")}


def task_pageload(ctx: LabContext, req: dict) -> dict:
    """A sequence of page loads in one lab boot. Each load names its server
    settings (cc, initcwnd, protocol, tls, certificate variant) and its
    client settings (page, loader, coalescing, cache-hit ratio, resolution
    scenario); Apache and dnsmasq are restarted only when those change."""
    from tortoiselab.web import pages, pki as pkimod

    path = PathSpec(**req["path"])
    work = ctx.work
    if req.get("site_dir"):  # made once per experiment on the host (runner)
        site = Path(req["site_dir"])
        manifest = json.loads((site / "manifest.json").read_text())
        pki = json.loads((Path(req["pki_dir"]) / "pki.json").read_text())
    else:
        site = Path("/tmp/site")
        manifest = pages.generate_site(site, seed=int(req.get("site_seed", 1)), domain=DOMAIN)
        pki = pkimod.make_pki(Path("/tmp/pki"), domain=DOMAIN)
    out: dict = {"manifest": manifest, "loads": []}
    name_files = _guest_name_files(work) if ctx.private_ovs else None
    with mininet_path(ctx, WEB_PATH) as lab:
        lab.configure(path, server_cc="cubic", loss_on=True)
        out["seeds"] = lab.seeds  # netem's, per direction (recorded in run.json meta.seeds)
        nodes = lab.nodes
        srv = lab.server
        ctx.ex.run(["ip", "addr", "add", f"{SERVER_IP2}/8", "dev", srv.defaultIntf().name], host=srv)
        ctx.ex.run(["ip", "neigh", "replace", SERVER_IP2, "lladdr", srv.defaultIntf().MAC(), "dev",
                    lab.client.defaultIntf().name, "nud", "permanent"], host=lab.client)
        web = WebLab(ctx, lab, nodes, site, pki)
        try:
            for i, load in enumerate(req["loads"]):
                out["loads"].append(_one_load(ctx, lab, web, path, load, i, work, name_files))
        finally:
            web.stop()
    return out


def _one_load(ctx: LabContext, lab: PathLab, web: WebLab, path: PathSpec, load: dict, i: int, work: Path,
              name_files: tuple[Path, Path] | None) -> dict:
    s, c = load["server"], load["client"]
    ex = ctx.ex
    ex.run(C.sysctl_set("net.ipv4.tcp_congestion_control", s.get("cc", "cubic")), host=lab.server)
    ex.run(C.route_window("10.0.0.0/8", lab.server.defaultIntf().name, s.get("initcwnd_pkts"),
                          s.get("initrwnd_pkts")), host=lab.server)
    ex.run(C.sysctl_set("net.ipv4.tcp_slow_start_after_idle", int(s.get("slow_start_after_idle", 1))),
           host=lab.server)
    web.apache(s.get("protocol", "h2"), s.get("tls", "1.3"), s.get("cert", "shared"))
    names = resolution(c.get("resolution", "same-ip"), lab.server.IP())
    web.dns(names)
    if name_files is not None:
        _write_names(name_files[0], names)
    lab.set_netem(path, loss_on=True)  # same seeded draws for every load
    d = work / f"load-{i:03d}"
    d.mkdir(exist_ok=True)
    pcap, cpcap = d / "server.pcap", d / "client.pcap"
    cap = ctx.ex.start(tcpdump_argv(lab.server.defaultIntf().name, str(pcap)), lab.server)
    ccap = ctx.ex.start(tcpdump_argv(lab.client.defaultIntf().name, str(cpcap)), lab.client)
    # tcpdump attached before the first packet (0.25-0.75 s); the load starts
    # on a grid point, at the same instant in every run (docs/determinism.md)
    align_to_grid(0.5)
    page = c.get("page", "feed.html")
    url = c.get("url") or f"https://{WWW}/{page}"
    loader = c.get("loader", "loader")
    probe = _cwnd_probe(ctx)
    tracer = probe.__enter__()
    t0 = time.monotonic()
    if loader == "loader":
        argv = [sys.executable, "-m", "tortoiselab.client", url, "--ca", web.pki["ca"],
                "--protocol", s.get("protocol", "h2") if c.get("protocol") is None else c["protocol"],
                "--cache-hit-ratio", str(c.get("cache_hit_ratio", 0.0)), "--seed", str(c.get("seed", 1)),
                "--timeout", str(c.get("timeout_s", 60)), "--har", str(d / "page.har"),
                "--summary", str(d / "summary.json")]
        argv += ["--dns-server", DNS_IP] if c.get("dns", True) else \
            [x for n, ip in sorted(names.items()) for x in ("--resolve", f"{n}:{ip}")]
        if not c.get("coalescing", True):
            argv.append("--no-coalescing")
        if c.get("tls_client"):
            argv += ["--tls", c["tls_client"]]
        if c.get("repeat_after_idle_s"):
            argv += ["--repeat-after", str(c["repeat_after_idle_s"])]
        ex.run(argv, host=lab.client, check=False,
               timeout=float(c.get("timeout_s", 60)) + float(c.get("repeat_after_idle_s") or 0) + 60)
        summary = json.loads((d / "summary.json").read_text()) if (d / "summary.json").exists() else \
            {"error": "the loader wrote no summary"}
        har = str(d / "page.har")
    elif loader == "nghttp":
        # nghttp2's client: -a fetches the page's same-origin assets the way
        # it parses them, -n discards bodies, -s prints per-request timings.
        # It resolves through the system resolver (the guest's resolv.conf
        # points at the lab's DNS server) and does not verify certificates.
        from tortoiselab.analysis.parsers import parse_nghttp_stats

        rc, text, err = ex.capture(["nghttp", "-nas", url], lab.client, timeout=120)
        st = parse_nghttp_stats(text)
        summary = {"rc": rc, "plt_ms": st["plt_ms"], "requests": st["requests"],
                   "error": err.strip()[-500:] or None if rc else None,
                   "raw": text[-8000:], "stderr": err[-2000:]}
        har = None
    elif loader == "h2load":
        # bulk throughput, as the Stony Brook paper measures it: h2load over
        # one connection, requests one after another (-c 1 -m 1)
        from tortoiselab.analysis.parsers import parse_h2load

        n = int(c.get("h2load_requests", 3))
        rc, text, err = ex.capture(["h2load", "-n", str(n), "-c", "1", "-m", "1", url], lab.client,
                                   timeout=float(c.get("timeout_s", 300)))
        try:
            summary = {"rc": rc, "error": None, **parse_h2load(text), "raw": text[-4000:]}
        except ValueError as exc:
            summary = {"rc": rc, "error": f"{exc}: {err.strip()[-300:]}", "raw": text[-4000:]}
        har = None
    else:
        raise ValueError(f"loader: unknown loader {loader!r}; use loader, nghttp or h2load")
    # elapsed time of the whole client process (DNS, TCP, TLS, every object):
    # on the virtual clock its own CPU costs nothing, so this is network time
    wall_of_load = time.monotonic() - t0
    probe.__exit__(None, None, None)
    cwnd = _write_cwnd(tracer, d / "cwnd.json")
    time.sleep(1.0)  # the last packets reach tcpdump (costs nothing on the virtual clock)
    capstats = _tcpdump_stop(cap)
    ccapstats = _tcpdump_stop(ccap)
    from tortoiselab.analysis.flights import analyze_pcap, handshake_summary

    conns = [handshake_summary(x) for x in analyze_pcap(pcap, keep_series=False)] if pcap.exists() else []
    sysctls = {k: ex.run(C.sysctl_get(k), host=lab.server, check=False).strip() for k in SERVER_SYSCTLS}
    route = ex.run(["ip", "route", "show"], host=lab.server, check=False).strip()
    return {"index": i, "server": s, "client": c, "names": names, "summary": summary, "har": har,
            "pcap": str(pcap), "client_pcap": str(cpcap), "capture": capstats, "client_capture": ccapstats,
            "connections": conns, "server_sysctls": sysctls, "server_route": route,
            "load_seconds": round(wall_of_load, 6), "cwnd": cwnd}


def _cwnd_probe(ctx: LabContext):
    """The server's cwnd at every ACK (tcp:tcp_probe on port 443) in the lab
    guest, whose kernel is the lab's alone; on the native backend tracing is
    host-wide and needs root, so it is left off there."""
    from contextlib import nullcontext

    from tortoiselab.guest import trace

    if not ctx.private_ovs or not trace.EVENT.exists():
        return nullcontext(None)
    return trace.tcp_probe(443)


def _write_cwnd(tracer, out: Path) -> str | None:
    """cwnd.json: [t s, snd_cwnd, ssthresh, srtt us, snd_una, snd_nxt] per
    ACK of the connection with the most samples (the page's main one)."""
    if tracer is None:
        return None
    by_conn: dict[int, list] = {}
    for s in tracer.samples():
        by_conn.setdefault(s.dport, []).append([s.t, s.snd_cwnd, s.ssthresh, s.srtt_us, s.snd_una, s.snd_nxt])
    if not by_conn:
        return None
    out.write_text(json.dumps(max(by_conn.values(), key=len)))
    return str(out)


SERVER_SYSCTLS = ("net.ipv4.tcp_congestion_control", "net.ipv4.tcp_no_metrics_save",
                  "net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_sack", "net.ipv4.tcp_timestamps",
                  "net.ipv4.tcp_ecn", "net.ipv4.tcp_wmem", "net.ipv4.tcp_rmem", "net.core.default_qdisc")
