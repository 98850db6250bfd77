"""When a page's requests leave under client.schedule chromium (issue 51):
the priorities Chromium gives what its preload scanner finds, and the two
gates a request passes (Blink's tight mode until <body>, the network
service's delayable limits for an origin without an HTTP/2 connection of
its own), driven by event sequences; the scanner that finds them as the
document's bytes arrive, with each image's estimated place; and the whole
loader against a local server, whose document arrives in two parts."""

from __future__ import annotations

import asyncio

import pytest

from tortoiselab.client import LoadOptions, discover_assets, load_page
from tortoiselab.client.options import OptionError
from tortoiselab.client.page import Found, Scanner
from tortoiselab.client.schedule import HIGH, LOW, MEDIUM, PRIORITY_NAMES, VERY_HIGH, VERY_LOW, ChromiumScheduler, \
    Priorities
from tortoiselab.spec.idform import side_form
from tortoiselab.spec.sides import DOCUMENT_ONLY, ClientCfg

WWW, STATIC = "https://www.lab.test", "https://static.lab.test"


def css(i: int, **kw) -> Found:
    return Found(f"{STATIC}/css/{i}.css", "stylesheet", STATIC, **kw)


def js(i: int, deferred: bool = True, **kw) -> Found:
    return Found(f"{STATIC}/js/{i}.js", "script", STATIC, deferred=deferred, blocking=not deferred, **kw)


def img(name: str, area: float | None = 576, top: float | None = 5000, origin: str = STATIC, **kw) -> Found:
    return Found(f"{origin}/img/{name}", "image", origin, area=area, top=top, in_body=True, **kw)


def names(reqs) -> list[str]:
    return [r.found.url.rsplit("/", 1)[1] for r in reqs]


# --- priorities ---------------------------------------------------------------

def test_priorities_follow_chromiums_defaults_by_type_and_position():
    p = Priorities()
    got = [p.of(f) for f in (css(0), js(0, deferred=True), js(1, deferred=False), img("small", area=576),
                             img("big", area=160 * 90), css(1), js(2, deferred=False), js(3, deferred=True),
                             img("lazy", area=None, lazy=True))]
    # head: style sheet VeryHigh, defer Low, blocking High; after the first
    # image a blocking script and a style sheet are "late": Medium
    assert [PRIORITY_NAMES[x] for x in got] == ["VeryHigh", "Low", "High", "Low", "Medium", "Medium", "Medium",
                                               "Low", "VeryLow"]


def test_only_the_first_five_not_small_images_are_boosted():
    p = Priorities()
    sizes = [576, 14400, None, 552 * 368, 10_000, 10_001, 90_000, 14400, 14400]
    got = [p.of(img(str(i), area=a)) for i, a in enumerate(sizes)]
    # 576 and exactly 10,000 px^2 are small; an image without both sizes is not
    assert got == [LOW, MEDIUM, MEDIUM, MEDIUM, LOW, MEDIUM, MEDIUM, LOW, LOW]


# --- the gates ------------------------------------------------------------------

def feed_like() -> tuple[ChromiumScheduler, list]:
    """The lab's feed page as the scanner finds it in its first chunk: four
    style sheets and four defer scripts in <head>; six small icons and two
    small avatars in the first viewport, a boosted thumb in it and a boosted
    photo below it; more below; all on static, reached by coalescing (no
    HTTP/2 connection of its own: not known)."""
    s = ChromiumScheduler(known={WWW})
    for f in [css(i) for i in range(4)] + [js(i) for i in range(4)]:
        s.add(f)
    body = [img(f"icon{i}", top=8) for i in range(6)] + [
        img("avatar0", area=2304, top=32), img("thumb0", area=14400, top=236), img("avatar1", area=2304, top=450),
        img("photo0", area=203136, top=757), img("avatar2", area=2304, top=1247),
        img("thumb1", area=14400, top=1432), img("thumb2", area=14400, top=1882), img("photo1", area=203136, top=2330),
        img("avatar3", area=2304, top=2856)]
    reqs = [s.add(f) for f in body]
    s.body()
    return s, reqs


def test_feed_first_batch_is_the_style_sheets_and_two_medium_images():
    """Blink's tight mode while the scanner's finds are issued (before the
    parser inserts <body>): Low waits, two Medium pass; after <body> the
    network's limit of 6 requests to static (the style sheets count) holds
    the rest. Chromium sent these 6 at 609 ms (docs/browser.md)."""
    s, _ = feed_like()
    assert names(s.take()) == ["0.css", "1.css", "2.css", "3.css", "thumb0", "photo0"]
    assert s.take() == []


