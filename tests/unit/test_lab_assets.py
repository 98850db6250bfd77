"""An experiment's pages and PKI (host/assets.py): made once per results
folder, and the pages made again when the page generator changed since (a
folder made before a page existed served 404 for it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tortoiselab.host import assets, guestpaths
from tortoiselab.host.errors import RunnerError
from tortoiselab.web import images
from tortoiselab.web import pki as pkimod


def test_made_once_then_reused(tmp_path):
    site, pki = assets.lab_assets(tmp_path)
    mark = site / "MARK"
    mark.write_text("x")
    assert assets.lab_assets(tmp_path) == (site, pki) and mark.exists()  # not made again


def test_a_changed_generator_makes_the_site_again_and_keeps_the_pki(tmp_path):
    site, pki = assets.lab_assets(tmp_path)
    cert = {p.name: p.read_bytes() for p in pki.iterdir() if p.is_file()}
    page = next(p for p in (site / "www").iterdir() if p.suffix == ".html")
    before = page.read_bytes()
    page.unlink()  # a page the old generator did not make
    (tmp_path / ".lab" / "SITE_VERSION").write_text("an older generator\n")
    site2, pki2 = assets.lab_assets(tmp_path)
    assert (site2, pki2) == (site, pki)
    assert page.read_bytes() == before  # back, and the same bytes (pages depend only on the seed)
    assert {p.name: p.read_bytes() for p in pki.iterdir() if p.is_file()} == cert
    assert (tmp_path / ".lab" / "SITE_VERSION").read_text().strip() == assets.site_version()
    assert not [p for p in (tmp_path / ".lab").iterdir() if ".tmp-" in p.name or ".old-" in p.name]


def test_a_folder_from_before_the_version_file_is_brought_up_to_date(tmp_path):
    site, _ = assets.lab_assets(tmp_path)
    (tmp_path / ".lab" / "SITE_VERSION").unlink()
    (site / "www" / "app.html").unlink(missing_ok=True)
    assets.lab_assets(tmp_path)
    assert (site / "www" / "app.html").exists()


def test_a_pki_seen_at_another_path_names_its_files_there(tmp_path):
    """A uml guest sees the results folder's PKI at a fixed path of its own
    (host/guestpaths.py GUEST_RO): every file pki.json names moves with it,
    and nothing else does."""
    made = pkimod.make_pki(tmp_path / "r" / ".lab" / "pki", seed_name="t")
    moved = pkimod.rebased(json.loads((tmp_path / "r" / ".lab" / "pki" / "pki.json").read_text()),
                           "/run/tortoise-ro/0/pki")
    assert moved["ca"] == "/run/tortoise-ro/0/pki/ca.pem" and moved["domain"] == made["domain"]
    for name, v in made["variants"].items():
        for host in ("www", "static"):
            if host in v:
                assert moved["variants"][name][host]["cert"] == \
                    "/run/tortoise-ro/0/pki" + v[host]["cert"][len(str(tmp_path / "r" / ".lab" / "pki")):]
    flat = json.dumps(moved)
    assert str(tmp_path) not in flat
    assert pkimod.rebased(made, tmp_path / "r" / ".lab" / "pki") == made  # the same place: unchanged


def test_a_uml_request_names_its_read_only_folders_at_the_guests_paths():
    req = {"site_dir": "/r/x/.lab/site", "pki_dir": "/r/x/.lab/pki", "ro_paths": ["/r/x/.lab", "/r/x/.lab/tr"],
           "path": {"trace_down": "/r/x/.lab/tr/lte.down", "other": "/r/x/.labz/f"}, "n": 3}
    out = guestpaths.guest_request(req, req["ro_paths"])
    g = guestpaths.GUEST_RO
    assert out["site_dir"] == f"{g}/0/site" and out["pki_dir"] == f"{g}/0/pki"
    assert out["path"] == {"trace_down": f"{g}/1/lte.down", "other": "/r/x/.labz/f"}  # the deeper folder's own mount
    assert out["ro_paths"] == [f"{g}/0", f"{g}/1"] and out["n"] == 3


def test_a_changed_image_encoder_is_a_changed_generator(tmp_path, monkeypatch):
    """The site's images come from web/images.py: a change there makes a
    results folder's site again, as one in web/pages.py does."""
    before = assets.site_version()
    copy = tmp_path / "images.py"
    copy.write_bytes(Path(images.__file__).read_bytes() + b"\n# changed\n")
    monkeypatch.setattr(images, "__file__", str(copy))
    assert assets.site_version() != before


