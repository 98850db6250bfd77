from tortoiselab.guest import commands as C
from tortoiselab.spec.pathspec import PathSpec


def test_netem_default_path():
    p = PathSpec(rtt_ms=200, rate_mbit=10, loss_pct=1)
    assert C.netem("s2-eth1", p, 1.0) == [
        "tc", "qdisc", "replace", "dev", "s2-eth1", "root", "handle", "1:", "netem",
        "limit", "257", "delay", "100ms", "loss", "random", "1%", "rate", "10mbit"]


def test_netem_jitter_no_loss_fractional():
    p = PathSpec(rtt_ms=25, rate_mbit=2.5, loss_pct=0, jitter_ms=1.5)
    assert C.netem("x", p, 0.0) == [
        "tc", "qdisc", "replace", "dev", "x", "root", "handle", "1:", "netem",
        "limit", str(p.netem_limit_pkts()), "delay", "12.5ms", "1.5ms", "distribution", "normal",
        "rate", "2.5mbit"]


def test_netem_seed_mirrors_netem():
    p = PathSpec(rtt_ms=200, rate_mbit=10, loss_pct=1)
    assert C.netem_seed("s2-eth1", p, 1.0, 42, "/py") == [
        "/py", "-m", "tortoiselab.tools.netem_seed", "--dev", "s2-eth1", "--limit", "257",
        "--latency-ns", "100000000", "--seed", "42", "--loss-pct", "1", "--rate-bps", "10000000"]


def test_derive_seed_is_stable_and_distinct():
    a = C.derive_seed(1, "netem", "down")
    assert a == C.derive_seed(1, "netem", "down")
    assert a != C.derive_seed(1, "netem", "up") != C.derive_seed(2, "netem", "up")
    assert 0 <= a < 2**64


def test_host_settings():
    assert C.offloads_off("client-eth0") == ["ethtool", "-K", "client-eth0", "tso", "off", "gso", "off",
                                             "gro", "off"]
    assert C.sysctl_set("net.ipv4.tcp_no_metrics_save", 1) == [
        "sysctl", "-q", "-w", "net.ipv4.tcp_no_metrics_save=1"]
    assert C.route_window("10.0.0.0/8", "server-eth0", 10, 30) == [
        "ip", "route", "replace", "10.0.0.0/8", "dev", "server-eth0", "initcwnd", "10", "initrwnd", "30"]
    assert C.route_window("10.0.0.0/8", "e", 3, None) == ["ip", "route", "replace", "10.0.0.0/8", "dev", "e",
                                                          "initcwnd", "3"]


def test_probes():
    assert C.ping("10.0.0.2", 20, 0.2) == ["ping", "-n", "-c", "20", "-i", "0.2", "-W", "3", "10.0.0.2"]
    assert C.ss_tcp_info(5001) == ["ss", "-t", "-i", "-n", "state", "established", "( sport = :5001 )"]


def test_single_deterministic_drop():
    qdisc, filt = C.drop_nth_data_segment("s2-eth2", "10.0.0.2", 150)
    assert qdisc == ["tc", "qdisc", "replace", "dev", "s2-eth2", "ingress"]
    assert filt[:8] == ["tc", "filter", "add", "dev", "s2-eth2", "parent", "ffff:", "protocol"]
    i = filt.index("gact")
    assert filt[i:i + 6] == ["gact", "ok", "random", "determ", "pipe", "150"]
    assert filt[-2:] == ["conform-exceed", "ok/drop"]  # exceed: pass, conform (the first): drop
    import pytest
    with pytest.raises(ValueError, match="n: "):
        C.drop_nth_data_segment("x", "10.0.0.2", 0)


def test_modules():
    assert C.insmod("/m/tcp_reno_beta.ko", {"beta": "0.800"}) == ["insmod", "/m/tcp_reno_beta.ko", "beta=0.800"]
    assert C.rmmod("tcp_reno_beta") == ["rmmod", "tcp_reno_beta"]
