"""The napkin model (tortoiselab.analysis.napkin) against seed 003's worked numbers
and against hand-computed cases."""

import pytest

from tortoiselab.analysis import napkin as N
from tortoiselab.spec import cols


def test_slow_start_rounds():
    # IW·MSS·(2^k - 1) >= S
    assert N.slow_start_rounds(0, 10) == 0
    assert N.slow_start_rounds(1, 10) == 1
    assert N.slow_start_rounds(10 * 1448, 10) == 1
    assert N.slow_start_rounds(10 * 1448 + 1, 10) == 2
    assert N.slow_start_rounds(30 * 1448, 10) == 2
    assert N.slow_start_rounds(100_000, 3) == 5   # 3+6+12+24 = 45 < 70 <= 93
    assert N.slow_start_rounds(100_000, 10) == 3  # 10+20+40 = 70 segments
    assert N.slow_start_rounds(100_000, 30) == 2
    assert N.slow_start_rounds(100_000, 70) == 1
    with pytest.raises(ValueError):
        N.slow_start_rounds(100, 0)


def test_napkin_article_worked_example():
    """Napkin Problem 15: information.dk, 160 KB of HTML, initcwnd 3, a
    6908-byte certificate over TLS 1.2: 1 TCP + 3 TLS + 6 HTTP = 10 round
    trips, "with our roundtrip time at 130ms ... the 1.3s total time". The
    article's count is napkin_rtts; Linux's floor is lower: the handshake
    flight (5 segments, more than IW/2) grew the window to 3 + 5 + 2 = 10
    before the response, which then doubles: 10, 20, 40, 80 -> 4 rounds."""
    f = N.floor_ms(130, 15, 160_000, 3, tls="1.2", cert_flight_bytes=6908)
    assert (f["tcp_rtts"], f["tls_rtts"], f["slow_start_rounds"]) == (1, 3, 6)
    assert f["napkin_rtts"] == 10
    assert f["response_window"] == 10 and f["data_rounds"] == 4 and f["rtts"] == 8
    assert f["round_trips_ms"] == 8 * 130
    # the formula adds all 160 KB at 15 Mbit/s (~85 ms); the floor
    # charges the last round's 40 segments (10 + 20 + 40 = 70 before it, of 111)
    assert f["s_over_c_ms"] == pytest.approx(160_000 * 8 / 15e3, abs=1e-3)
    assert f["napkin_ms"] == pytest.approx(1300 + 85.333, abs=0.01)
    last = 111 - 70
    assert f["total_ms"] == pytest.approx(1040 + last * 1514 * 8 / 15e3, abs=0.01)
    # ... and with the 2635-byte certificate of sirupsen.com the third TLS trip goes
    assert N.tls_round_trips("1.2", 3, 2635) == 2
    assert N.tls_round_trips("1.2", 10, 6908) == 2


def test_the_articles_server_grew_x1_7_into_a_64_kb_window():
    """The article's own windows (6, 10, 17, 29, 48 capped at 64 KB, 9):
    x1.7 per round and the receive window give its 6 HTTP rounds and 10
    round trips; Linux's doubling from the grown window gives 8."""
    a = N.article_server()
    assert (a["rtts"], a["http_rounds"], a["round_trips_ms"]) == (10, 6, 1300)
    assert 1300 < a["total_ms"] < 1.1 * 1300
    assert a["rtts"] > N.floor_ms(130, 15, 160_000, 3, tls="1.2", cert_flight_bytes=6908)["rtts"]
    # the cap: without it the x1.7 growth needs 5 rounds, with it 6
    free = N.data_time_ms(130, 15, 160_000, 6, 1460, growth=1.7)
    assert free["rounds"] == 5
    with pytest.raises(ValueError, match="rwnd_bytes"):
        N.data_time_ms(130, 15, 160_000, 6, rwnd_bytes=100)


def test_handshake_window_follows_linuxs_cwnd_limited_test():
    # a flight above IW/2 keeps the sender window-limited: + every segment ACKed
    assert N.handshake_window(3, "1.2", 6908) == 3 + 5 + 2
    assert N.handshake_window(10, "1.3", 7743) == 10 + 6
    assert N.handshake_window(4, "1.3", 7743, growth=16) == 4 + 6 * 15   # hybla, rho 4
    # a flight of IW/2 or less never passes it: the window stays at IW
    assert N.handshake_window(10, "1.3", 1409) == 10
    assert N.handshake_window(30, "1.3", 7743) == 30
    assert N.handshake_window(10, None, 7743) == 10


