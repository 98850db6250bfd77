"""The napkin model of a page load: the physical floor under a measured PLT.

Seed 003 (Napkin Problem 15) counts round trips: 1 for TCP, h for TLS, k
for the response in slow start, plus the time to push the bytes through the
bottleneck. Here:

    PLT ≈ (d + 1 + h + k)·RTT + serialization

- d: DNS lookups that cross the path (one round trip per uncached name);
- 1: the TCP handshake;
- h: TLS round trips before the request may leave (1 for TLS 1.3, 2 for
  1.2, 0 without TLS), plus slow_start_rounds(flight, IW) - 1 when the
  server's handshake flight does not fit its initial window;
- k: slow-start rounds for the response, the smallest k with
  IW·MSS·(2^k - 1) >= S (the article's count: `napkin_rtts`), started from
  the largest window Linux can have after the handshake (`handshake_window`);
- serialization: only what an ideal sender cannot hide behind the ACK
  clock: rounds are counted until the object ends or a flight would take
  longer than an RTT to serialize, and the bytes from that round on are
  charged at the bottleneck rate on the wire (MSS + 66 header bytes per
  segment) (`total_ms`; the issue's S/C for all bytes is `napkin_ms`).

A page (`page_floor_ms`, `run_floor` from a run's configuration) adds its
objects as one more transfer continuing slow start from the window the
handshake and the document grew, and a second origin's DNS (and TCP + TLS
when not coalesced). A traced downlink has no rate: the trace is the
bottleneck from the page's instant in it (analysis/tracefloor.py).

Every choice errs low (windows as large as Linux could have them, doubling
every round; a known receive window caps the flights), so measured / floor
>= 1 on every loss-free run, and the gap is something to explain. What the
floor leaves out, the article's own server (`article_server`) and the
measurements that back the model: docs/analysis.md, "The PLT floor".
"""
from __future__ import annotations

import math

from tortoiselab.analysis.tracefloor import HEADER_BYTES, TraceLink, traced_data_time_ms, traced_downlink
from tortoiselab.spec import cols

TLS_RTTS = {"1.3": 1, "1.2": 2, None: 0, "none": 0}


def slow_start_rounds(size_bytes: int, iw_pkts: int, mss: int = 1448) -> int:
    """Round trips slow start needs for size_bytes: the smallest k with
    IW·MSS·(2^k - 1) >= S (0 for nothing to send)."""
    if size_bytes < 0 or iw_pkts < 1 or mss < 1:
        raise ValueError("size_bytes >= 0, iw_pkts >= 1 and mss >= 1, please")
    if size_bytes == 0:
        return 0
    segments = math.ceil(size_bytes / mss)
    k = 0
    while iw_pkts * (2 ** k - 1) < segments:
        k += 1
    return k


def tls_round_trips(tls: str | None, iw_pkts: int, cert_flight_bytes: int | None = None, mss: int = 1448) -> int:
    """h: TLS round trips before the request, with the extra rounds of a
    server handshake flight larger than the initial window."""
    if tls not in TLS_RTTS:
        raise ValueError(f"tls: {tls!r}; use '1.3', '1.2' or None")
    h = TLS_RTTS[tls]
    if h and cert_flight_bytes:
        h += max(0, slow_start_rounds(cert_flight_bytes, iw_pkts, mss) - 1)
    return h


