"""The coalescing decision (RFC 9113 §9.1.1) and certificate name matching (RFC 6125)."""

import datetime
import ipaddress

import pytest

from tortoiselab.client import cert_covers, coalesce_decision, san_matches
from tortoiselab.client.coalesce import sans_from_der, sans_from_peercert


@pytest.mark.parametrize("pattern,host,ok", [
    ("www.lab.test", "www.lab.test", True),
    ("WWW.Lab.Test", "www.lab.test", True),
    ("www.lab.test.", "www.lab.test", True),
    ("www.lab.test", "www.lab.test.", True),
    ("www.lab.test", "static.lab.test", False),
    ("lab.test", "www.lab.test", False),
    ("*.lab.test", "static.lab.test", True),
    ("*.lab.test", "STATIC.lab.test", True),
    ("*.lab.test", "lab.test", False),            # the wildcard needs a label
    ("*.lab.test", "a.static.lab.test", False),   # exactly one label
    ("*.test", "lab.test", False),                # too broad
    ("*", "test", False),
    ("s*.lab.test", "static.lab.test", False),    # partial wildcards not honoured
    ("*tatic.lab.test", "static.lab.test", False),
    ("www.*.test", "www.lab.test", False),         # only the left-most label
    ("*.*.test", "a.lab.test", False),
    ("*.lab.test", "xn--bcher-kva.lab.test", True),
    ("*.0.0.1", "127.0.0.1", False),               # never for IP addresses
    ("", "www.lab.test", False),
])
def test_san_matches(pattern, host, ok):
    assert san_matches(pattern, host) is ok


def test_cert_covers_uses_ip_sans_for_ip_hosts():
    assert cert_covers("127.0.0.1", ["www.lab.test"], ["127.0.0.1"])
    assert not cert_covers("127.0.0.1", ["127.0.0.1"], [])  # a dNSName does not cover an IP
    assert cert_covers("www.lab.test", ["a.test", "*.lab.test"])
    assert not cert_covers("www.lab.test", [])


BOTH = ["www.lab.test", "static.lab.test"]


@pytest.mark.parametrize("host,host_ips,conn_ips,sans,reuse,why", [
    ("static.lab.test", ["10.0.0.2"], ["10.0.0.2"], BOTH, True, "same address"),
    ("static.lab.test", ["10.0.0.3", "10.0.0.2"], ["10.0.0.2"], BOTH, True, "same address"),
    ("static.lab.test", ["10.0.0.3"], ["10.0.0.2"], BOTH, False, "resolves to"),
    ("static.lab.test", ["10.0.0.2"], ["10.0.0.2"], ["www.lab.test"], False, "does not cover"),
    ("static.lab.test", ["10.0.0.2"], ["10.0.0.2"], ["*.lab.test"], True, "same address"),
    ("a.static.lab.test", ["10.0.0.2"], ["10.0.0.2"], ["*.lab.test"], False, "does not cover"),
    ("static.lab.test", [], ["10.0.0.2"], BOTH, False, "resolves to"),
    ("static.lab.test", ["::1"], ["0:0::1"], BOTH, True, "same address"),  # addresses compared as addresses
])
def test_coalesce_decision(host, host_ips, conn_ips, sans, reuse, why):
    d = coalesce_decision(host, host_ips, conn_ips, sans)
    assert d.reuse is reuse
    assert why in d.reason


def test_decision_accepts_iterators():
    d = coalesce_decision("static.lab.test", iter(["10.0.0.2"]), iter(["10.0.0.2"]), iter(["www.lab.test"]))
    assert not d.reuse and "['www.lab.test']" in d.reason


def test_sans_from_getpeercert_dict():
    cert = {"subject": ((("commonName", "www.lab.test"),),),
            "subjectAltName": (("DNS", "www.lab.test"), ("DNS", "*.lab.test"), ("IP Address", "10.0.0.2"))}
    assert sans_from_peercert(cert) == (["www.lab.test", "*.lab.test"], ["10.0.0.2"])
    assert sans_from_peercert({}) == ([], [])


def _der(names, ips=()):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    k = ec.generate_private_key(ec.SECP256R1())
    n = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test")])
    now = datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc)
    b = (x509.CertificateBuilder().subject_name(n).issuer_name(n).public_key(k.public_key())
         .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1)))
    if names or ips:
        b = b.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName(x) for x in names] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]), False)
    return b.sign(k, hashes.SHA256()).public_bytes(serialization.Encoding.DER)


def test_sans_from_der():
    assert sans_from_der(_der(BOTH, ["10.0.0.2"])) == (BOTH, ["10.0.0.2"])
    assert sans_from_der(_der([])) == ([], [])  # no SAN extension: nothing is covered (no CN fallback)