def test_napkin_article_naive_model():
    """The article's first guess: 4 round trips at 140 ms = 560 ms, plus
    ~100 ms for 160 KB at 15 Mbit/s, "a ballpark of ~660ms"."""
    f = N.floor_ms(140, 15, 160_000, 1000, tls="1.2")
    assert f["rtts"] == 4 and f["round_trips_ms"] == 560
    assert 640 < f["napkin_ms"] < 660 and 640 < f["total_ms"] < 660


def test_tls_round_trips():
    assert N.tls_round_trips("1.3", 10) == 1
    assert N.tls_round_trips("1.2", 10) == 2
    assert N.tls_round_trips(None, 10) == 0
    assert N.tls_round_trips("1.3", 3, 7743) == 2   # the lab's large chain at IW 3
    assert N.tls_round_trips("1.3", 10, 7743) == 1
    assert N.tls_round_trips("1.3", 3, 4344) == 1   # exactly 3 x 1448 fits
    assert N.tls_round_trips("1.3", 1, 7 * 1448 + 1) == 4  # 1 + 2 + 4 < 8 segments: 3 extra
    with pytest.raises(ValueError):
        N.tls_round_trips("1.1", 10)


def test_floor_parts_for_the_lab_path():
    # 100 ms, 100 Mbit/s, 100 KB, one DNS lookup, TLS 1.3
    f = N.floor_ms(100, 100, 100_000, 10, dns_lookups=1)
    assert (f["dns_rtts"], f["tcp_rtts"], f["tls_rtts"], f["slow_start_rounds"]) == (1, 1, 1, 3)
    assert f["rtts"] == 6
    # the last round carries segments 31..70 (40 of them) at 1514 bytes on the wire
    assert f["serialization_ms"] == pytest.approx(40 * 1514 * 8 / 100e3, abs=1e-3)
    assert f["total_ms"] == pytest.approx(600 + 4.845, abs=1e-3)
    assert f["napkin_ms"] == 608.0
    assert N.ratio(701.662, f) == pytest.approx(1.1601, abs=1e-4)
    assert N.ratio(None, f) is None


