"""An experiment's pages and PKI (host/assets.py): made once per results
folder, and the pages made again when the page generator changed since (a
folder made before a page existed served 404 for it)."""

from __future__ import annotations

from tortoiselab.host import assets


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
