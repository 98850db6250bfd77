"""The page: which assets a browser would fetch, where they are, which are cached.

Pure functions, tested without a network.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import parse_qsl, urldefrag, urljoin, urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Asset:
    url: str
    kind: str  # image | script | stylesheet


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


def request_target(url: str) -> str:
    """Path and query as sent on the request line / :path."""
    u = urlsplit(url)
    return (u.path or "/") + (f"?{u.query}" if u.query else "")


def query_string(url: str) -> list[dict]:
    return [{"name": k, "value": v} for k, v in parse_qsl(urlsplit(url).query, keep_blank_values=True)]


class _AssetParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.base_href: str | None = None
        self.found: list[tuple[str, str]] = []  # (raw url, kind)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k.lower(): (v or "") for k, v in attrs}
        if tag == "base" and self.base_href is None and a.get("href", "").strip():
            self.base_href = a["href"].strip()
        elif tag == "img" and a.get("src", "").strip():
            self.found.append((a["src"], "image"))
        elif tag == "script" and a.get("src", "").strip():
            self.found.append((a["src"], "script"))
        elif tag == "link" and "stylesheet" in a.get("rel", "").lower().split() and a.get("href", "").strip():
            self.found.append((a["href"], "stylesheet"))


def resolve_url(base_url: str, ref: str) -> str | None:
    """An attribute value resolved against the document's base URL, fragment
    dropped; None if it does not name an http(s) resource (data:, javascript:, ...)."""
    ref = ref.strip()
    # browsers strip tabs and newlines inside URLs (WHATWG URL parser)
    ref = ref.replace("\t", "").replace("\n", "").replace("\r", "")
    if not ref:
        return None
    absolute, _frag = urldefrag(urljoin(base_url, ref))
    u = urlsplit(absolute)
    if u.scheme not in DEFAULT_PORTS or not u.hostname:
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


def charset_of(content_type: str | None) -> str:
    for part in (content_type or "").split(";")[1:]:
        k, _, v = part.strip().partition("=")
        if k.lower() == "charset" and v:
            return v.strip('"\' ')
    return "utf-8"


def decode_html(body: bytes, content_type: str | None) -> str:
    try:
        return body.decode(charset_of(content_type), errors="replace")
    except LookupError:
        return body.decode("utf-8", errors="replace")