def test_floor_on_a_bulk_transfer_counts_rounds_until_the_pipe_is_full():
    # 10 MB at 10 Mbit/s over 100 ms: BDP ~ 82.6 full frames; flights of
    # 10, 20, 40, 80 serialize within an RTT, the 160-segment round does not:
    # 5 rounds, the last of them and the rest at the bottleneck rate
    f = N.floor_ms(100, 10, 10_000_000, 10, tls=None)
    assert f["link_saturated"] and f["data_rounds"] == 5
    rest = -(-10_000_000 // 1448) - 150
    assert f["serialization_ms"] == pytest.approx(rest * 1514 * 8 / 10e3, abs=1e-3)
    assert f["total_ms"] == pytest.approx(100 + 500 + rest * 1514 * 8 / 10e3, abs=1e-3)
    assert f["total_ms"] < f["napkin_ms"]  # the formula counts 10 rounds and all the bytes
    # and it is never below the time the bytes need at the bottleneck
    assert f["total_ms"] > 10_000_000 * 8 / 10e3


def test_floor_is_monotonic_in_the_initial_window():
    totals = [N.floor_ms(200, 20, 300_000, iw)["total_ms"] for iw in (1, 3, 10, 30, 100)]
    assert totals == sorted(totals, reverse=True)


def test_bad_inputs():
    with pytest.raises(ValueError):
        N.floor_ms(-1, 10, 1000, 10)
    with pytest.raises(ValueError):
        N.floor_ms(100, 0, 1000, 10)
    with pytest.raises(ValueError):
        N.floor_ms(100, 10, 1000, 10, dns_lookups=-1)


# --- whole pages ----------------------------------------------------------------

SEG_20 = 1514 * 8 / 20e3  # ms per full frame at 20 Mbit/s


def test_lead_segments_take_their_place_in_the_first_window():
    # 3 segments behind 4 small ones: one round in a window of 10, two in a window of 4
    assert N.data_time_ms(100, 20, 3000, 10, lead_segments=4)["rounds"] == 1
    assert N.data_time_ms(100, 20, 3000, 4, lead_segments=4)["rounds"] == 2
    assert N.data_time_ms(100, 20, 3000, 4, lead_segments=4, growth=16)["total_ms"] == \
        pytest.approx(200 + 3 * SEG_20, abs=1e-6)
    assert N.data_time_ms(100, 20, 0, 4, lead_segments=4)["rounds"] == 0  # nothing of ours to wait for


def test_hybla_starts_at_rho_and_multiplies_by_two_to_the_rho():
    assert N.slow_start_window("cubic", 10, 100) == (10.0, 2.0)
    assert N.slow_start_window("reno", 3, 600) == (3.0, 2.0)
    assert N.slow_start_window("hybla", 10, 100) == (4.0, 16.0)  # ρ = 100/25, initcwnd overridden
    w, g = N.slow_start_window("hybla", 10, 30)
    assert w == 1.0 and g == pytest.approx(2 ** 1.2)
    assert N.slow_start_window("hybla", 10, 10) == (1.0, 2.0)  # ρ >= 1


def test_page_floor_by_hand():
    """The lab's tiny page shape: a 3-segment document and 21 segments of
    objects over 100 ms / 20 Mbit/s, IW 10, TLS 1.3 with a one-segment
    server flight, one DNS lookup: DNS + TCP + TLS, the document in one
    round (4 post-handshake segments + 3 fit in 10), then the objects from a
    window of 10 + 1 + 4 + 3 = 18 (Linux counts ACKed segments, the four
    small ones too): 18, then 3 segments, the last round's 3 at the
    bottleneck rate."""
    f = N.page_floor_ms(100, 20, 3000, 21 * 1448, 10, tls="1.3", cert_flight_bytes=1409, dns_lookups=1)
    assert (f["dns_rtts"], f["tcp_rtts"], f["tls_rtts"], f["document_rounds"], f["object_rounds"]) == (1, 1, 1, 1, 2)
    assert f["objects_first_window"] == 18 and f["rtts"] == 6
    assert f["total_ms"] == pytest.approx(600 + 3 * SEG_20 + 3 * SEG_20, abs=1e-3)
    # no objects: the document's load alone
    g = N.page_floor_ms(100, 20, 3000, 0, 10, cert_flight_bytes=1409)
    assert g["total_ms"] == pytest.approx(400 + 3 * SEG_20, abs=1e-3) and g["object_rounds"] == 0


def test_the_lead_segments_grow_the_window_as_linux_counts_them():
    """Linux's slow start counts ACKed segments, not bytes: the four small
    post-handshake segments (TLS 1.3) add four segments of window, as the
    lab's capture of a feed load shows (objects from 56 segments)."""
    f = N.page_floor_ms(100, 20, 60_000, 100_000, 10, tls="1.3", cert_flight_bytes=1271)
    assert f["objects_first_window"] == 10 + 1 + 4 + 42


def test_page_floor_second_origin():
    kw = dict(rtt_ms=100, rate_mbit=20, document_bytes=60_000, object_bytes=0, iw_pkts=10, tls="1.3",
              cert_flight_bytes=1409, dns_lookups=1, second_origin_bytes=500_000)
    doc = N.data_time_ms(100, 20, 60_000, 10, lead_segments=4)
    co = N.page_floor_ms(second_origin="coalesced", **kw)
    w = 10 + 1 + 4 + -(-60_000 // 1448)  # IW + the segments ACKed: flight, 4 post-handshake, document
    assert co["total_ms"] == pytest.approx(300 + doc["total_ms"] + 100 +
                                           N.data_time_ms(100, 20, 500_000, w)["total_ms"], abs=1e-3)
    assert co["second_origin_rtts"] == 1  # its DNS lookup
    sep = N.page_floor_ms(second_origin="connection", **kw)
    assert sep["total_ms"] == pytest.approx(300 + doc["total_ms"] + 300 +
                                            N.data_time_ms(100, 20, 500_000, 10)["total_ms"], abs=1e-3)
    assert sep["second_origin_rtts"] == 3 and sep["total_ms"] > co["total_ms"]
    with pytest.raises(ValueError, match="second_origin"):
        N.page_floor_ms(second_origin="maybe", **kw)


MANIFEST = {
    "pages": {"tiny.html": {"path": "/tiny.html",
                            "document": {"url": "https://www.lab.test/tiny.html", "origin": "https://www.lab.test",
                                         "path": "/tiny.html", "bytes": 3000},
                            "objects": [{"url": f"https://www.lab.test/img/{i}.png", "origin": "https://www.lab.test",
                                         "bytes": 1448} for i in range(21)]}},
    "bulk": [{"url": "https://www.lab.test/objects/100000.bin", "origin": "https://www.lab.test",
              "path": "/objects/100000.bin", "bytes": 100_000}],
}
PKI = {"variants": {"shared": {"coalescing": True, "www": {"tls13_flight_estimate_bytes": 1409}}}}


def _config(**client):
    return {"path": {"rtt_ms": 100, "resolved": {"rtt_ms": 100, "rate_mbit": 20, "loss_pct": 0}},
            "server": {"cc": "cubic", "initcwnd_pkts": 10, "protocol": "h2", "tls": "1.3", "cert": "shared"},
            "client": {"page": "tiny.html", "loader": "loader", "coalescing": True, **client}}


def test_run_floor_from_a_runs_configuration():
    f = N.run_floor(_config(), MANIFEST, PKI)
    assert f["floor_ms"] == N.page_floor_ms(100, 20, 3000, 21 * 1448, 10, cert_flight_bytes=1409)["total_ms"]
    # cached objects are not fetched
    cached = [o["url"] for o in MANIFEST["pages"]["tiny.html"]["objects"][:14]]
    assert N.run_floor(_config(), MANIFEST, PKI, cached)["model"]["object_rounds"] == 1
    # a single object by url: the document alone
    b = N.run_floor(_config(url="objects/100000.bin"), MANIFEST, PKI)
    assert b["floor_ms"] == N.page_floor_ms(100, 20, 100_000, 0, 10, cert_flight_bytes=1409)["total_ms"]
    # hybla: its own window
    cfg = _config()
    cfg["server"]["cc"] = "hybla"
    assert N.run_floor(cfg, MANIFEST, PKI)["model"]["growth"] == 16.0


def test_run_floor_says_why_it_does_not_apply():
    assert "h2load" in N.run_floor(_config(loader="h2load"), MANIFEST, PKI)["why"]
    assert "HTTP/1.1" in N.run_floor(_config(protocol="h1"), MANIFEST, PKI)["why"]
    assert "manifest" in N.run_floor(_config(page="feed.html"), MANIFEST, PKI)["why"]
    assert N.run_floor(_config(page="feed.html"), MANIFEST, PKI)["floor_ms"] is None


def test_tied_alpha_makes_the_backoff_buy_nothing_in_the_reno_friendly_region():
    """RFC 9438 §4.3 ties alpha = 3(1 - beta)/(1 + beta): the AIMD window
    sqrt(alpha (1 + beta) / (2 (1 - beta) p)) is then sqrt(3 / 2p) for every
    beta, so CUBIC+'s beta' = 0.95 against 0.7 predicts x1.00 where the flow
    is in that region (20-100 ms at 2-10 % loss; +9 % at 200 ms, 2 %); the
    untied reading (alpha = 1 for both) gives the notebook's old x2.6."""
    assert N.reno_friendly_alpha(0.7) == pytest.approx(0.9 / 1.7)
    assert N.aimd_window(0.02, 0.95) == pytest.approx(N.aimd_window(0.02, 0.7)) == pytest.approx((1.5 / 0.02) ** 0.5)
    for loss in (0.02, 0.06, 0.1):
        for rtt in (0.02, 0.1):
            w = N.cubic_loss_window(loss, rtt, 0.95)
            assert w["region"] == "Reno-friendly", (loss, rtt, w)
            assert N.backoff_gain(loss, rtt, 0.7, 0.95) == pytest.approx(1.0)
    # at 200 ms and 2 % beta' = 0.95 just reaches its cubic region: +9 %
    assert N.cubic_loss_window(0.02, 0.2, 0.95)["region"] == "cubic"
    assert 1.08 < N.backoff_gain(0.02, 0.2, 0.7, 0.95) < 1.10
    assert N.backoff_gain(0.02, 0.1, 0.7, 0.95, alpha=1) == pytest.approx((1.95 / 0.05 / (1.7 / 0.3)) ** 0.5)
    assert 2.6 < N.backoff_gain(0.02, 0.1, 0.7, 0.95, alpha=1) < 2.65
    # Reno: 1.22 / sqrt(p) at alpha 1, beta 0.5 (Mathis et al.)
    assert N.aimd_window(0.02, 0.5, alpha=1) == pytest.approx(1.5 ** 0.5 / 0.02 ** 0.5)
    # at very low loss and a long RTT the cubic region wins, and there beta' matters
    far = N.cubic_loss_window(1e-5, 0.2, 0.95)
    assert far["region"] == "cubic" and N.backoff_gain(1e-5, 0.2, 0.7, 0.95) > 1.3
    with pytest.raises(ValueError, match="loss"):
        N.aimd_window(2, 0.7)


# --- an imported site's floor (client.site; docs/your-own-site.md) -----------------

def _site_and_har(conns: list[tuple[str, str, int]], served: dict[str, int] | None = None,
                  doc_protocol: str = "h2"):
    """A site of https://www.s.example/ (30,000 bytes) and objects, and our
    loader's HAR of a load: conns is (url, connection id, bodySize) per object."""
    doc = "https://www.s.example/"
    origins = {"https://www.s.example": {"protocol": doc_protocol, "certificate": "cert-1"},
               "https://cdn.s.example": {"protocol": "h2", "certificate": "cert-2"}}
    responses = {f"GET {doc}": {"bytes": 30_000}}
    responses |= {f"GET {u}": {"bytes": (served or {}).get(u, n)} for u, _, n in conns}
    entry = lambda u, c, n: {"request": {"method": "GET", "url": u}, "response": {"bodySize": n}, "connection": c}
    har = {"log": {"entries": [entry(doc, "c1", 30_000)] + [entry(*x) for x in conns]}}
    site = {"name": "s", "origins": origins, "responses": responses}
    pki = {"certificates": {"cert-1": {"tls13_flight_estimate_bytes": 4000}}}
    return har, site, pki


CONFIG = {"path": {"rtt_ms": 100, "rate_mbit": 50}, "server": {"cc": "cubic", "initcwnd_pkts": 10},
          "client": {"site": "s", "loader": "loader", "protocol": None}}  # None: the page's, as a run's config holds it


def test_an_imported_sites_floor_counts_the_documents_connection_and_the_largest_other():
    """By hand, 100 ms, 50 Mbit/s, CUBIC IW 10, a 4,000-byte TLS flight (one
    TLS round trip, window 10 after it). The document's connection: 30,000 +
    70,000 bytes (coalesced cdn host too) = 70 segments behind the 4
    post-handshake ones, from 300 ms (DNS, TCP, TLS): 6 + 20 + 40 + 4 in 4
    rounds, ends at 700 ms + 4 segments' serialization. Of the other
    connections only the largest, 100,000 bytes (a body the HAR counts
    larger than served counts as served), starting no sooner than the
    document's first byte (400 ms), then DNS, TCP and TLS (700 ms): 10 + 20
    + 40 segments, the last flight serialized: 1000 ms + 40 segments.
    With names warm, one DNS round trip less on each path."""
    har, site, pki = _site_and_har([("https://www.s.example/a.css", "c1", 20_000),
                                    ("https://cdn.s.example/b.js", "c1", 50_000),
                                    ("https://api.x.example/c.json", "c2", 9_000),
                                    ("https://img.y.example/d.png", "c3", 80_000),
                                    ("https://img.y.example/e.png", "c3", 40_000)],
                                   served={"https://img.y.example/d.png": 60_000})
    seg = (1448 + N.HEADER_BYTES) * 8 / 50_000
    f = N.imported_floor(CONFIG, har, site, pki)
    assert f[cols.FLOOR] == pytest.approx(1000 + 40 * seg, abs=1e-3)
    m = f["model"]
    assert (m["document_connection_bytes"], m["other_connection_bytes"], m["other_connections_left_out"]) == \
        (100_000, 100_000, 1)
    assert m["document_connection_rounds"] == 4 and m["other_connection_start_ms"] == 700
    # the stored record's typed model carries every part (a run's summary keeps it: spec/measured.py)
    from tortoiselab.spec.measured import FloorModel
    assert FloorModel.model_validate(m).model_dump(exclude_none=True) == {k: v for k, v in m.items() if v is not None}
    warm = {**CONFIG, "client": {**CONFIG["client"], "dns": "warm"}}
    assert N.imported_floor(warm, har, site, pki)[cols.FLOOR] == pytest.approx(800 + 40 * seg, abs=1e-3)
    alone = N.imported_floor(CONFIG, *_site_and_har([("https://www.s.example/a.css", "c1", 20_000)]))
    assert alone[cols.FLOOR] == pytest.approx(300 + 300 + 9 * seg, abs=1e-3)  # 50,000 bytes: 6 + 20 + 9 segments


def test_an_imported_sites_floor_applies_to_our_loader_on_h2_only():
    har, site, pki = _site_and_har([("https://www.s.example/a.css", "c1", 20_000)])
    chromium = {**CONFIG, "client": {"site": "s", "loader": "chromium"}}
    assert N.imported_floor(chromium, har, site, pki) == {
        cols.FLOOR: None, "why": "loader chromium: the floor models our page loader only"}
    h1 = N.imported_floor(CONFIG, *_site_and_har([], doc_protocol="http/1.1"))
    assert h1[cols.FLOOR] is None and "HTTP/1.1" in h1["why"]
    assert N.imported_floor(CONFIG, {"log": {"entries": []}}, site, pki)[cols.FLOOR] is None
