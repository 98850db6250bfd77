import hashlib
import json
import os
import stat
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tortoiselab.web import pages

KIB, MIB = 1024, 1024 * 1024


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img" and "src" in a:
            self.refs.append(("img", a["src"]))
        elif tag == "script" and "src" in a:
            self.refs.append(("script", a["src"]))
        elif tag == "link" and a.get("rel") == "stylesheet" and "href" in a:
            self.refs.append(("css", a["href"]))


def refs(path: Path) -> list[tuple[str, str]]:
    p = _Refs()
    p.feed(path.read_text())
    return p.refs


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    base = tmp_path_factory.mktemp("sites")
    a = pages.generate_site(base / "a", seed=1)
    b = pages.generate_site(base / "b", seed=1)
    c = pages.generate_site(base / "c", seed=2)
    return base, a, b, c


def test_same_seed_same_bytes_other_seed_differs(sites):
    base, a, b, c = sites
    da, db, dc = (pages.tree_digest(base / n) for n in "abc")
    assert da == db and len(da) == a["totals"]["files"] + 1  # + manifest.json
    assert a == b
    # another seed: every object's bytes differ
    assert (base / "a" / "manifest.json").read_bytes() != (base / "c" / "manifest.json").read_bytes()
    bins_a = {k: v for k, v in da.items() if k.startswith("www/objects/")}
    assert bins_a and all(dc[k] != v for k, v in bins_a.items())
    for name in ("tiny.html", "feed.html"):
        sa = {o["sha256"] for o in a["pages"][name]["objects"]}
        sc = {o["sha256"] for o in c["pages"][name]["objects"]}
        assert not sa & sc


def test_regenerating_replaces_the_tree(tmp_path, sites):
    base, *_ = sites
    pages.generate_site(tmp_path / "s", seed=1, bulk_sizes=(5000,))
    (tmp_path / "s" / "www" / "stale.html").write_text("old")
    pages.generate_site(tmp_path / "s", seed=2)
    assert pages.tree_digest(tmp_path / "s") == pages.tree_digest(base / "c")


@pytest.mark.parametrize("name,count,lo,hi", [
    ("tiny.html", 50, 1, 1000 - 1),               # < 1 KB, also for 1 KB = 1000
    ("small.html", 30, KIB, 10 * 1000),          # 1-10 KB under either reading
    ("medium.html", 20, 10 * KIB, 100 * 1000),   # 10-100 KB
    ("large.html", 3, MIB + 1, 2 * 1000 * 1000),  # > 1 MB, at most 2 MB
])
def test_size_classes(sites, name, count, lo, hi):
    base, m, *_ = sites
    page = m["pages"][name]
    objs = page["objects"]
    assert len(objs) == page["n_objects"] == count
    for o in objs:
        assert lo <= o["bytes"] <= hi, o
        f = base / "a" / o["file"]
        assert f.stat().st_size == o["bytes"]
        assert hashlib.sha256(f.read_bytes()).hexdigest() == o["sha256"]
        assert o["origin"] == "https://www.lab.test" and o["host"] == "www.lab.test"
        assert o["content_type"] in ("image/png", "image/jpeg")
    # the page references exactly its objects, as relative <img> URLs
    r = refs(base / "a" / "www" / name)
    assert [kind for kind, _ in r] == ["img"] * count
    assert [src for _, src in r] == [o["path"].lstrip("/") for o in objs]
    assert all("://" not in src and not src.startswith("/") for _, src in r)
    assert page["origins"] == ["https://www.lab.test"]


def test_feed_assets_all_on_static_origin(sites):
    base, m, *_ = sites
    feed = m["pages"]["feed.html"]
    assert feed["document"]["bytes"] == pages.FEED_HTML_BYTES == 60_000
    assert feed["origin"] == "https://www.lab.test"
    assert feed["origins"] == ["https://www.lab.test", "https://static.lab.test"]
    objs = feed["objects"]
    assert all(o["url"].startswith("https://static.lab.test/") and o["host"] == "static.lab.test"
               and o["file"].startswith("static/") for o in objs)
    r = refs(base / "a" / "www" / "feed.html")
    assert sorted(src for _, src in r) == sorted(o["url"] for o in objs)  # each asset exactly once
    kinds = {ac.kind: ac for ac in pages.FEED_ASSETS}
    assert {k: v["count"] for k, v in feed["by_kind"].items()} == {k: ac.count for k, ac in kinds.items()}
    for o in objs:
        ac = kinds[o["kind"]]
        assert ac.lo <= o["bytes"] <= ac.hi
        assert (base / "a" / o["file"]).stat().st_size == o["bytes"]
    css = [src for k, src in r if k == "css"]
    js = [src for k, src in r if k == "script"]
    assert len(css) == 4 and len(js) == 12 and len([1 for k, _ in r if k == "img"]) == 30
    # a few hundred KB to ~1 MB in all
    assert 400_000 <= feed["total_bytes"] <= 1_200_000


