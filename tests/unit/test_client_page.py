"""Asset discovery, URL resolution and the seeded cache-hit choice."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tortoiselab.client import choose_cached, discover_assets, resolve_url
from tortoiselab.client.page import (decode_html, is_html, made_script_requests, origin_of, query_string,
                                     request_target, subresources)
from tortoiselab.web import harsite

BASE = "https://www.lab.test/feed/index.html?x=1"

PAGE = """<!doctype html><html><head>
<title>feed</title>
<LINK REL="Stylesheet" HREF="css/site.css">
<link rel="alternate stylesheet" href="/css/alt.css" title="alt">
<link rel="icon" href="/favicon.ico">
<link rel="preload" href="/font.woff2" as="font">
<script src="//static.lab.test/js/app.js?v=2"></script>
<script>var inline = "<img src='nope.png'>";</script>
</head><body>
<img src="img/a.png"><img src = " ../img/b.png ">
<img src="https://static.lab.test:8443/img/c.png#frag">
<img src="img/a.png#again">
<img src="data:image/png;base64,AAAA"><img src=""><img alt="no src">
<img src="img/d.png?w=1&amp;h=2">
<a href="/not-an-asset.png">link</a>
<IMG SRC="javascript:alert(1)">
<img src="http://plain.lab.test/e.png"/>
</body></html>"""


def test_discovers_img_script_and_stylesheets_in_document_order():
    got = [(a.kind, a.url) for a in discover_assets(PAGE, BASE)]
    assert got == [
        ("stylesheet", "https://www.lab.test/feed/css/site.css"),
        ("stylesheet", "https://www.lab.test/css/alt.css"),
        ("script", "https://static.lab.test/js/app.js?v=2"),
        ("image", "https://www.lab.test/feed/img/a.png"),
        ("image", "https://www.lab.test/img/b.png"),
        ("image", "https://static.lab.test:8443/img/c.png"),
        ("image", "https://www.lab.test/feed/img/d.png?w=1&h=2"),
        ("image", "http://plain.lab.test/e.png"),
    ]


def test_base_href_changes_where_relative_urls_point():
    html = '<head><base href="https://cdn.lab.test/v2/"></head><img src="x.png"><script src="/y.js"></script>'
    assert [a.url for a in discover_assets(html, BASE)] == ["https://cdn.lab.test/v2/x.png",
                                                             "https://cdn.lab.test/y.js"]
    rel = '<base href="../assets/"><img src="x.png">'
    assert [a.url for a in discover_assets(rel, BASE)] == ["https://www.lab.test/assets/x.png"]


def test_empty_and_broken_html():
    assert discover_assets("", BASE) == []
    # unquoted values, stray end tags, an unfinished tag at the end
    html = "<div><img src=a.png></span><p><script src=b.js></script><img src='c.png'"
    assert [a.url for a in discover_assets(html, BASE)] == ["https://www.lab.test/feed/a.png",
                                                           "https://www.lab.test/feed/b.js"]


@pytest.mark.parametrize("ref,want", [
    ("a.png", "https://www.lab.test/feed/a.png"),
    ("./a.png", "https://www.lab.test/feed/a.png"),
    ("../a.png", "https://www.lab.test/a.png"),
    ("../../../a.png", "https://www.lab.test/a.png"),
    ("/a.png", "https://www.lab.test/a.png"),
    ("//static.lab.test/a.png", "https://static.lab.test/a.png"),
    ("?page=2", "https://www.lab.test/feed/index.html?page=2"),
    ("https://static.lab.test:8443/a.png#top", "https://static.lab.test:8443/a.png"),
    ("  a.png\n", "https://www.lab.test/feed/a.png"),
    ("im\tg/a.png", "https://www.lab.test/feed/img/a.png"),
    ("data:image/gif;base64,R0lG", None),
    ("mailto:x@lab.test", None),
    ("#only-fragment", "https://www.lab.test/feed/index.html?x=1"),
    ("", None),
])
def test_resolve_url(ref, want):
    assert resolve_url(BASE, ref) == want


def test_origins_and_request_targets():
    o = origin_of("https://WWW.Lab.Test./x")
    assert (o.scheme, o.host, o.port, o.authority, str(o)) == \
        ("https", "www.lab.test", 443, "www.lab.test", "https://www.lab.test")
    o = origin_of("https://static.lab.test:8443/a.png")
    assert (o.port, o.authority) == (8443, "static.lab.test:8443")
    assert origin_of("http://a.test/").port == 80
    assert origin_of("https://a.test:443/") == origin_of("https://a.test/")
    assert request_target("https://a.test") == "/"
    assert request_target("https://a.test/p/q.png?a=1&b=") == "/p/q.png?a=1&b="
    assert query_string("https://a.test/?a=1&b=") == [{"name": "a", "value": "1"}, {"name": "b", "value": ""}]
    with pytest.raises(ValueError):
        origin_of("ftp://a.test/")


def test_decode_html_uses_the_charset():
    assert decode_html("é".encode("latin-1"), "text/html; charset=ISO-8859-1") == "é"
    assert decode_html("é".encode(), "text/html") == "é"
    assert decode_html(b"\xff", "text/html; charset=bogus") == "\ufffd"


@pytest.mark.parametrize("charset", ["idna", "punycode", "undefined", "ascii\x00"])
def test_decode_html_falls_back_to_utf8_when_the_charset_cannot_decode(charset):
    """Before: UnicodeError (idna, undefined), UnicodeDecodeError (punycode),
    ValueError (a NUL in the name) out of the loader."""
    assert decode_html(b"\xff<img src=a.png>", f"text/html; charset={charset}") == "\ufffd<img src=a.png>"


URLS = [f"https://www.lab.test/img/{i}.png" for i in range(20)]


def test_cache_choice_is_seeded_and_deterministic():
    a = choose_cached(URLS, 0.3, seed=7)
    assert a == choose_cached(URLS, 0.3, seed=7)
    assert len(a) == 6 and set(a) <= set(URLS)
    assert a == sorted(a, key=URLS.index)  # page order
    assert len({tuple(choose_cached(URLS, 0.3, seed=s)) for s in range(10)}) > 1


def test_cache_choice_pinned():
    # the choice is part of the recorded experiment: pin it
    assert choose_cached(URLS, 0.25, seed=1) == [URLS[i] for i in (2, 3, 4, 8, 18)]


@pytest.mark.parametrize("ratio,n,k", [(0.0, 20, 0), (1.0, 20, 20), (0.5, 3, 2), (0.25, 2, 1), (0.2, 2, 0),
                                       (0.5, 0, 0), (0.05, 10, 1), (0.04, 10, 0)])
def test_cache_choice_count_rounds_half_up(ratio, n, k):
    assert len(choose_cached(URLS[:n], ratio, seed=3)) == k


def test_cache_choice_rejects_bad_ratio():
    with pytest.raises(ValueError, match="cache_hit_ratio"):
        choose_cached(URLS, 1.5, seed=1)


def test_page_level_cache_serves_a_share_of_views_wholly_from_cache():
    """cache_unit page (seed 001's mechanism): a view has every asset cached
    or none, drawn from the seed alone; over many seeds the share of cached
    views is the ratio."""
    from tortoiselab.client.page import cached_assets, view_from_cache
    for seed in range(50):
        got = cached_assets(URLS, 0.6, seed, "page")
        assert got in ([], URLS)
        assert got == cached_assets(URLS, 0.6, seed, "page")  # same seed, same view
        assert (got == URLS) == view_from_cache(0.6, seed)
    share = sum(view_from_cache(0.8, s) for s in range(2000)) / 2000
    assert 0.77 <= share <= 0.83
    assert not any(view_from_cache(0.0, s) for s in range(200)) and all(view_from_cache(1.0, s) for s in range(200))
    assert cached_assets(URLS, 0.25, 1, "asset") == choose_cached(URLS, 0.25, 1)  # the default model is unchanged
    with pytest.raises(ValueError, match="cache unit"):
        cached_assets(URLS, 0.5, 1, "object")
    with pytest.raises(ValueError, match="cache_hit_ratio"):
        view_from_cache(-0.1, 1)


# --- what a response's body is: only HTML has subresources (issue 37) ---------

IMG_PAGE = b'<!doctype html><img src="a.png"><script src="b.js"></script>'


@pytest.mark.parametrize("content_type,found", [
    ("text/html", 2), ("text/html; charset=utf-8", 2), ("Text/HTML ;charset=ISO-8859-1", 2), (" text/html", 2),
    ("application/octet-stream", 0), ("image/jpeg", 0), ("text/plain", 0), ("text/htmlx", 0),
    ("application/xhtml+xml", 0), ("", 0), (None, 0),
])
def test_only_an_html_response_has_subresources(content_type, found):
    """A browser parses a response for subresources only when its media type
    (RFC 9110 §8.3.1) is text/html; a binary object is a load of one object.
    Before: objects/10000000.bin was parsed as HTML and the load failed with
    'internal error in the loader: AssertionError: expected name token'."""
    got = subresources(IMG_PAGE, content_type, BASE)
    assert len(got) == found
    assert is_html(content_type) == bool(found)


def test_a_binary_body_is_never_parsed():
    """The 10 MB object of the report, in small: random bytes that the HTML
    parser chokes on when read as HTML, served as application/octet-stream."""
    body = b"\x00\x17<![\x01\x9c\xff" * 1000
    assert subresources(body, "application/octet-stream", BASE) == []


@pytest.mark.parametrize("html,want", [
    ("<![\x01><img src=a.png>", ["a.png"]),  # 3.11's stdlib: AssertionError expected name token
    ("<![\x01<img src=a.png>", []),  # the bogus comment runs to the img tag's '>'
    ("<![\x01<img src=a.png><img src=b.png>", ["b.png"]),
    ("<![ ]]><img src=a.png>", ["a.png"]),
    ("<![foo[ x ]><img src=a.png>", ["a.png"]),  # AssertionError unknown status keyword 'foo'
    ("<![if !IE]><img src=a.png><![endif]>", ["a.png"]),
    # outside SVG and MathML, <![CDATA[ opens a bogus comment ending at the first '>'
    # (WHATWG HTML, 13.2.5.42 markup declaration open state): b.png is markup again
    ("<![CDATA[ x > <img src=b.png> ]]>", ["b.png"]),
    ("<!x><img src=a.png>", ["a.png"]),
    ("<img src=a.png><![", ["a.png"]),
])
def test_markup_declarations_read_as_the_html_tokenizer_does(html, want):
    assert [a.url for a in discover_assets(html, BASE)] == [f"https://www.lab.test/feed/{u}" for u in want]


@pytest.mark.parametrize("ref", ["http://[x/a.png", "https://www.lab.test:99999/a.png", "https://www.lab.test:ab/a.png",
                                 "https://[::1/a.png"])
def test_a_url_that_does_not_parse_is_no_asset(ref):
    """Before: urljoin's ValueError (Invalid IPv6 URL) out of discover_assets,
    or an asset whose port origin_of could not read."""
    assert resolve_url(BASE, ref) is None
    assert [a.url for a in discover_assets(f'<img src="{ref}"><img src="ok.png">', BASE)] == [
        "https://www.lab.test/feed/ok.png"]
    assert [a.url for a in discover_assets(f'<base href="{ref}"><img src="x.png">', BASE)] == [
        "https://www.lab.test/feed/x.png"]


# markup-heavy documents: single characters and the tokens the parser branches on
TOKENS = list("<>!/[]-?&#;=\"' \n\tabcdimgsrcptlnkhefCDATAIF:.\x00\ufffd") + [
    "<img src=", "<script src=", "<link rel=stylesheet href=", "<base href=", "<![", "<![", "<!", "<!--", "-->",
    "]]>", "<![CDATA[", "<!doctype", "<?", "</", "http://[", "https://x.test", ":99999", "&#x", "&amp", "<svg>",
    "<style>", "</script>", "<script>"]
MARKUP = st.lists(st.sampled_from(TOKENS), max_size=120).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.binary(max_size=3000), MARKUP.map(str.encode)),
       st.one_of(st.just("text/html"), st.text(max_size=20).map(lambda c: f"text/html; charset={c}")))
def test_any_bytes_as_an_html_body_give_assets_or_none_and_never_raise(body, content_type):
    """The page parser is total: whatever an HTML response's body and charset
    hold, it returns assets (no exception), each one the loader can request."""
    for a in subresources(body, content_type, BASE):
        assert a.kind in ("image", "script", "stylesheet")
        origin_of(a.url)
        assert request_target(a.url).startswith("/")


def test_an_imported_sites_made_script_names_the_requests_the_recorded_script_made():
    # web/harsite.made_script writes it; our loader reads it back as a browser running it finds them
    body = harsite.made_script(5000, [("https://a.test/x.js", "script"), ("/p.png", "image"),
                                      ("https://b.test/api?q=1&t=2", "fetch"), ("s.css", "stylesheet")], "k")
    got = made_script_requests(body, "https://js.test/app.js")
    assert [(f.url, f.kind, f.origin, f.deferred) for f in got] == [
        ("https://a.test/x.js", "script", "https://a.test", True), ("https://js.test/p.png", "image", "https://js.test", False),
        ("https://b.test/api?q=1&t=2", "iframe", "https://b.test", False),
        ("https://js.test/s.css", "stylesheet", "https://js.test", False)]
    assert made_script_requests(harsite.made_script(100, [], "k"), "https://js.test/app.js") == []
    # any other script (the lab's own pages', a recorded one) is not run
    assert made_script_requests(b"/* a script */ var u=[1];", "https://js.test/app.js") is None
    assert made_script_requests(body[:60], "https://js.test/app.js") is None  # cut before its list ends
