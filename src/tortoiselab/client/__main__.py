"""python -m tortoiselab.client URL --ca FILE --har OUT.har --summary OUT.json [...]

Writes both files on every outcome (the error recorded in them) and exits
0 when the page loaded, 1 when the load failed, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from .har import build_har
from .loader import load_page_sync
from .options import LoadOptions, OptionError, parse_origin_protocol_args, parse_resolve_args
from .timeline import Clock

PROG = "python -m tortoiselab.client"


class _ArgError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # raise instead of exiting, so the files still get written
        raise _ArgError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Load a web page like a browser (HTTP/2 or HTTP/1.1 over TLS) and "
                                       "write its HAR and a summary.")
    p.add_argument("url", metavar="URL", help="the page, e.g. https://www.lab.test/feed.html")
    p.add_argument("--resolve", action="append", default=[], metavar="HOST:IP",
                   help="static name resolution, repeatable (like curl --resolve)")
    p.add_argument("--origin-protocol", action="append", default=[], metavar="ORIGIN=h2|h1",
                   help="this origin's protocol where a page's origins mix h2 and HTTP/1.1 (an imported site, "
                        "as recorded), repeatable; the others speak --protocol")
    p.add_argument("--dns-server", metavar="IP[:PORT]", help="resolve by UDP DNS A queries to this server")
    p.add_argument("--ca", required=True, metavar="FILE", help="trust anchor (PEM), e.g. the lab CA")
    p.add_argument("--protocol", default="h2", metavar="h2|h1",
                   help="h2: one multiplexed connection per origin; h1: up to 6 per host (default h2)")
    p.add_argument("--no-coalescing", action="store_true", help="never reuse a connection for another host")
    p.add_argument("--cache-hit-ratio", type=float, default=0.0, metavar="X",
                   help="fraction of the assets treated as cached, 0..1 (default 0)")
    p.add_argument("--cache-unit", default="asset", metavar="asset|page",
                   help="what --cache-hit-ratio counts: asset = that share of the page's assets is cached; "
                        "page = that share of page views is served wholly from cache (default asset)")
    p.add_argument("--seed", type=int, default=1, metavar="N", help="seed of the cache-hit choice (default 1)")
    p.add_argument("--timeout", type=float, default=30.0, metavar="S", help="bound on the whole load (default 30)")
    p.add_argument("--connect-timeout", type=float, default=10.0, metavar="S",
                   help="bound on each DNS lookup, TCP connect and TLS handshake (default 10)")
    p.add_argument("--request-timeout", type=float, default=None, metavar="S",
                   help="bound on each request (default: only --timeout)")
    p.add_argument("--max-h1-connections", type=int, default=6, metavar="N",
                   help="HTTP/1.1 connections per host (default 6)")
    p.add_argument("--tls", default="any", metavar="1.2|1.3|any", help="TLS version (default any)")
    p.add_argument("--repeat-after", type=float, default=None, metavar="S",
                   help="load the page again S seconds after the first load, on the same connections "
                        "(summary: repeat)")
    p.add_argument("--schedule", default="chromium", metavar="chromium|eager",
                   help="when the page's requests leave: chromium = as Chromium schedules them (found as the "
                        "document arrives, by priority, low-priority ones held while it loads); eager = every "
                        "asset at once once the whole document is in (default chromium)")
    p.add_argument("--har", required=True, metavar="OUT.har", help="where to write the HAR")
    p.add_argument("--summary", required=True, metavar="OUT.json", help="where to write the summary")
    p.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    return p


def _outputs(argv: list[str]) -> tuple[str | None, str | None, str | None]:
    """--har, --summary and URL from argv as far as they can be made out."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--har")
    p.add_argument("--summary")
    try:
        ns, rest = p.parse_known_args(argv)
    except SystemExit:
        return None, None, None
    url = next((a for a in rest if "://" in a), None)
    return ns.har, ns.summary, url


def _write(path: str | None, data: dict) -> str | None:
    if not path:
        return None
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    except OSError as e:
        return f"cannot write {path}: {e.strerror or e}"
    return None


def _bad_args(message: str, argv: list[str]) -> int:
    har_path, summary_path, url = _outputs(argv)
    error = f"bad arguments: {message}"
    har = build_har([], Clock.start(), title=url or "", comment=f"load not started: {error}")
    summary = {"url": url, "ok": False, "error": error, "errors": [error], "requests": 0, "plt_ms": None}
    for path, data in ((har_path, har), (summary_path, summary)):
        _write(path, data)
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv):
        build_parser().print_help()
        return 0
    try:
        a = build_parser().parse_args(argv)
    except _ArgError as e:
        return _bad_args(str(e), argv)
    logging.basicConfig(level=logging.DEBUG if a.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        opts = LoadOptions(
            url=a.url, resolve=parse_resolve_args(a.resolve), dns_server=a.dns_server, ca_file=a.ca,
            protocol=a.protocol, coalescing=not a.no_coalescing, cache_hit_ratio=a.cache_hit_ratio,
            cache_unit=a.cache_unit,
            seed=a.seed, timeout_s=a.timeout, tls_version=a.tls, connect_timeout_s=a.connect_timeout,
            request_timeout_s=a.request_timeout, max_h1_connections=a.max_h1_connections,
            repeat_after_s=a.repeat_after, schedule=a.schedule,
            origin_protocols=parse_origin_protocol_args(a.origin_protocol))
    except OptionError as e:
        return _bad_args(e.for_cli(), argv)
    res = load_page_sync(opts)
    problems = [p for p in (_write(a.har, res.har), _write(a.summary, res.summary)) if p]
    for p in problems:
        print(f"{PROG}: error: {p}", file=sys.stderr)
    s = res.summary
    if res.error:
        print(f"{PROG}: load failed: {res.error}", file=sys.stderr)
        return 1
    print(f"{opts.url}: {s['requests']} requests, {s['bytes']} bytes, plt {s['plt_ms']} ms, "
          f"ttfb {s['ttfb_ms']} ms, {s['connections_opened']} connections, reuse ratio {s['reuse_ratio']}")
    return 2 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
