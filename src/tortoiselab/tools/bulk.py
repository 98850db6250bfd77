"""Bulk TCP transfer, server to client, with blocking sockets only.

Blocking matters on the virtual clock: simulated time moves only while the
guest is idle, so a busy-polling tool (iperf3 was seen to) freezes it.

    python -m tortoiselab.tools.bulk serve --port P --seconds S
    python -m tortoiselab.tools.bulk serve --port P --bytes B
    python -m tortoiselab.tools.bulk fetch --host H --port P

`serve` prints "listening" once ready, accepts one connection, sends for
S seconds of (guest) time, closes, and prints a JSON line. `fetch` reads to
EOF and prints a JSON line with bytes and times.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time

CHUNK = 64 * 1024


def serve(port: int, seconds: float, nbytes: int | None = None) -> dict:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as ls:
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("0.0.0.0", port))
        ls.listen(1)
        print("listening", flush=True)
        conn, peer = ls.accept()
        with conn:
            cc = conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()
            buf = b"\xa5" * CHUNK
            sent = 0
            start = time.monotonic()
            if nbytes is not None:  # exactly nbytes, however long it takes
                while sent < nbytes:
                    chunk = buf[:min(CHUNK, nbytes - sent)]
                    conn.sendall(chunk)
                    sent += len(chunk)
                # the client closes first, once it has every byte: until then
                # this socket stays ESTABLISHED (no FIN queued behind the data),
                # so the kernel's per-ACK tracepoint sees the whole transfer
                conn.recv(1)
            else:
                while time.monotonic() - start < seconds:
                    conn.sendall(buf)
                    sent += len(buf)
            conn.shutdown(socket.SHUT_WR)
            conn.recv(1)  # wait for the client's close
    return {"bytes_sent": sent, "seconds": time.monotonic() - start, "cc": cc, "peer": peer[0]}


def fetch(host: str, port: int, nbytes: int | None = None) -> dict:
    with socket.create_connection((host, port), timeout=120) as s:
        start = time.monotonic()
        got = 0
        first = None
        while nbytes is None or got < nbytes:
            data = s.recv(CHUNK)
            if not data:
                break
            if first is None:
                first = time.monotonic() - start
            got += len(data)
        end = time.monotonic() - start
        mss = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG)
    return {"bytes": got, "first_byte_s": first, "seconds": end, "mss": mss}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bulk")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--seconds", type=float, default=10.0)
    s.add_argument("--bytes", type=int, default=None, help="send exactly this many bytes instead")
    f = sub.add_parser("fetch")
    f.add_argument("--host", required=True)
    f.add_argument("--port", type=int, required=True)
    f.add_argument("--bytes", type=int, default=None, help="close after this many bytes")
    a = ap.parse_args(argv)
    out = serve(a.port, a.seconds, a.bytes) if a.cmd == "serve" else fetch(a.host, a.port, a.bytes)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
