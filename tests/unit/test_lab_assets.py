"""An experiment's pages and PKI (host/assets.py): made once per results
folder, and the pages made again when the page generator changed since (a
folder made before a page existed served 404 for it)."""

from __future__ import annotations

import json
from pathlib import Path

from tortoiselab.host import assets, guestpaths
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
