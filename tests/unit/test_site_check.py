"""A results folder's staged imported site (`.lab/imported/NAME`) checked as
the lab's own site is (host/sitecheck.py, host/labcheck.py; issue 55,
docs/your-own-site.md "Checking a results folder"): against the import on
this machine (`--sites`) and the import id each run's record carries; a
tampered body, a forged site.json that agrees with its bodies, a forged
certificate and a link are each named, and `tortoise verify`, `report`
and `grade`'s readers refuse the folder."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from tortoiselab.host import assets, labcheck, provenance, sitecheck, sites, store, verify
from tortoiselab.host.errors import RunnerError
from tortoiselab.host.manifests import write_manifest
from tortoiselab.host.verifycli import cli_verify
from tortoiselab.web import harserve, harsite

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "har" / "multi-origin.har"
RUNS = ("a1a1a1a1a1a1", "b2b2b2b2b2b2")


def _record(exp: Path, rid: str, sid: str | None) -> None:
    """A run of the imported site `shop` as the runner stores it: its
    record (client.site, and meta.seeds.imported_site the id of the copy
    it loaded) and its manifest."""
    d = exp / rid
    d.mkdir()
    seeds = {"run": 1} | ({provenance.IMPORTED_SITE: sid} if sid else {})
    store.write_record(d, {"run_id": rid, "experiment": exp.name, "repetition": 0, "seed": 1,
                           "config": {"client": {"site": "shop", "loader": "chromium"}}, "ok": True,
                           "path": {"rtt_ms": 100.0, "loss_pct": 0.0, "rate_mbit": 50.0},
                           "summary": {"plt_ms": 1000.0}, "meta": {"seeds": seeds}})
    write_manifest(d)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A results folder as `tortoise run experiments/your-site.yaml` leaves it:
    the lab's .lab, the site `shop` staged into it from sites/shop, and two
    runs whose records carry its id."""
    root = tmp_path_factory.mktemp("sitecheck")
    sites.import_har(FIXTURE, root / "sites", "shop", tokens=frozenset({"session_token"}))
    exp = root / "results" / "your-site@ci"
    exp.mkdir(parents=True)
    assets.lab_assets(exp, certs={"shared-rsa"})
    sid = sites.stage_for_experiment(exp, {"shop"}, root / "sites")["shop"]
    for rid in RUNS:
        _record(exp, rid, sid)
    return exp


@pytest.fixture
def folder(made, tmp_path):
    """A copy of `made` to tamper with, and its sites folder."""
    shutil.copytree(made.parent.parent / "sites", tmp_path / "sites", symlinks=True)
    exp = tmp_path / "results" / made.name
    shutil.copytree(made, exp, symlinks=True)
    return exp, tmp_path / "sites"


def _staged(exp: Path) -> Path:
    return exp / ".lab" / "imported" / "shop"


def _differences(exp: Path, sites_dir: Path | None) -> list[tuple[str, str]]:
    return labcheck.check_lab(exp, sites_dir=sites_dir).differences


def _forge_body(exp: Path) -> tuple[str, str]:
    """The largest body changed (same size) and site.json rewritten to name
    it: a copy that agrees with itself (host/sites.load_site passes) but is
    not the import its runs loaded. (old, new) body hash."""
    staged = _staged(exp)
    site = json.loads((staged / "site.json").read_bytes())
    key, resp = max(site["responses"].items(), key=lambda kv: kv[1]["bytes"])
    old = resp["body"]
    body = bytearray((staged / "bodies" / old).read_bytes())
    body[-10:] = b"0123456789"
    new = hashlib.sha256(body).hexdigest()
    (staged / "bodies" / new).write_bytes(bytes(body))
    (staged / "bodies" / old).unlink()
    for r in site["responses"].values():
        if r["body"] == old:
            r["body"] = new
    (staged / "site.json").write_bytes(harsite.site_bytes(site))
    sites.load_site(staged.parent, "shop")  # whole in itself
    return old, new


def test_a_staged_site_as_made_passes(made):
    """With the import here, and without it (the records' ids back it):
    every file of the copy is compared, the PKI by shape and signature."""
    sites_dir = made.parent.parent / "sites"
    for where in (sites_dir, None):
        c = labcheck.check_lab(made, sites_dir=where)
        assert c.ok, c.lines()
    staged = _staged(made)
    n = len(list((staged / "bodies").iterdir())) + len(list((staged / "pki").iterdir())) + 1
    assert c.files >= n + 170
    got = sitecheck.recorded_ids(made)
    assert got == {"shop": {r: hashlib.sha256((staged / "site.json").read_bytes()).hexdigest() for r in RUNS}}


def test_a_changed_body_is_named(folder):
    exp, sites_dir = folder
    body = max((_staged(exp) / "bodies").iterdir(), key=lambda p: p.stat().st_size)
    data = bytearray(body.read_bytes())
    data[0] ^= 1
    body.write_bytes(bytes(data))
    for where in (sites_dir, None):
        (rel, what), = _differences(exp, where)
        assert rel == f"imported/shop/bodies/{body.name}" and "as made, other bytes" in what, (rel, what)


def test_a_forged_site_json_that_agrees_with_its_bodies_is_refused(folder):
    """The attack a whole-in-itself check misses: body and site.json changed
    together. Without the import here the records' ids catch it; with it,
    the import does as well."""
    exp, sites_dir = folder
    _forge_body(exp)
    diffs = dict(_differences(exp, None))
    assert list(diffs) == ["imported/shop/site.json"], diffs
    assert "not the import's id the records of 2 runs that loaded it carry" in diffs["imported/shop/site.json"]
    whats = [w for r, w in _differences(exp, sites_dir) if r == "imported/shop/site.json"]
    assert any(f"another import than {sites_dir / 'shop'}" in w for w in whats), whats


