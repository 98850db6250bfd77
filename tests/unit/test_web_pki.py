import json
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from cryptography.x509.verification import VerificationError

from tortoiselab.web import pki as P

WWW, STATIC = "www.lab.test", "static.lab.test"


@pytest.fixture(scope="module")
def lab_pki(tmp_path_factory):
    return P.make_pki(tmp_path_factory.mktemp("pki"), seed_name="unit")  # ~2 s: three RSA-4096 keys


def sans(path: str) -> list[str]:
    leaf = P.load_chain(Path(path))[0]
    return leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)


def test_sans_per_variant(lab_pki):
    v = lab_pki["variants"]
    assert set(v) == {"shared", "separate", "large", "shared-rsa", "separate-rsa"}
    assert v["shared"]["www"]["cert"] == v["shared"]["static"]["cert"]
    assert sorted(sans(v["shared"]["www"]["cert"])) == sorted([WWW, STATIC])
    assert v["separate"]["www"]["cert"] != v["separate"]["static"]["cert"]
    assert sans(v["separate"]["www"]["cert"]) == [WWW]
    assert sans(v["separate"]["static"]["cert"]) == [STATIC]
    assert v["large"]["www"]["cert"] == v["large"]["static"]["cert"]
    assert sorted(sans(v["large"]["www"]["cert"])) == sorted([WWW, STATIC])
    assert [v[n]["coalescing"] for n in ("shared", "separate", "large")] == [True, False, True]
    assert sorted(sans(v["shared-rsa"]["www"]["cert"])) == sorted([WWW, STATIC])
    assert sans(v["separate-rsa"]["static"]["cert"]) == [STATIC]
    assert [v[n]["coalescing"] for n in ("shared-rsa", "separate-rsa")] == [True, False]
    assert "unit" in P.load_chain(Path(lab_pki["ca"]))[0].subject.rfc4514_string()


@pytest.mark.parametrize("variant", ["shared", "separate", "large", "shared-rsa", "separate-rsa"])
@pytest.mark.parametrize("role", ["www", "static"])
def test_chain_verifies_to_the_ca(lab_pki, variant, role):
    e = lab_pki["variants"][variant][role]
    ca = lab_pki["variants"][variant]["ca"]  # the rsa variants have a root of their own
    assert (ca == lab_pki["ca"]) == (not variant.endswith("-rsa"))
    path = P.verify_chain(Path(ca), Path(e["cert"]), e["host"])
    assert path[-1] == P.load_chain(Path(ca))[0]
    assert len(path) == e["chain_certs"] + 1  # + the root, which the chain file does not carry
    if shutil.which("openssl"):
        r = subprocess.run(["openssl", "verify", "-CAfile", ca, "-untrusted", e["cert"],
                            "-verify_hostname", e["host"], e["cert"]], capture_output=True, text=True)
        assert r.returncode == 0 and ": OK" in r.stdout, r.stdout + r.stderr


def test_separate_certificate_does_not_cover_the_other_host(lab_pki):
    e = lab_pki["variants"]["separate"]
    with pytest.raises(VerificationError):
        P.verify_chain(Path(lab_pki["ca"]), Path(e["www"]["cert"]), STATIC)
    with pytest.raises(VerificationError):
        P.verify_chain(Path(lab_pki["ca"]), Path(e["static"]["cert"]), WWW)


def test_keys_match_and_are_private(lab_pki):
    for variant, d in lab_pki["variants"].items():
        for role in ("www", "static"):
            e = d[role]
            key = serialization.load_pem_private_key(Path(e["key"]).read_bytes(), None)
            leaf = P.load_chain(Path(e["cert"]))[0]
            pub = serialization.PublicFormat.SubjectPublicKeyInfo
            assert key.public_key().public_bytes(serialization.Encoding.DER, pub) == \
                leaf.public_key().public_bytes(serialization.Encoding.DER, pub)
            assert stat.S_IMODE(Path(e["key"]).stat().st_mode) == 0o600
            if variant == "large":
                assert isinstance(key, rsa.RSAPrivateKey) and key.key_size == 4096
            elif variant.endswith("-rsa"):
                assert isinstance(key, rsa.RSAPrivateKey) and key.key_size == 2048
            else:
                assert isinstance(key, ed25519.Ed25519PrivateKey)
    assert json.loads((Path(lab_pki["ca"]).parent / "pki.json").read_text()) == lab_pki


def test_large_chain_overflows_initcwnd_3_and_fits_initcwnd_10(lab_pki):
    e = lab_pki["variants"]["large"]["www"]
    chain = P.load_chain(Path(e["cert"]))
    der = [len(c.public_bytes(serialization.Encoding.DER)) for c in chain]
    assert der == e["chain_der_sizes"] and sum(der) == e["chain_der_bytes"] == P.LARGE_CHAIN_DER_BYTES == 6908
    assert len(chain) == 1 + P.LARGE_INTERMEDIATES == 3
    assert all(c.public_key().key_size == 4096 for c in chain)
    flight = e["tls13_flight_estimate_bytes"]
    assert flight == P.tls13_server_flight_bytes(der, 512)
    # the certificate alone already overflows 3 segments; the whole flight fits in 10, with margin
    assert sum(der) > 3 * P.MSS_BYTES + 1000
    assert flight < 10 * P.MSS_BYTES - 4000
    assert 4 <= e["tls13_flight_segments"] <= 7


def test_small_chains_fit_one_segment(lab_pki):
    for variant in ("shared", "separate"):
        for role in ("www", "static"):
            e = lab_pki["variants"][variant][role]
            assert e["chain_certs"] == 2 and e["chain_der_bytes"] < 1200
            assert e["tls13_flight_estimate_bytes"] <= P.MSS_BYTES


def test_flight_estimate_matches_a_capture():
    # captured on lo: Apache 2.4 / OpenSSL 3.0, TLS_AES_256_GCM_SHA384, X25519,
    # ALPN h2, chain DER 4568 + 1402 + 938 with RSA-4096 keys: 7743 bytes from
    # the server between the ClientHello and the client's Finished
    assert P.tls13_server_flight_bytes([4568, 1402, 938], 512) == 7743


def test_variant_subset_and_bad_names(tmp_path):
    r = P.make_pki(tmp_path / "p", variants=("shared",))
    assert set(r["variants"]) == {"shared"}
    assert not (tmp_path / "p" / "large").exists()
    with pytest.raises(ValueError, match="variants"):
        P.make_pki(tmp_path / "q", variants=("huge",))


def test_same_seed_name_same_small_chains(tmp_path):
    """Deterministic PKI (docs/determinism.md): the same seed name gives
    byte-identical small chains and keys, another seed name other ones."""
    a, b, c = (P.make_pki(tmp_path / n, seed_name=s, variants=("shared", "separate"))
               for n, s in (("a", "exp"), ("b", "exp"), ("c", "other")))
    for variant, role in (("shared", "www"), ("separate", "www"), ("separate", "static")):
        files = [Path(x["variants"][variant][role]["cert"]).read_bytes() for x in (a, b, c)]
        keys = [Path(x["variants"][variant][role]["key"]).read_bytes() for x in (a, b, c)]
        assert files[0] == files[1] and keys[0] == keys[1]
        assert files[0] != files[2] and keys[0] != keys[2]
    assert Path(a["ca"]).read_bytes() == Path(b["ca"]).read_bytes()
