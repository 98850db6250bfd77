"""The browser's summary: a pure function of what one load collected, with
the keys and meanings of our loader's summary (tortoiselab.client.summary)
where the browser can give them, so runs of either loader read alike.

From Navigation Timing and Resource Timing (ms from the navigation's start,
the page's time origin):

- plt_ms: navigation start to the last responseEnd among the page and its
  resources (the lab's "page start to last byte": includes the base page's
  DNS lookup when names are cold, and its TCP and TLS set-up).
- plt_onload_ms: navigation start to loadEventEnd (the browser's own PLT:
  parsing, scripts and layout included).
- plt_from_request_ms: the page's requestStart to the last responseEnd
  (first request to last byte, as our loader's and nghttp's).
- ttfb_ms: navigation start to the page's responseStart.
- content_download_ms: the page's responseStart to the last responseEnd.

From the DevTools Network events (one per request; connectionId is the
socket a response came over, the same for every request multiplexed on an
HTTP/2 connection, coalesced ones included):

- requests, requests_failed (a network error or a status >= 400): the
  requests that went to the network; requests_from_cache: those the HTTP
  cache answered (a warm load, browser/__main__.py --profile-dir);
- connections_opened: distinct connections that carried a response;
- connections_reused: responses on a connection first used for another
  origin (coalesced);
- reuse_ratio: among responses from origins other than the page's, the
  fraction that came over such a connection (0 when there were none);
- protocols: responses per protocol (Resource Timing's nextHopProtocol;
  "" for another origin's resources, which send no Timing-Allow-Origin);
- bytes: response body bytes received (the sum of Network.dataReceived;
  Resource Timing gives no sizes for another origin's resources).
- schedule: when each request left, as the browser scheduled it (the
  lab's measure of Chromium's request scheduling, docs/browser.md), per
  request in the order the page issued them: url, type (DevTools'
  resource type), priority (DevTools' initialPriority: VeryHigh, High,
  Medium, Low, VeryLow) and priority_final (after any
  resourceChangedPriority), and in ms from the page's own request:
  issued (requestWillBeSent: the renderer let it go), sent (the
  network stack wrote its headers: timing.requestTime + sendStart),
  headers (its response headers arrived) and done (loadingFinished).
- dns_ms: the lookups' durations, one per name (the first response whose
  DevTools timing has a lookup: dnsEnd - dnsStart), summed as our loader
  sums its lookups; 0 when names come from the static map (warm).

From the page after its load:

- images: the page's <img src> elements: how many, how many the browser
  decoded (HTMLImageElement.decode() resolved and naturalWidth > 0), and
  the URLs of those it did not (None when the page was not read).
"""

from __future__ import annotations

from urllib.parse import urlsplit

# Resource Timing fields kept per entry in the summary (ms from the time origin)
TIMING_FIELDS = ("startTime", "domainLookupStart", "connectStart", "secureConnectionStart", "connectEnd",
                 "requestStart", "responseStart", "responseEnd")


def origin(url: str) -> str:
    u = urlsplit(url)
    port = u.port or {"https": 443, "http": 80}.get(u.scheme)
    return f"{u.scheme}://{u.hostname}:{port}"


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 3)


def browser_own(url: str, kind: str | None) -> bool:
    """A request the browser makes for itself, not for the page: the
    favicon (resource type Other); it is left out of the counts (a site
    without one would fail every load with a 404)."""
    return kind == "Other" and urlsplit(url).path == "/favicon.ico"


def exchanges(events: list[dict]) -> list[dict]:
    """One record per network request of the page (http and https only),
    in the order they were sent: url, origin, status, protocol, remote
    address, connection id, whether it finished, its error."""
    by_id: dict[str, dict] = {}
    for ev in events:
        p = ev["params"]
        rid = p.get("requestId")
        if ev["method"] == "Network.requestWillBeSent":
            url = p["request"]["url"]
            if not url.startswith(("http://", "https://")) or browser_own(url, p.get("type")):
                continue
            # a redirect reuses the request id: the later request replaces the earlier
            by_id[rid] = {"url": url, "origin": origin(url), "t": p.get("timestamp"), "status": None,
                          "protocol": None, "remote": None, "connection": None, "reused": None,
                          "cached": False, "done": False, "error": None, "bytes": 0, "dns_ms": None}
        elif rid in by_id:
            rec = by_id[rid]
            if ev["method"] == "Network.responseReceived":
                r = p["response"]
                rec.update(status=r.get("status"), protocol=r.get("protocol"),
                           remote=(f"{r['remoteIPAddress']}:{r.get('remotePort')}"
                                   if r.get("remoteIPAddress") else None),
                           connection=r.get("connectionId") or None, reused=r.get("connectionReused"),
                           cached=bool(r.get("fromDiskCache") or r.get("fromPrefetchCache")),
                           dns_ms=_lookup_ms(r.get("timing")))
            elif ev["method"] == "Network.dataReceived":
                rec["bytes"] += int(p.get("dataLength") or 0)
            elif ev["method"] == "Network.loadingFinished":
                rec["done"] = True
            elif ev["method"] == "Network.loadingFailed":
                rec["error"] = p.get("errorText") or "failed"
    return sorted(by_id.values(), key=lambda r: (r["t"] is None, r["t"] or 0))


