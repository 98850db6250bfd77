"""The web tier in the lab: Apache httpd (mod_http2, mod_ssl) on the server
host, dnsmasq on the dns host, the names the client resolves, and packet
captures; every process stopped on the way out, also on error.
The page-load task (guest/tasks/pageload.py) runs loads over it.
"""

from __future__ import annotations

import pwd
import re
import signal
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from tortoiselab.guest import commands as C
from tortoiselab.guest import imported
from tortoiselab.guest.executor import Executor
from tortoiselab.guest.imported import ImportedSite
from tortoiselab.guest.net import LAB_PREFIX, LabContext, PathLab
from tortoiselab.spec.requests import LAB_DOMAIN, WWW, LoadSpec
from tortoiselab.spec.topology import SERVER_IP2
from tortoiselab.web import apache

STATIC = f"static.{LAB_DOMAIN}"
DNS_IP = "10.0.0.53"
# names for failure tests: no host answers at DEAD_IP; the server's
# certificates do not cover OTHER
DEAD, OTHER = f"dead.{LAB_DOMAIN}", f"other.{LAB_DOMAIN}"
DEAD_IP = "10.0.0.99"
WEB_RUN = Path("/run/tortoise-web")
APACHE_START_S = 60.0  # httpd writes its pid file once it listens
PROCESS_STOP_S = 30.0  # a server or capture asked to stop
DNS_SETTLE_S = 0.2  # dnsmasq listens; virtual time, costs nothing (docs/determinism.md)


def resolution(scenario: str, server_ip: str, cdn_ip: str | None = None) -> dict[str, str]:
    """Where the hostnames point: www and static on the same server address
    (coalescing possible) or on two addresses of the server (not possible);
    with a CDN beside the PoP (cdn_ip, spec/cdn.py) static on the CDN host
    whatever the scenario, www on the PoP (the server)."""
    extra = {DEAD: DEAD_IP, OTHER: server_ip}
    if scenario not in ("same-ip", "two-ip"):
        raise ValueError(f"resolution: unknown scenario {scenario!r}; use same-ip or two-ip")
    if cdn_ip is not None:
        return {WWW: server_ip, STATIC: cdn_ip, **extra}
    return {WWW: server_ip, STATIC: server_ip if scenario == "same-ip" else SERVER_IP2, **extra}