def test_base_html_is_the_feed_document_alone(sites):
    base, m, *_ = sites
    b = m["pages"]["base.html"]
    feed_html = (base / "a" / "www" / "feed.html").read_text()
    base_html = (base / "a" / "www" / "base.html").read_text()
    assert len(base_html.encode()) == len(feed_html.encode()) == b["document_bytes"] == pages.FEED_HTML_BYTES
    assert refs(base / "a" / "www" / "base.html") == []  # nothing a loader would fetch
    assert "https://static.lab.test/" in base_html  # the references are there, inert
    # the same text up to the embedded data block, but for the attribute names
    cut = '<code id="bootstrap-data"'
    assert base_html.split(cut)[0].replace("data-src=", "src=").replace("data-href=", "href=") == \
        feed_html.split(cut)[0]
    assert b["objects"] == [] and b["n_requests"] == 1 and b["total_bytes"] == pages.FEED_HTML_BYTES
    assert b["base_of"] == "feed.html"


def test_manifest_totals(sites):
    base, m, *_ = sites
    assert json.loads((base / "a" / "manifest.json").read_text()) == m
    for name, p in m["pages"].items():
        assert p["path"] == "/" + name and p["url"] == "https://www.lab.test/" + name
        assert p["object_bytes"] == sum(o["bytes"] for o in p["objects"])
        assert p["total_bytes"] == p["document_bytes"] + p["object_bytes"]
        assert p["n_requests"] == 1 + p["n_objects"]
        assert sum(k["bytes"] for k in p["by_kind"].values()) == p["object_bytes"]
    on_disk = {str(f.relative_to(base / "a")): f.stat().st_size
               for f in (base / "a").rglob("*") if f.is_file() and f.name != "manifest.json"}
    assert m["totals"]["files"] == len(on_disk)
    assert m["totals"]["bytes"] == sum(on_disk.values())
    assert m["totals"]["by_docroot"]["static"] == sum(v for k, v in on_disk.items() if k.startswith("static/"))
    assert str(base) not in (base / "a" / "manifest.json").read_text()  # relative, reproducible


def test_bulk_objects(sites, tmp_path):
    base, m, *_ = sites
    assert [(o["path"], o["bytes"]) for o in m["bulk"]] == [
        ("/objects/500.bin", 500), ("/objects/5000.bin", 5000), ("/objects/50000.bin", 50_000),
        ("/objects/100000.bin", 100_000), ("/objects/1000000.bin", 1_000_000), ("/objects/10000000.bin", 10_000_000)]
    assert all(o["content_type"] == "application/octet-stream" for o in m["bulk"])
    mm = pages.generate_site(tmp_path / "s", bulk_sizes=(1234, 50_000))
    assert [o["url"] for o in mm["bulk"]] == ["https://www.lab.test/objects/1234.bin",
                                              "https://www.lab.test/objects/50000.bin"]
    assert (tmp_path / "s" / "www" / "objects" / "1234.bin").stat().st_size == 1234
    for bad in ((0,), (10, 10), (-5,)):
        with pytest.raises(ValueError, match="bulk_sizes"):
            pages.generate_site(tmp_path / "x", bulk_sizes=bad)


def test_port_and_domain_in_urls(tmp_path):
    m = pages.generate_site(tmp_path / "s", seed=3, domain="example.test", port=8443, bulk_sizes=())
    feed = m["pages"]["feed.html"]
    assert feed["url"] == "https://www.example.test:8443/feed.html"
    assert all(o["url"].startswith("https://static.example.test:8443/") for o in feed["objects"])
    html = (tmp_path / "s" / "www" / "feed.html").read_text()
    assert "https://static.example.test:8443/css/" in html and "lab.test" not in html


