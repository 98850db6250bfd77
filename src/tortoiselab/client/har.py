"""HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/): build from a
timeline, and check any HAR's structure.

validate_har() is a pure validator other parts of the lab may use on HAR
files from any tool: it checks the required fields and their types, the
timing rules (send/wait/receive >= 0; blocked/dns/connect/ssl >= 0 or -1;
ssl <= connect; entry time = sum of the non-negative timings, ssl excluded)
and that pagerefs name a page. Custom fields (leading "_") are allowed.

What our HAR records: httpVersion "h2" or "HTTP/1.1"; request.headersSize
is the bytes of the request head as sent (HTTP/1.1: request line and
headers; h2: the HEADERS frame, HPACK-compressed, with its 9-byte frame
header); response.headersSize is -1 for h2 (decoded by HPACK, size not
kept); dns/connect/ssl are given only for the request that made the lookup
or opened the connection (-1 otherwise); connection is the loader's
connection id ("c1", ...), the same ids as in the summary. Custom fields:
_resourceType, _coalesced (sent on a connection opened for another origin),
_superseded (answered 421 and sent again), _attempts, _error.
pageTimings: onContentLoad = last byte of the base HTML, onLoad = last byte
of the last object (-1 if the load failed), both from the page start.
"""

from __future__ import annotations

from datetime import datetime

from .page import query_string
from .timeline import Clock, RequestRecord, ms, timings, total_time

try:
    from importlib.metadata import version as _pkg_version

    CREATOR_VERSION = _pkg_version("tortoiselab")
except Exception:  # not installed (run from a tree)
    CREATOR_VERSION = "0.1.0"

PAGE_ID = "page_1"


def _iso(dt: datetime) -> str:
    return dt.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _nv(pairs: list[tuple[str, str]]) -> list[dict]:
    return [{"name": k, "value": v} for k, v in pairs]


def entry(r: RequestRecord, clock: Clock) -> dict:
    t = timings(r)
    ctype = r.header("content-type") or ""
    e = {
        "pageref": PAGE_ID,
        "startedDateTime": _iso(clock.wall(r.start)),
        "time": total_time(t),
        "request": {
            "method": r.method, "url": r.url, "httpVersion": r.http_version,
            "cookies": [], "headers": _nv(r.request_headers), "queryString": query_string(r.url),
            "headersSize": r.request_headers_size, "bodySize": 0,
        },
        "response": {
            "status": r.status, "statusText": r.status_text, "httpVersion": r.http_version,
            "cookies": [], "headers": _nv(r.response_headers),
            "content": {"size": r.body_bytes, "mimeType": ctype or "x-unknown"},
            "redirectURL": r.header("location") or "",
            "headersSize": r.response_headers_size,
            "bodySize": r.body_bytes if r.first_byte is not None else -1,
        },
        "cache": {},
        "timings": t,
        "_resourceType": r.kind,
        "_coalesced": r.coalesced,
        "_superseded": r.superseded,
    }
    if r.server_ip:
        e["serverIPAddress"] = r.server_ip
    if r.conn_id:
        e["connection"] = r.conn_id
    if r.attempts > 1:
        e["_attempts"] = r.attempts
    if r.priority is not None:
        e["_priority"] = r.priority  # as Chromium's HAR export names it
    if r.error:
        e["_error"] = r.error
    return e


def build_har(records: list[RequestRecord], clock: Clock, *, title: str, started: float | None = None,
              on_content_load: float | None = None, on_load: float | None = None, comment: str = "") -> dict:
    """The HAR of one page. `started` (monotonic) defaults to the first
    request's start; on_content_load/on_load are monotonic instants (the
    base HTML's last byte and the last object's last byte) or None (-1)."""
    t0 = started if started is not None else (records[0].start if records else clock.mono0)
    page = {
        "startedDateTime": _iso(clock.wall(t0)),
        "id": PAGE_ID,
        "title": title,
        "pageTimings": {
            "onContentLoad": ms(on_content_load - t0) if on_content_load is not None else -1,
            "onLoad": ms(on_load - t0) if on_load is not None else -1,
        },
    }
    log = {
        "version": "1.2",
        "creator": {"name": "tortoiselab", "version": CREATOR_VERSION},
        "pages": [page],
        "entries": [entry(r, clock) for r in records],
    }
    if comment:
        log["comment"] = comment
    return {"log": log}


# -- structural schema ---------------------------------------------------------
# A small JSON-Schema-like description: a dict maps keys to specs ("?" suffix:
# optional), [spec] is a list of spec, a type or tuple of types is a leaf.

NUM = (int, float)
_NV = {"name": str, "value": str, "comment?": str}
_COOKIE = {"name": str, "value": str, "path?": str, "domain?": str, "expires?": (str, type(None)),
           "httpOnly?": bool, "secure?": bool, "comment?": str}
