"""What one page load is asked to do, checked before anything connects.

A bad value is refused with the name of the option and what to write instead
(docs/architecture.md, "Style"); the CLI maps each field to its flag.
"""

from __future__ import annotations

import ipaddress
import math
import os
from dataclasses import dataclass, field
from urllib.parse import urlsplit

PROTOCOLS = ("h2", "h1")
TLS_VERSIONS = ("1.2", "1.3", "any")
CACHE_UNITS = ("asset", "page")  # as client/page.py draws them
SCHEDULES = ("chromium", "eager")  # as client/schedule.py names them

# field name -> CLI flag, for messages
FLAGS = {
    "url": "URL",
    "resolve": "--resolve",
    "dns_server": "--dns-server",
    "ca_file": "--ca",
    "protocol": "--protocol",
    "coalescing": "--no-coalescing",
    "cache_hit_ratio": "--cache-hit-ratio",
    "cache_unit": "--cache-unit",
    "seed": "--seed",
    "timeout_s": "--timeout",
    "tls_version": "--tls",
    "connect_timeout_s": "--connect-timeout",
    "request_timeout_s": "--request-timeout",
    "max_h1_connections": "--max-h1-connections",
    "repeat_after_s": "--repeat-after",
    "schedule": "--schedule",
    "origin_protocols": "--origin-protocol",
}


class OptionError(ValueError):
    """A load option that cannot work; `field` names it, the message says why."""

    def __init__(self, field_name: str, message: str):
        self.field = field_name
        super().__init__(f"{field_name}: {message}")
        self.message = message

    def for_cli(self) -> str:
        return f"{FLAGS.get(self.field, self.field)}: {self.message}"


