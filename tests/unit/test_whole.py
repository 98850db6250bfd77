"""A run is ok only when its measurement is whole (analysis/whole.py and
the runner's use of it), on canned loader output."""

from __future__ import annotations

from pathlib import Path

from tortoiselab.analysis.parsers import parse_h2load, parse_nghttp_stats
from tortoiselab.analysis.whole import capture_problems, load_problems, object_bytes_of
from tortoiselab.host.runner import measurement_problems
from tortoiselab.spec.experiment import Experiment, expand

DATA = Path(__file__).resolve().parents[1] / "data"
H2LOAD = (DATA / "h2load_1mb.txt").read_text()
# the same transfer of an object the site does not have: three 404 pages
H2LOAD_404 = (H2LOAD.replace("3 succeeded, 0 failed", "3 succeeded, 0 failed")
              .replace("status codes: 3 2xx, 0 3xx, 0 4xx, 0 5xx", "status codes: 0 2xx, 0 3xx, 3 4xx, 0 5xx")
              .replace("2.86MB (3000000) data", "588B (588) data"))
NGHTTP = (DATA / "nghttp_tiny_stats.txt").read_text()


def _summary(text: str) -> dict:
    return {"rc": 0, "error": None, **parse_h2load(text)}


def test_h2load_whole():
    assert load_problems("h2load", _summary(H2LOAD), requests=3, object_bytes=1000000) == []


def test_h2load_counting_404s_as_succeeded_is_not_whole():
    """h2load says '3 succeeded' for three 404s; the status line tells."""
    s = _summary(H2LOAD_404)
    assert s["succeeded"] == 3 and s["throughput_mbit"] > 0  # the plausible number
    p = load_problems("h2load", s, requests=3, object_bytes=10485760, url="objects/10485760.bin")
    assert p[0] == "3 of 3 requests answered 4xx for objects/10485760.bin"
    assert "0 of 3 requests answered 2xx" in p and "588 body bytes for 3 x 10485760 expected" in p


def test_h2load_short_bodies_or_no_summary_are_not_whole():
    s = _summary(H2LOAD)
    assert load_problems("h2load", s, requests=3, object_bytes=100000) == [
        "3000000 body bytes for 3 x 100000 expected"]
    assert load_problems("h2load", {"rc": 1, "error": "h2load output lacks its summary"}, requests=3) == [
        "h2load output lacks its summary", "h2load exited with 1"]


def test_loader_and_nghttp():
    ok = {"ok": True, "error": None, "requests": 40, "requests_failed": 0, "plt_ms": 812.5}
    assert load_problems("loader", ok) == []
    bad = {**ok, "ok": False, "error": "GET https://www.lab.test/x returned HTTP 404 Not Found", "plt_ms": None}
    assert load_problems("loader", bad) == ["GET https://www.lab.test/x returned HTTP 404 Not Found"]
    assert load_problems("loader", {**ok, "plt_ms": None}) == ["no page-load time was measured"]
    st = parse_nghttp_stats(NGHTTP)
    assert load_problems("nghttp", {"rc": 0, **st}) == []
    st404 = parse_nghttp_stats(NGHTTP.replace("  200   3K /tiny.html", "  404   3K /tiny.html"))
    assert load_problems("nghttp", {"rc": 0, **st404}) == ["404 for /tiny.html"]


def test_the_runner_reads_the_loaders_own_output():
    exp = Experiment(name="w", path={"rtt_ms": 50, "loss_pct": 0, "rate_mbit": 10},
                     client={"url": "objects/1000000.bin", "loader": "h2load"})
    run = expand(exp)[0]
    assert measurement_problems(run, {**_summary(H2LOAD), "raw": H2LOAD}) == []
    assert "0 of 3 requests answered 2xx" in measurement_problems(run, {**_summary(H2LOAD_404), "raw": H2LOAD_404})
    nexp = Experiment(name="n", path={"rtt_ms": 50, "loss_pct": 0, "rate_mbit": 10},
                      client={"page": "tiny.html", "loader": "nghttp"})
    nrun = expand(nexp)[0]
    summary = {"rc": 0, "plt_ms": 100.87, "requests": 1, "raw": NGHTTP.replace("  200   3K /tiny.html",
                                                                               "  503   3K /tiny.html")}
    assert measurement_problems(nrun, summary) == ["503 for /tiny.html"]


def test_object_size_from_url():
    assert object_bytes_of("objects/10000000.bin") == 10000000 and object_bytes_of("feed.html") is None


def test_a_capture_is_whole_only_with_counters_and_no_drops():
    good = {"captured": 969, "received_by_filter": 969, "dropped_by_kernel": 0}
    assert capture_problems({"server": good, "client": good}) == []
    assert capture_problems({"server": {**good, "dropped_by_kernel": 12}, "client": good}) == [
        "tcpdump dropped 12 packets of the server capture"]
    assert capture_problems({"server": good, "client": {"captured": None}}) == [
        "the client capture has no tcpdump counters (tcpdump did not stop cleanly)"]


def test_our_loader_on_an_object_is_whole_with_the_objects_bytes():
    """A load of objects/<bytes>.bin by our loader (issue 37): one request of
    exactly that many body bytes; the runner passes the size from the URL."""
    ok = {"ok": True, "error": None, "requests": 1, "requests_failed": 0, "plt_ms": 1650.2, "bytes": 1000000}
    assert load_problems("loader", ok, object_bytes=1000000, url="objects/1000000.bin") == []
    assert load_problems("loader", {**ok, "bytes": 999000}, object_bytes=1000000, url="objects/1000000.bin") == [
        "999000 body bytes for objects/1000000.bin, 1000000 expected"]
    run = expand(Experiment(name="o", path={"rtt_ms": 50, "loss_pct": 0, "rate_mbit": 10},
                            client={"url": "objects/1000000.bin", "loader": "loader"}))[0]
    assert measurement_problems(run, ok) == []
    assert measurement_problems(run, {**ok, "bytes": 512}) == [
        "512 body bytes for objects/1000000.bin, 1000000 expected"]
