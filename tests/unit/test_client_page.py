"""Asset discovery, URL resolution and the seeded cache-hit choice."""

import pytest

from tortoiselab.client import choose_cached, discover_assets, resolve_url
from tortoiselab.client.page import decode_html, origin_of, query_string, request_target

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