def test_records_forged_too_are_caught_by_the_import(folder):
    """A forger who also rewrites each record's id (and its manifest) is
    caught by a grader who holds the import; without it, nothing can tell."""
    exp, sites_dir = folder
    _forge_body(exp)
    forged = hashlib.sha256((_staged(exp) / "site.json").read_bytes()).hexdigest()
    for rid in RUNS:
        shutil.rmtree(exp / rid)
        _record(exp, rid, forged)
    assert _differences(exp, None) == []  # said in the module's doc and docs/your-own-site.md
    (rel, what), = _differences(exp, sites_dir)
    assert rel == "imported/shop/site.json" and "another import than" in what


def test_records_without_an_id_and_no_import_back_nothing(folder):
    exp, sites_dir = folder
    for rid in RUNS:
        shutil.rmtree(exp / rid)
        _record(exp, rid, None)
    (rel, what), = _differences(exp, None)
    assert rel == "imported/shop/site.json" and "nothing backs it" in what and "--sites DIR" in what
    assert _differences(exp, sites_dir) == []  # the import here backs it


def test_a_forged_certificate_is_named(folder, tmp_path):
    """One certificate group's chain and key replaced by those of a PKI made
    anew for the same site: right names and shape, but not signed by the
    copy's CA. And a group's leaf made to cover every host (coalescing the
    recording never did): its shape differs."""
    exp, sites_dir = folder
    pki = _staged(exp) / "pki"
    site = json.loads((_staged(exp) / "site.json").read_bytes())
    harserve.make_site_pki(tmp_path / "other", site, "site shop")
    gid = site["certificates"][0]["id"]
    shutil.copy(tmp_path / "other" / f"{gid}.pem", pki / f"{gid}.pem")
    diffs = _differences(exp, sites_dir)
    assert diffs and {r for r, _ in diffs} == {f"imported/shop/pki/{gid}.pem"}, diffs
    assert any("is not signed by" in w for _, w in diffs) and any("not the leaf certificate's" in w for _, w in diffs)
    wide = json.loads(json.dumps(site))
    wide["certificates"][0]["hosts"] = sorted({h for g in site["certificates"] for h in g["hosts"]})
    harserve.make_site_pki(tmp_path / "wide", wide, "site shop")
    for f in (f"{gid}.pem", f"{gid}.key", "ca.pem"):
        shutil.copy(tmp_path / "wide" / f, pki / f)
    whats = dict(_differences(exp, sites_dir))
    assert "not a certificate chain or key of the shape" in whats[f"imported/shop/pki/{gid}.pem"], whats


def test_a_link_is_named_never_followed(folder, tmp_path):
    exp, sites_dir = folder
    body = next((_staged(exp) / "bodies").iterdir())
    outside = tmp_path / "outside"
    outside.write_bytes(body.read_bytes())
    body.unlink()
    body.symlink_to(outside)
    outside.chmod(0)  # were it followed, reading it would fail
    try:
        (rel, what), = _differences(exp, sites_dir)
    finally:
        outside.chmod(0o644)
    assert rel == f"imported/shop/bodies/{body.name}" and "a link" in what
    os.unlink(body)
    _staged(exp).rename(exp / "elsewhere")
    (_staged(exp)).symlink_to(exp / "elsewhere")
    (rel, what), = _differences(exp, sites_dir)
    assert rel == "imported/shop" and "is a link or no folder" in what


def test_a_missing_copy_and_an_extra_file_are_named(folder):
    exp, sites_dir = folder
    (_staged(exp) / "bodies" / "extra").write_bytes(b"x")
    (rel, what), = _differences(exp, sites_dir)
    assert rel == "imported/shop/bodies/extra" and "a file the generator does not make" in what
    shutil.rmtree(_staged(exp))
    (rel, what), = _differences(exp, sites_dir)
    assert rel == "imported/shop" and f"missing: 2 runs loaded it ({', '.join(RUNS)})" in what


def test_readers_refuse_a_tampered_copy(folder, capsys):
    """`tortoise verify` exits 1 naming the file; report's and grade's
    readers (verify.admitted) refuse every run, or leave them out."""
    exp, sites_dir = folder
    assert cli_verify(exp, sites_dir=sites_dir) == 0
    _forge_body(exp)
    capsys.readouterr()
    assert cli_verify(exp, sites_dir=sites_dir) == 1
    out = capsys.readouterr().out
    assert ".lab failing" in out and f"{_staged(exp) / 'site.json'}: is another import than" in out, out
    with pytest.raises(verify.DamagedFolder, match="imported/shop/site.json"):
        with verify.admitted([exp], False, "tortoise report", sites_dir):
            pass
    with verify.admitted([exp], True, "tortoise report", None) as left_out:
        assert len(left_out) == 2 and store.read_records(exp) == []
    with pytest.raises(RunnerError, match="imported/shop/site.json"):
        labcheck.refuse_other_lab(exp)  # a resume into it: refused before any run


def test_the_record_carries_the_id_of_the_copy_it_loaded(made):
    staged = _staged(made)
    seeds = provenance.run_seeds(1, 2, made / ".lab" / "site", "x", {}, "virtual", imported=staged)
    assert seeds[provenance.IMPORTED_SITE] == sites.load_site(staged.parent, "shop")[1]
    assert provenance.IMPORTED_SITE not in provenance.run_seeds(1, 2, made / ".lab" / "site", "x", {}, "virtual")

