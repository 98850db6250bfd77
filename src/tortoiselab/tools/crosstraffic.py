"""Cross traffic on a shared bottleneck: one process sends every flow, one
process per receiving host fetches all of its flows (a process costs
milliseconds of CPU in the UML guest; threads cost little). Blocking
sockets only: a busy-polling tool would freeze the virtual clock.

    python -m tortoiselab.tools.crosstraffic serve --port P
    python -m tortoiselab.tools.crosstraffic fetch --host H --port P --flows FILE --t0 T [--sample-ms 100]

`serve` prints "listening", then serves every connection in a thread of its
own until its stdin closes: the client's first line is a JSON request
{"cc": algorithm, "bytes": N or null}; it sends N bytes (null: until the
client closes) with that algorithm. `fetch` reads FILE (a JSON list of
flows: id, start_s, cc, nbytes), starts each flow at T + start_s
(CLOCK_MONOTONIC, absolute), counts every flow's bytes, samples the counts
every sample-ms from T, stops every flow when its stdin closes and prints
one JSON line: per flow its bytes, start, first byte and end; the samples.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time

CHUNK = 64 * 1024


def _serve_one(conn: socket.socket) -> None:
    with conn:
        try:
            line = conn.makefile("rb").readline()
            req = json.loads(line)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, req["cc"].encode())
            buf, left = b"\x5a" * CHUNK, req["bytes"]
            while left is None or left > 0:
                n = CHUNK if left is None else min(CHUNK, left)
                conn.sendall(buf[:n])
                left = None if left is None else left - n
            conn.shutdown(socket.SHUT_WR)
            conn.recv(1)
        except (OSError, ValueError, KeyError):
            pass  # the client stopped the flow (bulk) or went away


def serve(port: int) -> None:
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", port))
    ls.listen(128)

    def accept() -> None:
        while True:
            conn, _ = ls.accept()
            threading.Thread(target=_serve_one, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    print("listening", flush=True)
    sys.stdin.read()  # until the lab closes our stdin


class _Flow:
    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self.bytes = 0
        self.first_byte_s: float | None = None
        self.end_s: float | None = None
        self.done = False
        self.error: str | None = None
        self.sock: socket.socket | None = None

    def run(self, host: str, port: int, t0: float, stop: threading.Event) -> None:
        if stop.wait(max(0.0, t0 + self.spec["start_s"] - time.monotonic())):
            return  # stopped before its start: never started
        try:
            self.sock = socket.create_connection((host, port))
            self.sock.sendall((json.dumps({"cc": self.spec["cc"], "bytes": self.spec["nbytes"]}) + "\n").encode())
            while True:
                data = self.sock.recv(CHUNK)
                if not data:
                    self.done = True
                    break
                if self.first_byte_s is None:
                    self.first_byte_s = round(time.monotonic() - t0, 6)
                self.bytes += len(data)
        except OSError as exc:
            if not stop.is_set():
                self.error = str(exc)
        finally:
            self.end_s = round(time.monotonic() - t0, 6)
            if self.sock is not None:
                self.sock.close()

    def result(self) -> dict:
        return {"id": self.spec["id"], "kind": self.spec.get("kind"), "bytes": self.bytes, "done": self.done,
                "start_s": self.spec["start_s"], "first_byte_s": self.first_byte_s, "end_s": self.end_s,
                "cc": self.spec["cc"], "error": self.error}


def _sleep_until(t: float) -> None:
    while (left := t - time.monotonic()) > 0:
        time.sleep(left)


def fetch(host: str, port: int, flows: list[dict], t0: float, sample_ms: int) -> dict:
    stop = threading.Event()
    state = [_Flow(f) for f in flows]
    threads = [threading.Thread(target=f.run, args=(host, port, t0, stop), daemon=True) for f in state]
    for th in threads:
        th.start()
    samples: list[list] = []

    def sample() -> None:
        k = 0
        while not stop.is_set():
            _sleep_until(t0 + k * sample_ms / 1e3)
            samples.append([round(k * sample_ms / 1e3, 6), [f.bytes for f in state]])
            k += 1

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    sys.stdin.read()  # until the lab closes our stdin: the measurement is over
    stop.set()
    for f in state:
        if f.sock is not None:
            try:
                f.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
    for th in threads:
        th.join(timeout=10)
    return {"flows": [f.result() for f in state], "samples": samples, "sample_ms": sample_ms}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="crosstraffic")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--port", type=int, required=True)
    f = sub.add_parser("fetch")
    f.add_argument("--host", required=True)
    f.add_argument("--port", type=int, required=True)
    f.add_argument("--flows", required=True, help="a JSON file: a list of flows")
    f.add_argument("--t0", type=float, required=True, help="CLOCK_MONOTONIC instant the schedule counts from")
    f.add_argument("--sample-ms", type=int, default=100)
    a = ap.parse_args(argv)
    if a.cmd == "serve":
        serve(a.port)
        return 0
    with open(a.flows, encoding="utf-8") as fh:
        flows = json.load(fh)
    print(json.dumps(fetch(a.host, a.port, flows, a.t0, a.sample_ms)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