def data_time_ms(rtt_ms: float, rate_mbit: float | None, size_bytes: int, iw_pkts: float, mss: int = 1448,
                 header_bytes: int = HEADER_BYTES, growth: float = 2.0, lead_segments: int = 0,
                 rwnd_bytes: int | None = None, link: TraceLink | None = None, start_ms: float = 0.0) -> dict:
    """From the request leaving the client to the response's last byte
    arriving, for an ideal slow-start sender: rounds every RTT while a
    flight serializes in less than an RTT, then the bottleneck's rate.
    `growth`: the window's factor per round (2 for slow start; Hybla's is
    2^ρ, see `slow_start_window`). `lead_segments`: small segments sent
    just before (the window counts packets, not bytes), which take their
    place in the first rounds' windows. `rwnd_bytes`: the receiver's
    window, which caps every flight (None: no cap, the floor's default).
    `link`: a traced downlink (analysis/tracefloor.py) in place of
    rate_mbit, the request leaving at start_ms on the load's clock
    (`traced_data_time_ms`)."""
    if rtt_ms < 0 or (link is None and (rate_mbit is None or rate_mbit <= 0)):
        raise ValueError("rtt_ms >= 0 and rate_mbit > 0 (or a traced link), please")
    if growth < 1 or lead_segments < 0:
        raise ValueError("growth >= 1 and lead_segments >= 0, please")
    if rwnd_bytes is not None and rwnd_bytes < mss:
        raise ValueError(f"rwnd_bytes: {rwnd_bytes}; at least one MSS ({mss}), or None for no cap")
    flights = round_flights(size_bytes, iw_pkts, mss, growth, lead_segments, rwnd_bytes)
    if link is not None:
        return traced_data_time_ms(rtt_ms, link, start_ms, size_bytes, flights, mss, header_bytes)
    segments = math.ceil(size_bytes / mss) if size_bytes > 0 else 0
    per_seg_ms = (mss + header_bytes) * 8 / (rate_mbit * 1e3)
    rounds, sent, saturated = 0, 0, False
    tail_segments, tail_bytes = 0, 0
    for w in flights:
        rounds += 1
        if w == 0:
            continue
        if w * per_seg_ms >= rtt_ms or sent + w >= segments:
            saturated = w * per_seg_ms >= rtt_ms and sent + w < segments
            tail_segments = segments - sent
            tail_bytes = size_bytes - sent * mss
            break
        sent += w
    ser = tail_segments * per_seg_ms
    return {"rounds": rounds, "tail_segments": tail_segments, "tail_bytes": tail_bytes,
            "link_saturated": saturated, "serialization_ms": ser, "total_ms": rounds * rtt_ms + ser}


def round_flights(size_bytes: int, iw_pkts: float, mss: int = 1448, growth: float = 2.0, lead_segments: int = 0,
                  rwnd_bytes: int | None = None) -> list[int]:
    """The data segments of each round's flight until size_bytes are sent
    (0 for a round the lead segments fill): the window is
    IW·growth^(round-1) segments, capped by the receiver's window."""
    rwnd = rwnd_bytes // mss if rwnd_bytes is not None else math.inf
    segments = math.ceil(size_bytes / mss) if size_bytes > 0 else 0
    out, sent, lead = [], 0, lead_segments if segments else 0
    while sent < segments:
        cap = min(max(1, math.floor(iw_pkts * growth ** len(out))), rwnd)
        taken, lead = min(lead, cap), lead - min(lead, cap)
        w = min(cap - taken, segments - sent)
        out.append(w)
        sent += w
    return out


# The server's last TLS 1.2 flight (ChangeCipherSpec, Finished and the session
# ticket), ACKed by the client's request: 2 small segments in the lab's capture.
TLS12_FINISHED_SEGMENTS = 2


def handshake_window(iw_pkts: float, tls: str | None, cert_flight_bytes: int | None, growth: float = 2.0,
                     mss: int = 1448) -> float:
    """The largest window the server can have when the response starts.
    Linux grows the window in slow start only while the sender is
    window-limited, in slow start when cwnd < 2 x packets out
    (tcp_is_cwnd_limited, net/ipv4/tcp_output.c), and then by one segment
    per segment ACKed (growth - 1 for Hybla). A handshake flight of more
    than IW/2 segments passes that test, and every handshake segment
    (with TLS 1.2 the server's Finished flight too) is ACKed before the
    response leaves: IW + (growth - 1) x those segments, an upper bound of
    the window (so a lower bound of the time). A smaller flight leaves the
    window at IW."""
    segs = math.ceil((cert_flight_bytes or 0) / mss)
    if not tls or tls == "none" or not segs or 2 * min(iw_pkts, segs) <= iw_pkts:
        return iw_pkts
    acked = segs + (TLS12_FINISHED_SEGMENTS if tls == "1.2" else 0)
    return iw_pkts + acked * (growth - 1)