def test_readable_by_www_data_whatever_the_umask(tmp_path):
    old = os.umask(0o077)
    try:
        pages.generate_site(tmp_path / "s", bulk_sizes=(100,))
    finally:
        os.umask(old)
    for p in [tmp_path / "s", *(tmp_path / "s").rglob("*")]:
        mode = stat.S_IMODE(p.stat().st_mode)
        assert mode == (0o755 if p.is_dir() else 0o644), (p, oct(mode))


@pytest.mark.skipif(not Path("/etc/mime.types").exists(), reason="no /etc/mime.types on this machine")
def test_content_types_match_the_mime_types_apache_reads():
    table = {}
    for line in Path("/etc/mime.types").read_text().splitlines():
        parts = line.split()
        if parts and not parts[0].startswith("#"):
            for ext in parts[1:]:
                table["." + ext] = parts[0]
    for ext, ctype in pages.CONTENT_TYPES.items():
        assert table[ext] == ctype, ext


def test_article_page_is_160kb_of_html_alone(sites):
    """Seed 003's page: one 160 KB document, nothing else to fetch."""
    base, m, *_ = sites
    a = m["pages"]["article.html"]
    assert a["document_bytes"] == pages.ARTICLE_HTML_BYTES == 160_000
    assert a["n_objects"] == 0
    text = (base / "a" / "www" / "article.html").read_text()
    assert text.startswith("<!DOCTYPE html>") and text.endswith("</html>\n")
    assert "<img" not in text and "src=" not in text


def test_app_page_is_the_apps_data_and_images_only(sites):
    """app.html: what LinkedIn's mobile app loads (seed 000): its feed data
    on www and the feed's avatars and thumbnails on static, no CSS or JS."""
    base, m, *_ = sites
    app, feed = m["pages"]["app.html"], m["pages"]["feed.html"]
    assert app["document_bytes"] == pages.APP_DOC_BYTES == 30_000
    assert (base / "a" / "www" / "app.html").stat().st_size == pages.APP_DOC_BYTES
    assert set(app["by_kind"]) == set(pages.APP_IMAGE_KINDS) == {"avatar", "thumb"}
    assert app["n_requests"] == 1 + 12 + 8 and app["origins"] == feed["origins"] and app["app_of"] == "feed.html"
    r = refs(base / "a" / "www" / "app.html")
    assert {k for k, _ in r} == {"img"}
    assert sorted(src for _, src in r) == sorted(o["url"] for o in app["objects"])  # each image once
    feed_urls = {o["url"] for o in feed["objects"]}
    assert {o["url"] for o in app["objects"]} <= feed_urls  # the same files as the feed's, no new ones


def test_styles_parse_as_css(sites):
    """Every style sheet is CSS without a syntax error (tinycss2, a CSS
    Syntax Level 3 parser): rules and declarations alike."""
    tinycss2 = pytest.importorskip("tinycss2")
    base, m, *_ = sites
    sheets = [o for o in m["pages"]["feed.html"]["objects"] if o["kind"] == "css"]
    assert len(sheets) == 4
    for o in sheets:
        rules = tinycss2.parse_stylesheet((base / "a" / o["file"]).read_text(), skip_comments=True,
                                          skip_whitespace=True)
        assert rules and all(r.type == "qualified-rule" for r in rules), o["file"]
        for r in rules:
            decls = tinycss2.parse_declaration_list(r.content, skip_comments=True, skip_whitespace=True)
            assert decls and all(d.type == "declaration" for d in decls), (o["file"], r.serialize())


def test_scripts_parse_as_javascript(sites):
    """Every script passes Node's syntax check in strict mode (the node
    binary inside Playwright's wheel: nothing else installed); the browser
    test runs them in Chromium (tests/integration/test_site_whole.py)."""
    driver = pytest.importorskip("playwright._impl._driver")
    node = driver.compute_driver_executable()[0]
    base, m, *_ = sites
    scripts = [base / "a" / o["file"] for o in m["pages"]["feed.html"]["objects"] if o["kind"] == "js"]
    assert len(scripts) == 12
    for f in scripts:
        assert '"use strict";' in f.read_text()
        p = subprocess.run([str(node), "--check", str(f)], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, (f.name, p.stderr)
    bad = base / "bad.js"
    bad.write_text('"use strict";\nvar static = 1;\n')  # the check can fail: a reserved word in strict mode
    assert subprocess.run([str(node), "--check", str(bad)], capture_output=True, timeout=60).returncode != 0
