"""HAR 1.2 building and checking, HAR timings and the summary's arithmetic,
all on synthetic timelines (no network)."""

import copy
from datetime import datetime, timezone

import pytest

from tortoiselab.client import build_har, summarize, validate_har
from tortoiselab.client.timeline import Clock, ConnRecord, DnsLookup, RequestRecord, timings, total_time

T0 = 1000.0  # monotonic seconds at page start
WALL0 = datetime(2025, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
WWW, STATIC = "https://www.lab.test", "https://static.lab.test"
SETTINGS = {"url": WWW + "/feed.html", "protocol": "h2", "coalescing": True, "cache_hit_ratio": 0.0, "seed": 1}


def t(s: float) -> float:
    return T0 + s


def req(url, origin, kind, start, send, fb, lb, conn="c1", ip="10.0.0.2", **kw) -> RequestRecord:
    r = RequestRecord(url, origin, kind, start=t(start), send_start=t(send), send_end=t(send + 0.001),
                      first_byte=t(fb), last_byte=t(lb), end=t(lb), status=200, status_text="OK",
                      http_version="h2", body_bytes=1000, conn_id=conn, server_ip=ip,
                      request_headers=[(":method", "GET"), (":path", "/")],
                      response_headers=[(":status", "200"), ("content-type", "image/png")],
                      request_headers_size=40)
    for k, v in kw.items():
        if k in ("dns", "tcp", "tls"):
            v = (t(v[0]), t(v[1]))
        setattr(r, k, v)
    return r


def timeline(coalesced: bool = True):
    """Base HTML on www over c1 (DNS 10 ms, TCP 100 ms, TLS 200 ms, TTFB
    412 ms), a stylesheet on www, and two images on static: coalesced onto c1,
    or over c2 of their own."""
    base = req(WWW + "/feed.html", WWW, "document", 0.0, 0.311, 0.412, 0.450,
               dns=(0.0, 0.010), tcp=(0.010, 0.110), tls=(0.110, 0.310))
    base.response_headers = [(":status", "200"), ("content-type", "text/html")]
    css = req(WWW + "/a.css", WWW, "stylesheet", 0.460, 0.461, 0.562, 0.600)
    lookups = [DnsLookup("www.lab.test", "dns", t(0.0), t(0.010), ["10.0.0.2"]),
               DnsLookup("static.lab.test", "dns", t(0.460), t(0.470), ["10.0.0.2"])]
    c1 = ConnRecord("c1", WWW, "www.lab.test", "10.0.0.2", 443, tcp=(t(0.010), t(0.110)), tls=(t(0.110), t(0.310)),
                    alpn="h2", tls_version="TLSv1.3", origins=[WWW])
    conns = [c1]
    if coalesced:
        img1 = req(STATIC + "/1.png", STATIC, "image", 0.460, 0.471, 0.572, 0.900, coalesced=True, dns=(0.460, 0.470))
        img2 = req(STATIC + "/2.png", STATIC, "image", 0.461, 0.472, 0.573, 0.800, coalesced=True)
        c1.origins.append(STATIC)
        c1.requests = 4
    else:
        img1 = req(STATIC + "/1.png", STATIC, "image", 0.460, 0.771, 0.872, 1.200, conn="c2",
                   dns=(0.460, 0.470), tcp=(0.470, 0.570), tls=(0.570, 0.770))
        img2 = req(STATIC + "/2.png", STATIC, "image", 0.461, 0.772, 0.873, 1.100, conn="c2")
        c1.requests = 2
        conns.append(ConnRecord("c2", STATIC, "static.lab.test", "10.0.0.2", 443, tcp=(t(0.470), t(0.570)),
                                tls=(t(0.570), t(0.770)), alpn="h2", tls_version="TLSv1.3", origins=[STATIC],
                                requests=2))
    return [base, css, img1, img2], conns, lookups


CLOCK = Clock(T0, WALL0)


def har_of(records):
    last = max(r.last_byte for r in records)
    return build_har(records, CLOCK, title=WWW + "/feed.html", on_content_load=records[0].last_byte, on_load=last)


# -- timings ---------------------------------------------------------------------

def test_timings_of_the_request_that_opened_the_connection():
    base = timeline()[0][0]
    tm = timings(base)
    assert tm == {"blocked": 1.0, "dns": 10.0, "connect": 300.0, "send": 1.0, "wait": 100.0, "receive": 38.0,
                  "ssl": 200.0}
    assert total_time(tm) == 450.0  # = last byte - start; ssl is inside connect


def test_timings_of_a_request_on_an_open_connection():
    css = timeline()[0][1]
    assert timings(css) == {"blocked": 1.0, "dns": -1.0, "connect": -1.0, "send": 1.0, "wait": 100.0,
                            "receive": 38.0, "ssl": -1.0}


def test_timings_of_a_coalesced_request_that_made_the_lookup():
    img1 = timeline()[0][2]
    tm = timings(img1)
    assert (tm["dns"], tm["connect"], tm["ssl"], tm["blocked"]) == (10.0, -1.0, -1.0, 1.0)
    assert total_time(tm) == 440.0


def test_timings_of_failures():
    # connect timed out after 10 s: the time is in connect, nothing sent
    r = RequestRecord("https://x.test/", "https://x.test", "document", start=t(0), dns=(t(0), t(0.002)),
                      tcp=(t(0.002), t(10.002)), end=t(10.002), error="connect timed out")
    tm = timings(r)
    assert (tm["connect"], tm["send"], tm["wait"], tm["receive"], tm["ssl"]) == (10000.0, 0, 0, 0, -1.0)
    assert total_time(tm) == 10002.0
    # sent, never answered
    r = RequestRecord("https://x.test/", "https://x.test", "image", start=t(0), send_start=t(0.1),
                      send_end=t(0.1005), end=t(3.0), error="timeout")
    tm = timings(r)
    assert (tm["blocked"], tm["send"], tm["wait"], tm["receive"]) == (100.0, 0.5, 2899.5, 0)
    # waited for a connection that never came
    r = RequestRecord("https://x.test/a", "https://x.test", "image", start=t(1), end=t(4), error="x")
    assert timings(r)["blocked"] == 3000.0


# -- HAR ---------------------------------------------------------------------------

def test_har_is_valid_and_carries_the_timeline():
    records, _, _ = timeline()
    har = har_of(records)
    assert validate_har(har) == []
    log = har["log"]
    assert log["version"] == "1.2" and log["creator"]["name"] == "tortoiselab"
    page = log["pages"][0]
    assert page["startedDateTime"] == "2025-03-01T12:00:00.000000Z"
    assert page["pageTimings"] == {"onContentLoad": 450.0, "onLoad": 900.0}
    e0, e2 = log["entries"][0], log["entries"][2]
    assert e0["pageref"] == page["id"]
    assert e0["time"] == 450.0 and e0["timings"]["ssl"] == 200.0
    assert e0["request"]["httpVersion"] == "h2" and e0["response"]["content"]["mimeType"] == "text/html"
    assert e2["startedDateTime"] == "2025-03-01T12:00:00.460000Z"
    assert e2["connection"] == "c1" and e2["serverIPAddress"] == "10.0.0.2" and e2["_coalesced"] is True
    for e in log["entries"]:
        assert e["time"] == pytest.approx(sum(v for k, v in e["timings"].items() if k != "ssl" and v > 0))


def test_har_of_a_failed_load_is_valid():
    r = RequestRecord("https://x.test/?q=1", "https://x.test", "document", start=t(0), dns=(t(0), t(0.001)),
                      end=t(0.001), error="DNS: no such host x.test")
    har = build_har([r], CLOCK, title="https://x.test/?q=1", comment="load failed: DNS")
    assert validate_har(har) == []
    e = har["log"]["entries"][0]
    assert e["_error"] == "DNS: no such host x.test" and e["response"]["status"] == 0
    assert e["request"]["queryString"] == [{"name": "q", "value": "1"}]
    assert har["log"]["pages"][0]["pageTimings"] == {"onContentLoad": -1, "onLoad": -1}
    assert validate_har(build_har([], CLOCK, title="")) == []


def _broken(mutate):
    har = har_of(timeline()[0])
    mutate(har)
    return validate_har(har)


@pytest.mark.parametrize("mutate,expect", [
    (lambda h: h["log"].pop("creator"), "$.log.creator: required field missing"),
    (lambda h: h["log"].update(version=1.2), "$.log.version: expected str"),
    (lambda h: h["log"].update(version="1.0"), "expected '1.2'"),
    (lambda h: h["log"]["entries"][1].pop("cache"), "$.log.entries[1].cache: required field missing"),
    (lambda h: h["log"]["entries"][1]["request"].pop("queryString"), "queryString: required field missing"),
    (lambda h: h["log"]["entries"][0]["response"].update(status="200"), "response.status: expected int"),
    (lambda h: h["log"]["entries"][0]["response"].update(status=True), "response.status: expected int"),
    (lambda h: h["log"]["entries"][0]["response"]["content"].pop("mimeType"), "content.mimeType: required"),
    (lambda h: h["log"]["entries"][0]["request"]["headers"].append({"name": "x"}), "headers[2].value: required"),
    (lambda h: h["log"]["entries"][0].update(time=1.0), "time: 1.0 is not the sum"),
    (lambda h: h["log"]["entries"][0]["timings"].update(send=-1), "timings.send: must be >= 0"),
    (lambda h: h["log"]["entries"][0]["timings"].update(dns=-2), "timings.dns: must be >= 0 or -1"),
    (lambda h: h["log"]["entries"][0]["timings"].update(ssl=999.0), "ssl (999.0) exceeds connect"),
    (lambda h: h["log"]["entries"][0]["timings"].pop("wait"), "timings.wait: required field missing"),
    (lambda h: h["log"]["entries"][0].update(pageref="page_9"), "names no page"),
    (lambda h: h["log"]["entries"][0].update(startedDateTime="yesterday"), "not an ISO 8601"),
    (lambda h: h["log"]["entries"][0].update(startedDateTime="2025-03-01T12:00:00"), "not an ISO 8601"),
    (lambda h: h["log"]["pages"][0].update(id=7), "pages[0].id: expected str"),
    (lambda h: h["log"]["entries"][0].update(bogus=1), "entries[0].bogus: unknown field"),
    (lambda h: h["log"].update(entries={}), "$.log.entries: expected an array"),
    (lambda h: h.update(log=[]), "$.log: expected an object"),
])
def test_validate_har_finds_each_fault(mutate, expect):
    errs = _broken(mutate)
    assert any(expect in e for e in errs), errs


def test_validate_har_accepts_other_tools_fields():
    har = har_of(timeline()[0])
    h = copy.deepcopy(har)
    h["log"]["browser"] = {"name": "Chrome", "version": "120"}
    h["log"]["entries"][0]["_initiator"] = {"type": "parser"}
    h["log"]["entries"][0]["timings"].update(blocked=-1)  # optional ones may be -1
    h["log"]["entries"][0]["time"] = round(h["log"]["entries"][0]["time"] - 1.0, 3)
    h["log"]["entries"][0]["startedDateTime"] = "2025-03-01T13:00:00.45+01:00"
    assert validate_har(h) == []


# -- summary -------------------------------------------------------------------------

def test_summary_with_coalescing():
    records, conns, lookups = timeline(coalesced=True)
    s = summarize(records, conns, lookups, settings=SETTINGS, cached_urls=["https://static.lab.test/3.png"],
                  assets_found=4, error=None)
    assert s["ok"] and s["error"] is None
    assert s["requests"] == 4 and s["bytes"] == 4000 and s["requests_failed"] == 0
    assert s["plt_ms"] == 900.0                    # page start -> last byte of the last object
    assert s["content_download_ms"] == 488.0       # first byte of the HTML (412) -> 900
    assert s["ttfb_ms"] == 412.0
    assert s["dns_ms"] == 20.0 and s["dns_ms_per_host"] == {"www.lab.test": 10.0, "static.lab.test": 10.0}
    assert s["tcp_connect_ms"] == {"c1": 100.0} and s["tls_handshake_ms"] == {"c1": 200.0}
    assert s["connections_opened"] == 1
    assert s["connections_reused"] == 2 and s["reuse_ratio"] == 1.0
    c = s["connections"][0]
    assert (c["opened_at_ms"], c["connect_ms"], c["tls_ms"], c["requests"]) == (10.0, 100.0, 200.0, 4)
    assert c["origins"] == [WWW, STATIC]
    assert s["cached_urls"] == ["https://static.lab.test/3.png"]
    assert {k: s[k] for k in SETTINGS} == SETTINGS


def test_summary_without_coalescing():
    records, conns, lookups = timeline(coalesced=False)
    s = summarize(records, conns, lookups, settings=SETTINGS, cached_urls=[], assets_found=3, error=None)
    assert s["plt_ms"] == 1200.0 and s["content_download_ms"] == 788.0
    assert s["connections_opened"] == 2 and s["connections_reused"] == 0 and s["reuse_ratio"] == 0.0
    assert s["tcp_connect_ms"] == {"c1": 100.0, "c2": 100.0}
    assert s["connections"][1]["opened_at_ms"] == 470.0


def test_reuse_ratio_counts_only_other_origins_and_not_421_retries():
    records, conns, lookups = timeline(coalesced=True)
    # img2 was answered 421 on c1 and sent again on a connection of its own
    records[3].superseded = True
    retry = req(STATIC + "/2.png", STATIC, "image", 0.8, 1.0, 1.1, 1.2, conn="c2")
    s = summarize(records + [retry], conns, lookups, settings=SETTINGS, cached_urls=[], assets_found=3, error=None)
    assert s["requests"] == 5
    assert s["connections_reused"] == 1
    assert s["reuse_ratio"] == 0.5  # img1 coalesced, the retry of img2 not
    only_www = [r for r in records if r.origin == WWW]
    assert summarize(only_www, conns, lookups, settings=SETTINGS, cached_urls=[], assets_found=1,
                     error=None)["reuse_ratio"] == 0.0


def test_summary_of_a_failed_load_keeps_what_completed():
    records, conns, lookups = timeline(coalesced=False)
    records[2].error, records[2].last_byte, records[2].first_byte = "connect to static.lab.test failed", None, None
    conns[1].error = "connect to static.lab.test failed"
    s = summarize(records, conns, lookups, settings=SETTINGS, cached_urls=[], assets_found=3,
                  error="connect to static.lab.test failed")
    assert not s["ok"] and s["plt_ms"] is None and s["content_download_ms"] is None
    assert s["ttfb_ms"] == 412.0 and s["requests_failed"] == 1 and s["connections_opened"] == 1
    assert s["errors"] == ["connect to static.lab.test failed"]
    empty = summarize([], [], [], settings=SETTINGS, cached_urls=[], assets_found=0, error="bad CA file")
    assert empty["plt_ms"] is None and empty["ttfb_ms"] is None and empty["requests"] == 0


@pytest.mark.parametrize("headers,body,status,problem", [
    ([("content-length", "1000")], 1000, 200, None),
    ([("Content-Length", "1000, 1000")], 1000, 200, None),  # a list of equal values is one (RFC 9110 §8.6)
    ([], 1234, 200, None),  # delimited by the end of the stream
    ([("content-length", "1000")], 990, 200, "received 990 body bytes, the Content-Length is 1000"),
    ([("content-length", "1000")], 1010, 200, "received 1010 body bytes, the Content-Length is 1000"),
    ([("content-length", "10, 20")], 10, 200, "Content-Length '10, 20' is not one number of bytes"),
    ([("content-length", "-1")], 0, 200, "Content-Length '-1' is not one number of bytes"),
    ([("content-length", "\u0661")], 1, 200, "Content-Length '\u0661' is not one number of bytes"),
    ([("content-length", "500")], 0, 304, None),  # the length of the body it did not send
    ([("content-length", "500"), ("transfer-encoding", "chunked")], 20, 200, None),  # chunked wins (RFC 9112 §6.3)
])
def test_a_body_is_whole_when_it_has_its_content_length(headers, body, status, problem):
    r = RequestRecord("https://www.lab.test/objects/1000.bin", WWW, "document", start=t(0), status=status,
                      body_bytes=body, response_headers=[(":status", str(status)), *headers])
    assert r.length_problem() == problem