def floor_ms(rtt_ms: float, rate_mbit: float, size_bytes: int, iw_pkts: int, tls: str | None = "1.3",
             cert_flight_bytes: int | None = None, dns_lookups: int = 0, mss: int = 1448,
             header_bytes: int = HEADER_BYTES) -> dict:
    """The floor of one object's load over a path, and its parts (see the
    module's docstring): total_ms (the floor), rtts and their split,
    serialization_ms (what the floor charges for the bottleneck),
    response_window (the first window of the response, handshake_window),
    napkin_rtts / napkin_ms = (d + 1 + h + k)·RTT (+ S/C), the article's
    formula as written (k from IW, no growth during the handshake)."""
    if dns_lookups < 0:
        raise ValueError("dns_lookups >= 0, please")
    h = tls_round_trips(tls, iw_pkts, cert_flight_bytes, mss)
    k = slow_start_rounds(size_bytes, iw_pkts, mss)
    w0 = handshake_window(iw_pkts, tls, cert_flight_bytes, mss=mss)
    data = data_time_ms(rtt_ms, rate_mbit, size_bytes, w0, mss, header_bytes)
    setup = dns_lookups + 1 + h
    s_over_c = size_bytes * 8 / (rate_mbit * 1e3)
    return {
        "total_ms": round(setup * rtt_ms + data["total_ms"], 3),
        "rtts": setup + data["rounds"],
        "rtt_ms": rtt_ms,
        "dns_rtts": dns_lookups, "tcp_rtts": 1, "tls_rtts": h,
        "slow_start_rounds": k, "data_rounds": data["rounds"], "link_saturated": data["link_saturated"],
        "response_window": w0,
        "round_trips_ms": round((setup + data["rounds"]) * rtt_ms, 3),
        "serialization_ms": round(data["serialization_ms"], 3),
        "s_over_c_ms": round(s_over_c, 3),
        "napkin_rtts": setup + k,
        "napkin_ms": round((setup + k) * rtt_ms + s_over_c, 3),
    }


def ratio(measured_ms: float | None, floor: dict | float) -> float | None:
    """measured / floor (>= 1 unless something beat physics or the model)."""
    f = floor["total_ms"] if isinstance(floor, dict) else floor
    if measured_ms is None or not f:
        return None
    return round(measured_ms / f, 4)


# The article's server (information.dk from Quebec, Napkin Problem 15): its
# windows per round trip as the article lists them, 1460-byte packets, and
# the client's receive window "~65kb" that capped the fifth.
ARTICLE_WINDOWS = (3, 6, 10, 17, 29, 48, 9)  # TLS round, then HTTP rounds 1-6
ARTICLE_GROWTH = 1.7                          # 6 -> 10 -> 17 -> 29 -> 48: x1.67..1.71 per round
ARTICLE_RWND_BYTES = 64 * 1024
ARTICLE_MSS = 1460