def _files(folder: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file below folder -> (bytes, inode, mtime_ns): a file rewritten,
    even with the same bytes, shows."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_ino, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_groups_of_certificate_variants_that_are_made_together():
    g = assets.pki_groups
    assert g(["shared"]) == g(["separate"]) == g(["shared", "separate"]) == (("shared", "separate"),)
    assert g(["separate-rsa"]) == g(["shared-rsa"]) == (("shared-rsa", "separate-rsa"),)  # one RSA root for both
    assert g(["large", "shared"]) == (("shared", "separate"), ("large",))
    assert g(pkimod.VARIANTS) == assets.PKI_GROUPS
    assert sorted(v for grp in assets.PKI_GROUPS for v in grp) == sorted(pkimod.VARIANTS)
    assert assets.missing_groups({"shared", "separate"}, ["large", "shared"]) == (("large",),)
    assert assets.missing_groups({"shared", "separate", "shared-rsa"}, ["shared-rsa"]) == \
        (("shared-rsa", "separate-rsa"),)  # a group is made whole
    assert assets.missing_groups(pkimod.VARIANTS, pkimod.VARIANTS) == ()
    with pytest.raises(ValueError, match="server.cert"):
        g(["huge"])


def test_a_new_folder_gets_only_the_groups_its_runs_use(tmp_path):
    """quick.yaml's runs all use `shared`: no RSA key is made (the large
    chain's three RSA-4096 keys and the -rsa variants' cost ~1.3 s)."""
    _, pki = assets.lab_assets(tmp_path, certs={"shared"})
    made = json.loads((pki / "pki.json").read_text())
    assert sorted(made["variants"]) == ["separate", "shared"]
    assert sorted(p.name for p in pki.iterdir()) == ["ca.key", "ca.pem", "pki.json", "separate", "shared"]
    (tmp_path / "x").mkdir()
    _, pki2 = assets.lab_assets(tmp_path / "x", certs={"large", "separate-rsa"})
    assert sorted(json.loads((pki2 / "pki.json").read_text())["variants"]) == ["large", "separate-rsa", "shared-rsa"]


def test_a_group_a_later_invocation_needs_is_added_without_touching_the_pki_made_before(tmp_path):
    _, pki = assets.lab_assets(tmp_path, certs={"separate"})
    before = _files(pki)
    old = json.loads((pki / "pki.json").read_text())
    assert assets.lab_assets(tmp_path, certs={"shared", "large", "shared-rsa"})[1] == pki
    after = _files(pki)
    assert {k: v for k, v in after.items() if k in before and k != "pki.json"} == \
        {k: v for k, v in before.items() if k != "pki.json"}  # the same bytes, never rewritten
    new = json.loads((pki / "pki.json").read_text())
    assert sorted(new["variants"]) == sorted(pkimod.VARIANTS)
    assert {k: v for k, v in new.items() if k != "variants"} == {k: v for k, v in old.items() if k != "variants"}
    assert all(new["variants"][v] == old["variants"][v] for v in old["variants"])
    assert str(tmp_path / ".lab" / "pki.tmp") not in json.dumps(new)
    assert not [p for p in (tmp_path / ".lab").iterdir() if ".tmp-" in p.name]
    for name in ("large", "shared-rsa", "separate-rsa"):  # the new chains verify against the folder's own roots
        v = new["variants"][name]
        for role in ("www", "static"):
            assert Path(v[role]["cert"]).parent.parent == pki
            pkimod.verify_chain(Path(v["ca"]), Path(v[role]["cert"]), v[role]["host"])
    assert new["variants"]["large"]["ca"] == str(pki / "ca.pem")
    assert new["variants"]["large"]["www"]["chain_der_bytes"] == pkimod.LARGE_CHAIN_DER_BYTES
    assert new["variants"]["shared-rsa"]["ca"] == new["variants"]["separate-rsa"]["ca"] == str(pki / "ca-rsa.pem")
    again = _files(pki)
    assets.lab_assets(tmp_path, certs=pkimod.VARIANTS)  # nothing lacking: nothing made
    assert _files(pki) == again


def test_a_folder_made_with_every_variant_is_left_as_it_is(tmp_path):
    _, pki = assets.lab_assets(tmp_path)  # the default: every variant, as folders made before the groups
    before = _files(pki)
    for certs in ({"shared"}, {"large"}, {"separate-rsa", "shared"}):
        assets.lab_assets(tmp_path, certs=certs)
        assert _files(pki) == before


def test_the_leftover_of_an_interrupted_extension_is_replaced(tmp_path):
    """Files of a group moved in before pki.json named them (an extension
    interrupted in between) are not part of the PKI: made again."""
    _, pki = assets.lab_assets(tmp_path, certs={"shared"})
    (pki / "large").mkdir()
    (pki / "large" / "cert.pem").write_text("half made\n")
    assets.lab_assets(tmp_path, certs={"large"})
    v = json.loads((pki / "pki.json").read_text())["variants"]["large"]
    pkimod.verify_chain(Path(v["ca"]), Path(v["www"]["cert"]), v["www"]["host"])


def test_a_pki_under_another_ca_is_not_extended_under_it(tmp_path):
    _, pki = assets.lab_assets(tmp_path, certs={"shared-rsa"})
    (pki / "ca.pem").write_bytes((pki / "ca.pem").read_bytes().replace(b"A", b"B", 1))  # not the seed name's CA
    before = _files(pki)
    with pytest.raises(RunnerError, match="remove"):
        assets.lab_assets(tmp_path, certs={"large"})
    assert _files(pki) == before
    assert not [p for p in (tmp_path / ".lab").iterdir() if ".tmp-" in p.name]


def test_a_pki_description_that_cannot_be_read_names_the_fix(tmp_path):
    _, pki = assets.lab_assets(tmp_path, certs={"shared"})
    (pki / "pki.json").write_text("{}")
    with pytest.raises(RunnerError, match=r"pki.json: not a readable PKI description.*remove"):
        assets.lab_assets(tmp_path, certs={"shared"})
