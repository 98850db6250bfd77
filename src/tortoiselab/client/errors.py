"""The one error type of a page load: a one-line message naming the host,
the step and why."""

from __future__ import annotations


class LoadError(Exception):
    """A step of the load failed; str() is the message for users."""

    def __init__(self, message: str, *, step: str = "", host: str = ""):
        super().__init__(message)
        self.step = step
        self.host = host


def fmt_s(seconds: float) -> str:
    """10.0 -> '10 s', 2.5 -> '2.5 s'."""
    return f"{seconds:g} s"


class Retry(Exception):
    """The server did not process the request (REFUSED_STREAM, a stream above
    GOAWAY's last id, a kept-alive connection closed before it answered): a
    browser sends it again, on a new connection if this one is gone."""


def quiet_future(fut):
    """Mark a future's exception as retrieved even if nobody awaits it any more
    (a waiter cancelled by the overall timeout)."""
    fut.add_done_callback(lambda f: f.cancelled() or f.exception())
    return fut