def article_server(rtt_ms: float = 130, rate_mbit: float = 15, size_bytes: int = 160_000) -> dict:
    """The article's own count for its case, beside the Linux floor: 1 TCP
    + 3 TLS round trips, then the response from the article's first HTTP
    window (6 packets) growing x1.7 per round, capped by its 64 KB receive
    window: 6 rounds, 10 round trips (`rtts`), 1.3 s at 130 ms."""
    data = data_time_ms(rtt_ms, rate_mbit, size_bytes, ARTICLE_WINDOWS[1], ARTICLE_MSS,
                        growth=ARTICLE_GROWTH, rwnd_bytes=ARTICLE_RWND_BYTES)
    rtts = 1 + tls_round_trips("1.2", 3, 6908) + data["rounds"]
    return {"rtts": rtts, "http_rounds": data["rounds"], "growth": ARTICLE_GROWTH,
            "rwnd_bytes": ARTICLE_RWND_BYTES, "round_trips_ms": rtts * rtt_ms,
            "total_ms": round(rtts * rtt_ms + data["serialization_ms"], 3)}


# --- whole pages ---------------------------------------------------------------

HYBLA_RTT0_MS = 25.0  # tcp_hybla's rtt0 module parameter (its default)
# Small segments the server sends once the handshake is done, ahead of the
# document, each taking a place in a window that counts packets: with TLS
# 1.3, OpenSSL's two NewSessionTicket messages (SSL_CTX_set_num_tickets:
# "By default, two tickets are issued") and HTTP/2's server preface
# SETTINGS and its SETTINGS ack (RFC 9113 §3.4, §6.5.3); with TLS 1.2 the
# ticket rides the server's last handshake flight. Seen in the lab's server
# capture: 303, 303, 50 and 31 bytes right after the client's Finished.
POST_HANDSHAKE_SEGMENTS = {"1.3": 4, "1.2": 2}


def slow_start_window(cc: str, iw_pkts: int, rtt_ms: float) -> tuple[float, float]:
    """(first window in segments, growth per round) of a sender's slow start.
    Linux's Hybla (net/ipv4/tcp_hybla.c, Caini & Firrincieli 2004) sets the
    window to ρ = max(RTT/rtt0, 1) when the connection starts (overriding
    the route's initcwnd) and adds 2^ρ − 1 segments per ACKed segment, so the
    window grows by 2^ρ per round; every other algorithm the lab runs starts
    at initcwnd and doubles (RFC 5681 slow start, one segment per segment
    ACKed)."""
    if cc == "hybla":
        rho = max(rtt_ms / HYBLA_RTT0_MS, 1.0)
        return float(math.floor(rho)), 2.0 ** rho
    return float(iw_pkts), 2.0