def test_feed_each_finished_request_frees_one_slot_then_layout_raises_the_visible_images():
    s, _ = feed_like()
    first = {r.found.url.rsplit("/", 1)[1]: r for r in s.take()}
    s.done(first["0.css"])
    assert names(s.take()) == ["thumb1"]  # the next boosted (Medium) image
    s.done(first["1.css"])
    assert names(s.take()) == ["thumb2"]
    s.done(first["2.css"])
    assert names(s.take()) == ["photo1"]
    s.done(first["3.css"])
    # the last render-blocking style sheet is in: its slot goes to the first
    # Low request (a defer script), then the first layout raises the images
    # in the viewport to High, and High is never held (Chromium: js-00 at
    # 723.2 ms, then the six icons and two avatars at 723.4)
    got = s.take()
    assert names(got) == ["0.js", "icon0", "icon1", "icon2", "icon3", "icon4", "icon5", "avatar0", "avatar1"]
    assert [PRIORITY_NAMES[r.priority] for r in got] == ["Low"] + ["High"] * 8
    assert s.take() == []


def test_an_origin_with_its_own_connection_is_not_held():
    """With static known (its own HTTP/2 connection: two IPs, or a page on
    www), only Blink's tight mode holds anything, and only until <body>."""
    s = ChromiumScheduler(known={WWW, STATIC})
    for f in [css(i) for i in range(4)] + [js(i) for i in range(4)]:
        s.add(f)
    s.add(img("a", area=None))
    assert names(s.take()) == ["0.css", "1.css", "2.css", "3.css", "a"]  # tight: Low waits, one Medium passes
    for i in range(20):
        s.add(img(f"x{i}"))
    s.body()
    assert len(s.take()) == 24  # the four scripts and the twenty images, at once


def test_tight_mode_lets_two_low_requests_run_when_nothing_else_does():
    s = ChromiumScheduler(known={WWW})
    lows = [s.add(img(f"l{i}", origin=WWW)) for i in range(5)]
    assert names(s.take()) == ["l0", "l1"]  # in flight < 2 (tight_limit)
    s.done(lows[0])
    assert names(s.take()) == ["l2"]
    s.body()
    assert names(s.take()) == ["l3", "l4"]  # WWW is known: nothing more holds them


def test_a_blocking_script_in_head_keeps_tight_mode_until_it_has_run():
    s = ChromiumScheduler(known={WWW, STATIC})
    sheet, script = s.add(css(0)), s.add(js(0, deferred=False))
    lows = [s.add(img(f"l{i}")) for i in range(4)]
    s.body()  # the scanner saw <body>; the parser waits for the script
    assert names(s.take()) == ["0.css", "0.js"]
    s.done(script)
    assert names(s.take()) == ["l0"]  # still tight (the script runs after the sheet): one slot of two
    s.done(sheet)
    assert names(s.take()) == ["l1", "l2", "l3"]
    assert all(r.stage == "sent" for r in lows)


def test_a_blocking_script_in_the_body_does_not_keep_tight_mode():
    s = ChromiumScheduler(known={WWW, STATIC})
    s.add(js(0, deferred=False, in_body=True))  # the parser meets it after <body>
    for i in range(4):
        s.add(img(f"l{i}"))
    s.body()
    assert names(s.take()) == ["0.js", "l0", "l1", "l2", "l3"]


def test_the_per_origin_limit_lets_other_origins_pass_and_the_client_limit_stops_all():
    a, b = "https://a.lab.test", "https://b.lab.test"
    s = ChromiumScheduler(known=set())
    s.body()
    for i in range(8):
        s.add(img(f"a{i}", origin=a))
    for i in range(8):
        s.add(img(f"b{i}", origin=b))
    got = names(s.take())
    # six to a (its limit), then b's pass until ten delayable are in flight
    assert got == ["a0", "a1", "a2", "a3", "a4", "a5", "b0", "b1", "b2", "b3"]
    s.add(Found(f"{b}/late.css", "stylesheet", b, in_body=True))  # late style sheet: Medium, still delayable
    assert s.take() == []
    s.add(Found(f"{b}/x.js", "script", b, blocking=True, in_body=True))  # late blocking script: Medium
    assert s.take() == []


def test_high_priority_requests_pass_every_limit():
    s = ChromiumScheduler(known=set())
    s.body()  # no style sheet: the first layout is now
    for i in range(12):
        s.add(img(f"l{i}"))  # below the fold: Low
    assert len(s.take()) == 6
    for i in range(4):
        s.add(img(f"v{i}", top=100))  # in the viewport, after the first layout: High
    assert names(s.take()) == ["v0", "v1", "v2", "v3"]
    s.add(css(9, in_body=True))  # a style sheet found after an image: Medium, held
    assert s.take() == []


