"""The HTTP/2 connection against a scripted h2 server over a socketpair
(no network, no TLS): stream slots follow SETTINGS_MAX_CONCURRENT_STREAMS,
the client's windows are large, refused streams come back as Retry, a
broken connection fails its streams with a clear message."""

import asyncio
import socket
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings
import pytest

from tortoiselab.client.connections import CONN_WINDOW, STREAM_WINDOW, H2Connection
from tortoiselab.client.errors import LoadError, Retry
from tortoiselab.client.page import origin_of
from tortoiselab.client.timeline import ConnRecord, RequestRecord

ORIGIN = origin_of("https://www.lab.test/")


class Server:
    """Answers GET /<n> with n bytes after `delay` seconds; REFUSED_STREAM for
    paths in `refuse`; hangs up on /hangup."""

    def __init__(self, sock, max_streams=100, delay=0.01, refuse=()):
        self.sock, self.max_streams, self.delay, self.refuse = sock, max_streams, delay, set(refuse)
        self.open = self.max_open = 0
        self.client_settings: dict = {}
        self.paths: list[str] = []
        self.authorities: list[str] = []
        self.conn_window_seen = 0

    async def run(self):
        reader, self.writer = await asyncio.open_connection(sock=self.sock)
        c = self.c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        c.local_settings = h2.settings.Settings(client=False, initial_values={
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: self.max_streams})
        c.initiate_connection()
        self.writer.write(c.data_to_send())
        loop = asyncio.get_running_loop()
        while True:
            data = await reader.read(65536)
            if not data:
                break
            for ev in c.receive_data(data):
                if isinstance(ev, h2.events.RemoteSettingsChanged):
                    self.client_settings.update({k: v.new_value for k, v in ev.changed_settings.items()})
                elif isinstance(ev, h2.events.WindowUpdated) and ev.stream_id == 0:
                    self.conn_window_seen = max(self.conn_window_seen, c.outbound_flow_control_window)
                elif isinstance(ev, h2.events.RequestReceived):
                    h = dict(ev.headers)
                    self.paths.append(h[":path"])
                    self.authorities.append(h[":authority"])
                    if h[":path"] in self.refuse:
                        c.reset_stream(ev.stream_id, h2.errors.ErrorCodes.REFUSED_STREAM)
                    elif h[":path"] == "/hangup":
                        self.writer.close()
                        return
                    else:
                        self.open += 1
                        self.max_open = max(self.max_open, self.open)
                        loop.call_later(self.delay, self.respond, ev.stream_id, int(h[":path"][1:]))
            self.writer.write(c.data_to_send())

    def respond(self, sid, n):
        c = self.c
        c.send_headers(sid, [(":status", "200"), ("content-type", "application/octet-stream"),
                             ("content-length", str(n))])
        body = b"x" * n
        # never more than the client's window allows: the test's big bodies fit
        assert c.local_flow_control_window(sid) >= n
        step = c.max_outbound_frame_size
        for i in range(0, n, step):
            c.send_data(sid, body[i:i + step])
        c.end_stream(sid)
        self.open -= 1
        self.writer.write(c.data_to_send())


async def _with_server(server_kw, client_fn):
    a, b = socket.socketpair()
    srv = Server(b, **server_kw)
    task = asyncio.create_task(srv.run())
    reader, writer = await asyncio.open_connection(sock=a)
    conn = H2Connection(ConnRecord("c1", str(ORIGIN), ORIGIN.host, "10.0.0.2", 443), reader, writer, time.monotonic)
    conn.start()
    try:
        return srv, await client_fn(conn)
    finally:
        await conn.close()
        await asyncio.wait_for(task, 5)


def _rec(path):
    return RequestRecord(f"https://www.lab.test{path}", str(ORIGIN), "image", start=time.monotonic())


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


def test_streams_respect_max_concurrent_streams_and_windows_are_large():
    sizes = [100, 70000, 5, 200000, 1, 3000, 1_000_000, 42]
    recs = [_rec(f"/{n}") for n in sizes]

    async def client(conn):
        # like the loader: the page first (the server's SETTINGS arrive with
        # it; before them the client assumes 100 streams, as Chrome does)
        first = await conn.request(recs[0], ORIGIN, f"/{sizes[0]}", [("user-agent", "t")], True, 10)
        return [first] + list(await asyncio.gather(*(conn.request(r, ORIGIN, f"/{n}", [("user-agent", "t")], True, 10)
                                                     for r, n in zip(recs[1:], sizes[1:]))))

    srv, bodies = run(_with_server({"max_streams": 2}, client))
    assert [len(b) for b in bodies] == sizes
    assert srv.max_open == 2
    assert sorted(srv.paths) == sorted(f"/{n}" for n in sizes)
    assert set(srv.authorities) == {"www.lab.test"}
    # the client is never what limits the sender
    assert srv.client_settings[h2.settings.SettingCodes.INITIAL_WINDOW_SIZE] == STREAM_WINDOW
    assert srv.client_settings[h2.settings.SettingCodes.ENABLE_PUSH] == 0
    assert srv.conn_window_seen >= CONN_WINDOW - 65535
    for r, n in zip(recs, sizes):
        assert r.status == 200 and r.body_bytes == n and r.http_version == "h2"
        assert r.start <= r.send_start <= r.send_end <= r.first_byte <= r.last_byte
        assert r.request_headers_size > 9  # a HEADERS frame: 9-byte header + HPACK block
        assert (":authority", "www.lab.test") in r.request_headers


def test_all_streams_at_once_when_the_server_allows():
    recs = [_rec(f"/{i + 1}") for i in range(12)]

    async def client(conn):
        return await asyncio.gather(*(conn.request(r, ORIGIN, f"/{i + 1}", [], False, 10)
                                      for i, r in enumerate(recs)))

    srv, bodies = run(_with_server({"max_streams": 100, "delay": 0.05}, client))
    assert srv.max_open == 12
    assert bodies == [b""] * 12  # keep_body=False: counted, not kept
    assert [r.body_bytes for r in recs] == list(range(1, 13))


def test_refused_stream_is_a_retry():
    async def client(conn):
        with pytest.raises(Retry):
            await conn.request(_rec("/7"), ORIGIN, "/7", [], False, 5)
        return await conn.request(_rec("/8"), ORIGIN, "/8", [], True, 5)

    _, body = run(_with_server({"refuse": ["/7"]}, client))
    assert body == b"x" * 8


def test_broken_connection_fails_streams_with_the_host_named():
    async def client(conn):
        with pytest.raises(LoadError) as e:
            await conn.request(_rec("/hangup"), ORIGIN, "/hangup", [], False, 5)
        assert not conn.usable
        with pytest.raises(Retry):  # a new request goes to a new connection
            await conn.request(_rec("/1"), ORIGIN, "/1", [], False, 5)
        return str(e.value)

    _, msg = run(_with_server({}, client))
    assert msg.startswith("GET https://www.lab.test/hangup: connection c1 to www.lab.test (10.0.0.2:443) broke: ")


def test_request_timeout_names_the_url():
    async def client(conn):
        with pytest.raises(LoadError) as e:
            await conn.request(_rec("/5"), ORIGIN, "/5", [], False, 0.05)
        return str(e.value)

    _, msg = run(_with_server({"delay": 1.0}, client))
    assert msg == "GET https://www.lab.test/5 on c1: no complete response after 0.05 s (no response yet)"
