"""The physics gate: numbers a completed run cannot have measured. A run
whose record breaks one of these is not ok for a grade (`tortoise grade`,
course/grade.py) or a study's verdict (studies/data.py), whatever its `ok`
says: the number was made up or edited, or the lab measured something else
than the page it was asked for.

    physics_gate(record, manifest, pki) -> [reason, ...]   (empty: the run passes)

record is a run.json as a dict (store.RunRecord.model_dump(mode="json")),
manifest the results folder's site manifest (<exp>/.lab/site/manifest.json)
and pki its PKI description (<exp>/.lab/pki/pki.json; None: the floor is
taken without the certificate flight). The gates, each on a number the
grade, the report or a verdict reads:

- bytes: our loader's `summary.bytes` is the page's bytes as the site
  serves them (the document and every object not taken from the cache,
  from the manifest: the loader checks each answer against them, so a whole
  load has exactly these); h2load's `data_bytes` is requests x the object's
  size (analysis/whole.py checks the same at run time);
- the napkin floor: on a path without loss, jitter or capacity trace, the
  PLT is at least the floor (analysis/napkin.run_floor, recomputed from the
  run's configuration and the folder's site, not read from the record: the
  floor errs low by construction, docs in napkin.py), less FLOOR_SLACK
  (a record's own `floor_ms` may be an older model's: the canned run
  initcwnd@ci/b1a05207aa21 says 1446 ms, the model now 1199 ms, for a
  PLT of 1215 ms);
- the path's RTT: no page load is shorter than one round trip of its path
  (DNS, TCP, TLS and the request each take one), nor its first byte, nor a
  second load on the open connection (its request and answer take one):
  `plt_ms`, `ttfb_ms` and `repeat.plt_ms` are at least the configured RTT
  less the jitter's allowance (JITTER_SIGMAS sigmas of a round trip);
- the bottleneck: h2load's throughput is not above the path's rate.

Without a manifest (a folder copied without its .lab, docs/course-labs.md)
bytes and floor are not gated; the grade says so. Runs that are not ok are
not gated (they carry no numbers for a verdict).
"""

from __future__ import annotations

import math

from tortoiselab.analysis import napkin
from tortoiselab.spec import cols

FLOOR_SLACK = 0.01  # measured >= floor x (1 - slack): the model's parts are rounded to 1 us
RATE_SLACK = 0.01  # throughput <= rate x (1 + slack): h2load's own rounding of seconds
JITTER_SIGMAS = 3.0  # as the grader's fidelity allowance (course/grade.py)


def _num(x) -> float | None:
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _path(rec: dict) -> dict:
    """The path the run ran on: the resolved path of its configuration,
    else the record's `path`."""
    cfg_path = (rec.get("config") or {}).get("path") or {}
    return cfg_path.get("resolved") or rec.get("path") or cfg_path


def page_bytes(manifest: dict, client: dict, cached_urls=()) -> int | None:
    """The bytes our loader must receive for the client's page or URL: the
    document and the objects it did not take from its cache (None: not in
    the manifest)."""
    doc, objects = napkin._page_parts(manifest, client)  # noqa: SLF001 (the floor's own reading of the manifest)
    if doc is None:
        return None
    cached = set(cached_urls or ())
    return int(doc["bytes"]) + sum(int(o["bytes"]) for o in objects if o["url"] not in cached)


def bytes_reasons(rec: dict, manifest: dict | None) -> list[str]:
    s, client = rec.get("summary") or {}, (rec.get("config") or {}).get("client") or {}
    loader = client.get("loader", "loader")
    if loader not in ("loader", "h2load"):
        return []  # nghttp and chromium: whole.load_problems checks their statuses at run time
    if manifest is None:  # a copy without .lab (docs/course-labs.md): nothing to check against (the grade says so)
        return []
    if loader == "loader":
        want = page_bytes(manifest, client, s.get("cached_urls"))
        got = s.get("bytes")
        page = client.get("url") or client.get("page")
        if want is None:
            return [f"the page {page} is not in the site's manifest"]
        return [] if got == want else [f"bytes {got}, the page {page} is {want} bytes (site manifest)"]
    size = page_bytes(manifest, {"url": client.get("url")}) if client.get("url") else None
    n = _num(s.get("requests"))
    if size is None or n is None:
        return []
    got = s.get("data_bytes")
    return [] if got == n * size else [f"h2load data_bytes {got}, {n:g} requests x {size} bytes expected"]


def floor_reasons(rec: dict, manifest: dict | None, pki: dict | None) -> list[str]:
    """PLT below the napkin floor on a path where the floor is a bound."""
    path, s = _path(rec), rec.get("summary") or {}
    plt = _num(s.get(cols.PLT))
    lossy = any(_num(path.get(k)) for k in ("loss_pct", "loss_up_pct", "jitter_ms"))
    if plt is None or lossy or path.get("trace_down") or path.get("trace_up"):
        return []
    if manifest is None:  # the record's own floor may be an older model's (higher), and is the record's word
        return []
    floor = napkin.run_floor(rec.get("config") or {}, manifest, pki, s.get("cached_urls") or ())[cols.FLOOR]
    if floor is None or plt >= floor * (1 - FLOOR_SLACK):
        return []
    return [f"PLT {plt:g} ms below its napkin floor {floor:.3f} ms on a loss-free path (analysis/napkin.py)"]


def rtt_reasons(rec: dict) -> list[str]:
    path, s = _path(rec), rec.get("summary") or {}
    rtt = _num(path.get("rtt_ms"))
    if not rtt:
        return []
    least = rtt - JITTER_SIGMAS * (_num(path.get("jitter_ms")) or 0.0) * 2 ** 0.5
    out = []
    for name, v in (("PLT", s.get(cols.PLT)), ("TTFB", s.get("ttfb_ms")),
                    ("second load's PLT", (s.get("repeat") or {}).get(cols.PLT))):
        v = _num(v)
        if v is not None and v < least:
            out.append(f"{name} {v:g} ms below the path's RTT {rtt:g} ms")
    return out


def rate_reasons(rec: dict) -> list[str]:
    path, s = _path(rec), rec.get("summary") or {}
    rate = _num(path.get("rate_mbit"))
    if not rate or path.get("trace_down"):
        return []
    out = []
    for k in (cols.THROUGHPUT, "steady_throughput_mbit"):
        v = _num(s.get(k))
        if v is not None and v > rate * (1 + RATE_SLACK):
            out.append(f"{k} {v:g} above the path's rate {rate:g} Mbit/s")
    return out


def physics_gate(rec: dict, manifest: dict | None, pki: dict | None = None) -> list[str]:
    """Why a completed run's numbers cannot be (empty: they can)."""
    if not rec.get(cols.OK):
        return []
    return [*bytes_reasons(rec, manifest), *floor_reasons(rec, manifest, pki), *rtt_reasons(rec),
            *rate_reasons(rec)]
