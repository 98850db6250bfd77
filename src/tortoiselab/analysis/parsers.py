"""Parsers for tool output: pure functions, tested on captured output in tests/data/."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tortoiselab.spec import cols

_PING_RTT = re.compile(r"icmp_seq=(\d+) ttl=\d+ time=([0-9.]+) ms")
_PING_SUMMARY = re.compile(r"(\d+) packets transmitted, (\d+) received")
# the summary has microsecond resolution; per-reply lines drop decimals >= 100 ms
_PING_STATS = re.compile(r"rtt min/avg/max/mdev = ([0-9.]+)/([0-9.]+)/([0-9.]+)/([0-9.]+) ms")


@dataclass(frozen=True)
class PingResult:
    transmitted: int
    received: int
    rtts_ms: tuple[float, ...]
    min_ms: float | None = None
    avg_ms: float | None = None
    max_ms: float | None = None


def parse_ping(text: str) -> PingResult:
    """Parse iputils ping output (without -q): per-reply RTTs and the totals."""
    rtts = tuple(float(m.group(2)) for m in _PING_RTT.finditer(text))
    m = _PING_SUMMARY.search(text)
    if not m:
        raise ValueError("ping output has no summary line ('N packets transmitted, M received')")
    st = _PING_STATS.search(text)
    stats = tuple(float(x) for x in st.groups()[:3]) if st else (None, None, None)
    return PingResult(int(m.group(1)), int(m.group(2)), rtts, *stats)


@dataclass(frozen=True)
class SsSocket:
    local: str
    peer: str
    algorithm: str | None
    cwnd: int | None
    mss: int | None
    rtt_ms: float | None


_SS_ALGO = re.compile(r"^\s*([a-z][a-z0-9_\-]*)\s+(?:wscale|rto|ts|sack|ecn|ecnseen|fastopen|cwnd)\b")
_SS_KV = {
    "cwnd": re.compile(r"\bcwnd:(\d+)"),
    "mss": re.compile(r"\bmss:(\d+)"),
    "rtt": re.compile(r"\brtt:([0-9.]+)/"),
}


def parse_ss_ti(text: str) -> list[SsSocket]:
    """Parse `ss -t -i -n` output: one socket line (addresses) followed by an
    indented info line that starts with the congestion control algorithm's
    name (e.g. ``cubic wscale:7,7 rto:404 ...``)."""
    out: list[SsSocket] = []
    lines = [ln for ln in text.splitlines() if ln.strip()]
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith(("Recv-Q", "State", "Netid")):
            i += 1
            continue
        fields = ln.split()
        # socket line: [State] Recv-Q Send-Q Local Peer
        addrs = [f for f in fields if ":" in f]
        if len(addrs) >= 2 and not ln.startswith((" ", "\t")):
            info = lines[i + 1] if i + 1 < len(lines) and lines[i + 1].startswith((" ", "\t")) else ""
            algo_m = _SS_ALGO.match(info)
            vals = {k: r.search(info) for k, r in _SS_KV.items()}
            out.append(SsSocket(
                local=addrs[-2], peer=addrs[-1],
                algorithm=algo_m.group(1) if algo_m else None,
                cwnd=int(vals["cwnd"].group(1)) if vals["cwnd"] else None,
                mss=int(vals["mss"].group(1)) if vals["mss"] else None,
                rtt_ms=float(vals["rtt"].group(1)) if vals["rtt"] else None,
            ))
            i += 2 if info else 1
        else:
            i += 1
    return out


_NGHTTP_ROW = re.compile(r"^\s*\d+\s+\+([0-9.]+)(us|ms|s)\s+\+([0-9.]+)(us|ms|s)\s+\S+\s+(\d{3})\s+(\S+)\s+(\S+)")
_UNIT_MS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def parse_nghttp_stats(text: str) -> dict:
    """`nghttp -s` request timings (relative to connectEnd): per request the
    response end, request start, status and path; and the page load time as
    the Stony Brook paper defines it, first request start to last byte."""
    rows = []
    for line in text.splitlines():
        m = _NGHTTP_ROW.match(line)
        if m:
            rows.append({"response_end_ms": float(m.group(1)) * _UNIT_MS[m.group(2)],
                         "request_start_ms": float(m.group(3)) * _UNIT_MS[m.group(4)],
                         "status": int(m.group(5)), "path": m.group(7)})
    if not rows:
        return {"requests": 0, cols.PLT: None, "rows": []}
    plt = max(r["response_end_ms"] for r in rows) - min(r["request_start_ms"] for r in rows)
    return {"requests": len(rows), cols.PLT: round(plt, 3), "rows": rows}


_H2LOAD_FINISHED = re.compile(r"finished in ([0-9.]+)(ms|s), ([0-9.]+) req/s, ([0-9.]+)([KMG]?B)/s")
_H2LOAD_REQ = re.compile(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed"
                         r"(?:, (\d+) errored, (\d+) timeout)?")
_H2LOAD_STATUS = re.compile(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx")
_H2LOAD_TRAFFIC = re.compile(r"traffic: \S+ \((\d+)\) total, .*?\S+ \((\d+)\) data")


def parse_h2load(text: str) -> dict:
    """h2load's summary: duration, requests, bytes; throughput of the
    response bodies in Mbit/s (the Stony Brook paper's throughput metric);
    the status classes and errored / timed-out requests (h2load counts a
    404 as "succeeded": analysis/whole.py checks the statuses)."""
    f, r, t = _H2LOAD_FINISHED.search(text), _H2LOAD_REQ.search(text), _H2LOAD_TRAFFIC.search(text)
    if not (f and r and t):
        raise ValueError("h2load output lacks its summary ('finished in', 'requests:', 'traffic:')")
    secs = float(f.group(1)) / (1000.0 if f.group(2) == "ms" else 1.0)
    data = int(t.group(2))
    return {"seconds": secs, "req_per_s": float(f.group(3)), "requests": int(r.group(1)),
            "succeeded": int(r.group(4)), "failed": int(r.group(5)), "total_bytes": int(t.group(1)),
            "data_bytes": data, cols.THROUGHPUT: round(data * 8 / secs / 1e6, 4) if secs > 0 else None,
            "errored": int(r.group(6) or 0), "timeout": int(r.group(7) or 0), **_h2load_statuses(text)}


def _h2load_statuses(text: str) -> dict:
    m = _H2LOAD_STATUS.search(text)
    if not m:
        return {}
    return {f"status_{c}": int(v) for c, v in zip(("2xx", "3xx", "4xx", "5xx"), m.groups())}


def parse_tc_filter_drops(text: str) -> int | None:
    """Packets dropped by the actions of `tc -s filter show` (the sum over
    every "(dropped N," counter); None when the text has no counters."""
    counts = [int(x) for x in re.findall(r"\(dropped (\d+),", text)]
    return sum(counts) if counts else None


_QDISC = re.compile(r"^qdisc (\S+) (\S+) .*?\n\s*Sent (\d+) bytes (\d+) pkt \(dropped (\d+),", re.M)


def parse_qdisc_drops(text: str) -> dict[str, tuple[str, int]]:
    """Each qdisc of `tc -s qdisc show dev DEV` by its handle ("1:",
    "11:"): (its kind, the packets it has dropped). A parent counts its
    children's drops too: netem's "dropped" holds the traced link's (its
    child's) as well as its own random losses."""
    return {m.group(2): (m.group(1), int(m.group(5))) for m in _QDISC.finditer(text)}
