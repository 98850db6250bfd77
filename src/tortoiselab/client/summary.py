"""The page-load summary: a pure function of the timeline.

Definitions (all in ms on the monotonic clock; `page start` is the instant
the loader starts the base HTML request, before its DNS lookup, TCP connect
and TLS handshake, i.e. the HAR startedDateTime of the first entry):

- plt_ms: page load time, from page start to the last byte of the last
  object received (Stony Brook: "the elapsed time between when the first
  object is requested and when the last object is received"). Includes the
  base page's DNS, TCP and TLS set-up. None when the load failed.
- plt_from_request_ms: from the moment the base HTML request is sent on an
  open connection (after DNS, TCP and TLS) to the last byte of the last
  object: the wire-level "first request to last byte" that nghttp -s
  reports (requestStart .. responseEnd), for cross-checks.
- content_download_ms: from the first byte of the base HTML response to the
  last byte of the last object (base HTML included), i.e. what is left of the
  load once the server has started answering; None when the load failed.
- ttfb_ms: page start to the first byte of the base HTML response (so it
  includes DNS, TCP connect and TLS for the base page, as in Navigation Timing
  responseStart - startTime).
- requests: HTTP exchanges made (a 421 and its retry count twice).
- connections_reused: requests sent on a connection that was opened for
  another origin (coalesced), 421'd ones left out.
- reuse_ratio: among requests for origins other than the base page's origin
  (the "non-first" origins), the fraction sent over a coalesced connection;
  0 when no request went to another origin. A request the server answered
  with 421 Misdirected Request and that was sent again on a connection of
  its own counts once, as not coalesced. (The LinkedIn study's
  "connections reused": 1 means every second-origin request rode an
  existing connection, 0 means each such origin opened its own.)
- dns_ms: sum of all lookup durations (0 for names from the static map).
- bytes: response body bytes received (identity encoding: object sizes).
"""

from __future__ import annotations

from .timeline import ConnRecord, DnsLookup, RequestRecord, ms


def _ms_or_none(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else ms(b - a)


def summarize(records: list[RequestRecord], conns: list[ConnRecord], lookups: list[DnsLookup], *,
              settings: dict, cached_urls: list[str], assets_found: int, error: str | None,
              started_at: str | None = None) -> dict:
    """settings: url, protocol, coalescing, cache_hit_ratio, seed, schedule (copied through)."""
    base = records[0] if records else None
    t0 = base.start if base else None
    done = [r for r in records if r.last_byte is not None]
    last = max((r.last_byte for r in done), default=None)
    failed = error is not None
    base_origin = base.origin if base else None
    final = [r for r in records if not r.superseded]
    others = [r for r in final if r.origin != base_origin]
    coalesced_others = [r for r in others if r.coalesced]
    per_host: dict[str, float] = {}
    for lk in lookups:
        if lk.end is not None:
            per_host[lk.host] = round(per_host.get(lk.host, 0.0) + ms(lk.end - lk.start), 3)
    conn_list = []
    for c in conns:
        opened = c.tcp[0] if c.tcp else c.tcp_start
        conn_list.append({
            "id": c.id, "origin": c.origin, "origins": list(c.origins), "host": c.host,
            "remote_ip": c.remote_ip, "remote_port": c.remote_port, "local_port": c.local_port,
            "alpn": c.alpn, "tls_version": c.tls_version, "cipher": c.cipher,
            "opened_at_ms": _ms_or_none(t0, opened),
            "connect_ms": ms(c.tcp[1] - c.tcp[0]) if c.tcp else None,
            "tls_ms": ms(c.tls[1] - c.tls[0]) if c.tls else None,
            "requests": c.requests, "error": c.error,
        })
    errors: list[str] = []
    for msg in [error] + [r.error for r in records] + [c.error for c in conns]:
        if msg and msg not in errors:
            errors.append(msg)
    established = [c for c in conns if c.error is None and c.tcp is not None
                   and (c.tls is not None or c.origin.startswith("http:"))]
    return {
        **{k: settings.get(k) for k in ("url", "protocol", "coalescing", "cache_hit_ratio", "seed", "schedule")},
        "ok": not failed,
        "error": error,
        "started_at": started_at,
        "assets_found": assets_found,
        "cached_urls": list(cached_urls),
        "requests": len(records),
        "requests_failed": sum(1 for r in records if not r.complete),
        "bytes": sum(r.body_bytes for r in records),
        "plt_ms": None if failed or last is None else ms(last - t0),
        "plt_from_request_ms": None if failed or last is None or base is None or base.send_start is None
        else ms(last - base.send_start),
        "content_download_ms": None if failed or last is None or base.first_byte is None
        else ms(last - base.first_byte),
        "ttfb_ms": _ms_or_none(t0, base.first_byte if base else None),
        "dns_ms": round(sum(per_host.values()), 3),
        "dns_ms_per_host": per_host,
        "tcp_connect_ms": {c["id"]: c["connect_ms"] for c in conn_list if c["connect_ms"] is not None},
        "tls_handshake_ms": {c["id"]: c["tls_ms"] for c in conn_list if c["tls_ms"] is not None},
        "connections_opened": len(established),
        "connections_reused": sum(1 for r in final if r.coalesced),
        "reuse_ratio": round(len(coalesced_others) / len(others), 6) if others else 0.0,
        "connections": conn_list,
        "errors": errors,
    }
