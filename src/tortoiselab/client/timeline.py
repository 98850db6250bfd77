"""What happened during a load, as plain records on one monotonic clock.

The loader fills these in; the HAR and the summary are pure functions of
them (har.py, summary.py), so both are tested on synthetic timelines.
All instants are time.monotonic() seconds (the guest's clock, which the lab
may run virtually); `Clock` maps them to wall-clock datetimes for the HAR.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable

Span = tuple[float, float]


@dataclass
class Clock:
    """One anchor pair (monotonic, wall) taken at the start of the load: every
    wall time in the HAR is anchor + monotonic offset, so all of them follow
    the monotonic clock."""

    mono0: float
    wall0: datetime
    now: Callable[[], float] = time.monotonic

    @classmethod
    def start(cls, now: Callable[[], float] = time.monotonic) -> "Clock":
        return cls(now(), datetime.now(timezone.utc), now)

    def wall(self, t: float) -> datetime:
        return self.wall0 + timedelta(seconds=t - self.mono0)


@dataclass
class DnsLookup:
    host: str
    source: str  # map | dns | system | literal
    start: float
    end: float | None = None
    addresses: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class ConnRecord:
    id: str
    origin: str
    host: str  # the host the connection was opened for (SNI)
    remote_ip: str
    remote_port: int
    tcp: Span | None = None
    tls: Span | None = None
    tcp_start: float | None = None
    tls_start: float | None = None
    alpn: str | None = None
    tls_version: str | None = None
    cipher: str | None = None
    local_port: int | None = None
    requests: int = 0
    origins: list[str] = field(default_factory=list)  # origins served (first = its own)
    error: str | None = None


@dataclass
class RequestRecord:
    url: str
    origin: str
    kind: str  # document | image | script | stylesheet
    start: float
    method: str = "GET"
    phase: str = "queued"  # where it is, for timeout messages
    dns: Span | None = None  # only the request that made the lookup
    tcp: Span | None = None  # only the request that opened the connection
    tls: Span | None = None
    send_start: float | None = None
    send_end: float | None = None
    first_byte: float | None = None
    last_byte: float | None = None
    end: float | None = None  # when it finished or failed
    http_version: str = ""
    status: int = 0
    status_text: str = ""
    request_headers: list[tuple[str, str]] = field(default_factory=list)
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    request_headers_size: int = -1
    response_headers_size: int = -1
    body_bytes: int = 0
    conn_id: str | None = None
    server_ip: str | None = None
    coalesced: bool = False  # sent on a connection opened for another origin
    superseded: bool = False  # answered 421 Misdirected Request and sent again
    attempts: int = 0  # > 1: refused stream / closed connection, sent again
    priority: str | None = None  # schedule chromium: the priority Chromium would give it (client/schedule.py)
    error: str | None = None

    def header(self, name: str) -> str | None:
        name = name.lower()
        for k, v in self.response_headers:
            if k.lower() == name:
                return v
        return None

    def length_problem(self) -> str | None:
        """Why the body received is not the whole body: its byte count differs
        from the response's Content-Length (RFC 9110 §8.6; a list of equal
        values counts as one), or that is not a number. None when they
        agree or there is no Content-Length (a body delimited by the end of
        the stream or of the connection), or a Transfer-Encoding overrides it
        (RFC 9112 §6.3)."""
        value = self.header("content-length")
        if value is None or self.status in (204, 304) or self.header("transfer-encoding") is not None:
            return None
        values = {v.strip() for v in value.split(",")}
        if len(values) != 1 or not (v := next(iter(values))).isascii() or not v.isdigit():
            return f"Content-Length {value!r} is not one number of bytes"
        want = int(v)
        if self.body_bytes != want:
            return f"received {self.body_bytes} body bytes, the Content-Length is {want}"
        return None

    @property
    def complete(self) -> bool:
        return self.error is None and self.last_byte is not None


def ms(seconds: float) -> float:
    return round(seconds * 1000.0, 3)


def timings(r: RequestRecord) -> dict[str, float]:
    """HAR timings in ms. dns/connect/ssl are -1 unless this request made the
    lookup / opened the connection; connect includes ssl (HAR 1.2). Phases a
    failed request never reached are 0 (send/wait/receive) or -1; the time up
    to the failure lands in the phase it was in."""
    end = r.end if r.end is not None else (r.last_byte if r.last_byte is not None else r.start)
    dns = ms(r.dns[1] - r.dns[0]) if r.dns else -1.0
    connect = -1.0
    if r.tcp:
        connect = ms((r.tls[1] if r.tls else r.tcp[1]) - r.tcp[0])
    ssl = ms(r.tls[1] - r.tls[0]) if r.tls else -1.0
    setup = max(dns, 0.0) + max(connect, 0.0)
    send = wait = receive = 0.0
    if r.send_start is None:
        blocked = ms(end - r.start) - setup
    else:
        blocked = ms(r.send_start - r.start) - setup
        s_end = r.send_end if r.send_end is not None else end
        send = ms(s_end - r.send_start)
        if r.send_end is not None:
            fb = r.first_byte if r.first_byte is not None else end
            wait = ms(fb - r.send_end)
            if r.first_byte is not None:
                lb = r.last_byte if r.last_byte is not None else end
                receive = ms(lb - r.first_byte)
    blocked = round(max(blocked, 0.0), 3)
    return {"blocked": blocked, "dns": dns, "connect": connect, "send": max(send, 0.0),
            "wait": max(wait, 0.0), "receive": max(receive, 0.0), "ssl": ssl}


def total_time(t: dict[str, float]) -> float:
    """HAR entry time: the sum of the non-negative timings, ssl excluded (it is
    part of connect)."""
    return round(sum(v for k, v in t.items() if k != "ssl" and v > 0), 3)