def page_floor_ms(rtt_ms: float, rate_mbit: float | None, document_bytes: int, object_bytes: int = 0,
                  iw_pkts: float = 10, tls: str | None = "1.3", cert_flight_bytes: int | None = None,
                  dns_lookups: int = 1, second_origin: str = "none", second_origin_bytes: int = 0,
                  growth: float = 2.0, mss: int = 1448, header_bytes: int = HEADER_BYTES,
                  link: TraceLink | None = None) -> dict:
    """The floor of an HTTP/2 page load: the document, then its objects.

    - set-up: (d + 1 + h)·RTT, as `floor_ms`;
    - the document: `data_time_ms` from the window the handshake left
      (`handshake_window`), behind the small post-handshake segments;
    - the objects of the document's origin, requested together once the
      document has arrived, on the same connection: one more transfer whose
      first window is what slow start can have reached by then, IW plus one
      segment for every segment ACKed so far (handshake flight and document;
      RFC 5681 §3.1 with RFC 3465's byte counting): a lower bound, since
      Linux grows the window only while the sender is window-limited;
    - objects of a second origin (the feed page's static host), whose name
      the client learns from the document: one DNS round trip first, then
      either on the same connection (`second_origin="coalesced"`) or on a new
      one (`"connection"`: TCP + TLS, from the initial window), in parallel
      with the first origin's objects.

    Headers, HTTP/2 frame and TLS record overheads are left out (they only
    lower the floor). `link`: a traced downlink in place of rate_mbit
    (analysis/tracefloor.py): each transfer meets the trace at its own
    instant of the load. Returns total_ms and its parts."""
    if second_origin not in ("none", "coalesced", "connection"):
        raise ValueError(f"second_origin: {second_origin!r}; use none, coalesced or connection")
    if min(document_bytes, object_bytes, second_origin_bytes, dns_lookups) < 0:
        raise ValueError("byte counts and dns_lookups >= 0, please")
    h = tls_round_trips(tls, max(1, math.floor(iw_pkts)), cert_flight_bytes, mss)
    setup = dns_lookups + 1 + h
    lead = POST_HANDSHAKE_SEGMENTS.get(tls, 0)
    w0 = handshake_window(iw_pkts, tls, cert_flight_bytes, growth, mss)
    doc = data_time_ms(rtt_ms, rate_mbit, document_bytes, w0, mss, header_bytes, growth, lead, link=link,
                       start_ms=setup * rtt_ms)
    t_doc = setup * rtt_ms + doc["total_ms"]
    # Linux's slow start grows the window by the segments ACKed, whatever their
    # size (tcp_slow_start counts packets), so the small lead segments count in
    # full: 4 segments of window at TLS 1.3 (seen in the lab's capture: the
    # feed page's objects started at 56 segments, not IW + the bytes' 43)
    doc_segments = lead * bool(document_bytes) + math.ceil(document_bytes / mss)
    acked = math.ceil((cert_flight_bytes or 0) / mss) + doc_segments
    w_next = max(iw_pkts + acked * (growth - 1), w0 + doc_segments * (growth - 1))
    none = {"total_ms": 0.0, "rounds": 0, "serialization_ms": 0.0}
    # each branch: (end, round trips after the document, data rounds, serialization)
    branches = []
    separate = second_origin == "connection" and second_origin_bytes > 0
    same = object_bytes + (second_origin_bytes if second_origin == "coalesced" else 0)
    if same or not separate:
        # coalesced objects alone wait for their name; with objects of both
        # origins the floor lets all of them start at once (lower)
        wait = 1 if second_origin == "coalesced" and second_origin_bytes and not object_bytes else 0
        d = data_time_ms(rtt_ms, rate_mbit, same, w_next, mss, header_bytes, growth, link=link,
                         start_ms=t_doc + wait * rtt_ms) if same else none
        branches.append((t_doc + wait * rtt_ms + d["total_ms"], wait, d["rounds"], d["serialization_ms"]))
    if separate:  # DNS, TCP and TLS of its own, from the initial window
        d = data_time_ms(rtt_ms, rate_mbit, second_origin_bytes, iw_pkts, mss, header_bytes, growth, link=link,
                         start_ms=t_doc + (2 + h) * rtt_ms)
        branches.append((t_doc + (2 + h) * rtt_ms + d["total_ms"], 2 + h, d["rounds"], d["serialization_ms"]))
    end, extra, rounds, ser = max(branches)
    traced = {} if link is None else {**link.describe(), "trace_mbit_over_floor": round(link.mean_rate_mbit(0, end), 3)}
    return {"total_ms": round(end, 3), "rtt_ms": rtt_ms, "rtts": setup + doc["rounds"] + extra + rounds,
            "dns_rtts": dns_lookups, "tcp_rtts": 1, "tls_rtts": h, "document_rounds": doc["rounds"],
            "second_origin_rtts": extra, "object_rounds": rounds, "document_window": round(w0, 2),
            "serialization_ms": round(doc["serialization_ms"] + ser, 3),
            "objects_first_window": round(w_next, 2), "growth": round(growth, 4), **traced}


