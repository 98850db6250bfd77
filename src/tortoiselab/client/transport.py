"""Opening a connection for the page loader: TCP connect to the first
address that answers, then the TLS handshake, timed apart (ConnRecord's tcp
and tls spans); the TLS context, the peer certificate's names, the reason a
step failed in words, and closing. What runs on top (HTTP/2, HTTP/1.1) is in
connections.py.
"""

from __future__ import annotations

import asyncio
import ssl

from .coalesce import sans_from_der, sans_from_peercert
from .errors import LoadError, fmt_s
from .page import Origin
from .timeline import ConnRecord

READ_CHUNK = 256 * 1024
CLOSE_WAIT_S = 0.5


def tls_context(ca_file: str | None, tls_version: str, alpn: list[str]) -> ssl.SSLContext:
    """Verify the chain against ca_file (system store if None) and the host name."""
    try:
        ctx = ssl.create_default_context(cafile=ca_file)
    except (ssl.SSLError, OSError) as e:
        raise LoadError(f"cannot load the CA file {ca_file}: {e}", step="setup")
    if tls_version == "1.2":
        ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    elif tls_version == "1.3":
        ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_3
    ctx.set_alpn_protocols(alpn)
    return ctx


def why_failed(e: BaseException) -> str:
    if isinstance(e, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {e.verify_message}"
    if isinstance(e, ssl.SSLError):
        return e.reason.lower().replace("_", " ") if e.reason else str(e)
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    if isinstance(e, OSError) and e.strerror:
        return e.strerror.lower()
    return str(e) or type(e).__name__


async def open_stream(origin: Origin, ips: list[str], ctx: ssl.SSLContext | None, timeout_s: float,
                      rec: ConnRecord, now, on_phase=lambda phase: None
                      ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """TCP connect to the first address that answers, then the TLS handshake
    (if ctx); fills rec (tcp/tls spans, ALPN, version); on_phase(text) says
    which step it is in."""
    host, port = origin.host, origin.port
    err: LoadError | None = None
    for ip in ips:
        rec.remote_ip, rec.remote_port = ip, port
        on_phase(f"connecting to {host} ({ip}:{port})")
        rec.tcp_start = now()
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(ip, port, limit=READ_CHUNK), timeout_s)
        except asyncio.TimeoutError:
            err = LoadError(f"connect to {host} ({ip}:{port}) timed out after {fmt_s(timeout_s)}",
                            step="connect", host=host)
            continue
        except OSError as e:
            err = LoadError(f"connect to {host} ({ip}:{port}) failed: {why_failed(e)}", step="connect",
                            host=host)
            continue
        rec.tcp = (rec.tcp_start, now())
        sock = writer.get_extra_info("sockname")
        rec.local_port = sock[1] if sock else None
        break
    else:
        assert err is not None
        raise err
    if ctx is None:
        return reader, writer
    on_phase(f"TLS handshake with {host} ({ip}:{port})")
    rec.tls_start = now()
    try:
        await asyncio.wait_for(writer.start_tls(ctx, server_hostname=host, ssl_handshake_timeout=timeout_s + 1),
                               timeout_s)
    except asyncio.CancelledError:  # the page load's own deadline
        writer.transport.abort()
        raise
    except asyncio.TimeoutError:
        writer.transport.abort()
        raise LoadError(f"TLS handshake with {host} ({ip}:{port}) timed out after {fmt_s(timeout_s)}",
                        step="tls", host=host)
    except (ssl.SSLError, OSError, EOFError) as e:
        writer.transport.abort()
        why = why_failed(e)
        if isinstance(e, ssl.SSLError) and any(w in why for w in ("extension", "application protocol")):
            # e.g. a server without h2 picks http/1.1 though we offered h2 only
            why += " (ALPN: the server may not speak the protocol we offered)"
        raise LoadError(f"TLS handshake with {host} ({ip}:{port}) failed: {why}", step="tls", host=host)
    rec.tls = (rec.tls_start, now())
    so: ssl.SSLObject = writer.get_extra_info("ssl_object")
    rec.alpn = so.selected_alpn_protocol()
    rec.tls_version = so.version()
    c = so.cipher()
    rec.cipher = c[0] if c else None
    return reader, writer


def peer_sans(writer: asyncio.StreamWriter) -> tuple[list[str], list[str]]:
    so: ssl.SSLObject | None = writer.get_extra_info("ssl_object")
    if so is None:
        return [], []
    d = so.getpeercert()
    if d and "subjectAltName" in d:
        return sans_from_peercert(d)
    der = so.getpeercert(binary_form=True)
    return sans_from_der(der) if der else ([], [])


async def close_writer(writer: asyncio.StreamWriter) -> None:
    try:
        writer.close()
        await asyncio.wait_for(writer.wait_closed(), CLOSE_WAIT_S)
    except (asyncio.TimeoutError, OSError, ssl.SSLError):
        writer.transport.abort()
    except Exception:
        writer.transport.abort()
