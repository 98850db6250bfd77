"""One-way loss probe: numbered UDP datagrams, counted at the receiver.

    python -m tortoiselab.tools.udpprobe recv --port P --idle S
    python -m tortoiselab.tools.udpprobe send --host H --port P --count N --interval-ms I

The receiver prints "listening", then counts distinct sequence numbers
(and, as reordered, those that arrive after a higher one) until no datagram
has arrived for S seconds (after the first one) and prints a JSON line.
The sender paces its datagrams well below the bottleneck rate so that every
loss is the path's loss model's (random or bursty), not a queue overflow.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import time

MAGIC = b"TLP1"


def recv(port: int, idle_s: float, count: int | None = None, first_wait_s: float = 60.0) -> dict:
    seen: set[int] = set()
    reordered, highest = 0, -1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
        s.bind(("0.0.0.0", port))
        print("listening", flush=True)
        s.settimeout(first_wait_s)
        while True:
            try:
                data = s.recv(2048)
            except socket.timeout:
                break
            if data[:4] == MAGIC:
                seq = struct.unpack("!I", data[4:8])[0]
                if seq < highest and seq not in seen:  # overtaken by a later-sent probe
                    reordered += 1
                highest = max(highest, seq)
                seen.add(seq)
                s.settimeout(idle_s)
    out = {"received": len(seen), "max_seq": max(seen) if seen else -1, "reordered": reordered}
    if count is not None:
        out["lost_seqs"] = [i for i in range(count) if i not in seen]
    return out


def send(host: str, port: int, count: int, interval_ms: float, size: int = 100) -> dict:
    pad = b"\0" * max(0, size - 8)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((host, port))
        start = time.monotonic()
        for seq in range(count):
            s.send(MAGIC + struct.pack("!I", seq) + pad)
            # absolute schedule: no drift from the cost of sending
            delay = start + (seq + 1) * interval_ms / 1e3 - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    return {"sent": count, "seconds": time.monotonic() - start}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="udpprobe")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("recv")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--idle", type=float, default=2.0)
    r.add_argument("--count", type=int, default=None, help="expected count: report which were lost")
    t = sub.add_parser("send")
    t.add_argument("--host", required=True)
    t.add_argument("--port", type=int, required=True)
    t.add_argument("--count", type=int, required=True)
    t.add_argument("--interval-ms", type=float, default=2.0)
    a = ap.parse_args(argv)
    out = recv(a.port, a.idle, a.count) if a.cmd == "recv" else send(a.host, a.port, a.count, a.interval_ms)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