class WebLab:
    """Apache and dnsmasq of one lab boot, restarted only when their settings
    change; a context manager that stops both on the way out."""

    def __init__(self, ctx: LabContext, lab: PathLab, site: Path, pki: dict, origin=None, cdn=None,
                 imported: ImportedSite | None = None) -> None:
        self.ctx, self.lab, self.site, self.pki = ctx, lab, site, pki
        self.imported = imported  # an imported site (guest/imported.py) served instead of the generated one
        self.origin = origin  # pop: the origin host; the server is its TLS-terminating reverse proxy
        self.origin_pidfile: Path | None = None
        self.cdn = cdn  # the CDN host beside the PoP (spec/cdn.py): a server of its own, the same site
        self.cdn_pidfile: Path | None = None
        WEB_RUN.mkdir(parents=True, exist_ok=True)
        self.apache_key: tuple | None = None
        self.apache_pidfile: Path | None = None
        # pid file -> its server's start time and command line (web/apache.py)
        self.started: dict[Path, tuple[int | None, bytes | None]] = {}
        self.dns_key: tuple | None = None
        self.dns_proc: subprocess.Popen | None = None

    def __enter__(self) -> "WebLab":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def ca(self, cert: str) -> str:
        """The CA a client trusts: the imported site's, else the variant's."""
        return self.imported.pki["ca"] if self.imported is not None else self.pki["variants"][cert]["ca"]

    def names(self, scenario: str) -> dict[str, str]:
        """The names of a load: the imported site's hosts, else `resolution`'s."""
        if self.imported is not None:
            return self.imported.names
        return resolution(scenario, self.lab.server.IP(), self.cdn.IP() if self.cdn is not None else None)

    def apache(self, protocol: str, tls: str, cert: str) -> None:
        key = ("imported",) if self.imported is not None else (protocol, tls, cert)
        if key == self.apache_key:
            return
        self.stop_apache()
        if self.imported is not None:  # its origins' protocols and certificates are the recording's
            run_dir = WEB_RUN / "httpd-imported"
            conf = imported.write_conf(run_dir, self.imported)
            self.apache_pidfile = apache.pid_file(run_dir)  # stop_apache finds it even if the start fails
            self._launch(run_dir, conf, self.lab.server)
            self.apache_key = key
            return
        run_dir = WEB_RUN / f"httpd-{protocol}-{tls}-{cert}"
        run_dir.mkdir(parents=True, exist_ok=True)
        if self.origin is not None:  # the origin first: the proxy passes every request on to it
            self.origin_pidfile = self._start_apache(run_dir / "origin", protocol, tls, cert,
                                                     [self.origin.IP()], None, self.origin)
        self.apache_pidfile = self._start_apache(run_dir, protocol, tls, cert, [self.lab.server.IP(), SERVER_IP2],
                                                 self.origin.IP() if self.origin is not None else None,
                                                 self.lab.server)
        if self.cdn is not None:
            self.cdn_pidfile = self._start_apache(run_dir / "cdn", protocol, tls, cert, [self.cdn.IP()], None,
                                                  self.cdn, role="cdn")
        self.apache_key = key

    def _start_apache(self, run_dir: Path, protocol: str, tls: str, cert: str, listen: list[str],
                      proxy_to: str | None, host, role: str = "") -> Path:
        """One Apache (a server, or with proxy_to a reverse proxy; role
        "cdn": the CDN host's) in a host; returns its pid file once it listens."""
        conf = apache.write_httpd_conf(run_dir, site_dir=self.site, pki=self.pki, cert_variant=cert,
                                       protocols=protocol, tls=tls, listen=listen, domain=LAB_DOMAIN,
                                       proxy_to=proxy_to)
        pidfile = apache.pid_file(run_dir)
        if role == "cdn":
            self.cdn_pidfile = pidfile  # stop_apache finds it even if the start fails
        elif proxy_to is None and self.origin is not None:
            self.origin_pidfile = pidfile
        else:
            self.apache_pidfile = pidfile
        return self._launch(run_dir, conf, host)

    def _launch(self, run_dir: Path, conf: Path, host) -> Path:
        """Start the Apache of conf in host; its pid file once it listens."""
        pidfile = apache.pid_file(run_dir)
        pidfile.unlink(missing_ok=True)  # one left by an earlier boot names no server of this one
        self.ctx.ex.run(apache.apache_argv(conf), host=host)
        pid = apache.wait_for_pid(pidfile, timeout=APACHE_START_S, error_log=run_dir / apache.ERROR_LOG)
        # signalled later only while it is this server: its start time and command line
        self.started[pidfile] = (apache.start_ticks(pid), apache.cmdline(pid))
        return pidfile

    def stop_apache(self) -> None:
        if self.origin is not None:  # pop: both servers' logs kept in the work folder (a proxy's 502/503 says why)
            for name, pidfile in (("pop", self.apache_pidfile), ("origin", self.origin_pidfile)):
                for kind, file in (("error", apache.ERROR_LOG), ("access", apache.ACCESS_LOG)):
                    log = pidfile.parent / file if pidfile is not None else None
                    if log is not None and log.exists():
                        tail = log.read_text(encoding="utf-8", errors="replace")[-20000:]
                        (self.ctx.work / f"{name}-{kind}.log").write_text(tail, encoding="utf-8")
        try:
            if self.apache_pidfile is not None:
                self._stop(self.apache_pidfile)
        finally:
            try:
                self._stop_other(self.origin_pidfile)
            finally:
                self._stop_other(self.cdn_pidfile)
        self.apache_key, self.apache_pidfile, self.origin_pidfile, self.cdn_pidfile = None, None, None, None

    def _stop_other(self, pidfile: Path | None) -> None:
        """The origin's or the CDN host's Apache stopped, if it was started."""
        if pidfile is not None:
            self._stop(pidfile)

    def _stop(self, pidfile: Path) -> None:
        """The Apache of pidfile stopped, while its pid is the server started."""
        started, cmd = self.started.pop(pidfile, (None, None))
        apache.stop_by_pidfile(pidfile, timeout=PROCESS_STOP_S, started=started, cmd=cmd)

    def dns(self, names: dict[str, str]) -> None:
        key = tuple(sorted(names.items()))
        if key == self.dns_key:
            return
        self.stop_dns()
        argv = C.dnsmasq(DNS_IP, names, WEB_RUN / "dnsmasq.pid", WEB_RUN / "dnsmasq.log")
        self.dns_proc = self.ctx.ex.start(argv, self.lab.nodes["dns"])
        time.sleep(DNS_SETTLE_S)
        if self.dns_proc.poll() is not None:
            raise RuntimeError(f"dnsmasq exited: {self.dns_proc.stderr.read()}")
        self.dns_key = key

    def stop_dns(self) -> None:
        if self.dns_proc is not None and self.dns_proc.poll() is None:
            self.dns_proc.terminate()
            self.dns_proc.wait(timeout=PROCESS_STOP_S)
        self.dns_proc, self.dns_key = None, None

    def stop(self) -> None:
        try:
            self.stop_apache()
        finally:
            self.stop_dns()