def _finite(name: str, v, lo: float, hi: float | None = None, lo_open: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise OptionError(name, f"must be a number, got {v!r}")
    v = float(v)
    if not math.isfinite(v):
        raise OptionError(name, f"must be a finite number, got {v}")
    if (v <= lo if lo_open else v < lo) or (hi is not None and v > hi):
        rng = f"{'(' if lo_open else '['}{lo:g}, {hi:g}]" if hi is not None else f"{'>' if lo_open else '>='} {lo:g}"
        raise OptionError(name, f"must be in {rng}, got {v:g}")
    return v


def parse_dns_server(value: str) -> tuple[str, int]:
    """'10.0.0.53' or '10.0.0.53:5353' -> (ip, port)."""
    host, port = value, 53
    if value.count(":") == 1:
        host, p = value.split(":")
        if not p.isdigit() or not 0 < int(p) < 65536:
            raise OptionError("dns_server", f"bad port in {value!r}; write IP or IP:PORT, e.g. 10.0.0.53")
        port = int(p)
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        raise OptionError("dns_server", f"{value!r} is not an IP address; write IP or IP:PORT, e.g. 10.0.0.53")
    return str(ip), port


@dataclass
class LoadOptions:
    """One page load. Times in seconds; see load_page() for the behaviour."""

    url: str
    resolve: dict[str, str | list[str]] = field(default_factory=dict)
    dns_server: str | None = None
    ca_file: str | None = None
    protocol: str = "h2"
    coalescing: bool = True
    cache_hit_ratio: float = 0.0
    # what cache_hit_ratio counts: "asset" (that share of each view's assets)
    # or "page" (that share of page views, each served wholly from cache)
    cache_unit: str = "asset"
    seed: int = 1
    timeout_s: float = 30.0
    tls_version: str = "any"
    # each DNS lookup, TCP connect and TLS handshake; capped by timeout_s
    connect_timeout_s: float = 10.0
    # each request, from sending it to its last byte; None: only timeout_s bounds it
    request_timeout_s: float | None = None
    max_h1_connections: int = 6
    # load the page a second time, this long after the first load ended, on
    # the connections the first one left open (seed 003: tcp_slow_start_after_idle)
    repeat_after_s: float | None = None
    # when the page's requests leave: "chromium", as Chromium schedules them
    # (discovered as the document arrives, by priority, low-priority ones held
    # while the document loads: client/schedule.py); "eager", every asset at
    # once when the whole document is in (the loader before issue 51)
    schedule: str = "chromium"
    # a page whose origins mix h2 and HTTP/1.1 (an imported site, as recorded):
    # origin (scheme://host[:port], as page.Origin writes it) -> h2 or h1; the
    # origins not named speak `protocol`
    origin_protocols: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.url, str):
            raise OptionError("url", f"must be a string, got {self.url!r}")
        u = urlsplit(self.url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise OptionError("url", f"{self.url!r} is not an http(s) URL; e.g. https://www.lab.test/feed.html")
        try:
            u.port
        except ValueError:
            raise OptionError("url", f"{self.url!r} has a bad port")
        if self.protocol not in PROTOCOLS:
            raise OptionError("protocol", f"{self.protocol!r} is not one of {', '.join(PROTOCOLS)}")
        if self.protocol == "h2" and u.scheme != "https":
            raise OptionError("url", f"{self.url!r}: h2 is negotiated by TLS ALPN and needs https:// "
                                     "(or use protocol h1)")
        if self.tls_version not in TLS_VERSIONS:
            raise OptionError("tls_version", f"{self.tls_version!r} is not one of {', '.join(TLS_VERSIONS)}")
        if not isinstance(self.coalescing, bool):
            raise OptionError("coalescing", f"must be true or false, got {self.coalescing!r}")
        self.cache_hit_ratio = _finite("cache_hit_ratio", self.cache_hit_ratio, 0.0, 1.0)
        if self.cache_unit not in CACHE_UNITS:
            raise OptionError("cache_unit", f"{self.cache_unit!r} is not one of {', '.join(CACHE_UNITS)}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise OptionError("seed", f"must be an integer, got {self.seed!r}")
        self.timeout_s = _finite("timeout_s", self.timeout_s, 0.0, 86400.0, lo_open=True)
        self.connect_timeout_s = _finite("connect_timeout_s", self.connect_timeout_s, 0.0, 86400.0, lo_open=True)
        if self.request_timeout_s is not None:
            self.request_timeout_s = _finite("request_timeout_s", self.request_timeout_s, 0.0, 86400.0,
                                             lo_open=True)
        if isinstance(self.max_h1_connections, bool) or not isinstance(self.max_h1_connections, int) \
                or not 1 <= self.max_h1_connections <= 64:
            raise OptionError("max_h1_connections", f"must be an integer in [1, 64], got {self.max_h1_connections!r}")
        if self.schedule not in SCHEDULES:
            raise OptionError("schedule", f"{self.schedule!r} is not one of {', '.join(SCHEDULES)}")
        if self.repeat_after_s is not None:
            self.repeat_after_s = _finite("repeat_after_s", self.repeat_after_s, 0.0, 600.0, lo_open=True)
        self.resolve = normalize_resolve(self.resolve)
        self.origin_protocols = normalize_origin_protocols(self.origin_protocols)
        if self.dns_server is not None:
            parse_dns_server(self.dns_server)
        if self.ca_file is not None and not os.path.isfile(self.ca_file):
            raise OptionError("ca_file", f"{self.ca_file!r} is not a file; give the lab CA's PEM file")

    def as_dict(self) -> dict:
        """The settings a summary records (origin_protocols only where some
        are given: a page of one protocol records what it did before)."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__
                if k != "origin_protocols" or self.origin_protocols}


def normalize_resolve(resolve) -> dict[str, list[str]]:
    """{'Host': 'ip' | ['ip', ...]} -> {'host': ['ip', ...]}, IPs checked."""
    if not isinstance(resolve, dict):
        raise OptionError("resolve", f"must be a mapping host -> IP, got {type(resolve).__name__}")
    out: dict[str, list[str]] = {}
    for host, ips in resolve.items():
        if not isinstance(host, str) or not host.strip(".") or ":" in host:
            raise OptionError("resolve", f"bad host name {host!r}")
        ips = [ips] if isinstance(ips, str) else list(ips)
        if not ips:
            raise OptionError("resolve", f"{host}: no address given")
        for ip in ips:
            try:
                ipaddress.ip_address(ip)
            except (ValueError, TypeError):
                raise OptionError("resolve", f"{host}: {ip!r} is not an IP address; write HOST:IP, "
                                             "e.g. www.lab.test:10.0.0.2")
        key = host.strip(".").lower()
        out.setdefault(key, [])
        out[key] += [str(ipaddress.ip_address(ip)) for ip in ips if str(ipaddress.ip_address(ip)) not in out[key]]
    return out


def normalize_origin_protocols(given) -> dict[str, str]:
    """{'https://Host:443': 'h1'} -> {'https://host': 'h1'} (the origin as
    page.Origin writes it), each protocol checked; h2 only over https."""
    if not isinstance(given, dict):
        raise OptionError("origin_protocols", f"must be a mapping origin -> h2|h1, got {type(given).__name__}")
    out: dict[str, str] = {}
    for origin, protocol in given.items():
        u = urlsplit(origin) if isinstance(origin, str) else None
        try:
            port = u.port if u is not None else None
        except ValueError:
            u = None
        if u is None or u.scheme not in ("http", "https") or not u.hostname or u.path not in ("", "/") \
                or u.query:
            raise OptionError("origin_protocols", f"{origin!r} is not an origin; write SCHEME://HOST[:PORT]=h2|h1, "
                                                  "e.g. https://legacy.shop.test=h1")
        if protocol not in PROTOCOLS:
            raise OptionError("origin_protocols", f"{origin}: {protocol!r} is not one of {', '.join(PROTOCOLS)}")
        if protocol == "h2" and u.scheme != "https":
            raise OptionError("origin_protocols", f"{origin}: h2 is negotiated by TLS ALPN and needs https://")
        default = 443 if u.scheme == "https" else 80
        host = u.hostname.rstrip(".").lower()
        h = f"[{host}]" if ":" in host else host
        out[f"{u.scheme}://{h}" + ("" if (port or default) == default else f":{port}")] = protocol
    return out


def parse_origin_protocol_args(items: list[str]) -> dict[str, str]:
    """CLI --origin-protocol ORIGIN=h2|h1 (repeatable)."""
    out: dict[str, str] = {}
    for item in items:
        origin, sep, protocol = item.rpartition("=")
        if not sep or not origin:
            raise OptionError("origin_protocols", f"{item!r}: expected ORIGIN=h2|h1, e.g. https://legacy.shop.test=h1")
        out[origin] = protocol
    return normalize_origin_protocols(out)


def parse_resolve_args(items: list[str]) -> dict[str, list[str]]:
    """CLI --resolve HOST:IP (repeatable; a host may be given several IPs)."""
    out: dict[str, list[str]] = {}
    for item in items:
        host, sep, ip = item.partition(":")
        if not sep or not host or not ip:
            raise OptionError("resolve", f"{item!r}: expected HOST:IP, e.g. www.lab.test:10.0.0.2")
        out.setdefault(host, []).append(ip)
    return normalize_resolve(out)
