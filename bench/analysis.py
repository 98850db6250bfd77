"""Benchmark of the analysis (figures, not assertions): how long and how much
memory it takes to turn 1,000 runs' records into the runs table, the
statistics and the HTML report, and to analyse a 100 MB server capture.

    .venv/bin/python bench/analysis.py [--runs 1000] [--capture-mb 100] [--work DIR]

Both inputs are made here, from a seed, so that the figures do not depend on
what a results folder happens to hold:

- runs: an experiment of 2 algorithms x 5 loss rates x 4 Stony Brook pages x
  25 repetitions (1,000 runs), expanded by tortoiselab.spec.experiment as a real
  one is, each run folder holding a run.json shaped like the runner's (no
  captures); PLTs drawn around a floor, heavier-tailed with loss;
- capture: one TLS connection on port 443 seen at the server with the lab's
  snaplen (128 bytes): handshake, slow start from 10 segments, then a
  window of one bandwidth-delay product (100 Mbit/s, 100 ms) with one lost
  and fast-retransmitted segment every 50 round trips, ACKs every second
  segment, until the file is --capture-mb large (about 800 MB of payload
  for 100 MB at snaplen 128). The benchmark checks that the analysis finds
  every retransmission it put in.

Memory is the process's peak resident set (VmHWM) during each step, reset
before it (/proc/self/clear_refs), so each figure is that step's own peak.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np

from tortoiselab.spec import experiment
from tortoiselab.analysis import flights
from tortoiselab import report
from tortoiselab.report.context import comparisons, runs_summary
from tortoiselab.host import store

RESULTS: list[tuple[str, float, float]] = []  # (step, seconds, peak RSS MB)


def _rss_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


@contextmanager
def step(name: str) -> Iterator[None]:
    """Time a step and record its own peak resident memory."""
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    except OSError:
        pass
    before = _rss_mb("VmRSS")
    t0 = time.perf_counter()
    yield
    wall = time.perf_counter() - t0
    peak = _rss_mb("VmHWM")
    RESULTS.append((name, wall, peak))
    print(f"  {name:<58} {wall:7.2f} s   peak RSS {peak:5.0f} MB (+{peak - before:.0f} MB)", flush=True)


# --- 1,000 runs ------------------------------------------------------------------

BENCH_EXPERIMENT = """\
name: bench-analysis
description: synthetic records for the analysis benchmark (not a lab run)
repetitions: {reps}
seed: 7
path: {{rtt_ms: 200, loss_pct: 0, rate_mbit: 10}}
server: {{cc: cubic, initcwnd_pkts: 10}}
client: {{page: tiny.html}}
sweep:
  server.cc: [cubic, hybla]
  path.loss_pct: [0, 0.5, 1, 2, 5]
  client.page: [tiny.html, small.html, medium.html, large.html]