def test_a_page_without_style_sheets_is_laid_out_at_its_body():
    """The app's feed (app.html): twenty images on static, no style sheet.
    The first layout comes with <body>: every image in the viewport is High
    and leaves at once (Chromium: all twenty at 606-608 ms, once static's
    name was resolved; in one load of four its layout came late, see
    docs/browser.md)."""
    s = ChromiumScheduler(known={WWW})
    for i in range(12):
        s.add(img(f"a{i}", area=None, top=8))
    for i in range(8):
        s.add(img(f"t{i}", area=None, top=8))
    s.body()
    got = s.take()
    # static's six (five boosted, one Low), then the layout: the other fourteen High
    assert [PRIORITY_NAMES[r.priority] for r in got] == ["Medium"] * 5 + ["Low"] + ["High"] * 14


def test_every_request_leaves_once_whatever_the_order_of_events():
    s, reqs = feed_like()
    sent = []
    for _ in range(100):
        out = s.take()
        sent += out
        if not out:
            busy = [r for r in s.requests if r.stage == "sent"]
            if not busy:
                break
            s.done(busy[-1])  # finish the latest one first
    assert sorted(r.seq for r in sent) == list(range(len(s.requests)))
    assert all(r.stage in ("sent", "done") for r in s.requests)


# --- the scanner ----------------------------------------------------------------

PAGE = (b'<!doctype html><html><head><title>t</title><link rel="stylesheet" href="/a.css">'
        b'<script src="/s.js"></script><script src="/d.js" defer></script></head>\n<body>'
        b'<nav><img src="/i.png" width="24" height="24"></nav>' + b"<p>" + b"word " * 4000 + b"</p>"
        b'<img src="/far.jpg" width="552" height="368" loading="lazy">'
        b'<div style="display: none"><img src="/hidden.png"></div><img src="/i.png"></body></html>')


def _scan(step: int) -> list[Found]:
    sc = Scanner(f"{WWW}/p.html", "text/html; charset=utf-8")
    got = []
    for i in range(0, len(PAGE), step):
        got += sc.feed(PAGE[i:i + step])
    return got + sc.close()


@pytest.mark.parametrize("step", [1, 7, 100, 1300, len(PAGE)])
def test_the_scanner_finds_as_discover_assets_does_whatever_the_chunks(step):
    got = _scan(step)
    assert [f.url for f in got] == [a.url for a in discover_assets(PAGE.decode(), f"{WWW}/p.html")]
    by = {f.url.rsplit("/", 1)[1]: f for f in got}
    assert (by["s.js"].blocking, by["s.js"].deferred, by["d.js"].deferred, by["a.css"].in_body) == \
        (True, False, True, False)
    assert (by["i.png"].area, by["i.png"].in_body, by["far.jpg"].lazy) == (576.0, True, True)
    # in the first viewport, far below it (20,000 characters of text), no room at all
    assert by["i.png"].top < 100 and by["far.jpg"].top > 720 * 2 and by["hidden.png"].top is None


def test_where_an_image_lands_does_not_depend_on_the_chunks():
    tops = {step: [f.top for f in _scan(step)] for step in (1, 7, 1300, len(PAGE))}
    assert tops[1] == tops[7] == tops[1300] == tops[len(PAGE)]


def test_the_scanner_sees_body_as_soon_as_its_tag_arrives():
    sc = Scanner(f"{WWW}/p.html", "text/html")
    head, rest = PAGE.split(b"<body>")
    assert [f.url.rsplit("/", 1)[1] for f in sc.feed(head)] == ["a.css", "s.js", "d.js"] and not sc.body
    sc.feed(b"<body>")
    assert sc.body


def test_the_scanner_finds_nothing_in_what_is_not_html():
    sc = Scanner(f"{WWW}/x.bin", "application/octet-stream")
    assert sc.feed(PAGE) == [] and sc.close() == []


# --- options and the run's configuration ----------------------------------------

def test_schedule_is_an_option_with_a_clear_error():
    assert LoadOptions(f"{WWW}/feed.html").schedule == "chromium"
    with pytest.raises(OptionError, match="schedule: 'lazy' is not one of chromium, eager"):
        LoadOptions(f"{WWW}/feed.html", schedule="lazy")


def test_a_page_run_of_our_loader_is_scheduled_as_chromium_unless_told_eager():
    assert ClientCfg().schedule == "chromium"
    assert ClientCfg(schedule="eager").schedule == "eager"
    # one response (a url, a document with nothing to fetch), another loader: none
    assert ClientCfg(url="objects/1000.bin").schedule is None
    assert all(ClientCfg(page=p).schedule is None for p in DOCUMENT_ONLY)
    assert ClientCfg(loader="chromium").schedule is None
    with pytest.raises(ValueError, match="client.schedule: .* the nghttp loader has its own, leave it out"):
        ClientCfg(loader="nghttp", schedule="eager")


