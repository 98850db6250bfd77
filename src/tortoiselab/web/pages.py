"""The lab's web site, generated from a seed.

`generate_site(out_dir, seed, domain)` writes two document roots and a
manifest:

    out_dir/www/       served for www.<domain>
        tiny.html small.html medium.html large.html   the Stony Brook pages
        img/<class>/flag-NNN.(png|jpg)                  their objects (relative URLs)
        feed.html                                       the multi-origin feed page
        base.html                                       the feed's document, references inert
        app.html                                        the mobile app's feed: API data + images
        objects/<bytes>.bin                             single objects for bulk transfers
    out_dir/static/    served for static.<domain>
        css/ js/ img/{icons,avatars,thumbs,photos}/     the feed's assets (absolute URLs)
    out_dir/manifest.json

Everything is derived from the seed alone: each file draws its size and
its bytes from its own `random.Random`, keyed by a SHA-256 of (seed, file
role), so the same seed gives byte-identical trees and adding a file does
not shift the others. The manifest holds no absolute paths and no times,
so it is reproducible too.

Page composition (seed 002, Stony Brook: objects <1 KB, 1-10 KB,
10-100 KB, >1 MB; seed 001, LinkedIn: a base HTML page on www whose static
assets come from a second hostname) is documented in webroot/README.md.

Images are valid PNG and JPEG files of the drawn size (web/images.py):
a small seeded picture, and seeded random bytes in metadata placed before
the pixels (a PNG private chunk, JPEG APP15 segments) that make up the
exact size, so a browser reads and decodes every byte (it stopped after
~16 KB of the random bytes the generator wrote before, docs/browser.md).
Bulk objects are pseudo-random bytes. Nothing compresses (Apache serves
the files as they are: no mod_deflate). CSS and JS are valid CSS and
JavaScript, padded with a comment to an exact size; the scripts only
declare functions and arrays, so running them does nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from tortoiselab.web import images

# /2: valid images (web/images.py) of the same sizes as /1's random bytes
GENERATOR = "tortoiselab.web.pages/2"
WWW, STATIC = "www", "static"

# What Apache sends for these extensions with Debian's /etc/mime.types.
CONTENT_TYPES = {
    ".html": "text/html",
    ".css": "text/css",
    ".js": "text/javascript",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".bin": "application/octet-stream",
}

KB, MB = 1000, 1000 * 1000  # decimal units throughout (file names, docs)
# one object per Stony Brook size class (<1 KB, 1-10 KB, 10-100 KB, >1 MB: h2load
# throughput per class), plus 100 KB and 10 MB bulk transfers
DEFAULT_BULK_SIZES: tuple[int, ...] = (500, 5 * KB, 50 * KB, 100 * KB, 1 * MB, 10 * MB)
# The napkin article's page (seed 003): "the 160kb of HTML" of information.dk,
# one document with nothing else to fetch.
ARTICLE_HTML_BYTES = 160 * KB


@dataclass(frozen=True)
class SizeClass:
    """One Stony Brook page: `count` objects, sizes uniform in [lo, hi]
    bytes (inclusive). Bounds are chosen to hold under both the decimal and
    the binary reading of "KB" and "MB"."""

    name: str
    count: int
    lo: int
    hi: int
    ext: str
    label: str


STONY_BROOK: tuple[SizeClass, ...] = (
    SizeClass("tiny", 50, 200, 999, ".png", "objects < 1 KB"),
    SizeClass("small", 30, 1024, 10_000, ".png", "objects 1-10 KB"),
    SizeClass("medium", 20, 10_240, 100_000, ".jpg", "objects 10-100 KB"),
    SizeClass("large", 3, 1_100_000, 2_000_000, ".jpg", "objects > 1 MB"),
)


@dataclass(frozen=True)
class AssetClass:
    """One kind of asset of the feed page, served from static.<domain>."""

    kind: str
    count: int
    lo: int
    hi: int
    folder: str
    ext: str


# Feed page composition: an assumption modelled on the HTTP Archive Web
# Almanac 2024 median desktop page (JS the most requested type, images the
# most bytes), scaled down so that a load stays short. See webroot/README.md.
FEED_HTML_BYTES = 60_000
FEED_ASSETS: tuple[AssetClass, ...] = (
    AssetClass("css", 4, 8_000, 30_000, "css", ".css"),
    AssetClass("js", 12, 4_000, 40_000, "js", ".js"),
    AssetClass("icon", 6, 500, 2_000, "img/icons", ".png"),
    AssetClass("avatar", 12, 2_000, 6_000, "img/avatars", ".jpg"),
    AssetClass("thumb", 8, 10_000, 30_000, "img/thumbs", ".jpg"),
    AssetClass("photo", 4, 40_000, 90_000, "img/photos", ".jpg"),
)
FEED_HEAD_SCRIPTS = 4  # the first 4 scripts in <head> (defer), the rest before </body>

# The mobile app's feed (seed 000: "page load time ... on LinkedIn's mobile
# app"): a native app loads no style sheets or scripts, only the feed's data
# from an API and the images the data names. An assumption (the seed gives no
# composition): a 30 KB data response on www (a compressed JSON feed of about
# a dozen updates) and the feed's 12 avatars and 8 thumbnails from static,
# the photos left out (a phone shows thumbnails first). See webroot/README.md.
APP_DOC_BYTES = 30_000
APP_IMAGE_KINDS = ("avatar", "thumb")


# --- seeded randomness ------------------------------------------------------
def _rng(seed: int, key: str) -> random.Random:
    digest = hashlib.sha256(f"tortoiselab.web.pages:{seed}:{key}".encode()).digest()
    return random.Random(int.from_bytes(digest[:16], "big"))


_WORDS = ("network latency congestion window packet loss round trip server client page load "
          "connection coalescing certificate handshake bandwidth delay product emerging markets "
          "india china mobile desktop feed update share comment like follow team engineering "
          "performance speed tortoise hybla cubic reno yeah scalable slow start recovery "
          "queue buffer pop edge cdn static asset image script style request response stream").split()
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def _letters(rng: random.Random, n: int) -> str:
    """n characters of lowercase letters and spaces (safe inside any comment)."""
    return "".join(rng.choice(_LETTERS + "    ") for _ in range(n))


def _hex(rng: random.Random, n: int) -> str:
    return "%0*x" % (n, rng.getrandbits(4 * n))


def _fill(rng: random.Random, n: int, head: str, chunk, open_c: str, close_c: str) -> bytes:
    """Text of exactly n bytes: `head`, then chunks while they fit, then a
    comment open_c ... close_c that makes up the rest."""
    parts, size = [head], len(head)
    room = len(open_c) + len(close_c) + 1
    while True:
        c = chunk(rng)
        if size + len(c) + room > n:
            break
        parts.append(c)
        size += len(c)
    pad = n - size - len(open_c) - len(close_c) - 1
    if pad < 0:
        raise ValueError(f"_fill: {n} bytes is too small for the header")
    parts.append(open_c + _letters(rng, pad) + close_c + "\n")
    out = "".join(parts).encode("ascii")
    assert len(out) == n, (len(out), n)
    return out


def _css(rng: random.Random, n: int, name: str) -> bytes:
    def rule(r: random.Random) -> str:
        sel = f".{r.choice(_WORDS)}-{_hex(r, 4)} .{r.choice(_WORDS)}"
        props = [f"margin:{r.randint(0, 24)}px {r.randint(0, 24)}px", f"color:#{_hex(r, 6)}",
                 f"padding:{r.randint(0, 16)}px", f"font-size:{r.randint(11, 20)}px",
                 f"border-radius:{r.randint(0, 8)}px", f"background:#{_hex(r, 6)}"]
        r.shuffle(props)
        return sel + "{" + ";".join(props[:r.randint(2, 6)]) + "}\n"

    return _fill(rng, n, f"/* {name}: Tortoise Lab stylesheet, {n} bytes */\n", rule, "/*", "*/")


def _js(rng: random.Random, n: int, name: str) -> bytes:
    def stmt(r: random.Random) -> str:
        f, v = f"{r.choice(_WORDS)}_{_hex(r, 4)}", f"{r.choice(_WORDS)}{r.randint(0, 999)}"
        return (f"function {f}({v}){{var k=\"{_hex(r, 16)}\";return {v}+k.length*{r.randint(1, 97)};}}\n"
                if r.random() < 0.6 else f"var {v}_{_hex(r, 3)}=[{','.join(str(r.randint(0, 9999)) for _ in range(r.randint(2, 9)))}];\n")

    return _fill(rng, n, f"/* {name}: Tortoise Lab script, {n} bytes */\n\"use strict\";\n", stmt, "/*", "*/")


# --- the generator ------------------------------------------------------------
def _origin(host: str, port: int) -> str:
    return f"https://{host}" if port == 443 else f"https://{host}:{port}"


class _Site:
    def __init__(self, root: Path, seed: int, domain: str, port: int) -> None:
        self.root, self.seed, self.domain, self.port = root, seed, domain, port
        self.hosts = {WWW: f"www.{domain}", STATIC: f"static.{domain}"}
        self.origins = {k: _origin(h, port) for k, h in self.hosts.items()}
        self.files: dict[str, dict] = {}

    def put(self, docroot: str, rel: str, data: bytes, kind: str) -> dict:
        path = self.root / docroot / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.chmod(path, 0o644)
        ext = os.path.splitext(rel)[1]
        entry = {"url": f"{self.origins[docroot]}/{rel}", "path": f"/{rel}", "host": self.hosts[docroot],
                 "origin": self.origins[docroot], "file": f"{docroot}/{rel}", "bytes": len(data),
                 "content_type": CONTENT_TYPES[ext], "kind": kind,
                 "sha256": hashlib.sha256(data).hexdigest()}
        self.files[entry["file"]] = entry
        return entry


def _page_entry(name: str, doc: dict, objects: list[dict], **extra) -> dict:
    by_kind: dict[str, dict] = {}
    for o in objects:
        k = by_kind.setdefault(o["kind"], {"count": 0, "bytes": 0})
        k["count"] += 1
        k["bytes"] += o["bytes"]
    obj_bytes = sum(o["bytes"] for o in objects)
    origins = [doc["origin"]] + sorted({o["origin"] for o in objects} - {doc["origin"]})
    return {"name": name, "path": doc["path"], "url": doc["url"], "origin": doc["origin"], "origins": origins,
            "document": doc, "objects": objects, "by_kind": by_kind, "n_objects": len(objects),
            "n_requests": 1 + len(objects), "document_bytes": doc["bytes"], "object_bytes": obj_bytes,
            "total_bytes": doc["bytes"] + obj_bytes, **extra}


def _stony_brook_page(site: _Site, cls: SizeClass) -> dict:
    objects = []
    for i in range(cls.count):
        rel = f"img/{cls.name}/flag-{i:03d}{cls.ext}"
        size = _rng(site.seed, f"size:{cls.name}:{i}").randint(cls.lo, cls.hi)
        data = images.encode(cls.ext, size, _rng(site.seed, f"body:{rel}")).data
        objects.append(site.put(WWW, rel, data, cls.name))
    rng = _rng(site.seed, f"html:{cls.name}")
    imgs = "".join(f'<img src="{o["path"][1:]}" width="64" height="48" alt="flag {i:03d}">\n'
                   for i, o in enumerate(objects))
    html = ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>Tortoise Lab: {cls.name} page ({cls.count} {cls.label})</title>\n</head>\n<body>\n"
            f"<h1>{cls.name.capitalize()} objects</h1>\n"
            f"<p>{cls.count} {cls.label}; seed {site.seed}. {_words(rng, 12)}.</p>\n"
            f"<div class=\"flags\">\n{imgs}</div>\n</body>\n</html>\n")
    doc = site.put(WWW, f"{cls.name}.html", html.encode("ascii"), "html")
    return _page_entry(f"{cls.name}.html", doc, objects, size_class={"name": cls.name, "min_bytes": cls.lo,
                                                                      "max_bytes": cls.hi, "label": cls.label})


def _feed_assets(site: _Site) -> dict[str, list[dict]]:
    assets: dict[str, list[dict]] = {}
    for ac in FEED_ASSETS:
        out = []
        for i in range(ac.count):
            size = _rng(site.seed, f"size:feed:{ac.kind}:{i}").randint(ac.lo, ac.hi)
            rng = _rng(site.seed, f"body:feed:{ac.kind}:{i}")
            stem = f"{ac.kind}-{i:02d}"
            if ac.kind == "css":
                data = _css(rng, size, stem)
            elif ac.kind == "js":
                data = _js(rng, size, stem)
            else:
                data = images.encode(ac.ext, size, rng).data
            rel = f"{ac.folder}/{stem}-{hashlib.sha256(data).hexdigest()[:10]}{ac.ext}"  # fingerprinted
            out.append(site.put(STATIC, rel, data, ac.kind))
        assets[ac.kind] = out
    return assets


def _feed_html(site: _Site, a: dict[str, list[dict]], inert: bool = False) -> bytes:
    """The feed document, FEED_HTML_BYTES long. inert=True (base.html): the
    same text with every asset reference moved to data-src / data-href,
    which no loader fetches (the lazy-loading idiom); the embedded data
    block absorbs the few extra bytes, so the size is the same."""
    rng = _rng(site.seed, "html:feed")
    src, href = ("data-src", "data-href") if inert else ("src", "href")
    h = ["<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
         "<title>Feed | Tortoise Lab</title>\n"]
    h += [f"<link rel=\"stylesheet\" {href}=\"{o['url']}\">\n" for o in a["css"]]
    h += [f"<script {src}=\"{o['url']}\" defer></script>\n" for o in a["js"][:FEED_HEAD_SCRIPTS]]
    h.append("</head>\n<body class=\"feed\">\n<header class=\"global-nav\">\n<nav>\n")
    for o, label in zip(a["icon"], ("home", "network", "jobs", "messaging", "notifications", "me")):
        h.append(f"<a class=\"nav-item\" href=\"/{label}/\"><img class=\"nav-icon\" {src}=\"{o['url']}\" "
                 f"width=\"24\" height=\"24\" alt=\"{label}\"><span>{label.capitalize()}</span></a>\n")
    h.append("</nav>\n</header>\n<main class=\"feed-main\">\n")
    thumbs, photos = list(a["thumb"]), list(a["photo"])
    for i, av in enumerate(a["avatar"]):
        author = f"{rng.choice(_WORDS).capitalize()} {rng.choice(_WORDS).capitalize()}"
        h.append(f"<article class=\"feed-update\" data-urn=\"urn:li:activity:{rng.randint(10**15, 10**16 - 1)}\">\n"
                 f"<div class=\"actor\"><img class=\"avatar\" {src}=\"{av['url']}\" width=\"48\" height=\"48\" "
                 f"alt=\"{author}\"><a class=\"actor-name\" href=\"/in/{_hex(rng, 8)}/\">{author}</a>"
                 f"<span class=\"actor-description\">{_words(rng, 6)}</span>"
                 f"<span class=\"age\">{rng.randint(1, 23)}h</span></div>\n")
        for _ in range(rng.randint(2, 4)):
            h.append(f"<p class=\"commentary\">{_words(rng, rng.randint(25, 60))}.</p>\n")
        if i % 3 == 1 and photos:
            h.append(f"<figure class=\"update-image\"><img {src}=\"{photos.pop(0)['url']}\" width=\"552\" "
                     f"height=\"368\" alt=\"{_words(rng, 4)}\" loading=\"eager\"></figure>\n")
        elif thumbs:
            h.append(f"<a class=\"article-card\" href=\"https://example.org/{_hex(rng, 12)}\">"
                     f"<img {src}=\"{thumbs.pop(0)['url']}\" width=\"160\" height=\"90\" alt=\"\">"
                     f"<span class=\"title\">{_words(rng, 9)}</span></a>\n")
        h.append(f"<div class=\"social-counts\"><span>{rng.randint(0, 5000)} reactions</span>"
                 f"<span>{rng.randint(0, 300)} comments</span></div>\n<ul class=\"comments\">\n")
        for _ in range(rng.randint(1, 3)):
            h.append(f"<li class=\"comment\"><a href=\"/in/{_hex(rng, 8)}/\">{rng.choice(_WORDS).capitalize()}</a> "
                     f"{_words(rng, rng.randint(8, 30))}</li>\n")
        h.append("</ul>\n</article>\n")
    # every asset is referenced exactly once; left-overs go into a side rail
    h.append("<aside class=\"rail\">\n")
    h += [f"<img {src}=\"{o['url']}\" width=\"552\" height=\"368\" alt=\"\">\n" for o in photos]
    h += [f"<img {src}=\"{o['url']}\" width=\"160\" height=\"90\" alt=\"\">\n" for o in thumbs]
    h.append("</aside>\n</main>\n")
    h += [f"<script {src}=\"{o['url']}\" defer></script>\n" for o in a["js"][FEED_HEAD_SCRIPTS:]]
    tail = "</body>\n</html>\n"
    # LinkedIn-style embedded data: a hidden <code> block whose comment
    # makes the document exactly FEED_HTML_BYTES long.
    body = "".join(h)
    open_c, close_c = "<code id=\"bootstrap-data\" style=\"display:none\"><!--", "--></code>\n"
    pad = FEED_HTML_BYTES - len(body) - len(open_c) - len(close_c) - len(tail)
    if pad < 0:
        raise ValueError(f"feed.html markup is {len(body)} bytes, over FEED_HTML_BYTES={FEED_HTML_BYTES}")
    filler = []
    n = 0
    while n < pad:
        rec = (f"{{\"entityUrn\":\"urn:li:fs_update:{rng.randint(10**15, 10**16 - 1)}\","
               f"\"text\":\"{_words(rng, rng.randint(5, 20))}\",\"trackingId\":\"{_hex(rng, 24)}\"}},\n")
        filler.append(rec)
        n += len(rec)
    out = (body + open_c + "".join(filler)[:pad] + close_c + tail).encode("ascii")
    assert len(out) == FEED_HTML_BYTES, len(out)
    return out


def _app_html(site: _Site, a: dict[str, list[dict]]) -> bytes:
    """The mobile app's feed view, APP_DOC_BYTES long: the API's feed data
    (JSON-like records) and one <img src> per image it names, so that a
    loader that reads HTML fetches what the app fetches: the data, then the
    images (absolute URLs on static, as the app's media come from a CDN
    hostname). No style sheet, no script."""
    rng = _rng(site.seed, "html:app")
    imgs = [o for kind in APP_IMAGE_KINDS for o in a[kind]]
    head = ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<title>Feed (app) | Tortoise Lab</title>\n</head>\n<body class=\"app-feed\">\n"
            + "".join(f"<img src=\"{o['url']}\" alt=\"\">\n" for o in imgs)
            + "<code id=\"feed-data\" style=\"display:none\">\n")
    tail = "</code>\n</body>\n</html>\n"

    def record(r: random.Random) -> str:
        return (f"{{\"entityUrn\":\"urn:li:fs_update:{r.randint(10**15, 10**16 - 1)}\","
                f"\"text\":\"{_words(r, r.randint(5, 30))}\",\"trackingId\":\"{_hex(r, 24)}\"}},\n")
    return _fill(rng, APP_DOC_BYTES - len(tail), head, record, "<!--", "-->") + tail.encode("ascii")


def _article_html(site: _Site) -> bytes:
    """A news article of exactly ARTICLE_HTML_BYTES: paragraphs of text and
    no subresources, so a load is one response in slow start (seed 003)."""
    rng = _rng(site.seed, "html:article")
    head = ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<title>Tortoise Lab: article (160 KB of HTML)</title>\n</head>\n<body>\n<article>\n"
            f"<h1>{_words(rng, 6)}</h1>\n")
    body = _fill(rng, ARTICLE_HTML_BYTES - len("</article>\n</body>\n</html>\n"), head,
                 lambda r: f"<p>{_words(r, r.randint(40, 120))}.</p>\n", "<!-- ", " -->")
    return body + b"</article>\n</body>\n</html>\n"


def _clear(out_dir: Path) -> None:
    """Remove what a previous run of the generator wrote (only that)."""
    for d in (WWW, STATIC):
        if (out_dir / d).is_dir():
            shutil.rmtree(out_dir / d)
    (out_dir / "manifest.json").unlink(missing_ok=True)


# Every file's modification time. Apache derives Last-Modified and the ETag
# (FileETag MTime Size) from it; HPACK's Huffman code gives digits 5 or 6
# bits, so the time of generation changed the length of every response's
# headers by a byte or so, and with it every later segment boundary
# (docs/determinism.md). 2025-01-01T00:00:00Z, before the virtual clock's start.
SITE_MTIME = 1735689600


def generate_site(out_dir: Path, seed: int = 1, domain: str = "lab.test", *,
                  bulk_sizes: Sequence[int] = DEFAULT_BULK_SIZES, port: int = 443) -> dict:
    """Write the site for `seed` under out_dir (www/, static/, manifest.json)
    and return the manifest.

    out_dir/www and out_dir/static are replaced if they exist. Files are
    mode 0644 and folders 0755 whatever the umask, so that Apache's
    children (www-data) can read them; the caller must make out_dir's
    parents traversable (o+x). `port` only changes the URLs written into
    the pages and the manifest (443 is left out, as browsers do).
    """
    out_dir = Path(out_dir)
    if seed < 0:
        raise ValueError(f"seed: must be >= 0, got {seed}")
    sizes = [int(s) for s in bulk_sizes]
    if any(s <= 0 for s in sizes) or len(set(sizes)) != len(sizes):
        raise ValueError(f"bulk_sizes: positive, distinct byte counts, got {list(bulk_sizes)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    _clear(out_dir)
    site = _Site(out_dir, seed, domain, port)

    pages: dict[str, dict] = {}
    for cls in STONY_BROOK:
        pages[f"{cls.name}.html"] = _stony_brook_page(site, cls)

    assets = _feed_assets(site)
    html = _feed_html(site, assets)
    objects = [o for ac in FEED_ASSETS for o in assets[ac.kind]]
    pages["feed.html"] = _page_entry("feed.html", site.put(WWW, "feed.html", html, "html"), objects)
    # base.html: the feed's document, same size and text, with inert
    # references, so that any loader (ours, nghttp -a, a browser) fetches it alone.
    base = _feed_html(site, assets, inert=True)
    pages["base.html"] = _page_entry("base.html", site.put(WWW, "base.html", base, "html"), [],
                                     base_of="feed.html")

    # app.html: the mobile app's feed, the API's data and its images only
    app_objects = [o for kind in APP_IMAGE_KINDS for o in assets[kind]]
    pages["app.html"] = _page_entry("app.html", site.put(WWW, "app.html", _app_html(site, assets), "html"),
                                    app_objects, app_of="feed.html")

    pages["article.html"] = _page_entry("article.html", site.put(WWW, "article.html", _article_html(site),
                                                                   "html"), [])

    bulk = [site.put(WWW, f"objects/{s}.bin", _rng(seed, f"bulk:{s}").randbytes(s), "bulk") for s in sizes]

    for root, dirs, files in os.walk(out_dir):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
        for f in files:  # Last-Modified and ETag come from the mtime (see SITE_MTIME)
            os.utime(os.path.join(root, f), (SITE_MTIME, SITE_MTIME))
    os.chmod(out_dir, 0o755)

    manifest = {
        "generator": GENERATOR, "seed": seed, "domain": domain, "port": port,
        "hosts": site.hosts, "origins": site.origins, "docroots": {WWW: WWW, STATIC: STATIC},
        "pages": pages, "bulk": bulk,
        "totals": {"files": len(site.files), "bytes": sum(f["bytes"] for f in site.files.values()),
                   "by_docroot": {d: sum(f["bytes"] for f in site.files.values() if f["file"].startswith(d + "/"))
                                  for d in (WWW, STATIC)}},
    }
    text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
    (out_dir / "manifest.json").write_text(text, encoding="utf-8")
    os.chmod(out_dir / "manifest.json", 0o644)
    return manifest


def tree_digest(out_dir: Path) -> dict[str, str]:
    """sha256 of every file under out_dir, by relative path (for checks)."""
    out_dir = Path(out_dir)
    return {str(p.relative_to(out_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out_dir.rglob("*")) if p.is_file()}