_CACHE_ENTRY = {"expires?": str, "lastAccess": str, "eTag": str, "hitCount": int, "comment?": str}
SCHEMA = {
    "log": {
        "version": str,
        "creator": {"name": str, "version": str, "comment?": str},
        "browser?": {"name": str, "version": str, "comment?": str},
        "pages?": [{
            "startedDateTime": str, "id": str, "title": str,
            "pageTimings": {"onContentLoad?": NUM, "onLoad?": NUM, "comment?": str},
            "comment?": str,
        }],
        "entries": [{
            "pageref?": str, "startedDateTime": str, "time": NUM,
            "request": {
                "method": str, "url": str, "httpVersion": str, "cookies": [_COOKIE], "headers": [_NV],
                "queryString": [_NV],
                "postData?": {"mimeType": str, "params?": list, "text?": str, "comment?": str},
                "headersSize": int, "bodySize": int, "comment?": str,
            },
            "response": {
                "status": int, "statusText": str, "httpVersion": str, "cookies": [_COOKIE],
                "headers": [_NV],
                "content": {"size": int, "compression?": int, "mimeType": str, "text?": str,
                            "encoding?": str, "comment?": str},
                "redirectURL": str, "headersSize": int, "bodySize": int, "comment?": str,
            },
            "cache": {"beforeRequest?": (dict, type(None)), "afterRequest?": (dict, type(None)), "comment?": str},
            "timings": {"blocked?": NUM, "dns?": NUM, "connect?": NUM, "send": NUM, "wait": NUM,
                        "receive": NUM, "ssl?": NUM, "comment?": str},
            "serverIPAddress?": str, "connection?": str, "comment?": str,
        }],
        "comment?": str,
    }
}


def _tname(spec) -> str:
    if spec == NUM:
        return "number"
    ts = spec if isinstance(spec, tuple) else (spec,)
    return " or ".join("null" if x is type(None) else x.__name__ for x in ts)


def _check(value, spec, path: str, errs: list[str]) -> None:
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            errs.append(f"{path}: expected an object, got {type(value).__name__}")
            return
        for key, sub in spec.items():
            optional = key.endswith("?")
            k = key.rstrip("?")
            if k not in value:
                if not optional:
                    errs.append(f"{path}.{k}: required field missing")
                continue
            _check(value[k], sub, f"{path}.{k}", errs)
        known = {k.rstrip("?") for k in spec}
        for k in value:
            if k not in known and not k.startswith("_"):
                errs.append(f"{path}.{k}: unknown field (custom fields start with '_')")
    elif isinstance(spec, list):
        if not isinstance(value, list):
            errs.append(f"{path}: expected an array, got {type(value).__name__}")
            return
        for i, item in enumerate(value):
            _check(item, spec[0], f"{path}[{i}]", errs)
    else:
        types = spec if isinstance(spec, tuple) else (spec,)
        if isinstance(value, bool) and bool not in types:
            ok = False
        else:
            ok = isinstance(value, types)
        if not ok:
            errs.append(f"{path}: expected {_tname(spec)}, got {type(value).__name__} {value!r:.40}")


def _datetime_ok(s) -> bool:
    if not isinstance(s, str) or "T" not in s:
        return False
    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return False
    return dt.tzinfo is not None


def validate_har(har) -> list[str]:
    """Every way `har` departs from HAR 1.2's structure, one line each
    (empty list: valid)."""
    errs: list[str] = []
    _check(har, SCHEMA, "$", errs)
    if errs:
        return errs
    log = har["log"]
    if log["version"] not in ("1.1", "1.2"):
        errs.append(f"$.log.version: expected '1.2', got {log['version']!r}")
    page_ids = set()
    for i, p in enumerate(log.get("pages", [])):
        if not _datetime_ok(p["startedDateTime"]):
            errs.append(f"$.log.pages[{i}].startedDateTime: not an ISO 8601 date-time with zone: "
                        f"{p['startedDateTime']!r}")
        if p["id"] in page_ids:
            errs.append(f"$.log.pages[{i}].id: duplicate page id {p['id']!r}")
        page_ids.add(p["id"])
        for k in ("onContentLoad", "onLoad"):
            v = p["pageTimings"].get(k)
            if v is not None and v < 0 and v != -1:
                errs.append(f"$.log.pages[{i}].pageTimings.{k}: must be >= 0 or -1, got {v}")
    for i, e in enumerate(log["entries"]):
        where = f"$.log.entries[{i}]"
        if not _datetime_ok(e["startedDateTime"]):
            errs.append(f"{where}.startedDateTime: not an ISO 8601 date-time with zone: {e['startedDateTime']!r}")
        if "pageref" in e and e["pageref"] not in page_ids:
            errs.append(f"{where}.pageref: {e['pageref']!r} names no page in log.pages")
        t = e["timings"]
        for k in ("send", "wait", "receive"):
            if t[k] < 0:
                errs.append(f"{where}.timings.{k}: must be >= 0, got {t[k]}")
        for k in ("blocked", "dns", "connect", "ssl"):
            if k in t and t[k] < 0 and t[k] != -1:
                errs.append(f"{where}.timings.{k}: must be >= 0 or -1, got {t[k]}")
        if t.get("ssl", -1) >= 0 and t.get("connect", -1) >= 0 and t["ssl"] > t["connect"] + 1e-6:
            errs.append(f"{where}.timings: ssl ({t['ssl']}) exceeds connect ({t['connect']}); "
                        "connect includes ssl")
        if t.get("ssl", -1) >= 0 and t.get("connect", -1) < 0:
            errs.append(f"{where}.timings: ssl given without connect")
        total = sum(v for k, v in t.items() if k in ("blocked", "dns", "connect", "send", "wait", "receive")
                    and isinstance(v, NUM) and v > 0)
        if e["time"] < 0 or abs(e["time"] - total) > max(0.01, 1e-6 * total):
            errs.append(f"{where}.time: {e['time']} is not the sum of the non-negative timings ({total:.3f})")
        if e["response"]["status"] < 0:
            errs.append(f"{where}.response.status: must be >= 0")
        for side in ("request", "response"):
            for k in ("headersSize", "bodySize"):
                if e[side][k] < -1:
                    errs.append(f"{where}.{side}.{k}: must be >= 0 or -1, got {e[side][k]}")
    return errs
