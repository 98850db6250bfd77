"""HTTP/2 connection coalescing (RFC 9113 §9.1.1, RFC 7540 §9.1.1).

A request for host B may go on an open connection made for host A when the
connection's remote address is among B's resolved addresses and the
certificate the connection was verified with is valid for B. Chrome and
Firefox decide the same way. Names are matched as RFC 6125 §6.4 says, the
way browsers do: case-insensitive, a trailing dot ignored, a wildcard only
as the whole left-most label ("*.lab.test"), matching exactly one label, never
across a public top level ("*.test" is refused), and no Common Name fallback.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Iterable


def _norm(name: str) -> str:
    return name.strip().rstrip(".").lower()


def _ip(s: str):
    try:
        return ipaddress.ip_address(s.strip("[]"))
    except ValueError:
        return None


def san_matches(pattern: str, host: str) -> bool:
    """Does one dNSName SAN entry cover host?"""
    p, h = _norm(pattern), _norm(host)
    if not p or not h:
        return False
    if "*" not in p:
        return p == h
    labels = p.split(".")
    if labels[0] != "*" or "*" in ".".join(labels[1:]):
        return False  # only a whole left-most wildcard label is honoured
    if len(labels) < 3:
        return False  # "*.test", "*" : too broad
    if _ip(h) is not None:
        return False
    h_labels = h.split(".")
    if len(h_labels) != len(labels) or not h_labels[0]:
        return False
    return h_labels[1:] == labels[1:]


def cert_covers(host: str, dns_names: Iterable[str], ip_addresses: Iterable[str] = ()) -> bool:
    """Is the certificate (its SAN dNSNames and iPAddresses) valid for host?"""
    hip = _ip(host)
    if hip is not None:
        return any(_ip(a) == hip for a in ip_addresses)
    return any(san_matches(n, host) for n in dns_names)


@dataclass(frozen=True)
class CoalesceDecision:
    reuse: bool
    reason: str


def coalesce_decision(host: str, host_ips: Iterable[str], conn_ips: Iterable[str],
                      dns_names: Iterable[str], ip_sans: Iterable[str] = ()) -> CoalesceDecision:
    """May a request for `host`, which resolved to `host_ips`, use a connection
    whose remote address is in `conn_ips` and whose certificate carries the
    SAN `dns_names` (and `ip_sans`)? Pure: no I/O."""
    dns_names, ip_sans = list(dns_names), list(ip_sans)
    hips = {a for a in (_ip(x) for x in host_ips) if a is not None}
    cips = {a for a in (_ip(x) for x in conn_ips) if a is not None}
    common = hips & cips
    if not common:
        return CoalesceDecision(False, f"{host} resolves to {sorted(map(str, hips))}, "
                                       f"the connection goes to {sorted(map(str, cips))}")
    if not cert_covers(host, dns_names, ip_sans):
        return CoalesceDecision(False, f"the connection's certificate does not cover {host} "
                                       f"(SAN {sorted(dns_names)})")
    return CoalesceDecision(True, f"same address {sorted(map(str, common))[0]} and the certificate covers {host}")


def sans_from_peercert(cert: dict) -> tuple[list[str], list[str]]:
    """(dNSNames, iPAddresses) from ssl.SSLSocket.getpeercert()'s dict."""
    dns = [v for k, v in cert.get("subjectAltName", ()) if k == "DNS"]
    ips = [v.strip() for k, v in cert.get("subjectAltName", ()) if k == "IP Address"]
    return dns, ips


def sans_from_der(der: bytes) -> tuple[list[str], list[str]]:
    """(dNSNames, iPAddresses) from a DER certificate (getpeercert(binary_form=True))."""
    from cryptography import x509  # lazy: a large import, paid only by a load that reads a DER certificate

    cert = x509.load_der_x509_certificate(der)
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return [], []
    return ext.get_values_for_type(x509.DNSName), [str(a) for a in ext.get_values_for_type(x509.IPAddress)]
