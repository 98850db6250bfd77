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


def test_random_loss_message_is_unchanged():
    """Paths without a burst length send the bytes they sent before the loss
    models existed (taken from that code: 200 ms RTT, 2 ms jitter, 1 % loss,
    10 Mbit/s, seed 42)."""
    opts = N.netem_options(257, 100_000_000, 2_000_000, 1, 10_000_000, 42)
    assert opts.hex() == (
        "84d7170001010000295c8f020000000000000000127a00000c000a0000e1f505000000000c000b0080841e00"
        "0000000014000600d01213000000000000000000000000000c000e002a00000000000000")
    assert N.TCA_NETEM_LOSS | N.NLA_F_NESTED not in _attrs(opts[24:])


def test_gilbert_elliott_nest_as_iproute2_encodes_it():
    """`loss gemodel 1.754386% 33.333333% 100% 0%`: q_netem.c rounds each
    percentage with rint(x / 100 * UINT32_MAX), stores h = UINT32_MAX - (1-h),
    and nests NETEM_LOSS_GE in TCA_NETEM_LOSS | NLA_F_NESTED; qopt.loss is 0."""
    opts = N.netem_options(257, 100_000_000, 0, 5, 10_000_000, 7, loss_ge=(1.754386, 33.333333, 100, 0))
    assert struct.unpack("=6I", opts[:24])[2] == 0
    a = _attrs(opts[24:])
    nest = a[N.TCA_NETEM_LOSS | N.NLA_F_NESTED]
    inner = _attrs(nest)
    p, r, h, k1 = struct.unpack("=4I", inner[N.NETEM_LOSS_GE])
    assert p == round(0.01754386 * 0xFFFFFFFF) == 75350305
    assert r == round(0.33333333 * 0xFFFFFFFF)
    assert (h, k1) == (0, 0)  # 1-h = 100 %: every packet in Bad lost; 1-k = 0 %: none in Good
    assert struct.unpack("=Q", a[N.TCA_NETEM_PRNG_SEED])[0] == 7
    # tc puts the loss nest before the rate: keep its order
    kinds = list(_attrs(opts[24:]))
    assert kinds.index(N.TCA_NETEM_LOSS | N.NLA_F_NESTED) < kinds.index(N.TCA_NETEM_RATE)


def test_main_refuses_probabilities_outside_0_100(capsys):
    import pytest
    with pytest.raises(SystemExit):
        N.main(["--dev", "lo", "--limit", "1", "--latency-ns", "0", "--seed", "1",
                "--loss-ge", "1", "120", "100", "0"])
    assert "between 0 and 100" in capsys.readouterr().err