def schedule(events: list[dict]) -> list[dict]:
    """Per network request of the page (as exchanges() picks them), in the
    order the page issued them: its type and priorities, and when it was
    issued, sent, answered and done, in ms from the first request's
    issue (the document's); None where an event is missing."""
    by_id: dict[str, dict] = {}
    t0: float | None = None
    for ev in events:
        p, m = ev["params"], ev["method"]
        rid = p.get("requestId")
        if m == "Network.requestWillBeSent":
            url = p["request"]["url"]
            if not url.startswith(("http://", "https://")) or browser_own(url, p.get("type")):
                continue
            t0 = p.get("timestamp") if t0 is None else t0
            by_id[rid] = {"url": url, "type": p.get("type"), "priority": p["request"].get("initialPriority"),
                          "priority_final": p["request"].get("initialPriority"), "issued": p.get("timestamp"),
                          "sent": None, "headers": None, "done": None}
        elif rid not in by_id:
            continue
        elif m == "Network.resourceChangedPriority":
            by_id[rid]["priority_final"] = p.get("newPriority")
        elif m == "Network.responseReceived":
            tm = p["response"].get("timing") or {}
            if tm.get("requestTime") is not None:
                base = tm["requestTime"]
                by_id[rid]["sent"] = base + tm.get("sendStart", 0) / 1e3 if tm.get("sendStart", -1) >= 0 else None
                by_id[rid]["headers"] = (base + tm["receiveHeadersEnd"] / 1e3
                                         if tm.get("receiveHeadersEnd", -1) >= 0 else None)
        elif m == "Network.loadingFinished":
            by_id[rid]["done"] = p.get("timestamp")
    out = []
    for r in sorted(by_id.values(), key=lambda r: (r["issued"] is None, r["issued"] or 0)):
        out.append({**r, **{k: None if r[k] is None or t0 is None else round((r[k] - t0) * 1e3, 3)
                            for k in ("issued", "sent", "headers", "done")}})
    return out


def _lookup_ms(timing: dict | None) -> float | None:
    """A DevTools ResourceTiming's DNS lookup in ms, None if it made none
    (dnsStart -1: a connection already open, or a static map)."""
    if not timing or timing.get("dnsStart", -1) < 0 or timing.get("dnsEnd", -1) < 0:
        return None
    return timing["dnsEnd"] - timing["dnsStart"]


def lookups_ms(recs: list[dict]) -> dict[str, float]:
    """The lookup time per name: the first request of that name that shows one."""
    out: dict[str, float] = {}
    for r in recs:
        host = urlsplit(r["url"]).hostname
        if r["dns_ms"] is not None and host not in out:
            out[host] = round(r["dns_ms"], 3)
    return out


def connections(recs: list[dict]) -> list[dict]:
    """The connections that carried responses, in the order of first use:
    the origin each was opened for, the origins it served, its remote
    address and protocol, and its requests."""
    conns: dict[int, dict] = {}
    for r in recs:
        if r["connection"] is None or r["cached"]:
            continue
        c = conns.setdefault(r["connection"], {"id": r["connection"], "origin": r["origin"], "origins": [],
                                               "remote": r["remote"], "protocol": r["protocol"], "requests": 0})
        if r["origin"] not in c["origins"]:
            c["origins"].append(r["origin"])
        c["requests"] += 1
    return list(conns.values())


def _failures(recs: list[dict]) -> list[str]:
    out = []
    for r in recs:
        if r["error"]:
            out.append(f"{r['url']}: {r['error']}")
        elif r["status"] is not None and r["status"] >= 400:
            out.append(f"{r['url']}: status {r['status']}")
        elif not r["done"]:
            out.append(f"{r['url']}: not finished")
    return out


