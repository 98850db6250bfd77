"""The lab PKI: one root CA per lab and three certificate variants for the
server, made with `cryptography`. Generated where the caller says, per lab;
never committed.

Deterministic (docs/determinism.md): the same `seed_name` gives byte-identical
small chains (shared, separate) and a large chain of identical length. The
CA, the intermediate and the small leaves are Ed25519 keys derived from the
seed name; Ed25519 signatures are deterministic and always 64 bytes (an
ECDSA P-256 signature is DER of two random-length integers, 70-72 bytes, so
every TLS handshake's CertificateVerify, and every certificate made, came out
a byte longer or shorter at random, shifting every later segment boundary).
Serial numbers come from the seed name, validity is a fixed window around
the virtual clock's start (backends.VIRTUAL_EPOCH). The large variant's
RSA-4096 keys are random (`cryptography` cannot derive RSA keys from a
seed), but its chain DER is padded to an exact length and RSA signatures
have a fixed length, so its bytes on the wire have a fixed length too.
The keys are predictable by design: this CA is trusted by the lab's clients
alone, for the lab's own names.

Variants (each: a chain PEM = leaf + intermediates, a key, the CA for clients):

- ``shared``: one Ed25519 leaf whose SANs cover www.<domain> and
  static.<domain>: a client may coalesce static onto the www connection
  (RFC 7540 §9.1.1; seed 001, LinkedIn).
- ``separate``: two Ed25519 leaves, one per hostname: coalescing is not
  possible, the client must open a second connection for static.
- ``large``: one RSA-4096 leaf for both hostnames behind two RSA-4096
  intermediates, padded to a chain of `LARGE_CHAIN_DER_BYTES` (see below).

The small chains (shared, separate) are leaf + one Ed25519 intermediate,
under 1 KB of DER: the server's whole TLS 1.3 first flight fits in one
1448-byte segment, so it fits any initial window.

The large chain reproduces the napkin article (seed 003): a certificate
that does not fit the initial window costs the handshake an extra round
trip. The target is that the server's TLS 1.3 first flight (ServerHello,
ChangeCipherSpec, EncryptedExtensions, Certificate, CertificateVerify,
Finished) is larger than 3 segments (initcwnd 3: 3 x 1448 = 4344 bytes, so
the server stalls for an ACK mid-certificate) and smaller than 10 segments
(initcwnd 10: 10 x 1448 = 14480 bytes, so the handshake takes its usual
single server flight), with margin on both sides. 1448 bytes is the TCP
payload of a 1500-byte MTU segment with timestamps. We size the chain DER to
6908 bytes, the napkin article's Danish newspaper certificate; the flight is
then 7743 bytes = 6 segments (`tls13_server_flight_bytes` estimates it;
measured end to end with openssl s_client, see webroot/README.md).
Hybrid post-quantum key shares (X25519MLKEM768, default in OpenSSL >= 3.5
clients) add about 1.1 KB to the ServerHello; the flight still fits in 10.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import subprocess
import uuid
from pathlib import Path
from typing import Sequence

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cryptography.x509.verification import VerificationError

from tortoiselab.project import moved

# *-rsa: the small variants under an RSA-2048 root, for browsers (no Ed25519)
VARIANTS = ("shared", "separate", "large", "shared-rsa", "separate-rsa")
MSS_BYTES = 1448  # TCP payload per segment: MTU 1500 - 20 (IP) - 20 (TCP) - 12 (timestamps)
INITCWND_SMALL, INITCWND_DEFAULT = 3, 10
LARGE_CHAIN_DER_BYTES = 6908  # the napkin article's (seed 003) 6908-byte certificate
LARGE_INTERMEDIATES = 2
RSA_BITS = 4096  # the large chain's keys
# every certificate's validity: fixed, so that the same seed name gives the
# same bytes; it contains the virtual clock's start (2030-01-01) and today
NOT_BEFORE = dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc)
NOT_AFTER = dt.datetime(2049, 12, 31, tzinfo=dt.timezone.utc)  # UTCTime ends with 2049

# A private, registration-free OID for the padding extension: 2.25.<UUID>
# (ITU-T X.667), derived from a name we own. Non-critical, so every client
# ignores it.
PADDING_OID = x509.ObjectIdentifier(
    "2.25." + str(uuid.uuid5(uuid.NAMESPACE_URL, "https://tortoiselab.test/oid/certificate-padding").int))


# --- TLS arithmetic -----------------------------------------------------------
def tls13_server_flight_bytes(chain_der_sizes: list[int], signature_bytes: int, *, key_share_bytes: int = 32,
                              session_id_bytes: int = 32, alpn: str = "h2", finished_bytes: int = 48,
                              sni_ack: bool = True, ccs: bool = True) -> int:
    """Bytes on the wire (TLS records, not TCP/IP headers) of the server's
    first TLS 1.3 flight as OpenSSL sends it: one plaintext ServerHello
    record, a ChangeCipherSpec record (middlebox compatibility mode, when the
    client sent a session id), then EncryptedExtensions, Certificate,
    CertificateVerify and Finished, each in its own encrypted record
    (5 header + 1 inner type + 16 AEAD tag). Defaults: X25519 key share,
    a 32-byte legacy session id echoed, the empty server_name extension that
    acknowledges SNI, ALPN h2, TLS_AES_256_GCM_SHA384 (48-byte Finished).
    Checked against Apache 2.4 / OpenSSL 3.0 on the wire: 7743 bytes
    estimated and captured for the large chain."""
    rec, enc = 5, 5 + 1 + 16
    sh_body = 2 + 32 + 1 + session_id_bytes + 2 + 1 + 2 + (4 + 2) + (4 + 2 + 2 + key_share_bytes)
    sh = rec + 4 + sh_body
    ee_ext = 2 + ((4 + 2 + 1 + len(alpn)) if alpn else 0) + (4 if sni_ack else 0)
    ee = enc + 4 + ee_ext
    cert = enc + 4 + 1 + 3 + sum(3 + n + 2 for n in chain_der_sizes)
    cv = enc + 4 + 2 + 2 + signature_bytes
    fin = enc + 4 + finished_bytes
    return sh + (6 if ccs else 0) + ee + cert + cv + fin


def segments(n_bytes: int, mss: int = MSS_BYTES) -> int:
    return math.ceil(n_bytes / mss)


# --- certificates ---------------------------------------------------------------
def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Tortoise Lab"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _derived(seed_name: str, label: str, n: int) -> bytes:
    """n bytes for one key or serial of the PKI, from its seed name and role."""
    return hashlib.sha256(f"tortoise-lab-pki:{seed_name}:{label}".encode()).digest()[:n]


def _new_key(kind: str, seed_name: str = "", label: str = ""):
    """Ed25519 keys are derived from (seed_name, label); RSA keys are random."""
    if kind == "ed25519":
        return ed25519.Ed25519PrivateKey.from_private_bytes(_derived(seed_name, label, 32))
    if kind in ("rsa-4096", "rsa-2048"):
        return rsa.generate_private_key(public_exponent=65537, key_size=int(kind[4:]))
    raise ValueError(f"key kind: {kind!r}")


def _sig_bytes(key) -> int:
    """Length of a signature this key makes (Ed25519: always 64)."""
    return key.key_size // 8 if isinstance(key, rsa.RSAPrivateKey) else 64


def _sign_hash(issuer_key):
    """Ed25519 signs the message itself (no separate hash algorithm)."""
    return None if isinstance(issuer_key, ed25519.Ed25519PrivateKey) else hashes.SHA256()


def _ski(key) -> x509.SubjectKeyIdentifier:
    return x509.SubjectKeyIdentifier.from_public_key(key.public_key())


def _build(subject: str, key, issuer_cert: x509.Certificate | None, issuer_key, *, ca: bool,
           path_len: int | None = None, sans: list[str] | None = None, padding: int | None = None,
           serial_seed: str = "") -> x509.Certificate:
    serial = int.from_bytes(_derived(serial_seed, f"serial:{subject}", 16), "big") >> 1  # positive, < 2^127
    b = (x509.CertificateBuilder()
         .subject_name(_name(subject))
         .issuer_name(issuer_cert.subject if issuer_cert is not None else _name(subject))
         .public_key(key.public_key())
         .serial_number(serial)
         .not_valid_before(NOT_BEFORE)
         .not_valid_after(NOT_AFTER)
         .add_extension(x509.BasicConstraints(ca=ca, path_length=path_len if ca else None), critical=True)
         .add_extension(_ski(key), critical=False))
    if issuer_cert is not None:
        b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                            critical=False)
    if ca:
        b = b.add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                          data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                          crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
    else:
        b = (b.add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                           key_encipherment=isinstance(key, rsa.RSAPrivateKey),
                                           data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                           crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
             .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
             .add_extension(x509.SubjectAlternativeName([x509.DNSName(s) for s in sans or []]), critical=False))
    if padding is not None:
        # deterministic filler: sizes the certificate, says what it is
        fill = (b"tortoise lab: padding that makes this chain large enough to overflow initcwnd 3. " * (padding // 80 + 1))
        b = b.add_extension(x509.UnrecognizedExtension(PADDING_OID, fill[:padding]), critical=False)
    return b.sign(issuer_key, _sign_hash(issuer_key))


def _der(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.DER)


def _padded_leaf(target_chain: int, others: int, key, issuer_cert, issuer_key, cn: str, sans: list[str],
                 serial_seed: str = ""):
    """A leaf whose DER length is exactly target_chain - others: build it with
    padding, measure, correct (DER length fields can shift by a byte), up
    to a few tries; RSA signatures have a fixed length, so this converges."""
    want = target_chain - others
    pad = 0
    for _ in range(8):
        cert = _build(cn, key, issuer_cert, issuer_key, ca=False, sans=sans, padding=pad, serial_seed=serial_seed)
        got = len(_der(cert))
        if got == want:
            return cert
        if pad == 0 and got > want:
            raise ValueError(f"large chain target {target_chain} bytes is below the unpadded chain "
                             f"({others + got} bytes)")
        pad += want - got
    raise RuntimeError(f"could not size the large leaf to {want} bytes (last {got})")


def _write_key(path: Path, key) -> None:
    data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)


def _write_chain(path: Path, chain: list[x509.Certificate]) -> None:
    path.write_bytes(b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain))
    os.chmod(path, 0o644)


def _leaf_entry(host: str, cert_path: Path, key_path: Path, chain: list[x509.Certificate], key) -> dict:
    sizes = [len(_der(c)) for c in chain]
    flight = tls13_server_flight_bytes(sizes, _sig_bytes(key))
    return {"host": host, "cert": str(cert_path), "key": str(key_path),
            "sans": chain[0].extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            .get_values_for_type(x509.DNSName),
            "chain_certs": len(chain), "chain_der_sizes": sizes, "chain_der_bytes": sum(sizes),
            "tls13_flight_estimate_bytes": flight, "tls13_flight_segments": segments(flight)}


def rebased(pki: dict, to: Path | str) -> dict:
    """pki (a pki.json) with its files' paths moved from the folder it was
    made in (its CA's folder) to `to`: the same folder seen at another path,
    as a uml guest sees the results folder's PKI (host/guestpaths.py)."""
    return moved(pki, [(str(Path(pki["ca"]).parent), str(to))])


def make_pki(out_dir: Path, domain: str = "lab.test", seed_name: str = "", *,
             large_chain_der_bytes: int = LARGE_CHAIN_DER_BYTES, variants: Sequence[str] = VARIANTS) -> dict:
    """Create the lab CA and the three server certificate variants under
    out_dir and return their paths (also written as out_dir/pki.json):

        {"domain", "ca", "ca_key", "hosts": {"www", "static"},
         "variants": {"shared" | "separate" | "large":
             {"coalescing": bool, "key_type", "ca",
              "www":    {"host", "cert", "key", "sans", "chain_certs", "chain_der_sizes",
                         "chain_der_bytes", "tls13_flight_estimate_bytes", "tls13_flight_segments"},
              "static": {... same ...}}}}

    A variant's "cert" is the chain PEM (leaf, then intermediates; no root)
    as Apache's SSLCertificateFile wants it; "key" is mode 0600 (Apache reads
    it as root before it drops to www-data). Clients trust "ca".
    `seed_name` labels the CA's common name (e.g. the lab or run it is for)
    and seeds the Ed25519 keys and the serial numbers (see the module doc).
    The large variant's chain DER is exactly `large_chain_der_bytes`.
    `variants` picks a subset (the large one costs three RSA-4096 keys, ~2 s).
    """
    unknown = set(variants) - set(VARIANTS)
    if unknown or not variants:
        raise ValueError(f"variants: choose from {VARIANTS}, got {list(variants)}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(out_dir, 0o755)
    www, static = f"www.{domain}", f"static.{domain}"
    label = f"Tortoise Lab CA {seed_name}".strip()

    ca_key = _new_key("ed25519", seed_name, "ca")
    ca = _build(label, ca_key, None, ca_key, ca=True, path_len=None, serial_seed=seed_name)
    ca_pem, ca_key_pem = out_dir / "ca.pem", out_dir / "ca.key"
    _write_chain(ca_pem, [ca])
    _write_key(ca_key_pem, ca_key)

    # small chains: leaf <- one Ed25519 intermediate <- root
    int_key = _new_key("ed25519", seed_name, "intermediate")
    inter = _build("Tortoise Lab Ed25519 Intermediate", int_key, ca, ca_key, ca=True, path_len=0,
                   serial_seed=seed_name)
    made = _small_variants(out_dir, "", variants, (inter, int_key), str(ca_pem), "ed25519", www, static, seed_name)
    if any(v.endswith("-rsa") for v in variants):
        made.update(_rsa_variants(out_dir, variants, label, www, static, seed_name))
    if "large" in variants:
        made["large"] = _large_variant(out_dir / "large", ca, ca_key, str(ca_pem), www, static,
                                       large_chain_der_bytes, seed_name)

    pki = {"domain": domain, "ca": str(ca_pem), "ca_key": str(ca_key_pem), "hosts": {"www": www, "static": static},
           "window": {"mss_bytes": MSS_BYTES, "initcwnd_small_bytes": INITCWND_SMALL * MSS_BYTES,
                      "initcwnd_default_bytes": INITCWND_DEFAULT * MSS_BYTES},
           "variants": made}
    (out_dir / "pki.json").write_text(json.dumps(pki, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return pki


def _small_variants(out_dir: Path, suffix: str, variants: Sequence[str], issuer: tuple, ca_pem: str,
                    kind: str, www: str, static: str, seed_name: str) -> dict[str, dict]:
    """The shared and separate variants (names + suffix) of one key kind,
    leaves issued by issuer (certificate, key)."""
    inter, int_key = issuer
    made: dict[str, dict] = {}
    if "shared" + suffix in variants:
        d = out_dir / ("shared" + suffix)
        d.mkdir(exist_ok=True)
        k = _new_key(kind, seed_name, "shared" + suffix)
        leaf = _build(www, k, inter, int_key, ca=False, sans=[www, static], serial_seed=seed_name)
        _write_chain(d / "cert.pem", [leaf, inter])
        _write_key(d / "key.pem", k)
        e = _leaf_entry(www, d / "cert.pem", d / "key.pem", [leaf, inter], k)
        made["shared" + suffix] = {"coalescing": True, "key_type": kind, "ca": ca_pem,
                                   "www": e, "static": {**e, "host": static}}
    if "separate" + suffix in variants:
        d = out_dir / ("separate" + suffix)
        d.mkdir(exist_ok=True)
        made["separate" + suffix] = {"coalescing": False, "key_type": kind, "ca": ca_pem}
        for role, host in (("www", www), ("static", static)):
            k = _new_key(kind, seed_name, f"separate{suffix}-{role}")
            leaf = _build(host, k, inter, int_key, ca=False, sans=[host], serial_seed=seed_name)
            _write_chain(d / f"{role}.pem", [leaf, inter])
            _write_key(d / f"{role}.key", k)
            made["separate" + suffix][role] = _leaf_entry(host, d / f"{role}.pem", d / f"{role}.key",
                                                          [leaf, inter], k)
    return made


def _rsa_variants(out_dir: Path, variants: Sequence[str], label: str, www: str, static: str,
                  seed_name: str) -> dict[str, dict]:
    """shared-rsa and separate-rsa: the small variants under a root of their
    own (ca-rsa.pem), every key RSA-2048, for clients that accept no Ed25519
    (Chromium and NSS: docs/browser.md). RSA keys are random, but the key
    and signature sizes are fixed, so the chain's length is too."""
    ca_key = _new_key("rsa-2048")
    ca = _build(f"{label} RSA", ca_key, None, ca_key, ca=True, path_len=None, serial_seed=seed_name)
    ca_pem = out_dir / "ca-rsa.pem"
    _write_chain(ca_pem, [ca])
    int_key = _new_key("rsa-2048")
    inter = _build("Tortoise Lab RSA-2048 Intermediate", int_key, ca, ca_key, ca=True, path_len=0,
                   serial_seed=seed_name)
    return _small_variants(out_dir, "-rsa", variants, (inter, int_key), str(ca_pem), "rsa-2048", www, static,
                           seed_name)


def _large_variant(d: Path, ca, ca_key, ca_pem: str, www: str, static: str, target: int,
                   seed_name: str = "") -> dict:
    """RSA-4096 leaf <- LARGE_INTERMEDIATES RSA-4096 intermediates <- root,
    the leaf padded so that the chain DER is exactly `target` bytes."""
    d.mkdir(exist_ok=True)
    issuer, issuer_key, inters = ca, ca_key, []
    for i in range(LARGE_INTERMEDIATES):
        ik = _new_key(f"rsa-{RSA_BITS}")
        ic = _build(f"Tortoise Lab RSA Intermediate {i + 1}", ik, issuer, issuer_key, ca=True,
                    path_len=LARGE_INTERMEDIATES - 1 - i, serial_seed=seed_name)
        inters.insert(0, ic)
        issuer, issuer_key = ic, ik
    k = _new_key(f"rsa-{RSA_BITS}")
    leaf = _padded_leaf(target, sum(len(_der(c)) for c in inters), k, issuer, issuer_key,
                        www, [www, static], serial_seed=seed_name)
    _write_chain(d / "cert.pem", [leaf, *inters])
    _write_key(d / "key.pem", k)
    e = _leaf_entry(www, d / "cert.pem", d / "key.pem", [leaf, *inters], k)
    return {"coalescing": True, "key_type": "rsa-4096", "ca": ca_pem, "www": e, "static": {**e, "host": static}}


# --- what a made PKI is checked against (host/labcheck.py) -----------------------
def seed_determined(rel: str) -> bool:
    """Whether a PKI file's bytes follow from its seed name alone: the
    Ed25519 CA, the small chains and their keys (pki.json too, once its
    paths are rebased). The RSA keys of `large`, the `-rsa` variants and
    ca-rsa.pem are random: only their shape is (pem_shape)."""
    top = rel.split("/")[0]
    return not (top == "large" or top.endswith("-rsa") or top == "ca-rsa.pem")


_KEY_IDS = (x509.SubjectKeyIdentifier.oid, x509.AuthorityKeyIdentifier.oid)


def _key_kind(key) -> str:
    return f"rsa-{key.key_size}" if isinstance(key, (rsa.RSAPrivateKey, rsa.RSAPublicKey)) else type(key).__name__


def pem_shape(data: bytes) -> list[dict]:
    """What a PEM file with random keys shares with every one the generator
    makes for the same seed name: per certificate its DER length, subject,
    issuer, serial, validity, signature algorithm, key type and size and
    every extension but the key identifiers (which hash the random key);
    for a private key its type and size. ValueError for no PEM of either."""
    if b"PRIVATE KEY" in data:
        return [{"private_key": _key_kind(serialization.load_pem_private_key(data, password=None))}]
    out = []
    for c in x509.load_pem_x509_certificates(data):
        out.append({"der_bytes": len(_der(c)), "subject": c.subject.rfc4514_string(),
                    "issuer": c.issuer.rfc4514_string(), "serial": str(c.serial_number),
                    "valid": [c.not_valid_before_utc.isoformat(), c.not_valid_after_utc.isoformat()],
                    "signature": c.signature_algorithm_oid.dotted_string, "key": _key_kind(c.public_key()),
                    "extensions": [[e.oid.dotted_string, e.critical, e.value.public_bytes().hex()]
                                   for e in c.extensions if e.oid not in _KEY_IDS]})
    return out


def chain_problems(chain: bytes, ca: bytes, key: bytes | None = None) -> list[str]:
    """Why a chain PEM (leaf, then intermediates) is not one the lab's
    server can serve under this CA PEM: a certificate not signed by the
    next (the last by the CA, the CA by itself), a key (PEM) that is not
    the leaf's. [] when it holds."""
    try:
        certs, root = x509.load_pem_x509_certificates(chain), x509.load_pem_x509_certificate(ca)
    except ValueError as exc:
        return [f"not a PEM chain and CA ({exc})"]
    out = []
    for child, parent in zip([*certs, root], [*certs[1:], root, root]):
        try:
            child.verify_directly_issued_by(parent)
        except (ValueError, TypeError, InvalidSignature):
            out.append(f"{child.subject.rfc4514_string()} is not signed by {parent.subject.rfc4514_string()}")
    if key is not None:
        try:
            mine = serialization.load_pem_private_key(key, password=None).public_key()
        except (ValueError, TypeError) as exc:
            return [*out, f"the key is no PEM private key ({exc})"]
        spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        if mine.public_bytes(*spki) != certs[0].public_key().public_bytes(*spki):
            out.append("the key is not the leaf certificate's")
    return out


def load_chain(path: Path) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(Path(path).read_bytes())


def verify_chain(ca_pem: Path, chain_pem: Path, host: str) -> list[x509.Certificate]:
    """Verify a chain PEM for `host` against the lab CA with OpenSSL, the
    library the lab's clients and Apache use (`openssl verify`, strict, TLS
    server purpose, host name checked). cryptography's web-PKI verifier is not
    used: the CA/Browser Forum profile it enforces forbids Ed25519 keys, which
    OpenSSL's TLS accepts. Returns the path (leaf ... root); raises
    VerificationError naming OpenSSL's reason."""
    argv = ["openssl", "verify", "-x509_strict", "-purpose", "sslserver", "-verify_hostname", host,
            "-CAfile", str(ca_pem), "-untrusted", str(chain_pem), str(chain_pem)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30, encoding="utf-8", errors="replace")
    if r.returncode != 0:
        raise VerificationError(f"{chain_pem} for {host}: {(r.stdout + r.stderr).strip()}")
    return [*load_chain(chain_pem), *load_chain(ca_pem)]