def run_floor(config: dict, manifest: dict, pki: dict | None = None,
              cached_urls: tuple[str, ...] | list[str] = (), trace_start_ms: float | None = None) -> dict:
    """The floor of one run from its resolved configuration (path, server,
    client), the site's manifest (the page's objects and sizes) and the lab
    PKI (the size of the server's handshake flight). Returns
    {"floor_ms": ..., "model": parts} or {"floor_ms": None, "why": ...} where
    the model does not apply (h2load and nghttp loads, HTTP/1.1). On a
    traced downlink the bottleneck is the trace from the instant the page
    started in it (`trace_start_ms`, the run's summary), never rate_mbit
    (the default the trace overrides); without that instant, no floor."""
    s, c = config.get("server") or {}, config.get("client") or {}
    path = (config.get("path") or {}).get("resolved") or config.get("path") or {}
    loader = c.get("loader", "loader")
    if loader != "loader":
        return {cols.FLOOR: None, "why": f"loader {loader}: the floor models our page loader only"}
    protocol = c.get("protocol") or s.get("protocol", "h2")
    if protocol != "h2" or s.get("protocol", "h2") != "h2":
        return {cols.FLOOR: None, "why": "HTTP/1.1: the floor models one HTTP/2 connection per origin"}
    rtt, rate, link, why = _path_terms(path, trace_start_ms)
    if why:
        return {cols.FLOOR: None, "why": why}
    doc, objects = _page_parts(manifest, c)
    if doc is None:
        return {cols.FLOOR: None, "why": f"{c.get('url') or c.get('page')}: not in the site's manifest"}
    cached = set(cached_urls)
    objects = [o for o in objects if o["url"] not in cached]
    same = sum(o["bytes"] for o in objects if o["origin"] == doc["origin"])
    other = sum(o["bytes"] for o in objects if o["origin"] != doc["origin"])
    cert = s.get("cert", "shared")
    second = "none" if not other else (
        "coalesced" if c.get("coalescing", True) and c.get("resolution", "same-ip") == "same-ip"
        and ((pki or {}).get("variants", {}).get(cert, {}).get("coalescing", cert != "separate"))
        else "connection")
    flight = ((pki or {}).get("variants", {}).get(cert, {}).get("www") or {}).get("tls13_flight_estimate_bytes")
    iw, growth = slow_start_window(s.get("cc", "cubic"), int(s.get("initcwnd_pkts") or 10), float(rtt))
    f = page_floor_ms(float(rtt), None if link else float(rate), doc["bytes"], same, iw, tls=s.get("tls", "1.3"),
                      cert_flight_bytes=flight, dns_lookups=1, second_origin=second, second_origin_bytes=other,
                      growth=growth, link=link)
    return {cols.FLOOR: f["total_ms"], "model": f}