def _nav_figures(timings: dict | None) -> dict:
    nav = (timings or {}).get("nav")
    res = [e for e in (timings or {}).get("resources", []) if e.get("responseEnd")]
    if not nav or not nav.get("responseEnd"):
        return {k: None for k in ("plt_ms", "plt_onload_ms", "plt_from_request_ms", "ttfb_ms",
                                  "content_download_ms")} | {"protocols": {}, "resource_timings": []}
    last = max([nav["responseEnd"], *(e["responseEnd"] for e in res)])
    protocols: dict[str, int] = {}
    for e in [nav, *res]:
        protocols[e.get("nextHopProtocol") or ""] = protocols.get(e.get("nextHopProtocol") or "", 0) + 1
    return {
        "plt_ms": _r(last - nav["startTime"]),
        "plt_onload_ms": _r(nav["loadEventEnd"] - nav["startTime"]) if nav.get("loadEventEnd") else None,
        "plt_from_request_ms": _r(last - nav["requestStart"]),
        "ttfb_ms": _r(nav["responseStart"] - nav["startTime"]),
        "content_download_ms": _r(last - nav["responseStart"]),
        "protocols": protocols,
        "resource_timings": [{"name": e["name"], "protocol": e.get("nextHopProtocol"),
                              **{k: _r(e.get(k)) for k in TIMING_FIELDS}} for e in [nav, *res]],
    }


def image_figures(images: list[dict] | None) -> dict | None:
    """{"count", "decoded", "not_decoded": [src, ...]} of the page's
    images as READ_IMAGES returned them (browser/chromium.py); None when
    they were not read."""
    if images is None:
        return None
    bad = [i["src"] for i in images if not (i.get("decoded") and (i.get("width") or 0) > 0)]
    return {"count": len(images), "decoded": len(images) - len(bad), "not_decoded": bad}


def summarize(*, events: list[dict], timings: dict | None, console_errors: list[str], error: str | None,
              settings: dict, started_at: str | None = None, browser_version: str | None = None,
              leftover_processes: list | None = None, images: list[dict] | None = None) -> dict:
    """settings: url, protocol, dns_server (None: a static map), cache
    (cold, warm or priming). A load is ok when
    the browser raised no error, every request finished with a status
    below 400 and the page's timings were read."""
    every = exchanges(events)
    recs = [r for r in every if not r["cached"]]
    conns = connections(recs)
    first_origin = {c["id"]: c["origin"] for c in conns}
    base = recs[0]["origin"] if recs else None
    final = [r for r in recs if r["connection"] is not None and not r["cached"]]
    coalesced = [r for r in final if r["origin"] != first_origin[r["connection"]]]
    others = [r for r in final if r["origin"] != base]
    failures = _failures(every)
    if error is None and failures:
        error = f"{len(failures)} of {len(every)} requests failed, e.g. {failures[0]}"
    if error is None and not (timings or {}).get("nav"):
        error = "the page's navigation timing was not read"
    figures = _nav_figures(timings)
    lookups = lookups_ms(recs)
    if error is not None:
        figures.update(plt_ms=None, plt_onload_ms=None, plt_from_request_ms=None, content_download_ms=None)
    errors = [e for e in [error, *failures] if e]
    return {
        **{k: settings.get(k) for k in ("url", "protocol")},
        "loader": "chromium", "browser_version": browser_version, "ok": error is None, "error": error,
        "started_at": started_at, "cache": settings.get("cache", "cold"), "requests": len(recs),
        "requests_from_cache": len(every) - len(recs), "requests_failed": len(failures),
        "bytes": sum(r["bytes"] for r in recs), **figures,
        "dns_ms": round(sum(lookups.values()), 3), "dns_ms_per_host": lookups,
        "resolution": (f"lab DNS ({settings['dns_server']})" if settings.get("dns_server")
                       else "static map (--host-resolver-rules)"),
        "connections_opened": len(conns),
        "connections_reused": len(coalesced),
        "reuse_ratio": round(sum(1 for r in others if r in coalesced) / len(others), 6) if others else 0.0,
        "connections": conns, "schedule": schedule(events), "images": image_figures(images), "console_errors": list(console_errors),
        "errors": list(dict.fromkeys(errors)),
        "leftover_processes": [list(p) for p in (leftover_processes or [])],
    }
