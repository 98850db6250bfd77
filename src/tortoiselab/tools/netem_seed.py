"""Seed netem's random draws (loss, jitter) over rtnetlink.

Linux 6.12 lets netem take the seed of its PRNG (TCA_NETEM_PRNG_SEED, a
u64) so that the same seed gives the same loss pattern; Debian 12's `tc`
(iproute2 6.1) does not know the keyword. This tool sends the netem "change"
itself: the complete parameter set (as tc would encode it) plus the seed.
Change keeps the delay distribution table tc installed.

    python -m tortoiselab.tools.netem_seed --dev s2-eth1 --limit 257 \
        --latency-ns 100000000 --loss-pct 1 --rate-bps 10000000 --seed 42
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import sys

RTM_NEWQDISC = 36
NLM_F_REQUEST, NLM_F_ACK = 0x1, 0x4
NLMSG_ERROR = 2
TCA_KIND, TCA_OPTIONS = 1, 2
TCA_NETEM_RATE, TCA_NETEM_RATE64 = 6, 8
TCA_NETEM_LATENCY64, TCA_NETEM_JITTER64 = 10, 11
TCA_NETEM_PRNG_SEED = 14
TC_H_ROOT = 0xFFFFFFFF
U32_MAX = 0xFFFFFFFF


def _attr(kind: int, payload: bytes) -> bytes:
    hdr = struct.pack("=HH", 4 + len(payload), kind)
    pad = (-len(payload)) % 4
    return hdr + payload + b"\0" * pad


def loss_prob(pct: float) -> int:
    """Percent to netem's u32 probability, rounded as iproute2 does."""
    return int(round(pct / 100.0 * U32_MAX))


def netem_options(limit: int, latency_ns: int, jitter_ns: int, loss_pct: float,
                  rate_bps: int, seed: int) -> bytes:
    """TCA_OPTIONS payload: struct tc_netem_qopt, then netem's attributes."""
    ticks = lambda ns: min(ns >> 6, U32_MAX)  # PSCHED ticks are 64 ns
    qopt = struct.pack("=6I", ticks(latency_ns), limit, loss_prob(loss_pct), 0, 0, ticks(jitter_ns))
    rate_bytes = rate_bps // 8
    attrs = _attr(TCA_NETEM_LATENCY64, struct.pack("=q", latency_ns))
    attrs += _attr(TCA_NETEM_JITTER64, struct.pack("=q", jitter_ns))
    if rate_bytes:
        attrs += _attr(TCA_NETEM_RATE, struct.pack("=IiIi", min(rate_bytes, U32_MAX), 0, 0, 0))
        if rate_bytes >= U32_MAX:
            attrs += _attr(TCA_NETEM_RATE64, struct.pack("=Q", rate_bytes))
    attrs += _attr(TCA_NETEM_PRNG_SEED, struct.pack("=Q", seed))
    return qopt + attrs


def change_message(ifindex: int, options: bytes, seq: int = 1, handle: int = 0x10000) -> bytes:
    """RTM_NEWQDISC without CREATE/REPLACE: change the existing root netem."""
    tcm = struct.pack("=BxxxiIII", socket.AF_UNSPEC, ifindex, handle, TC_H_ROOT, 0)
    body = tcm + _attr(TCA_KIND, b"netem\0") + _attr(TCA_OPTIONS, options)
    return struct.pack("=IHHII", 16 + len(body), RTM_NEWQDISC, NLM_F_REQUEST | NLM_F_ACK, seq, 0) + body


def send(msg: bytes) -> None:
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as s:
        s.bind((0, 0))
        s.send(msg)
        data = s.recv(65536)
    length, kind = struct.unpack("=IH", data[:6])
    if kind != NLMSG_ERROR:
        raise OSError(f"unexpected netlink reply type {kind}")
    err = struct.unpack("=i", data[16:20])[0]
    if err != 0:
        raise OSError(-err, f"netem change refused: {os.strerror(-err)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="netem_seed")
    ap.add_argument("--dev", required=True)
    ap.add_argument("--limit", type=int, required=True)
    ap.add_argument("--latency-ns", type=int, required=True)
    ap.add_argument("--jitter-ns", type=int, default=0)
    ap.add_argument("--loss-pct", type=float, default=0.0)
    ap.add_argument("--rate-bps", type=int, default=0)
    ap.add_argument("--seed", type=int, required=True)
    a = ap.parse_args(argv)
    if not 0 <= a.seed < 2**64:
        ap.error("--seed must fit in 64 bits")
    opts = netem_options(a.limit, a.latency_ns, a.jitter_ns, a.loss_pct, a.rate_bps, a.seed)
    send(change_message(socket.if_nametoindex(a.dev), opts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