def imported_floor(config: dict, har: dict, site: dict, site_pki: dict | None = None,
                   trace_start_ms: float | None = None) -> dict:
    """The floor of a load of an imported site (client.site,
    docs/your-own-site.md) by our loader, from what the load fetched (its
    HAR: the document first, each request's connection) and the site (each
    response's bytes as served, the TLS flight of the document's
    certificate). Our loader asks for objects as the document arrives
    (client.schedule), so the floor assumes nothing of when: the
    document's connection carries the document and every object on it
    (coalesced hosts too) as one transfer from the window the handshake
    left, after DNS (none when client.dns is warm), TCP and TLS 1.3; of the
    other connections only the one that carried the most bytes counts,
    its name learned no sooner than the document's first byte, then its
    own DNS, TCP and TLS from the initial window; the others are left out
    as if they cost nothing, and both share the path's rate as if each had
    it alone. Each simplification only lowers the floor."""
    s, c = config.get("server") or {}, config.get("client") or {}
    path = (config.get("path") or {}).get("resolved") or config.get("path") or {}
    if c.get("loader", "loader") != "loader":
        return {cols.FLOOR: None, "why": f"loader {c.get('loader')}: the floor models our page loader only"}
    entries = [e for e in (har.get("log") or {}).get("entries") or [] if isinstance(e, dict)]
    if not entries:
        return {cols.FLOOR: None, "why": "the load's HAR has no entries"}
    origins = site.get("origins") or {}

    def origin(url: str) -> str:
        scheme, _, rest = url.partition("://")
        return f"{scheme}://{rest.split('/')[0].split('?')[0]}"

    doc_url = entries[0]["request"]["url"]
    if (origins.get(origin(doc_url)) or {}).get("protocol") != "h2" or (c.get("protocol") or "h2") != "h2":
        return {cols.FLOOR: None, "why": "HTTP/1.1: the floor models one HTTP/2 connection per origin"}
    rtt, rate, link, why = _path_terms(path, trace_start_ms)
    if why:
        return {cols.FLOOR: None, "why": why}
    rtt, rate = float(rtt), None if link else float(rate)
    responses = site.get("responses") or {}
    per_conn: dict[str, int] = {}
    for e in entries:
        req, conn = e["request"], str(e.get("connection"))
        served = (responses.get(f"{req['method']} {req['url']}") or {}).get("bytes")
        got = max(0, (e.get("response") or {}).get("bodySize") or 0)
        per_conn[conn] = per_conn.get(conn, 0) + min(got, served if isinstance(served, int) else got)
    mine = per_conn.pop(str(entries[0].get("connection")), 0)
    other = max(per_conn.values(), default=0)
    group = (origins.get(origin(doc_url)) or {}).get("certificate")
    flight = (((site_pki or {}).get("certificates") or {}).get(group) or {}).get("tls13_flight_estimate_bytes")
    iw, growth = slow_start_window(s.get("cc", "cubic"), int(s.get("initcwnd_pkts") or 10), rtt)
    dns = 0 if c.get("dns") == "warm" else 1
    h = tls_round_trips("1.3", max(1, math.floor(iw)), flight)
    setup = dns + 1 + h
    first = data_time_ms(rtt, rate, mine, handshake_window(iw, "1.3", flight, growth), growth=growth,
                         lead_segments=POST_HANDSHAKE_SEGMENTS["1.3"], link=link, start_ms=setup * rtt)
    ends = [setup * rtt + first["total_ms"]]
    second = {"total_ms": 0.0, "rounds": 0, "serialization_ms": 0.0}
    start = (setup + 1 + dns + 1 + tls_round_trips("1.3", max(1, math.floor(iw)))) * rtt
    if other:
        second = data_time_ms(rtt, rate, other, iw, growth=growth, link=link, start_ms=start)
        ends.append(start + second["total_ms"])
    return {cols.FLOOR: round(max(ends), 3), "model": {
        "total_ms": round(max(ends), 3), "rtt_ms": rtt, "dns_rtts": dns, "tcp_rtts": 1, "tls_rtts": h,
        "document_connection_bytes": mine, "document_connection_rounds": first["rounds"],
        "other_connection_bytes": other, "other_connection_start_ms": round(start, 3) if other else None,
        "other_connection_rounds": second["rounds"], "other_connections_left_out": max(0, len(per_conn) - 1),
        "serialization_ms": round(max(first["serialization_ms"], second["serialization_ms"]), 3),
        "growth": round(growth, 4), "imported_site": site.get("name")}}



def _path_terms(path: dict, trace_start_ms: float | None) -> tuple:
    """(rtt, rate, traced link, why not): the path's parts a floor needs; why
    is a reason when the path gives no floor (a trace that cannot be read,
    no RTT or no rate)."""
    link, why = traced_downlink(path.get("trace_down"), trace_start_ms)
    if why:
        return None, None, None, why
    rtt, rate = path.get("rtt_ms"), None if link else path.get("rate_mbit")
    if not rtt or not (rate or link):
        return None, None, None, "the path has no RTT or no rate"
    return rtt, rate, link, None

def _page_parts(manifest: dict, client: dict) -> tuple[dict | None, list[dict]]:
    """The document and the objects a load fetches, from the manifest."""
    if client.get("url"):
        url = client["url"]
        want = "/" + (url.split("://", 1)[1].partition("/")[2] if "://" in url else url).lstrip("/")
        for p in (manifest.get("pages") or {}).values():
            if p["path"] == want:
                return p["document"], list(p["objects"])
        for b in manifest.get("bulk") or []:
            if b["path"] == want:
                return b, []
        return None, []
    p = (manifest.get("pages") or {}).get(client.get("page", "feed.html"))
    return (p["document"], list(p["objects"])) if p else (None, [])


