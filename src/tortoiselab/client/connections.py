"""Connections: HTTP/2 (h2, sans-IO) or HTTP/1.1 on a stream that
transport.py opened (TCP then TLS, timed apart). Every await is bounded by
the caller or here; nothing polls.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from http import HTTPStatus
from typing import Callable

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

from .errors import LoadError, Retry, fmt_s, quiet_future
from .har import CREATOR_VERSION
from .page import Origin
from .timeline import ConnRecord, RequestRecord
from .transport import READ_CHUNK, close_writer, open_stream, peer_sans, tls_context, why_failed

# the loader opens its connections through here: open_stream, tls_context
__all__ = ["CONN_WINDOW", "STREAM_WINDOW", "USER_AGENT", "H1Connection", "H2Connection", "open_stream",
           "tls_context"]

USER_AGENT = f"tortoiselab-client/{CREATOR_VERSION}"
# Receive windows so large the client is never what limits the sender:
# 16 MiB per stream (SETTINGS_INITIAL_WINDOW_SIZE), 32 MiB for the
# connection (WINDOW_UPDATE on stream 0 right after the preface). Data is
# acknowledged as it is read; h2 returns credit once half a window is used.
STREAM_WINDOW = 16 * 1024 * 1024
CONN_WINDOW = 32 * 1024 * 1024
# streams we allow ourselves before the server's SETTINGS arrive (Chrome: 100)
INITIAL_STREAM_LIMIT = 100


class _Stream:
    def __init__(self, rec: RequestRecord, keep_body: bool, fut: asyncio.Future,
                 on_data: Callable[[bytes], None] | None = None):
        self.rec = rec
        self.keep_body = keep_body
        self.on_data = on_data
        self.body: list[bytes] = []
        self.fut = fut


class H2Connection:
    """One HTTP/2 connection; many requests at once, as many as the server's
    SETTINGS_MAX_CONCURRENT_STREAMS allows, the rest wait their turn (FIFO)."""

    def __init__(self, rec: ConnRecord, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, now):
        self.rec = rec
        self.reader, self.writer = reader, writer
        self.now = now
        self.sans = peer_sans(writer)
        cfg = h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        self.h2 = h2.connection.H2Connection(config=cfg)
        self.h2.local_settings = h2.settings.Settings(client=True, initial_values={
            h2.settings.SettingCodes.ENABLE_PUSH: 0,
            h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: STREAM_WINDOW,
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 100,
        })
        self.streams: dict[int, _Stream] = {}
        self.active = 0
        self.waiters: deque[asyncio.Future] = deque()
        self.settings_seen = False
        self.usable = True
        self.broken: str | None = None
        self._task: asyncio.Task | None = None

    @property
    def limit(self) -> int:
        if not self.settings_seen:
            return INITIAL_STREAM_LIMIT
        return max(1, min(self.h2.remote_settings.max_concurrent_streams, 2**31))

    def start(self) -> None:
        self.h2.initiate_connection()
        self.h2.increment_flow_control_window(CONN_WINDOW - 65535)
        self._flush()
        self._task = asyncio.get_running_loop().create_task(self._read_loop())

    def _flush(self) -> None:
        data = self.h2.data_to_send()
        if data and not self.writer.is_closing():
            self.writer.write(data)

    # -- stream slots ---------------------------------------------------------
    async def _acquire(self) -> None:
        if self.active < self.limit and not self.waiters:
            self.active += 1
            return
        fut = asyncio.get_running_loop().create_future()
        self.waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut in self.waiters:
                self.waiters.remove(fut)
            elif fut.done() and not fut.cancelled() and fut.exception() is None:
                self._release()  # granted, then cancelled: hand it on
            raise

    def _release(self) -> None:
        self.active -= 1
        self._grant()

    def _grant(self) -> None:
        while self.waiters and self.active < self.limit:
            fut = self.waiters.popleft()
            if not fut.done():
                self.active += 1
                fut.set_result(None)

    def _fail_waiters(self, exc: Exception) -> None:
        while self.waiters:
            fut = self.waiters.popleft()
            if not fut.done():
                fut.set_exception(exc)

    # -- requests -------------------------------------------------------------
    async def request(self, rec: RequestRecord, origin: Origin, path: str,
                            extra: list[tuple[str, str]], keep_body: bool, timeout_s: float | None,
                            on_data: Callable[[bytes], None] | None = None) -> bytes:
        """on_data(chunk): each piece of the body as it arrives (the
        document's scanner)."""
        if not self.usable:
            raise Retry()
        rec.phase = f"waiting for a stream slot on {self.rec.id}"
        await self._acquire()
        try:
            if not self.usable:
                raise Retry()
            headers = [(":method", rec.method), (":scheme", origin.scheme), (":authority", origin.authority),
                       (":path", path)] + extra
            rec.request_headers = headers
            rec.http_version = "h2"
            self._flush()
            sid = self.h2.get_next_available_stream_id()
            fut = quiet_future(asyncio.get_running_loop().create_future())
            st = _Stream(rec, keep_body, fut, on_data)
            self.streams[sid] = st
            rec.send_start = self.now()
            rec.phase = "sending"
            try:
                self.h2.send_headers(sid, headers, end_stream=True)
            except h2.exceptions.H2Error as e:
                self.streams.pop(sid, None)
                raise LoadError(f"GET {rec.url}: cannot open a stream on {self.rec.id}: {e}",
                                step="request", host=origin.host)
            data = self.h2.data_to_send()
            rec.request_headers_size = len(data)  # the HEADERS frame as sent (HPACK)
            self.writer.write(data)
            await self.writer.drain()
            rec.send_end = self.now()
            if rec.first_byte is None:
                rec.phase = f"waiting for the response on {self.rec.id}"
            try:
                await asyncio.wait_for(asyncio.shield(fut), timeout_s)
            except asyncio.TimeoutError:
                self._reset(sid)
                raise LoadError(f"GET {rec.url} on {self.rec.id}: no complete response after {fmt_s(timeout_s)}"
                                f" ({'receiving' if rec.first_byte else 'no response yet'})",
                                step="request", host=origin.host)
            except asyncio.CancelledError:
                self._reset(sid)
                raise
            return b"".join(st.body)
        except (ConnectionError, OSError) as e:
            self._broken(f"write failed: {why_failed(e)}")
            raise LoadError(f"GET {rec.url}: connection {self.rec.id} to {self.rec.host} failed: {why_failed(e)}",
                            step="request", host=origin.host)
        finally:
            self._release()

    def _reset(self, sid: int) -> None:
        self.streams.pop(sid, None)
        try:
            self.h2.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
            self._flush()
        except h2.exceptions.H2Error:
            pass

    # -- the read side --------------------------------------------------------
    async def _read_loop(self) -> None:
        try:
            while True:
                data = await self.reader.read(READ_CHUNK)
                t = self.now()
                if not data:
                    self._broken("the server closed the connection")
                    return
                try:
                    events = self.h2.receive_data(data)
                except h2.exceptions.ProtocolError as e:
                    self._broken(f"HTTP/2 protocol error: {e}")
                    self._flush()
                    return
                for ev in events:
                    self._event(ev, t)
                self._flush()
        except (ConnectionError, OSError, ssl.SSLError) as e:
            self._broken(f"read failed: {why_failed(e)}")
        except Exception as e:  # never leave streams waiting on a dead reader
            self._broken(f"internal error while reading: {type(e).__name__}: {e}")

    def _event(self, ev, t: float) -> None:
        if isinstance(ev, (h2.events.ResponseReceived, h2.events.InformationalResponseReceived)):
            st = self.streams.get(ev.stream_id)
            if st is None:
                return
            if st.rec.first_byte is None:
                st.rec.first_byte = t
                st.rec.phase = "receiving"
            if isinstance(ev, h2.events.ResponseReceived):
                st.rec.response_headers = list(ev.headers)
                status = dict(ev.headers).get(":status", "0")
                st.rec.status = int(status) if status.isdigit() else 0
                try:
                    st.rec.status_text = HTTPStatus(st.rec.status).phrase
                except ValueError:
                    st.rec.status_text = ""
                st.rec.last_byte = t
        elif isinstance(ev, h2.events.DataReceived):
            self.h2.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            st = self.streams.get(ev.stream_id)
            if st is not None:
                st.rec.body_bytes += len(ev.data)
                st.rec.last_byte = t
                if st.keep_body:
                    st.body.append(ev.data)
                if st.on_data is not None and ev.data:
                    st.on_data(ev.data)
        elif isinstance(ev, h2.events.StreamEnded):
            st = self.streams.pop(ev.stream_id, None)
            if st is not None:
                st.rec.last_byte = t
                if not st.fut.done():
                    st.fut.set_result(None)
        elif isinstance(ev, h2.events.StreamReset):
            st = self.streams.pop(ev.stream_id, None)
            if st is not None and not st.fut.done():
                if ev.error_code == h2.errors.ErrorCodes.REFUSED_STREAM and st.rec.first_byte is None:
                    st.fut.set_exception(Retry())
                else:
                    code = getattr(ev.error_code, "name", ev.error_code)
                    st.fut.set_exception(LoadError(f"GET {st.rec.url}: stream reset by the server ({code})",
                                                   step="request", host=self.rec.host))
        elif isinstance(ev, h2.events.RemoteSettingsChanged):
            self.settings_seen = True
            self._grant()
        elif isinstance(ev, h2.events.ConnectionTerminated):
            code = getattr(ev.error_code, "name", ev.error_code)
            self.usable = False
            self.broken = f"GOAWAY ({code}) from the server"
            last = ev.last_stream_id if ev.last_stream_id is not None else 2**31
            for sid in [s for s in self.streams if s > last]:
                st = self.streams.pop(sid)
                if not st.fut.done():
                    st.fut.set_exception(Retry())  # never processed (RFC 9113 §6.8)
            self._fail_waiters(Retry())

    def _broken(self, why: str) -> None:
        self.usable = False
        self.broken = self.broken or why
        exc = LoadError(f"connection {self.rec.id} to {self.rec.host} ({self.rec.remote_ip}:{self.rec.remote_port})"
                        f" broke: {why}", step="request", host=self.rec.host)
        for sid, st in list(self.streams.items()):
            if not st.fut.done():
                st.fut.set_exception(LoadError(f"GET {st.rec.url}: {exc}", step="request", host=self.rec.host))
        self.streams.clear()
        self._fail_waiters(Retry())  # not sent yet: they go on a new connection

    async def close(self) -> None:
        self.usable = False
        if not self.writer.is_closing():
            try:
                self.h2.close_connection()
                self._flush()
            except (h2.exceptions.H2Error, OSError, RuntimeError):
                pass
        await close_writer(self.writer)
        if self._task is not None and not self._task.done():
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass


class H1Connection:
    """One HTTP/1.1 keep-alive connection: one request at a time."""

    def __init__(self, rec: ConnRecord, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, now):
        self.rec = rec
        self.reader, self.writer = reader, writer
        self.now = now
        self.usable = True
        self.used = 0

    async def request(self, rec: RequestRecord, origin: Origin, path: str, extra: list[tuple[str, str]],
                      keep_body: bool, timeout_s: float | None,
                      on_data: Callable[[bytes], None] | None = None) -> bytes:
        self.used += 1
        try:
            return await asyncio.wait_for(self._request(rec, origin, path, extra, keep_body, on_data), timeout_s)
        except asyncio.TimeoutError:
            self.usable = False
            raise LoadError(f"GET {rec.url} on {self.rec.id}: no complete response after {fmt_s(timeout_s)}"
                            f" ({'receiving' if rec.first_byte else 'no response yet'})",
                            step="request", host=origin.host)
        except (asyncio.IncompleteReadError, ConnectionError, OSError, ssl.SSLError) as e:
            self.usable = False
            if rec.first_byte is None and self.used > 1 and isinstance(e, (asyncio.IncompleteReadError,
                                                                            ConnectionError)):
                raise Retry()
            why = "the server closed the connection" if isinstance(e, asyncio.IncompleteReadError) else why_failed(e)
            raise LoadError(f"GET {rec.url} on {self.rec.id}: {why}"
                            f"{' mid-response' if rec.first_byte else ' before responding'}",
                            step="request", host=origin.host)
        except (ValueError, asyncio.LimitOverrunError) as e:
            self.usable = False
            raise LoadError(f"GET {rec.url}: bad HTTP/1.1 response from {origin.host}: {e}",
                            step="request", host=origin.host)

    async def _request(self, rec: RequestRecord, origin: Origin, path: str, extra: list[tuple[str, str]],
                       keep_body: bool, on_data: Callable[[bytes], None] | None = None) -> bytes:
        headers = [("Host", origin.authority)] + [(k.title(), v) for k, v in extra] + [("Connection", "keep-alive")]
        head = f"{rec.method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
        raw = head.encode("latin-1")
        rec.request_headers = headers
        rec.request_headers_size = len(raw)
        rec.http_version = "HTTP/1.1"
        rec.send_start = self.now()
        rec.phase = "sending"
        self.writer.write(raw)
        await self.writer.drain()
        rec.send_end = self.now()
        rec.phase = f"waiting for the response on {self.rec.id}"
        while True:
            first = await self.reader.read(1)
            if not first:
                raise asyncio.IncompleteReadError(b"", None)
            if rec.first_byte is None:
                rec.first_byte = self.now()
                rec.phase = "receiving"
            head_bytes = first + await self.reader.readuntil(b"\r\n\r\n")
            status, reason, version, hdrs = _parse_head(head_bytes)
            if 100 <= status < 200 and status != 101:
                continue  # interim (100 Continue, 103 Early Hints)
            break
        rec.status, rec.status_text, rec.response_headers = status, reason, hdrs
        rec.response_headers_size = len(head_bytes)
        rec.last_byte = self.now()
        h = {k.lower(): v for k, v in hdrs}
        conn_tokens = {t.strip().lower() for t in h.get("connection", "").split(",")}
        if "close" in conn_tokens or version == "HTTP/1.0" and "keep-alive" not in conn_tokens:
            self.usable = False
        body: list[bytes] = []
        if rec.method == "HEAD" or status in (204, 304):
            pass
        elif "chunked" in h.get("transfer-encoding", "").lower():
            while True:
                line = await self.reader.readuntil(b"\r\n")
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while (await self.reader.readuntil(b"\r\n")) != b"\r\n":
                        pass
                    break
                await self._body(rec, size, body, keep_body, on_data)
                if await self.reader.readexactly(2) != b"\r\n":
                    raise ValueError("chunk not followed by CRLF")
        elif "content-length" in h:
            n = int(h["content-length"])
            if n < 0:
                raise ValueError(f"negative Content-Length {n}")
            await self._body(rec, n, body, keep_body, on_data)
        else:  # delimited by close
            self.usable = False
            while True:
                chunk = await self.reader.read(READ_CHUNK)
                if not chunk:
                    break
                rec.body_bytes += len(chunk)
                rec.last_byte = self.now()
                if keep_body:
                    body.append(chunk)
                if on_data is not None:
                    on_data(chunk)
        rec.last_byte = self.now()
        return b"".join(body)

    async def _body(self, rec: RequestRecord, n: int, body: list[bytes], keep: bool,
                    on_data: Callable[[bytes], None] | None = None) -> None:
        left = n
        while left:
            chunk = await self.reader.read(min(left, READ_CHUNK))
            if not chunk:
                raise asyncio.IncompleteReadError(b"", left)
            left -= len(chunk)
            rec.body_bytes += len(chunk)
            rec.last_byte = self.now()
            if keep:
                body.append(chunk)
            if on_data is not None:
                on_data(chunk)

    async def close(self) -> None:
        self.usable = False
        await close_writer(self.writer)


def _parse_head(raw: bytes) -> tuple[int, str, str, list[tuple[str, str]]]:
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ValueError(f"bad status line {lines[0]!r:.80}")
    hdrs = []
    for line in lines[1:]:
        if not line:
            continue
        k, sep, v = line.partition(":")
        if not sep:
            raise ValueError(f"bad header line {line!r:.80}")
        hdrs.append((k.strip(), v.strip()))
    return int(parts[1]), parts[2] if len(parts) > 2 else "", parts[0], hdrs