@dataclass(frozen=True)
class NameFiles:
    hosts: Path
    resolv: Path


def guest_name_files(ex: Executor, work: Path) -> NameFiles:
    """In the UML guest only: bind-mount files of the work folder over
    /etc/hosts and /etc/resolv.conf, for tools that use the system resolver
    (nghttp, curl). This must happen before Mininet makes its hosts: each
    host gets a private copy of the mount table at birth. Later loads only
    rewrite the files' contents (same inodes). The mounts exist in the
    guest's kernel alone; the host's files are untouched."""
    files = NameFiles(work / "guest-hosts", work / "guest-resolv.conf")
    files.hosts.write_text("127.0.0.1 localhost\n", encoding="utf-8")
    files.resolv.write_text(f"nameserver {DNS_IP}\noptions timeout:2 attempts:2\n", encoding="utf-8")
    for src, dst in ((files.hosts, "/etc/hosts"), (files.resolv, "/etc/resolv.conf")):
        ex.run(C.bind_mount(src, dst))
    return files


def write_names(hosts: Path, names: dict[str, str]) -> None:
    with open(hosts, "r+", encoding="utf-8") as fh:  # same inode: the bind mounts keep pointing at it
        fh.truncate(0)
        fh.write("127.0.0.1 localhost\n" + "".join(f"{ip} {n}\n" for n, ip in sorted(names.items())))


_TCPDUMP_STATS = re.compile(r"(\d+) packets? (captured|received by filter|dropped by kernel)")


class Capture:
    """A running tcpdump; stop() ends it (SIGINT, so it flushes) and returns
    its counters, once."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.stats: dict | None = None

    def stop(self) -> dict:
        if self.stats is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                _, err = self.proc.communicate(timeout=PROCESS_STOP_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                _, err = self.proc.communicate()
            found = {k: int(v) for v, k in _TCPDUMP_STATS.findall(err)}
            self.stats = {"captured": found.get("captured"), "received_by_filter": found.get("received by filter"),
                          "dropped_by_kernel": found.get("dropped by kernel")}
            if "captured" not in found:  # why there are no counters, for the run's error
                self.stats["stderr"] = err.strip()[-300:]
        return self.stats


def folder_owner(folder: Path) -> str:
    """The name of the user owning a folder (in the uml guest: the host user
    the lab runs as, through hostfs); root where the id has no name."""
    try:
        return pwd.getpwuid(folder.stat().st_uid).pw_name
    except KeyError:
        return "root"


@contextmanager
def capture(ex: Executor, host, out: Path) -> Iterator[Capture]:
    """tcpdump on a Mininet host's interface into out; stopped on the way
    out, also on error."""
    cap = Capture(ex.start(C.tcpdump(host.defaultIntf().name, out, user=folder_owner(out.parent)), host))
    try:
        yield cap
    finally:
        cap.stop()


def set_up_server(ex: Executor, lab: PathLab, web: WebLab, load: LoadSpec,
                   name_files: NameFiles | None) -> dict[str, str]:
    """The server's kernel settings, Apache and the names of this load;
    returns the names (hostname -> address)."""
    s, c = load.server, load.client
    lab.set_hosts(c.host_spec(), s.host_spec())
    ex.sysctl({"net.ipv4.tcp_congestion_control": s.cc,
               "net.ipv4.tcp_slow_start_after_idle": int(s.slow_start_after_idle)}, host=lab.server)
    ex.run(C.route_window(LAB_PREFIX, lab.server.defaultIntf().name, s.initcwnd_pkts, s.initrwnd_pkts),
           host=lab.server)
    web.apache(s.protocol, s.tls, s.cert)
    names = web.names(c.resolution)
    web.dns(names)
    if name_files is not None:
        write_names(name_files.hosts, names)
    return names