# --- loss-limited throughput (seed 002: CUBIC+ and Reno's beta) ----------------


def reno_friendly_alpha(beta: float) -> float:
    """CUBIC's additive increase in its Reno-friendly region, RFC 9438 §4.3
    (with the multiplicative decrease beta of §4.6):
    alpha = 3(1 - beta)/(1 + beta), chosen so that AIMD(alpha, beta) has
    Reno's average window; our tcp_cubic_plus ties it to beta' the same way
    (kernel/modules/README.md)."""
    if not 0 < beta < 1:
        raise ValueError(f"beta: {beta}; 0 < beta < 1")
    return 3 * (1 - beta) / (1 + beta)


def aimd_window(loss: float, beta: float, alpha: float | None = None) -> float:
    """Mean window (segments) of an AIMD(alpha, beta) flow that loses one
    packet in 1/loss (deterministic loss; Mathis, Semke, Mahdavi and Ott
    1997; Floyd, Handley and Padhye 2000): sqrt(alpha (1 + beta) /
    (2 (1 - beta) loss)). alpha None: RFC 9438's tied alpha, with which the
    window is sqrt(3 / (2 loss)) whatever beta is."""
    if not 0 < loss < 1:
        raise ValueError(f"loss: {loss}; a fraction, 0 < loss < 1")
    a = reno_friendly_alpha(beta) if alpha is None else alpha
    return math.sqrt(a * (1 + beta) / (2 * (1 - beta) * loss))


def cubic_window(loss: float, rtt_s: float, beta: float, c: float = 0.4) -> float:
    """Mean window (segments) of CUBIC's cubic region under the same loss
    model: (C (3 + beta) / (4 (1 - beta)))^(1/4) (RTT / loss)^(3/4), C = 0.4
    (Ha, Rhee and Xu 2008; RFC 8312 §5.1)."""
    if not 0 < loss < 1 or rtt_s <= 0:
        raise ValueError("0 < loss < 1 and rtt_s > 0, please")
    return (c * (3 + beta) / (4 * (1 - beta))) ** 0.25 * (rtt_s / loss) ** 0.75


def cubic_loss_window(loss: float, rtt_s: float, beta: float, alpha: float | None = None) -> dict:
    """CUBIC's mean window under random loss: the larger of its
    Reno-friendly estimate (aimd_window, alpha tied to beta unless given)
    and its cubic region (cubic_window), as RFC 9438 §4.2-4.3 take the
    larger of the two; with the region that wins."""
    reno, cub = aimd_window(loss, beta, alpha), cubic_window(loss, rtt_s, beta)
    return {"window": max(reno, cub), "region": "Reno-friendly" if reno >= cub else "cubic",
            "reno_friendly": reno, "cubic": cub}


def backoff_gain(loss: float, rtt_s: float, beta0: float = 0.7, beta1: float = 0.95,
                 alpha: float | None = None) -> float:
    """Throughput ratio of back-off beta1 over beta0 at the same loss and
    RTT (the window ratio; both flows loss-limited, below the bottleneck).
    With RFC 9438's tied alpha (alpha None) and the flow in the
    Reno-friendly region the ratio is 1: a gentler back-off comes with a
    slower increase, and the mean window does not move; only alpha = 1 for
    both (the untied AIMD reading) gives sqrt((1 + b1)(1 - b0) / ((1 - b1)(1 + b0)))."""
    return (cubic_loss_window(loss, rtt_s, beta1, alpha)["window"]
            / cubic_loss_window(loss, rtt_s, beta0, alpha)["window"])
