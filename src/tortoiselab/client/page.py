"""The page: which assets a browser would fetch, where they are, which are cached.

Pure functions, tested without a network. Only an HTML response has assets
(`subresources`): any other body (an image, objects/<bytes>.bin) is a load
of that one object. The HTML parser is total: whatever bytes an HTML
response holds, `discover_assets` returns the assets it finds and raises
nothing (tests/unit/test_client_page.py feeds it arbitrary bytes).
"""

from __future__ import annotations

import codecs
import json
import random
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import parse_qsl, urldefrag, urljoin, urlsplit

from .fold import Flow, hidden, px

DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Asset:
    url: str
    kind: str  # image | script | stylesheet


@dataclass(frozen=True)
class Found:
    """A subresource as the document's scanner finds it, with what a
    browser's priority for it depends on (client/schedule.py)."""

    url: str
    kind: str  # image | script | stylesheet
    origin: str
    deferred: bool = False  # a script with defer or async, or a module script
    blocking: bool = False  # a classic script without defer or async: it blocks the parser
    area: float | None = None  # an image's width x height (px^2) from its attributes; None unless both given
    lazy: bool = False  # an image with loading=lazy
    in_body: bool = False  # found after <body> (or content that implies it)
    top: float | None = None  # an image's estimated top in px (client/fold.py); None: it takes no room


@dataclass(frozen=True)
class Origin:
    scheme: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.scheme}://{self.authority}"

    @property
    def authority(self) -> str:
        """Host[:port] as sent in Host / :authority (port only if not the default)."""
        h = f"[{self.host}]" if ":" in self.host else self.host
        return h if DEFAULT_PORTS.get(self.scheme) == self.port else f"{h}:{self.port}"


def origin_of(url: str) -> Origin:
    u = urlsplit(url)
    if u.scheme not in DEFAULT_PORTS or not u.hostname:
        raise ValueError(f"{url!r} is not an http(s) URL")
    return Origin(u.scheme, u.hostname.rstrip(".").lower(), u.port or DEFAULT_PORTS[u.scheme])


MADE_SCRIPT = b"/* Tortoise Lab: the requests a recorded script made */\n(function(){var u=["
MADE_KINDS = {"script": "script", "stylesheet": "stylesheet", "image": "image"}  # else a hidden iframe


def made_script_requests(body: bytes, base_url: str) -> list[Found] | None:
    """The requests a made script of an imported site asks for
    (web/harsite.made_script: the recorded script's requests as a JSON list
    of [url, kind] after MADE_SCRIPT), as a browser running it finds them:
    scripts inserted by a script (async), style sheets, images, else a hidden
    iframe; None for any other body (a script of the lab's own pages, or a
    recorded one: our loader runs no script)."""
    if not body.startswith(MADE_SCRIPT):
        return None
    end = body.find(b"];", len(MADE_SCRIPT))
    try:
        pairs = json.loads(b"[" + body[len(MADE_SCRIPT):end] + b"]") if end >= 0 else None
    except ValueError:
        return None
    out: list[Found] = []
    for pair in pairs or []:
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
            return None
        url = urljoin(base_url, pair[0])
        try:
            origin = origin_of(url)
        except ValueError:
            continue
        kind = MADE_KINDS.get(pair[1], "iframe")
        out.append(Found(url, kind, str(origin), deferred=kind == "script", in_body=True))
    return out


def request_target(url: str) -> str:
    """Path and query as sent on the request line / :path."""
    u = urlsplit(url)
    return (u.path or "/") + (f"?{u.query}" if u.query else "")


def query_string(url: str) -> list[dict]:
    return [{"name": k, "value": v} for k, v in parse_qsl(urlsplit(url).query, keep_blank_values=True)]


# tags the HTML parser keeps in <head>; any other start tag implies <body>
# (WHATWG HTML 13.2.6.4.4-6, "in head" / "after head": anything else)
HEAD_TAGS = frozenset(("html", "head", "title", "meta", "link", "script", "style", "base", "noscript", "template"))