def test_eager_and_no_schedule_leave_the_id_form_as_it_was_chromium_enters_it():
    dump = ClientCfg(schedule="eager").model_dump()
    assert "schedule" not in side_form("client", dump)
    assert "schedule" not in side_form("client", ClientCfg(loader="chromium").model_dump())
    assert side_form("client", ClientCfg().model_dump())["schedule"] == "chromium"


def test_the_loaders_argv_carries_the_runs_schedule_and_nothing_without_one():
    from tortoiselab.guest import commands as C  # the guest's argv builders (pure)
    kw = dict(ca="/ca.pem", protocol="h2", cache_hit_ratio=0.0, seed=1, timeout_s=120, har="/h", summary="/s")
    plain = C.page_loader("/py", f"{WWW}/objects/1.bin", **kw)
    assert "--schedule" not in plain  # one object: the argv it had
    assert C.page_loader("/py", f"{WWW}/feed.html", schedule="eager", **kw) == [*plain[:3], f"{WWW}/feed.html",
                                                                                 *plain[4:], "--schedule", "eager"]


def test_document_only_pages_are_those_the_generator_gives_no_objects(tmp_path):
    from tortoiselab.web.pages import generate_site  # the site generator: a second, slower import
    pages = generate_site(tmp_path, seed=1, bulk_sizes=(500,))["pages"]
    assert sorted(DOCUMENT_ONLY) == sorted(p for p, e in pages.items() if e["n_objects"] == 0)


# --- the loader, on a local server ------------------------------------------------

DOC_HEAD = (b'<!doctype html><html><head><link rel="stylesheet" href="/a.css"></head><body>'
            + b"".join(b'<img src="/i%d.png" width="10" height="10">' % i for i in range(12)))
DOC_TAIL = b"<p>" + b"tail " * 2000 + b"</p></body></html>"


async def _serve(seen: list[str], css_seen: asyncio.Event) -> asyncio.Server:
    """HTTP/1.1 keep-alive: /page.html sends its head part, waits (at most
    2 s) until the style sheet is asked for, then the rest; every other
    path is a small PNG-typed body."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                path = (await reader.readuntil(b"\r\n\r\n")).split(b" ", 2)[1].decode()
                seen.append(path)
                if path == "/a.css":
                    css_seen.set()
                if path == "/page.html":
                    n = len(DOC_HEAD) + len(DOC_TAIL)
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % n
                                 + DOC_HEAD)
                    await writer.drain()
                    try:
                        await asyncio.wait_for(css_seen.wait(), 2.0)
                    except asyncio.TimeoutError:
                        pass
                    seen.append("(document's rest)")
                    writer.write(DOC_TAIL)
                else:
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: 100\r\n\r\n"
                                 + b"x" * 100)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


def _load(schedule: str) -> tuple:
    async def go():
        seen: list[str] = []
        server = await _serve(seen, asyncio.Event())
        port = server.sockets[0].getsockname()[1]
        async with server:
            res = await load_page(LoadOptions(f"http://www.lab.test:{port}/page.html", protocol="h1",
                                              resolve={"www.lab.test": "127.0.0.1"}, timeout_s=20.0,
                                              schedule=schedule))
        return res, seen

    return asyncio.run(go())


def test_chromium_schedule_asks_for_the_style_sheet_before_the_document_is_in():
    res, seen = _load("chromium")
    assert res.error is None, res.error
    assert seen.index("/a.css") < seen.index("(document's rest)")
    assert sorted(seen) == sorted(["/page.html", "(document's rest)", "/a.css"] + [f"/i{i}.png" for i in range(12)])
    prio = {e["request"]["url"].rsplit("/", 1)[1]: e.get("_priority") for e in res.har["log"]["entries"]}
    # the images leave as Low while the style sheet is out, as High once it is in (in the viewport)
    assert (prio["a.css"], prio["page.html"]) == ("VeryHigh", None)
    assert {prio[f"i{i}.png"] for i in range(12)} <= {"Low", "High"}
    assert res.summary["assets_found"] == 13 and res.summary["requests"] == 14


def test_eager_schedule_waits_for_the_whole_document():
    res, seen = _load("eager")
    assert res.error is None, res.error
    assert seen.index("(document's rest)") < seen.index("/a.css")
    assert all(e.get("_priority") is None for e in res.har["log"]["entries"])


def test_priority_names_are_devtools_names():
    assert [PRIORITY_NAMES[p] for p in (VERY_LOW, LOW, MEDIUM, HIGH, VERY_HIGH)] == \
        ["VeryLow", "Low", "Medium", "High", "VeryHigh"]
