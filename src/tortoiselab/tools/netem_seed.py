"""Seed netem's random draws (loss, jitter) over rtnetlink.

Linux 6.12 lets netem take the seed of its PRNG (TCA_NETEM_PRNG_SEED, a
u64) so that the same seed gives the same loss pattern; Debian 12's `tc`
(iproute2 6.1) does not know the keyword. This tool sends the netem "change"
itself: the complete parameter set (as tc would encode it) plus the seed.
Change keeps the delay distribution table tc installed, but not a loss
model: a change without TCA_NETEM_LOSS sets netem back to random loss
(netem_change in net/sched/sch_netem.c), so a Gilbert-Elliott model is sent
again (--loss-ge, as tc's `loss gemodel` encodes it); the change also puts
its chain back in its Good state.

    python -m tortoiselab.tools.netem_seed --dev s2-eth1 --limit 257 \
        --latency-ns 100000000 --loss-pct 1 --rate-bps 10000000 --seed 42
    ... --loss-ge 1.754386 33.333333 100 0   (p r 1-h 1-k, percent)

The message is built by hand (a few struct.pack calls) rather than with a
netlink library such as pyroute2: it is one message of fixed layout, its
bytes are checked against iproute2's encoding in tests/unit/test_netem_seed.py,
and the guest needs no further package.
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
TCA_NETEM_LOSS, NETEM_LOSS_GE = 5, 2
NLA_F_NESTED = 1 << 15
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


def gemodel(p_pct: float, r_pct: float, loss_bad_pct: float, loss_good_pct: float) -> bytes:
    """struct tc_netem_gemodel {p, r, h, k1} as tc fills it from `loss gemodel
    p r 1-h 1-k`: each percentage rounded as iproute2 does, and h = 1 - (1-h)."""
    return struct.pack("=4I", loss_prob(p_pct), loss_prob(r_pct), U32_MAX - loss_prob(loss_bad_pct),
                       loss_prob(loss_good_pct))


def netem_options(limit: int, latency_ns: int, jitter_ns: int, loss_pct: float,
                  rate_bps: int, seed: int, loss_ge: tuple[float, float, float, float] | None = None) -> bytes:
    """TCA_OPTIONS payload: struct tc_netem_qopt, then netem's attributes
    (in tc's order: the loss model's nest before the rate)."""
    ticks = lambda ns: min(ns >> 6, U32_MAX)  # PSCHED ticks are 64 ns
    loss = 0 if loss_ge is not None else loss_prob(loss_pct)
    qopt = struct.pack("=6I", ticks(latency_ns), limit, loss, 0, 0, ticks(jitter_ns))
    rate_bytes = rate_bps // 8
    attrs = _attr(TCA_NETEM_LATENCY64, struct.pack("=q", latency_ns))
    attrs += _attr(TCA_NETEM_JITTER64, struct.pack("=q", jitter_ns))
    if loss_ge is not None:
        attrs += _attr(TCA_NETEM_LOSS | NLA_F_NESTED, _attr(NETEM_LOSS_GE, gemodel(*loss_ge)))
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
    ap.add_argument("--loss-ge", type=float, nargs=4, default=None, metavar=("P", "R", "1-H", "1-K"),
                    help="Gilbert-Elliott loss (percent), instead of --loss-pct")
    ap.add_argument("--rate-bps", type=int, default=0)
    ap.add_argument("--seed", type=int, required=True)
    a = ap.parse_args(argv)
    if not 0 <= a.seed < 2**64:
        ap.error("--seed must fit in 64 bits")
    if a.loss_ge is not None and not all(0 <= v <= 100 for v in a.loss_ge):
        ap.error("--loss-ge takes four percentages between 0 and 100")
    opts = netem_options(a.limit, a.latency_ns, a.jitter_ns, a.loss_pct, a.rate_bps, a.seed,
                         tuple(a.loss_ge) if a.loss_ge is not None else None)
    send(change_message(socket.if_nametoindex(a.dev), opts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
