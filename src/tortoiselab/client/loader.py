"""Load one page the way a browser does, and time every step.

1. GET the base HTML (resolve, TCP connect, TLS with ALPN, request).
   A response that is not HTML (its Content-Type is not text/html: an
   image, objects/<bytes>.bin) is the whole load, one object, complete
   when its body is whole (as many bytes as its Content-Length).
2. Find its <img src>, <script src>, <link rel=stylesheet href>; treat a
   seeded choice of cache_hit_ratio of them as cached; request the rest,
   by schedule: "chromium" (the default), as Chromium does: each found as
   the document's bytes arrive (a preload scanner), given Chromium's
   priority, and held while Chromium would hold it (client/schedule.py);
   "eager", all at once when the whole document is in:
   - h2: one connection per origin (scheme, host, port), every request a
     stream on it, as many at a time as the server's
     SETTINGS_MAX_CONCURRENT_STREAMS allows. With coalescing on, a new origin
     is first resolved and then sent over an open connection whose remote
     address is among its addresses and whose certificate covers it (RFC 9113
     §9.1.1); a 421 Misdirected Request on such a connection is retried on a
     connection of its own (§9.1.2).
   - h1: up to max_h1_connections (6) keep-alive connections per origin, one
     request at a time on each; the others queue (FIFO) for a free one.
3. Record every request's blocked/dns/connect/ssl/send/wait/receive on
   time.monotonic(), and every connection's set-up.

Every await is bounded (per step by connect_timeout_s / request_timeout_s,
the whole load by timeout_s); nothing busy-polls, so the load runs on the
lab's virtual clock. Failures never raise: they end up in LoadResult.error
(one line: which host, which step, why), with the HAR and summary of what
completed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass

from .coalesce import coalesce_decision
from .connections import USER_AGENT, H1Connection, H2Connection, open_stream, tls_context
from .errors import LoadError, Retry, fmt_s, quiet_future
from .har import build_har
from .options import LoadOptions
from .page import (MADE_SCRIPT, Found, Origin, Scanner, cached_assets, made_script_requests, origin_of, request_target,
                   subresources, view_from_cache)
from .resolver import Resolver
from .schedule import PRIORITY_NAMES, ChromiumScheduler, Request
from .summary import summarize
from .timeline import Clock, ConnRecord, RequestRecord

log = logging.getLogger(__name__)

ACCEPT = {
    "document": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    "image": "image/avif,image/webp,image/apng,image/*,*/*;q=0.8",
    "stylesheet": "text/css,*/*;q=0.1",
    "script": "*/*",
}
MAX_ATTEMPTS = 3
MADE_SCRIPT_MAX = 1 << 20  # the bytes of a script read for an imported site's made-script list


@dataclass
class LoadResult:
    har: dict
    summary: dict
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None


class _H1Pool:
    def __init__(self) -> None:
        self.idle: list[H1Connection] = []
        self.count = 0  # open or opening
        self.waiters: deque[asyncio.Future] = deque()


class PageLoad:
    """The state of one load; load_page() drives it."""

    def __init__(self, opts: LoadOptions, now=time.monotonic):
        self.opts = opts
        self.now = now
        self.clock = Clock.start(now)
        self.step_s = min(opts.connect_timeout_s, opts.timeout_s)
        self.records: list[RequestRecord] = []
        self.conns: list[ConnRecord] = []
        self.objs: list[H1Connection | H2Connection] = []
        self.resolver = Resolver(opts.resolve, opts.dns_server, self.step_s, now)
        self._ctx: dict = {}  # protocol -> its TLS context
        self.cached: list[str] = []
        self.assets_found = 0
        self.error: str | None = None
        self.decisions: list[dict] = []
        self.misdirected = 0
        self._h2_origin: dict[Origin, asyncio.Future] = {}
        self._h2_open: list[H2Connection] = []
        self._no_coalesce: set[Origin] = set()
        self._h1: dict[Origin, _H1Pool] = {}
        self._failed: dict[Origin, LoadError] = {}
        # origins an HTTP/2 connection was opened for: Chromium's "supports
        # request priorities" (kept across a repeat load, as in its profile)
        self.h2_origins: set[str] = set()
        self._sched: ChromiumScheduler | None = None
        self._tg: asyncio.TaskGroup | None = None
        self.first_load: tuple[int, int, int] | None = None  # records, conns, lookups of load 1 (repeat)

    # -- the page ---------------------------------------------------------------
    async def run(self) -> None:
        """The load, and with repeat_after_s a second one after that much
        idle time, on whatever connections the first left open (a new page
        view on a warm connection: its congestion window is what the server
        kept, or restarted if it slow-starts after idle)."""
        await self._load_once()
        if self.error is None and self.opts.repeat_after_s:
            self.first_load = (len(self.records), len(self.conns), len(self.resolver.lookups))
            await asyncio.sleep(self.opts.repeat_after_s)
            await self._load_once()

    async def _load_once(self) -> None:
        if self.opts.schedule == "chromium":
            await self._load_scheduled()
            return
        url = self.opts.url
        self._tls()  # load the CA before the clock of the first request starts
        base, body = await self.fetch(url, "document", keep_body=True)
        if base.error:
            self.error = base.error
            return
        assets = subresources(body, base.header("content-type"), url)
        self.assets_found = len(assets)
        self.cached = cached_assets([a.url for a in assets], self.opts.cache_hit_ratio, self.opts.seed,
                                    self.opts.cache_unit)
        skip = set(self.cached)
        await asyncio.gather(*(self.fetch(a.url, a.kind) for a in assets if a.url not in skip))

    async def _load_scheduled(self) -> None:
        """The page as Chromium schedules it: the document's bytes go through
        a Scanner as they arrive, what it finds through a ChromiumScheduler,
        and each request it lets go is fetched at once; the load ends when
        the document and every request are done."""
        url = self.opts.url
        self._tls()
        sched = self._sched = ChromiumScheduler(known=self.h2_origins)
        try:
            await self._scheduled_group(url, sched)
        finally:
            self._tg = None

    async def _scheduled_group(self, url: str, sched: ChromiumScheduler) -> None:
        opts = self.opts
        found: list[Found] = []
        # the asset-unit cache draw needs every asset of the page: hold them to its end
        hold = opts.cache_unit == "asset" and opts.cache_hit_ratio > 0
        skip_all = opts.cache_unit == "page" and view_from_cache(opts.cache_hit_ratio, opts.seed)
        scanner: Scanner | None = None
        async with asyncio.TaskGroup() as tg:
            self._tg = tg
            def add(fs: list[Found]) -> None:
                for f in fs:
                    found.append(f)
                    if not hold and not skip_all:
                        sched.add(f)

            def on_body(rec: RequestRecord, chunk: bytes) -> None:
                nonlocal scanner
                if not 200 <= rec.status < 300:
                    return
                if scanner is None:
                    scanner = Scanner(url, rec.header("content-type"))
                add(scanner.feed(chunk))
                if scanner.body and not sched.body_found:
                    sched.body()
                self._launch()

            base, _ = await self.fetch(url, "document", on_body=on_body)
            if base.error:
                self.error = base.error
                for r in sched.requests:
                    if r.stage in ("blink", "net"):
                        r.stage = "done"  # nothing more leaves; what left finishes or fails
                return
            add((scanner or Scanner(url, base.header("content-type"))).close())
            self.assets_found = len(found)
            self.cached = cached_assets([f.url for f in found], opts.cache_hit_ratio, opts.seed, opts.cache_unit)
            if hold:
                skip = set(self.cached)
                for f in found:
                    if f.url not in skip:
                        sched.add(f)
            sched.body()  # the document's end implies <body>
            self._launch()

    def _launch(self) -> None:
        """Fetch every request the scheduler lets go now (each in a task of
        the load's group)."""
        if self._sched is None or self._tg is None:
            return
        for r in self._sched.take():
            self._tg.create_task(self._fetch_scheduled(r))

    async def _fetch_scheduled(self, r: Request) -> None:
        # a script's first bytes: an imported site's made script (page.made_script_requests) is run
        head: list[bytes] | None = []  # None: no made script

        def on_body(rec: RequestRecord, chunk: bytes) -> None:
            nonlocal head
            if head is None or not 200 <= rec.status < 300 or sum(map(len, head)) >= MADE_SCRIPT_MAX:
                return
            start = b"".join(head) + chunk
            head = head + [chunk] if start[:len(MADE_SCRIPT)] == MADE_SCRIPT[:len(start)] else None

        rec, _ = await self.fetch(r.found.url, r.found.kind, priority=PRIORITY_NAMES[r.priority],
                                  on_body=on_body if r.found.kind == "script" else None)
        if self._sched is not None:  # (not reached when the load is cancelled: nothing more leaves)
            if head and rec.error is None:
                self._run_made_script(b"".join(head), r.found.url)
            self._sched.done(r)
            self._launch()

    def _run_made_script(self, body: bytes, url: str) -> None:
        """The requests a made script asks for, found as it ends (a browser
        runs it then: web/harsite.made_script); each URL once a page."""
        found = made_script_requests(body, url)
        if not found or self._sched is None:
            return
        seen = {q.found.url for q in self._sched.requests} | {self.opts.url}
        for f in found:
            if f.url not in seen:
                seen.add(f.url)
                self._sched.add(f)

    async def fetch(self, url: str, kind: str, keep_body: bool = False, *, priority: str | None = None,
                    on_body=None) -> tuple[RequestRecord, bytes]:
        """One request and its retries; on_body(rec, chunk) sees the body's
        pieces as they arrive."""
        origin = origin_of(url)
        rec = RequestRecord(url, str(origin), kind, start=self.now(), priority=priority)
        self.records.append(rec)
        body = b""
        on_data = (lambda chunk: on_body(rec, chunk)) if on_body is not None else None
        try:
            body = await self._fetch(rec, origin, kind, keep_body, on_data)
            if rec.status == 421 and rec.coalesced:
                # Misdirected Request: the server will not answer for this origin on
                # this connection; a browser retries on a connection of its own
                self.misdirected += 1
                self._no_coalesce.add(origin)
                f = self._h2_origin.get(origin)
                if f is not None and f.done() and not f.cancelled() and f.exception() is None \
                        and f.result().rec.id == rec.conn_id:
                    del self._h2_origin[origin]
                rec.end = rec.last_byte
                rec.superseded = True
                rec.phase = "done (421, retried on a new connection)"
                return await self.fetch(url, kind, keep_body, priority=priority, on_body=on_body)
            if rec.status >= 400:
                text = f" {rec.status_text}" if rec.status_text else ""
                raise LoadError(f"GET {url} returned HTTP {rec.status}{text} (from {rec.server_ip}, {rec.conn_id})",
                                step="http", host=origin.host)
            if 300 <= rec.status < 400 and kind == "document":
                raise LoadError(f"GET {url} returned HTTP {rec.status}, a redirect to "
                                f"{rec.header('location') or '(no Location)'}; redirects are not followed, "
                                "load the target URL instead", step="http", host=origin.host)
            short = rec.length_problem()
            if short:
                raise LoadError(f"GET {url}: {short} (from {rec.server_ip}, {rec.conn_id})", step="http",
                                host=origin.host)
            rec.end = rec.last_byte
            rec.phase = "done"
        except LoadError as e:
            rec.error = str(e)
            rec.end = rec.end or self.now()
            rec.phase = f"failed ({e.step or 'error'})"
        return rec, body

    async def _fetch(self, rec: RequestRecord, origin: Origin, kind: str, keep_body: bool,
                     on_data=None) -> bytes:
        extra = [("user-agent", USER_AGENT), ("accept", ACCEPT.get(kind, "*/*")), ("accept-encoding", "identity")]
        target = request_target(rec.url)
        for _ in range(MAX_ATTEMPTS):
            rec.attempts += 1
            if self._protocol(origin) == "h2":
                conn = await self._h2_connection(origin, rec)
            else:
                conn = await self._h1_connection(origin, rec)
            rec.conn_id, rec.server_ip = conn.rec.id, conn.rec.remote_ip
            rec.coalesced = conn.rec.origin != str(origin)
            try:
                body = await conn.request(rec, origin, target, extra, keep_body, self.opts.request_timeout_s,
                                          on_data=on_data)
                conn.rec.requests += 1
                return body
            except Retry:
                rec.send_start = rec.send_end = rec.first_byte = rec.last_byte = None
                rec.status, rec.body_bytes = 0, 0
                continue
            except LoadError:
                conn.rec.requests += 1
                raise
            finally:
                if isinstance(conn, H1Connection):
                    self._h1_release(origin, conn)
        raise LoadError(f"GET {rec.url}: the server did not take the request in {MAX_ATTEMPTS} attempts "
                        "(streams refused or connections closed)", step="request", host=origin.host)

    # -- connections ------------------------------------------------------------
    def _protocol(self, origin: Origin) -> str:
        """The origin's protocol: as the imported site recorded it
        (opts.origin_protocols), else the page's."""
        return self.opts.origin_protocols.get(str(origin), self.opts.protocol)

    def _tls(self, protocol: str | None = None):
        """The TLS context whose ALPN offers `protocol` only (the page's by
        default): h2 or http/1.1."""
        protocol = protocol or self.opts.protocol
        if protocol not in self._ctx:
            alpn = ["h2"] if protocol == "h2" else ["http/1.1"]
            self._ctx[protocol] = tls_context(self.opts.ca_file, self.opts.tls_version, alpn)
        return self._ctx[protocol]

    async def _resolve(self, origin: Origin, rec: RequestRecord) -> list[str]:
        rec.phase = f"resolving {origin.host}"
        ips, lookup = await self.resolver.resolve(origin.host)
        if lookup is not None:
            rec.dns = (lookup.start, lookup.end)
        return ips

    async def _open(self, origin: Origin, ips: list[str], rec: RequestRecord) -> H1Connection | H2Connection:
        protocol = self._protocol(origin)
        if protocol == "h2" and origin.scheme != "https":
            raise LoadError(f"GET {rec.url}: plain http:// on an h2 page (h2 needs TLS; browsers block such "
                            "mixed content)", step="connect", host=origin.host)
        cr = ConnRecord(f"c{len(self.conns) + 1}", str(origin), origin.host, ips[0], origin.port,
                        origins=[str(origin)])
        self.conns.append(cr)
        ctx = self._tls(protocol) if origin.scheme == "https" else None

        def phase(text: str) -> None:
            rec.phase = text

        try:
            reader, writer = await open_stream(origin, ips, ctx, self.step_s, cr, self.now, phase)
        except (LoadError, asyncio.CancelledError) as e:
            t = self.now()
            cr.error = str(e) if isinstance(e, LoadError) else f"{rec.phase}: not finished when the page load timed out"
            rec.tcp = cr.tcp or ((cr.tcp_start, t) if cr.tcp_start is not None else None)
            rec.tls = (cr.tls_start, t) if cr.tcp and cr.tls_start is not None else None
            raise
        rec.tcp, rec.tls = cr.tcp, cr.tls
        want = "h2" if protocol == "h2" else "http/1.1"
        if ctx is not None and cr.alpn != want and not (want == "http/1.1" and cr.alpn is None):
            writer.transport.abort()
            cr.error = (f"{origin.host} ({cr.remote_ip}:{origin.port}) did not negotiate {want} by ALPN "
                        f"(got {cr.alpn or 'none'}); is {'h2' if want == 'h2' else 'http/1.1'} enabled on the server?")
            raise LoadError(cr.error, step="alpn", host=origin.host)
        if protocol == "h2":
            conn = H2Connection(cr, reader, writer, self.now)
            conn.start()
            self._h2_open.append(conn)
            self.h2_origins.add(str(origin))
            if self._sched is not None:
                self._sched.origin_known(str(origin))
                self._launch()
        else:
            conn = H1Connection(cr, reader, writer, self.now)
        self.objs.append(conn)
        return conn

    async def _h2_connection(self, origin: Origin, rec: RequestRecord) -> H2Connection:
        for _ in range(MAX_ATTEMPTS):
            if origin in self._failed:
                raise LoadError(str(self._failed[origin]), step=self._failed[origin].step, host=origin.host)
            fut = self._h2_origin.get(origin)
            if fut is None:
                break
            if not fut.done():
                rec.phase = f"waiting for the connection to {origin.host}"
            conn = await asyncio.shield(fut)
            if conn.usable:
                return conn
            if self._h2_origin.get(origin) is fut:
                del self._h2_origin[origin]
        fut = quiet_future(asyncio.get_running_loop().create_future())
        self._h2_origin[origin] = fut
        try:
            conn = await self._h2_establish(origin, rec)
        except LoadError as e:
            self._failed[origin] = e
            fut.set_exception(e)
            raise
        except BaseException:
            fut.cancel()
            raise
        fut.set_result(conn)
        return conn

    async def _h2_establish(self, origin: Origin, rec: RequestRecord) -> H2Connection:
        ips = await self._resolve(origin, rec)
        if self.opts.coalescing and origin not in self._no_coalesce:
            for c in self._h2_open:
                if not c.usable or c.rec.remote_port != origin.port or not c.rec.origin.startswith(origin.scheme + ":"):
                    continue
                d = coalesce_decision(origin.host, ips, [c.rec.remote_ip], *c.sans)
                self.decisions.append({"origin": str(origin), "connection": c.rec.id, "reuse": d.reuse,
                                       "reason": d.reason})
                if d.reuse:
                    c.rec.origins.append(str(origin))
                    return c
        return await self._open(origin, ips, rec)

    async def _h1_connection(self, origin: Origin, rec: RequestRecord) -> H1Connection:
        if origin in self._failed:
            raise LoadError(str(self._failed[origin]), step=self._failed[origin].step, host=origin.host)
        pool = self._h1.setdefault(origin, _H1Pool())
        while pool.idle:
            c = pool.idle.pop()
            if c.usable:
                return c
            pool.count -= 1
        if pool.count < self.opts.max_h1_connections:
            pool.count += 1
            return await self._h1_new(origin, pool, rec)
        fut = quiet_future(asyncio.get_running_loop().create_future())
        pool.waiters.append(fut)
        rec.phase = f"queued for one of the {self.opts.max_h1_connections} connections to {origin.host}"
        try:
            got = await fut
        except asyncio.CancelledError:
            if fut in pool.waiters:
                pool.waiters.remove(fut)
            elif fut.done() and not fut.cancelled() and fut.exception() is None:
                if fut.result() is None:
                    pool.count -= 1
                else:
                    self._h1_release(origin, fut.result())
            raise
        if got is None:  # a slot, not a connection: open one
            return await self._h1_new(origin, pool, rec)
        return got

    async def _h1_new(self, origin: Origin, pool: _H1Pool, rec: RequestRecord) -> H1Connection:
        try:
            ips = await self._resolve(origin, rec)
            return await self._open(origin, ips, rec)
        except LoadError as e:
            pool.count -= 1
            self._failed[origin] = e
            while pool.waiters:
                w = pool.waiters.popleft()
                if not w.done():
                    w.set_exception(LoadError(str(e), step=e.step, host=origin.host))
            raise
        except BaseException:
            pool.count -= 1
            raise

    def _h1_release(self, origin: Origin, conn: H1Connection) -> None:
        pool = self._h1[origin]
        if conn.usable:
            while pool.waiters:
                w = pool.waiters.popleft()
                if not w.done():
                    w.set_result(conn)
                    return
            pool.idle.append(conn)
            return
        pool.count -= 1
        while pool.waiters:
            w = pool.waiters.popleft()
            if not w.done():
                pool.count += 1
                w.set_result(None)
                return

    # -- the end ----------------------------------------------------------------
    def timed_out(self) -> None:
        t = self.now()
        open_recs = [r for r in self.records if r.end is None]
        for r in open_recs:
            r.end = t
            r.error = f"GET {r.url}: not finished when the page load timed out ({r.phase})"
        for c in self.conns:
            if c.error is None and (c.tcp is None or (c.tls is None and c.origin.startswith("https:"))):
                step = "connect to" if c.tcp is None else "TLS handshake with"
                c.error = f"{step} {c.host} ({c.remote_ip}:{c.remote_port}): not finished when the page load timed out"
        for lk in self.resolver.lookups:
            if lk.end is None:
                lk.end, lk.error = t, "not finished when the page load timed out"
        first = open_recs[0] if open_recs else None
        self.error = (f"page load timed out after {fmt_s(self.opts.timeout_s)}: "
                      f"{len(open_recs)} of {len(self.records)} requests unfinished"
                      + (f", e.g. GET {first.url} ({first.phase})" if first else ""))

    async def close(self) -> None:
        if self.objs:
            await asyncio.gather(*(c.close() for c in self.objs), return_exceptions=True)

    def result(self) -> LoadResult:
        error = self.error
        failed = sorted((r for r in self.records if r.error), key=lambda r: r.end or r.start)
        if error is None and failed:
            error = failed[0].error + (f" ({len(failed)} of {len(self.records)} requests failed)"
                                       if len(failed) > 1 else "")
        n_rec, n_conn, n_dns = self.first_load or (len(self.records), len(self.conns), len(self.resolver.lookups))
        records, second = self.records[:n_rec], self.records[n_rec:]
        base = records[0] if records else None
        last = max((r.last_byte for r in records if r.last_byte is not None), default=None)
        har = build_har(records, self.clock, title=self.opts.url,
                        started=base.start if base else self.clock.mono0,
                        on_content_load=base.last_byte if base and base.complete else None,
                        on_load=last if error is None else None,
                        comment=f"load failed: {error}" if error else "")
        page = har["log"]["pages"][0]
        summary = summarize(records, self.conns[:n_conn], self.resolver.lookups[:n_dns],
                            settings=self.opts.as_dict(), cached_urls=self.cached, assets_found=self.assets_found,
                            error=error, started_at=page["startedDateTime"])
        if self.first_load is not None:
            # the second load: its own timings; connections_opened counts only
            # the ones it had to open (0 when it ran on the first load's)
            rep = summarize(second, self.conns[n_conn:], self.resolver.lookups[n_dns:],
                            settings=self.opts.as_dict(), cached_urls=self.cached, assets_found=self.assets_found,
                            error=error if any(r.error for r in second) else None)
            summary["repeat"] = {"idle_s": self.opts.repeat_after_s,
                                 **{k: rep[k] for k in ("ok", "error", "requests", "bytes", "plt_ms",
                                                        "plt_from_request_ms", "content_download_ms", "ttfb_ms",
                                                        "connections_opened")},
                                 "connection_ids": sorted({r.conn_id for r in second if r.conn_id})}
        summary.update({
            "tls_version_requested": self.opts.tls_version,
            "resolver": self.resolver.describe(),
            "timeout_s": self.opts.timeout_s,
            "coalescing_decisions": self.decisions,
            "misdirected_retries": self.misdirected,
            "retried_requests": sum(1 for r in self.records if r.attempts > 1),
        })
        return LoadResult(har, summary, error)


async def load_page(opts: LoadOptions, *, now=time.monotonic) -> LoadResult:
    """Load opts.url like a browser; never raises for a failed load (see
    LoadResult.error). `now` is the monotonic clock (injectable for tests)."""
    pl = PageLoad(opts, now)
    try:
        try:
            async with asyncio.timeout(opts.timeout_s) as cm:
                await pl.run()
        except TimeoutError:
            if not cm.expired():
                raise
            pl.timed_out()
    except LoadError as e:
        pl.error = str(e)
    except Exception as e:  # a bug: still report what completed
        log.exception("page load failed unexpectedly")
        pl.error = f"internal error in the loader: {type(e).__name__}: {e}"
    finally:
        try:
            await asyncio.wait_for(pl.close(), 2.0)
        except (asyncio.TimeoutError, Exception):
            for c in pl.objs:
                c.writer.transport.abort()
    return pl.result()


def load_page_sync(opts: LoadOptions) -> LoadResult:
    return asyncio.run(load_page(opts))