"""
FLOOR_MS = {"tiny.html": 1010.0, "small.html": 1425.0, "medium.html": 2870.0, "large.html": 5600.0}


def make_runs(exp_dir: Path, n_runs: int) -> int:
    """Write n_runs run folders (n_runs a multiple of 40) and experiment.yaml."""
    reps = max(1, n_runs // 40)
    exp_dir.mkdir(parents=True)
    (exp_dir / "experiment.yaml").write_text(BENCH_EXPERIMENT.format(reps=reps))
    runs = experiment.expand(experiment.load(exp_dir / "experiment.yaml"))
    rng = np.random.default_rng(7)
    for r in runs:
        page, loss, cc = r.config["client"]["page"], r.path.loss_pct, r.config["server"]["cc"]
        floor = FLOOR_MS[page]
        plt = floor * (1.02 + rng.lognormal(np.log(0.05 + 0.4 * loss * (0.7 if cc == "hybla" else 1.0)), 0.5))
        rec = {"run_id": r.run_id, "experiment": r.experiment, "repetition": r.repetition, "seed": r.seed,
               "point": r.point, "config": r.config, "path": r.path.model_dump(), "ok": True, "error": None,
               "summary": {"plt_ms": round(plt, 3), "floor_ms": floor, "plt_over_floor": round(plt / floor, 4),
                           "ttfb_ms": round(4 * 200 + rng.exponential(20), 3), "bytes": 30_000,
                           "connections_opened": 1, "reuse_ratio": 0.0, "plt_from_request_ms": round(plt - 600, 3),
                           "content_download_ms": round(plt - 800, 3), "dns_ms": 200.1},
               "connections": [{"tcp_rtt_ms": 200.06, "tls_rtts": 1}],
               "capture": {"server": {"dropped_by_kernel": 0}, "client": {"dropped_by_kernel": 0}},
               "fidelity": [{"quantity": "rtt", "configured": 200, "measured": 200.06, "low": 196, "high": 214,
                             "unit": "ms", "ok": True, "note": ""}],
               "meta": {"backend": "uml", "clock": "virtual", "kernel_release": "6.12.57-tortoise",
                        "switch": "ovs", "sim_seconds": 14.2, "wall_seconds": 18.5,
                        "started": "2026-01-01T00:00:00+00:00", "ended": "2026-01-01T00:00:18+00:00",
                        "tools": {"python": "3.11", "tortoiselab_git": "bench"}}}
        d = exp_dir / r.run_id
        d.mkdir()
        (d / "run.json").write_text(json.dumps(rec, indent=1, sort_keys=True))
    return len(runs)


def bench_runs(work: Path, n_runs: int) -> None:
    exp_dir = work / "bench-analysis"
    n = make_runs(exp_dir, n_runs)
    print(f"{n} runs' records in {exp_dir} ({sum(p.stat().st_size for p in exp_dir.glob('*/run.json')) / 1e6:.1f} MB "
          f"of run.json)")
    with step(f"runs table: {n} run.json -> runs.parquet"):
        store.rebuild_table(exp_dir)
    with step("load the experiment (table, records, swept axes)"):
        ctx = report.load_context(exp_dir)
    with step(f"p50/p90/mean with bootstrap CIs, {ctx.df.groupby(ctx.axes).ngroups} groups"):
        runs_summary(ctx)
    with step("cubic vs hybla per stratum: tests, CIs, effect sizes, Holm"):
        comp = comparisons(ctx)
    with step("PLT / floor per object-size class"):
        report.floor_table(ctx)
    with step("the whole HTML report (tables, figures, embedding)"):
        out = report.write_report(exp_dir)
    print(f"  ({len(comp)} comparisons; report {out.stat().st_size / 1e6:.1f} MB)")


# --- a 100 MB capture ----------------------------------------------------------------

SNAPLEN, MSS = 128, 1448
SRV, CLI = bytes([10, 0, 0, 2]), bytes([10, 0, 0, 1])
_ETH = bytes(6) + bytes(6) + b"\x08\x00"


def _frame(src: bytes, dst: bytes, sport: int, dport: int, seq: int, ack: int, flags: int, payload: int,
           head: bytes = b"") -> bytes:
    """Ethernet + IPv4 + TCP (timestamps option) headers, the payload's first
    bytes `head` and zeros, cut at the snaplen (lengths in the headers are
    the real ones)."""
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + 32 + payload, 0, 0x4000, 64, 6, 0, src, dst)
    tcp = struct.pack("!HHIIHHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, (8 << 12) | flags,
                      65535, 0, 0) + b"\x01\x01\x08\x0a" + bytes(8)
    buf = _ETH + ip + tcp + head
    return (buf + bytes(max(0, min(SNAPLEN, len(buf) + payload - len(head)) - len(buf))))[:SNAPLEN]


def make_capture(path: Path, target_mb: float, rtt_s: float = 0.1, rate_mbit: float = 100.0) -> dict:
    """Write the synthetic server-side capture; return what it contains."""
    per_seg = (MSS + 66) * 8 / (rate_mbit * 1e6)
    bdp = int(rtt_s / per_seg)
    cport, sport = 40000, 443
    c_isn, s_isn = 1000, 5000
    out = open(path, "wb")
    out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, SNAPLEN, 1))
    size = 24

    def w(ts: float, frame: bytes, wire: int) -> None:
        nonlocal size
        sec = int(ts)
        out.write(struct.pack("<IIII", sec, int((ts - sec) * 1e6), len(frame), wire))
        out.write(frame)
        size += 16 + len(frame)

    SYN, ACK, PSH = 0x02, 0x10, 0x08
    t = 1.0
    w(t, _frame(CLI, SRV, cport, sport, c_isn, 0, SYN, 0), 74)
    w(t + 1e-5, _frame(SRV, CLI, sport, cport, s_isn, c_isn + 1, SYN | ACK, 0), 74)
    t += rtt_s
    w(t, _frame(CLI, SRV, cport, sport, c_isn + 1, s_isn + 1, ACK, 0), 66)
    hello = 517
    w(t + 1e-5, _frame(CLI, SRV, cport, sport, c_isn + 1, s_isn + 1, ACK | PSH, hello,
                       b"\x16\x03\x01" + struct.pack("!H", hello - 5) + b"\x01"), 66 + hello)
    cseq = c_isn + 1 + hello
    sh = 1400  # the server's handshake flight, then (a round trip later) the client's Finished and request
    w(t + 2e-5, _frame(SRV, CLI, sport, cport, s_isn + 1, cseq, ACK | PSH, sh,
                       b"\x16\x03\x03" + struct.pack("!H", sh - 5) + b"\x02"), 66 + sh)
    t += rtt_s
    req = 120
    w(t, _frame(CLI, SRV, cport, sport, cseq, s_isn + 1 + sh, ACK | PSH, req,
                b"\x17\x03\x03" + struct.pack("!H", req - 5)), 66 + req)
    cseq += req
    nxt = s_isn + 1 + sh  # next new server byte
    t += 1e-4
    cwnd, rounds, retrans, segments = 10, 0, 0, 0
    target = target_mb * 1e6
    while size < target:
        rounds += 1
        lose = rounds % 50 == 0 and cwnd >= bdp  # one loss every 50 round trips once the pipe is full
        first = nxt
        lost_seq = first + (cwnd // 2) * MSS if lose else None
        for i in range(cwnd):  # the flight
            w(t + i * per_seg, _frame(SRV, CLI, sport, cport, nxt, cseq, ACK | PSH, MSS), 66 + MSS)
            nxt += MSS
            segments += 1
        # its ACKs, a round trip later, one per two segments; a loss holds the ACK at the hole
        t_ack = t + rtt_s
        dup = 0
        for i in range(1, cwnd + 1, 2):
            acked = first + min(i + 1, cwnd) * MSS
            if lost_seq is not None and acked > lost_seq:
                acked = lost_seq
                dup += 1
            w(t_ack + i * per_seg, _frame(CLI, SRV, cport, sport, cseq, acked, ACK, 0), 66)
            if dup == 3:  # fast retransmit
                w(t_ack + i * per_seg + 1e-6, _frame(SRV, CLI, sport, cport, lost_seq, cseq, ACK | PSH, MSS),
                  66 + MSS)
                retrans += 1
        if lost_seq is not None:  # the retransmission's ACK covers the flight
            t_ack += rtt_s / 2
            w(t_ack + cwnd * per_seg, _frame(CLI, SRV, cport, sport, cseq, nxt, ACK, 0), 66)
            cwnd = max(10, cwnd // 2)
        else:
            cwnd = min(2 * cwnd, bdp)
        t = t_ack + cwnd * per_seg
    out.close()
    return {"bytes": size, "segments": segments, "retransmissions": retrans, "rounds": rounds,
            "payload_mb": (nxt - s_isn - 1) / 1e6}


def bench_capture(work: Path, target_mb: float) -> None:
    pcap = work / "bench-server.pcap"
    t0 = time.perf_counter()
    made = make_capture(pcap, target_mb)
    print(f"capture {pcap}: {made['bytes'] / 1e6:.1f} MB, {made['segments']:,} data segments "
          f"({made['payload_mb']:.0f} MB of payload), {made['retransmissions']} retransmissions put in "
          f"(made in {time.perf_counter() - t0:.1f} s)")
    mb = pcap.stat().st_size / 1e6
    with step(f"flights.analyze_pcap, {mb:.0f} MB, summary only (keep_series=False)"):
        (lean,) = flights.analyze_pcap(pcap, keep_series=False)
    with step(f"flights.analyze_pcap, {mb:.0f} MB, with the time-sequence series"):
        (conn,) = flights.analyze_pcap(pcap)
    with step("flights per round trip of that connection"):
        fl = flights.flights(conn)
    found = len(conn["retransmissions"])
    print(f"  found {found} retransmissions (put in {made['retransmissions']}), {len(fl)} flights, "
          f"goodput {conn['goodput_mbit']} Mbit/s; summary-only run agrees: "
          f"{len(lean['retransmissions']) == found}")
    if found != made["retransmissions"]:
        print("  MISMATCH: the analysis did not find the retransmissions the capture holds", file=sys.stderr)
    print(f"  ({made['segments'] / max(RESULTS[-3][1], 1e-9):,.0f} data segments/s; load average "
          f"{Path('/proc/loadavg').read_text().split()[0]} on {os.cpu_count()} CPUs)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1000, help="runs' records to analyse (multiple of 40)")
    ap.add_argument("--capture-mb", type=float, default=100, help="size of the capture to analyse")
    ap.add_argument("--work", help="keep the inputs here (default: a temporary folder, removed)")
    a = ap.parse_args(argv)
    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="tortoise-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        print(f"== analysis of {a.runs} runs' summaries ==")
        bench_runs(work, a.runs)
        print(f"== analysis of a {a.capture_mb:g} MB capture ==")
        bench_capture(work, a.capture_mb)
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