class _AssetParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.base_href: str | None = None
        self.found: list[tuple[str, str]] = []  # (raw url, kind)
        self.attrs: list[dict[str, str]] = []  # each found tag's attributes (lowercased names)
        self.in_body: list[bool] = []  # was each found after <body> (or content that implies it)?
        self.tops: list[float | None] = []  # each found image's estimated top (client/fold.py)
        self.body = False
        self.flow = Flow()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k.lower(): (v or "") for k, v in attrs}
        if not self.body and tag not in HEAD_TAGS:
            self.body = True
            if self.flow.skip[:1] == ["head"]:  # </head> may be left out: the body ends it
                self.flow.skip.clear()
        self.flow.start(tag, a)
        top = None
        if tag == "img" and not hidden(a):
            top = self.flow.top(px(a.get("width")), px(a.get("height")))
        kind, ref = None, ""
        if tag == "base" and self.base_href is None and a.get("href", "").strip():
            self.base_href = a["href"].strip()
        elif tag == "img" and a.get("src", "").strip():
            kind, ref = "image", a["src"]
        elif tag == "script" and a.get("src", "").strip():
            kind, ref = "script", a["src"]
        elif tag == "link" and "stylesheet" in a.get("rel", "").lower().split() and a.get("href", "").strip():
            kind, ref = "stylesheet", a["href"]
        if kind is not None:
            self.found.append((ref, kind))
            self.attrs.append(a)
            self.in_body.append(self.body)
            self.tops.append(top)

    def handle_endtag(self, tag: str) -> None:
        self.flow.end(tag)

    def handle_data(self, data: str) -> None:
        self.flow.text(data)

    def parse_html_declaration(self, i: int) -> int:
        """`<!` read as the HTML tokenizer reads it (WHATWG HTML, 13.2.5.42
        "markup declaration open state"): a comment, a DOCTYPE, or else a
        bogus comment up to the next `>`, `<![` included (`<![CDATA[` is a
        CDATA section only inside SVG and MathML, whose assets we do not
        fetch). The stdlib reads `<![` as an SGML marked section and, in
        Python 3.11, raises AssertionError on anything but its keywords
        ("expected name token", "unknown status keyword"). Returns the
        index after the declaration, or -1 if it is not complete yet."""
        if self.rawdata.startswith("<![", i):
            return self.parse_bogus_comment(i)
        return super().parse_html_declaration(i)


def resolve_url(base_url: str, ref: str) -> str | None:
    """An attribute value resolved against the document's base URL, fragment
    dropped; None if it does not name an http(s) resource (data:, javascript:,
    ...) or does not parse (a bad IPv6 literal, a port out of range: a
    browser's URL parser fails on them too and fetches nothing)."""
    ref = ref.strip()
    # browsers strip tabs and newlines inside URLs (WHATWG URL parser)
    ref = ref.replace("\t", "").replace("\n", "").replace("\r", "")
    if not ref:
        return None
    try:
        absolute, _frag = urldefrag(urljoin(base_url, ref))
        u = urlsplit(absolute)
        if u.scheme not in DEFAULT_PORTS or not u.hostname:
            return None
        _ = u.port  # ValueError for a port out of range or not a number
    except ValueError:  # "http://[x": a URL that does not parse names nothing to fetch
        return None
    return absolute


def discover_assets(html: str, base_url: str) -> list[Asset]:
    """<img src>, <script src> and <link rel=stylesheet href> in document
    order, resolved against <base href> (if any) and the page URL, each URL once."""
    p = _AssetParser()
    p.feed(html)
    p.close()
    doc_base = base_url
    if p.base_href:
        doc_base = resolve_url(base_url, p.base_href) or base_url
    seen: set[str] = set()
    out: list[Asset] = []
    for raw, kind in p.found:
        url = resolve_url(doc_base, raw)
        if url is None or url in seen:
            continue
        seen.add(url)
        out.append(Asset(url, kind))
    return out


def _found(url: str, kind: str, a: dict[str, str], in_body: bool, top: float | None = None) -> Found:
    if kind == "script":
        deferred = "defer" in a or "async" in a or a.get("type", "").strip().lower() == "module"
        return Found(url, kind, str(origin_of(url)), deferred=deferred, blocking=not deferred, in_body=in_body)
    if kind == "image":
        w, h = px(a.get("width")), px(a.get("height"))
        return Found(url, kind, str(origin_of(url)), area=None if w is None or h is None else w * h,
                     lazy=a.get("loading", "").strip().lower() == "lazy", in_body=in_body, top=top)
    return Found(url, kind, str(origin_of(url)), in_body=in_body)


