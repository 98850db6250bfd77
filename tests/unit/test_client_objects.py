"""A load of one object that is not HTML (issue 37): our loader against a
small HTTP/1.1 server on the loopback (plain http, no lab), so the whole
loader runs: request, response, what it parses, summary and HAR.

Before: `client.url: objects/10000000.bin` downloaded the object, then the
loader parsed it as HTML and failed with "internal error in the loader:
AssertionError: expected name token at ...".
"""

import asyncio
import random

import pytest

from tortoiselab.client import LoadOptions, load_page, validate_har

# bytes the stdlib HTML parser (Python 3.11) raises AssertionError on when read as HTML
BODY = b"\x89\x00<![\x01\xff" + random.Random(37).randbytes(200_000)
PAGE = b'<!doctype html><img src="/obj.bin"><img src="/obj.bin#again">'


async def _serve(routes: dict[str, tuple[str, bytes, int | None]], seen: list[str]) -> asyncio.Server:
    """An HTTP/1.1 keep-alive server: path -> (content type, body, content-length sent;
    None: the body's own length; another length: the server hangs up after the body)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1].decode()
                seen.append(path)
                ctype, body, length = routes[path]
                writer.write(f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\n"
                             f"Content-Length: {len(body) if length is None else length}\r\n\r\n".encode() + body)
                await writer.drain()
                if length is not None and length != len(body):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


def _load(routes: dict, path: str) -> tuple:
    async def go():
        seen: list[str] = []
        server = await _serve(routes, seen)
        port = server.sockets[0].getsockname()[1]
        async with server:
            res = await load_page(LoadOptions(f"http://www.lab.test:{port}{path}", protocol="h1",
                                              resolve={"www.lab.test": "127.0.0.1"}, timeout_s=20.0))
        return res, seen

    return asyncio.run(go())


@pytest.mark.parametrize("ctype", ["application/octet-stream", "image/jpeg"])
def test_a_binary_object_is_a_whole_load_of_one_request(ctype):
    res, seen = _load({"/obj.bin": (ctype, BODY, None)}, "/obj.bin")
    s = res.summary
    assert res.error is None, res.error
    assert seen == ["/obj.bin"]
    assert (s["ok"], s["requests"], s["requests_failed"], s["bytes"], s["assets_found"]) == \
        (True, 1, 0, len(BODY), 0)
    assert 0 < s["ttfb_ms"] <= s["plt_ms"]
    assert validate_har(res.har) == []
    entry = res.har["log"]["entries"][0]
    assert entry["response"]["content"]["size"] == len(BODY)
    assert entry["response"]["content"]["mimeType"] == ctype


def test_an_html_page_still_loads_its_objects():
    routes = {"/page.html": ("text/html; charset=utf-8", PAGE, None), "/obj.bin": ("application/octet-stream",
                                                                                  BODY, None)}
    res, seen = _load(routes, "/page.html")
    assert res.error is None, res.error
    assert seen == ["/page.html", "/obj.bin"]
    assert (res.summary["requests"], res.summary["assets_found"], res.summary["bytes"]) == (2, 1, len(PAGE) + len(BODY))


def test_an_object_cut_short_is_a_failed_load():
    """Complete means the whole body: a server that hangs up 10 bytes short of
    its Content-Length fails the load, with no page-load time."""
    res, _ = _load({"/obj.bin": ("application/octet-stream", BODY, len(BODY) + 10)}, "/obj.bin")
    assert res.error is not None and "closed the connection mid-response" in res.error
    assert (res.summary["ok"], res.summary["plt_ms"], res.summary["requests_failed"]) == (False, None, 1)
