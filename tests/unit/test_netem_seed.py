import struct

from tortoiselab.tools import netem_seed as N


def _attrs(buf):
    out = {}
    while buf:
        ln, kind = struct.unpack("=HH", buf[:4])
        out[kind] = buf[4:ln]
        buf = buf[(ln + 3) & ~3:]
    return out


def test_loss_probability_rounds_like_iproute2():
    assert N.loss_prob(0) == 0
    assert N.loss_prob(100) == 0xFFFFFFFF
    assert N.loss_prob(1) == 42949673  # rint(0.01 * 4294967295)


def test_options_layout():
    opts = N.netem_options(limit=257, latency_ns=100_000_000, jitter_ns=0, loss_pct=1,
                           rate_bps=10_000_000, seed=0x0102030405060708)
    latency, limit, loss, gap, dup, jitter = struct.unpack("=6I", opts[:24])
    assert (latency, limit, loss, gap, dup, jitter) == (100_000_000 >> 6, 257, 42949673, 0, 0, 0)
    a = _attrs(opts[24:])
    assert struct.unpack("=q", a[N.TCA_NETEM_LATENCY64])[0] == 100_000_000
    assert struct.unpack("=IiIi", a[N.TCA_NETEM_RATE]) == (1_250_000, 0, 0, 0)
    assert struct.unpack("=Q", a[N.TCA_NETEM_PRNG_SEED])[0] == 0x0102030405060708
    assert N.TCA_NETEM_RATE64 not in a


def test_message_is_a_change_of_the_root_netem():
    msg = N.change_message(7, b"\0" * 24, seq=9)
    ln, kind, flags, seq, pid = struct.unpack("=IHHII", msg[:16])
    assert (ln, kind, seq, pid) == (len(msg), N.RTM_NEWQDISC, 9, 0)
    assert flags == N.NLM_F_REQUEST | N.NLM_F_ACK  # no CREATE/REPLACE: change only
    family, ifindex, handle, parent, info = struct.unpack("=BxxxiIII", msg[16:36])
    assert (ifindex, handle, parent) == (7, 0x10000, N.TC_H_ROOT)
    a = _attrs(msg[36:])
    assert a[N.TCA_KIND] == b"netem\0"
    assert len(a[N.TCA_OPTIONS]) == 24