class Scanner:
    """The document's subresources as its bytes arrive, as a browser's
    preload scanner finds them: feed() each chunk of the body, close() at
    its end; each returns the Found not returned before, in document
    order, each URL once, resolved against the page URL and the <base href>
    seen so far. `body` turns true once the parser has seen <body> or a tag
    that implies it. Only an HTML response (is_html) has any. Total, like
    discover_assets: whatever the bytes, it raises nothing."""

    def __init__(self, url: str, content_type: str | None) -> None:
        self.url = url
        self.html = is_html(content_type)
        try:
            self._decoder = codecs.getincrementaldecoder(charset_of(content_type))(errors="replace")
            self._decoder.decode(b"")
        except (LookupError, ValueError, TypeError):  # as decode_html: UTF-8 for a charset Python cannot use
            self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._parser = _AssetParser()
        self._seen: set[str] = set()
        self._taken = 0

    @property
    def body(self) -> bool:
        return self._parser.body

    def feed(self, data: bytes) -> list[Found]:
        if not self.html or not data:
            return []
        try:
            text = self._decoder.decode(data)
        except (UnicodeError, ValueError):
            text = data.decode("utf-8", errors="replace")
        self._parser.feed(text)
        return self._new()

    def close(self) -> list[Found]:
        if not self.html:
            return []
        try:
            self._parser.feed(self._decoder.decode(b"", final=True))
        except (UnicodeError, ValueError):
            pass
        self._parser.close()
        return self._new()

    def _new(self) -> list[Found]:
        p = self._parser
        base = (resolve_url(self.url, p.base_href) or self.url) if p.base_href else self.url
        out = []
        for i in range(self._taken, len(p.found)):
            raw, kind = p.found[i]
            url = resolve_url(base, raw)
            if url is None or url in self._seen:
                continue
            self._seen.add(url)
            out.append(_found(url, kind, p.attrs[i], p.in_body[i], p.tops[i]))
        self._taken = len(p.found)
        return out


def choose_cached(urls: list[str], ratio: float, seed: int) -> list[str]:
    """The assets treated as browser-cache hits: round(ratio * n) of them
    (halves round up), drawn by random.Random(seed).sample over their
    positions; returned in page order. Same inputs, same choice."""
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"cache_hit_ratio must be in [0, 1], got {ratio}")
    n = len(urls)
    k = min(n, int(ratio * n + 0.5))
    picked = sorted(random.Random(seed).sample(range(n), k))
    return [urls[i] for i in picked]


CACHE_UNITS = ("asset", "page")


def view_from_cache(ratio: float, seed: int) -> bool:
    """Is this page view served wholly from the browser's cache (every
    asset a hit)? True with probability `ratio`, drawn from the load's seed
    alone (random.Random("page-cache:<seed>")), so the arms of a paired
    experiment, which share the seed, see the same view."""
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"cache_hit_ratio must be in [0, 1], got {ratio}")
    return random.Random(f"page-cache:{seed}").random() < ratio


def cached_assets(urls: list[str], ratio: float, seed: int, unit: str = "asset") -> list[str]:
    """The assets a load does not request, by cache model: unit "asset",
    each load has round(ratio * n) of its assets cached (choose_cached);
    unit "page", a share `ratio` of page views has every asset cached and
    the rest none (view_from_cache): the seed 001 mechanism, where a view
    served from cache needs no connection to the asset host at all."""
    if unit == "asset":
        return choose_cached(urls, ratio, seed)
    if unit == "page":
        return list(urls) if view_from_cache(ratio, seed) else []
    raise ValueError(f"cache unit must be one of {', '.join(CACHE_UNITS)}, got {unit!r}")


def media_type(content_type: str | None) -> str:
    """The media type of a Content-Type value, lowercased, without its
    parameters (RFC 9110 §8.3.1: type/subtype, case-insensitive); "" for
    none."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def is_html(content_type: str | None) -> bool:
    """Is a response with this Content-Type an HTML document, which a browser
    parses for the subresources it then fetches? Its media type is text/html.
    A response without one is not (RFC 9110 §8.3 lets a recipient assume
    application/octet-stream; we do, rather than sniff the body)."""
    return media_type(content_type) == "text/html"


def subresources(body: bytes, content_type: str | None, url: str) -> list[Asset]:
    """The assets a browser fetches after this response of url: those of
    discover_assets when it is HTML (is_html; decoded by its charset), none
    otherwise (an image, a binary object: the load is that one object)."""
    if not is_html(content_type):
        return []
    return discover_assets(decode_html(body, content_type), url)


def charset_of(content_type: str | None) -> str:
    for part in (content_type or "").split(";")[1:]:
        k, _, v = part.strip().partition("=")
        if k.lower() == "charset" and v:
            return v.strip('"\' ')
    return "utf-8"


def decode_html(body: bytes, content_type: str | None) -> str:
    """The body as text in the Content-Type's charset, bytes that do not
    decode replaced; UTF-8 when the charset is none Python can decode with
    (unknown, or a codec that fails even so: idna, punycode, undefined)."""
    try:
        return body.decode(charset_of(content_type), errors="replace")
    except (LookupError, ValueError):  # UnicodeError is a ValueError; a NUL in the name too
        return body.decode("utf-8", errors="replace")
