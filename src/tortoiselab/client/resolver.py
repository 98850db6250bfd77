"""Name resolution for the loader: a static map (like curl --resolve), real
UDP DNS A queries to one server (dnspython's message API on asyncio), or,
with neither given, the system resolver. Each lookup is timed and bounded.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

import dns.asyncquery
import dns.exception
import dns.message
import dns.rcode
import dns.rdatatype

from .errors import LoadError, fmt_s
from .options import parse_dns_server
from .timeline import DnsLookup

# UDP retransmission: 1 s, then doubling, until the step time is spent
# (glibc waits 5 s; a lossy lab path loses a query now and then)
FIRST_TRY_S = 1.0


async def query_a(host: str, server: str, port: int, timeout_s: float) -> list[str]:
    """A records of host from one DNS server over UDP, retransmitting."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    attempt = FIRST_TRY_S
    while True:
        left = deadline - loop.time()
        if left <= 0:
            raise LoadError(f"DNS query for {host} to {server}:{port} timed out after {fmt_s(timeout_s)}",
                            step="dns", host=host)
        q = dns.message.make_query(host, dns.rdatatype.A)
        try:
            r = await asyncio.wait_for(dns.asyncquery.udp(q, server, timeout=min(attempt, left), port=port),
                                       min(attempt, left) + 0.5)
            break
        except (dns.exception.Timeout, asyncio.TimeoutError):
            attempt *= 2
        except OSError as e:  # e.g. ICMP port unreachable: nobody listens
            raise LoadError(f"DNS query for {host} to {server}:{port} failed: {e.strerror or e}",
                            step="dns", host=host)
        except dns.exception.DNSException as e:
            raise LoadError(f"DNS query for {host} to {server}:{port} failed: {e}", step="dns", host=host)
    rc = r.rcode()
    if rc == dns.rcode.NXDOMAIN:
        raise LoadError(f"DNS: no such host {host} (NXDOMAIN from {server})", step="dns", host=host)
    if rc != dns.rcode.NOERROR:
        raise LoadError(f"DNS: {server} answered {dns.rcode.to_text(rc)} for {host}", step="dns", host=host)
    addrs = [rd.address for rrset in r.answer if rrset.rdtype == dns.rdatatype.A for rd in rrset]
    if not addrs:
        raise LoadError(f"DNS: {host} has no A record (NOERROR, empty answer from {server})", step="dns", host=host)
    return addrs


class Resolver:
    """One lookup per host per load, shared by every request for that host."""

    def __init__(self, static: dict[str, list[str]], dns_server: str | None, timeout_s: float, now):
        self.static = static
        self.server = parse_dns_server(dns_server) if dns_server else None
        self.timeout_s = timeout_s
        self.now = now
        self.lookups: list[DnsLookup] = []
        self._pending: dict[str, asyncio.Future] = {}

    def describe(self) -> str:
        parts = []
        if self.static:
            parts.append("static map")
        if self.server:
            parts.append(f"DNS {self.server[0]}:{self.server[1]}")
        return " then ".join(parts) or "system resolver"

    async def resolve(self, host: str) -> tuple[list[str], DnsLookup | None]:
        """(addresses, the lookup if this call made it else None)."""
        try:
            ipaddress.ip_address(host)
            return [host], None
        except ValueError:
            pass
        fut = self._pending.get(host)
        if fut is not None:
            return list(await asyncio.shield(fut)), None
        fut = asyncio.get_running_loop().create_future()
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved by whoever waits
        self._pending[host] = fut
        lk = DnsLookup(host, "map", self.now())
        self.lookups.append(lk)
        try:
            lk.addresses = await self._lookup(host, lk)
        except asyncio.CancelledError:
            lk.end = self.now()
            lk.error = "cancelled"
            fut.cancel()
            raise
        except LoadError as e:
            lk.end = self.now()
            lk.error = str(e)
            fut.set_exception(e)
            raise
        lk.end = self.now()
        fut.set_result(lk.addresses)
        return list(lk.addresses), lk

    async def _lookup(self, host: str, lk: DnsLookup) -> list[str]:
        if host in self.static:
            lk.source = "map"
            return list(self.static[host])
        if self.server:
            lk.source = "dns"
            return await query_a(host, self.server[0], self.server[1], self.timeout_s)
        if self.static:
            raise LoadError(f"cannot resolve {host}: not in the --resolve map and no --dns-server given",
                            step="dns", host=host)
        lk.source = "system"
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(
                loop.getaddrinfo(host, None, family=socket.AF_INET, type=socket.SOCK_STREAM), self.timeout_s)
        except asyncio.TimeoutError:
            raise LoadError(f"resolving {host} (system resolver) timed out after {fmt_s(self.timeout_s)}",
                            step="dns", host=host)
        except socket.gaierror as e:
            raise LoadError(f"cannot resolve {host} (system resolver): {e.strerror}", step="dns", host=host)
        out: list[str] = []
        for *_, sa in infos:
            if sa[0] not in out:
                out.append(sa[0])
        return out
