"""A results folder's .lab against its generators (host/labcheck.py; issue
50, "a tampered site passes an audited grade"): the comparison of file
digests (pure), a real .lab made by host/assets.py and then tampered as
the attack did, the PKI's random-key files by shape and signature, and the
readers that act on it (tortoise run refuses, verify and report name it)."""

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from tortoiselab.host import assets, labcheck, verify
from tortoiselab.host.errors import RunnerError
from tortoiselab.web import pki


def test_tree_differences_names_each_kind():
    want = {"www/a.html": (10, "a" * 64), "www/b.png": (5, "b" * 64), "manifest.json": (3, "c" * 64),
            "large/cert.pem": ("shape", "d" * 64), "pki.json": ("json", "e" * 64)}
    found = {"www/a.html": (4, None), "www/b.png": (5, "f" * 64), "www/extra.bin": (7, None),
             "manifest.json": "a link", "large/cert.pem": (99, "0" * 64), "pki.json": (9, "e" * 64)}
    assert labcheck.tree_differences(want, found) == [
        ("large/cert.pem", "not a certificate chain or key of the shape the generator makes (names, serials, "
                           "validity, extensions, key types and sizes, DER lengths)"),
        ("manifest.json", "is a link, not the generator's file"),
        ("www/a.html", f"4 bytes, the generator makes 10 bytes (sha256 {'a' * 12})"),
        ("www/b.png", f"5 bytes as made, other bytes: sha256 {'f' * 12}, the generator's {'b' * 12}"),
        ("www/extra.bin", "7 bytes, a file the generator does not make")]
    assert labcheck.tree_differences(want, {k: v for k, v in want.items()}) == []
    assert labcheck.tree_differences({"x": (1, "a" * 64)}, {}) == [("x", "missing: the generator makes it")]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A .lab as tortoise run makes it (host/assets.lab_assets), with the
    large chain of lab 4; later tests copy it before tampering."""
    exp = tmp_path_factory.mktemp("labcheck") / "initcwnd@reduced"
    exp.mkdir()
    assets.lab_assets(exp, certs={"large", "shared"})
    return exp


def _copy(made: Path, tmp_path: Path) -> Path:
    import shutil
    exp = tmp_path / made.name
    shutil.copytree(made, exp, symlinks=True)
    return exp


def test_a_lab_as_made_passes_fast(made):
    labcheck.check_lab(made)  # the generators' digests kept in the user's cache
    t0 = time.monotonic()
    c = labcheck.check_lab(made)
    took = time.monotonic() - t0
    assert c.ok, c.lines()
    assert c.files > 170 and took < 5, (c.files, took)


def cut_article(site) -> None:
    """Issue 50's tampered site: article.html cut from 160,000 to 39,667
    bytes and the site's manifest.json made to agree (document bytes,
    sha256, totals)."""
    cut = (site / "www" / "article.html").read_bytes()[:39_667]
    (site / "www" / "article.html").write_bytes(cut)
    m = json.loads((site / "manifest.json").read_text())
    page = m["pages"]["article.html"]
    page["document"].update(bytes=len(cut), sha256=hashlib.sha256(cut).hexdigest())
    page["document_bytes"] = page["total_bytes"] = len(cut)
    m["totals"]["bytes"] -= 160_000 - len(cut)
    (site / "manifest.json").write_text(json.dumps(m, indent=1, sort_keys=True) + "\n")


def test_the_issue_50_site_attack_is_named(made, tmp_path):
    """article.html cut from 160,000 to 39,667 bytes and the manifest made
    to agree (document bytes, sha256, total): both files named, sizes shown."""
    exp = _copy(made, tmp_path)
    site = exp / ".lab" / "site"
    cut_article(site)
    c = labcheck.check_lab(exp)
    assert [rel for rel, _ in c.differences] == ["site/manifest.json", "site/www/article.html"]
    assert dict(c.differences)["site/www/article.html"].startswith("39,667 bytes, the generator makes 160,000 bytes")
    # tortoise run refuses such a folder before any run, naming the file and the fix
    with pytest.raises(RunnerError) as e:
        labcheck.refuse_other_lab(exp)
    assert "article.html: 39,667 bytes" in str(e.value) and "move" in str(e.value) and "fresh folder" in str(e.value)
    # verify names it (a folder problem), and a reader's admission leaves every run out
    problems = verify.lab_problems(exp)
    assert {p.file.name for p in problems} == {"manifest.json", "article.html"} and all(p.run is None for p in problems)


def test_same_size_other_bytes_a_giant_and_a_link(made, tmp_path):
    exp = _copy(made, tmp_path)
    site = exp / ".lab" / "site"
    f = site / "www" / "tiny.html"
    data = bytearray(f.read_bytes())
    data[100] ^= 1
    f.write_bytes(bytes(data))
    os.truncate(site / "www" / "objects" / "500.bin", 10**12)  # sparse: named by its size, never read
    (site / "static" / "css").rename(site / "static" / "css-real")
    os.symlink("css-real", site / "static" / "css")
    (exp / ".lab" / "SITE_VERSION").write_text("0" * 16 + "\n")
    t0 = time.monotonic()
    c = labcheck.check_lab(exp)
    assert time.monotonic() - t0 < 5
    d = dict(c.differences)
    assert d["site/www/tiny.html"].startswith(f"{len(data):,} bytes as made, other bytes")
    assert d["site/www/objects/500.bin"] == (f"1,000,000,000,000 bytes, the generator makes 500 bytes (sha256 "
                                             f"{labcheck.expected_site()['www/objects/500.bin'][1][:12]})")
    assert d["site/static/css"] == "is a link, not the generator's file"
    assert d["SITE_VERSION"] == f"'{'0' * 16}', this page generator is {assets.site_version()!r}"


def test_pki_files_by_bytes_and_by_shape(made, tmp_path):
    """The Ed25519 CA and small chains are the seed name's bytes; the large
    chain's RSA keys are random, so it is held to its shape and signatures:
    another chain of another length, one signed by a CA of its own, a key
    that is not its leaf's, are each named; pki.json too."""
    exp = _copy(made, tmp_path)
    p = exp / ".lab" / "pki"
    other = tmp_path / "other"
    pki.make_pki(other, seed_name="someone-else", variants=["shared", "large"])
    (p / "shared" / "cert.pem").write_bytes((other / "shared" / "cert.pem").read_bytes())
    (p / "large" / "key.pem").write_bytes((other / "large" / "key.pem").read_bytes())
    doc = json.loads((p / "pki.json").read_text())
    doc["variants"]["shared"]["coalescing"] = False
    (p / "pki.json").write_text(json.dumps(doc))
    d = labcheck.check_lab(exp).differences
    names = [rel for rel, _ in d]
    assert "pki/shared/cert.pem" in names and "pki/pki.json" in names
    assert ("pki/large/cert.pem", "the key is not the leaf certificate's") in d
    # a large chain from another CA: same shape but for the issuer's name, and not signed by the folder's CA
    exp2 = _copy(made, tmp_path / "b")
    (exp2 / ".lab" / "pki" / "large" / "cert.pem").write_bytes((other / "large" / "cert.pem").read_bytes())
    (exp2 / ".lab" / "pki" / "large" / "key.pem").write_bytes((other / "large" / "key.pem").read_bytes())
    d2 = labcheck.check_lab(exp2).differences
    assert any(rel == "pki/large/cert.pem" and "is not signed by" in what for rel, what in d2), d2
    # the folder's own name is the seed name (as the runner makes it): another name, another CA
    assert "pki/ca.pem" in [rel for rel, _ in labcheck.check_lab(made, seed_name="initcwnd@ci").differences]


def test_a_copy_without_lab_is_not_compared(tmp_path):
    exp = tmp_path / "x@ci"
    (exp / ".lab" / "site").mkdir(parents=True)
    c = labcheck.check_lab(exp)
    assert c.ok and "has no READY" in c.unchecked
    link = tmp_path / "y@ci"
    link.mkdir()
    os.symlink(exp / ".lab", link / ".lab")
    assert labcheck.check_lab(link).differences == [("", "is a link or no folder, not the lab's pages and PKI")]
