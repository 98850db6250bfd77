"""Is a measurement whole? A run is ok only when every request was answered
with a success status and the bytes expected, and every figure it stores
was taken; otherwise it is stored as failed with the reason. A plausible
number from a failed measurement (a 404's few bytes read as a slow
throughput) is the worst result a lab can give, so each loader's output is
checked here, as a pure function, before the runner calls a run ok.

    load_problems(loader, summary, requests=..., object_bytes=...) -> [reason, ...]

An empty list means whole.
"""

from __future__ import annotations

import re

from tortoiselab.spec import cols

_OBJECT = re.compile(r"objects/(\d+)\.bin$")


def object_bytes_of(url: str | None) -> int | None:
    """The size of one of the site's single objects (objects/<bytes>.bin)."""
    m = _OBJECT.search(url or "")
    return int(m.group(1)) if m else None


def _loader_problems(s: dict, object_bytes: int | None = None, url: str | None = None) -> list[str]:
    """Our loader (tortoiselab.client): it raises on any status >= 400 or
    broken exchange, so its summary's error and failed requests say it all;
    a whole load also has its page-load time, and a load of one of the
    site's objects (object_bytes: its size) exactly that many body bytes."""
    out = []
    if s.get("error"):
        out.append(str(s["error"]))
    if s.get("ok") is False and not s.get("error"):  # not a column: the loader's summary field
        out.append("the loader reports the load as failed")
    if s.get("requests_failed"):
        out.append(f"{s['requests_failed']} of {s.get('requests')} requests not completed")
    if not s.get("requests"):
        out.append("no request was made")
    if s.get(cols.PLT) is None and not out:
        out.append("no page-load time was measured")
    if object_bytes is not None and not out and s.get("bytes") != object_bytes:
        out.append(f"{s.get('bytes')} body bytes for {url or 'the object'}, {object_bytes} expected")
    return out


def _nghttp_problems(s: dict) -> list[str]:
    out = []
    if s.get("rc"):
        out.append(f"nghttp exited with {s['rc']}: {s.get('error') or ''}".rstrip(": "))
    bad = [r for r in s.get("rows", []) if not 200 <= int(r.get("status", 0)) < 300]
    for r in bad[:3]:
        out.append(f"{r['status']} for {r.get('path')}")
    if len(bad) > 3:
        out.append(f"... {len(bad) - 3} more requests without a 2xx status")
    if not s.get("requests"):
        out.append("nghttp made no request")
    elif s.get(cols.PLT) is None:
        out.append("no page-load time was measured")
    return out


def _h2load_problems(s: dict, requests: int | None, object_bytes: int | None, url: str | None) -> list[str]:
    """h2load counts a request 'succeeded' whatever its status: a 404 is a
    success to it. Whole: every request done with a 2xx status, none failed,
    errored or timed out, and the bodies add up to requests x object size."""
    out = []
    if s.get("error"):
        out.append(str(s["error"]))
    if s.get("rc"):
        out.append(f"h2load exited with {s['rc']}")
    if "status_2xx" not in s:  # a summary h2load never printed
        return out or ["h2load printed no summary"]
    n = requests if requests is not None else s.get("requests")
    for code in ("4xx", "5xx", "3xx"):
        if s.get(f"status_{code}"):
            out.append(f"{s[f'status_{code}']} of {n} requests answered {code} for {url or 'the URL'}")
    if s.get("status_2xx") != n:
        out.append(f"{s.get('status_2xx')} of {n} requests answered 2xx")
    for k in ("failed", "errored", "timeout"):
        if s.get(k):
            out.append(f"{s[k]} requests {k}")
    if object_bytes is not None and n and s.get("data_bytes") != n * object_bytes:
        out.append(f"{s.get('data_bytes')} body bytes for {n} x {object_bytes} expected")
    if not out and not s.get(cols.THROUGHPUT):
        out.append("no throughput was measured")
    return out


def capture_problems(captures: dict[str, dict | None]) -> list[str]:
    """A capture is whole when tcpdump reported its counters and its kernel
    buffer dropped nothing: the connections, handshake RTTs and flights of
    a run come from it."""
    out = []
    for side, c in sorted(captures.items()):
        if not c or c.get("captured") is None:
            why = f": {c['stderr']}" if c and c.get("stderr") else ""
            out.append(f"the {side} capture has no tcpdump counters (tcpdump did not stop cleanly){why}")
        elif c.get("dropped_by_kernel"):
            out.append(f"tcpdump dropped {c['dropped_by_kernel']} packets of the {side} capture")
    return out


def load_problems(loader: str, summary: dict, requests: int | None = None, object_bytes: int | None = None,
                  url: str | None = None) -> list[str]:
    """Why a load's measurement is not whole (empty when it is). requests:
    how many the loader was asked for (h2load); object_bytes: the size each
    answer must have (a single object's size, from its URL)."""
    if loader == "loader":
        return _loader_problems(summary, object_bytes, url)
    if loader == "chromium":  # the browser's summary has our loader's keys (tortoiselab.browser)
        return _loader_problems(summary)
    if loader == "nghttp":
        return _nghttp_problems(summary)
    if loader == "h2load":
        return _h2load_problems(summary, requests, object_bytes, url)
    return [f"unknown loader {loader!r}: cannot tell whether its measurement is whole"]
