import subprocess
from pathlib import Path

import pytest

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


def test_netem_gilbert_loss():
    """A mean burst length gives netem's Gilbert-Elliott model (p r 1-h 1-k
    of the Simple Gilbert model) instead of random loss; the seeding tool
    sends the same model again."""
    p = PathSpec(rtt_ms=200, rate_mbit=10, loss_pct=5, loss_burst_pkts=3)
    assert C.netem("s2-eth1", p, 5.0, burst_pkts=3) == [
        "tc", "qdisc", "replace", "dev", "s2-eth1", "root", "handle", "1:", "netem",
        "limit", "257", "delay", "100ms", "loss", "gemodel", "1.754386%", "33.333333%", "100%", "0%",
        "rate", "10mbit"]
    assert C.netem_seed("s2-eth1", p, 5.0, 42, "/py", burst_pkts=3) == [
        "/py", "-m", "tortoiselab.tools.netem_seed", "--dev", "s2-eth1", "--limit", "257",
        "--latency-ns", "100000000", "--seed", "42", "--loss-ge", "1.754386", "33.333333", "100", "0",
        "--rate-bps", "10000000"]
    # loss off (the probe's RTT and rate phases): no loss model at all, as before
    assert C.netem("x", p, 0.0, burst_pkts=3) == C.netem("x", p, 0.0)
    assert C.netem_seed("x", p, 0.0, 1, "/py", burst_pkts=3) == C.netem_seed("x", p, 0.0, 1, "/py")


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
    with pytest.raises(ValueError, match="n: "):
        C.drop_nth_data_segment("x", "10.0.0.2", 0)


def test_modules():
    assert C.insmod("/m/tcp_reno_beta.ko", {"beta": "0.800"}) == ["insmod", "/m/tcp_reno_beta.ko", "beta=0.800"]
    assert C.rmmod("tcp_reno_beta") == ["rmmod", "tcp_reno_beta"]


def test_drop_filter_is_removed_and_read_on_its_device():
    # the remover undoes the qdisc drop_nth_data_segment adds (and its filter with it)
    qdisc, _ = C.drop_nth_data_segment("s2-eth2", "10.0.0.2", 150)
    assert C.drop_filter_remove("s2-eth2") == ["tc", "qdisc", "del", "dev", "s2-eth2", "ingress"]
    assert C.drop_filter_remove("s2-eth2")[4:] == qdisc[4:]
    assert C.drop_filter_stats("s2-eth2") == ["tc", "-s", "filter", "show", "dev", "s2-eth2", "ingress"]


def test_addresses_and_routes():
    assert C.addr_add("server-eth0", "10.0.0.3") == ["ip", "addr", "add", "10.0.0.3/8", "dev", "server-eth0"]
    assert C.neigh_permanent("10.0.0.3", "00:00:00:00:00:02", "client-eth0") == [
        "ip", "neigh", "replace", "10.0.0.3", "lladdr", "00:00:00:00:00:02", "dev", "client-eth0", "nud", "permanent"]
    assert C.route_show() == ["ip", "route", "show"]


def test_guest_set_up():
    assert C.bind_mount(Path("/w/guest-hosts"), "/etc/hosts") == ["mount", "--bind", "/w/guest-hosts", "/etc/hosts"]
    assert C.kernel_log() == ["dmesg"]


def test_seeded_entropy_passes_the_path_as_an_argument():
    path = "/run/open vswitch/$(touch x); 'e'"
    argv = C.seeded_entropy(["ovs-vswitchd", "--detach"], path)
    assert argv == ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                    'mount --bind "$1" /dev/urandom && shift && exec "$@"', "ovs", path, "ovs-vswitchd", "--detach"]
    assert path not in argv[6]  # the script is fixed text: no path in it


def test_seeded_entropy_script_sees_the_path_and_the_command_verbatim(tmp_path):
    # the script itself, with `mount` replaced by a stand-in that prints its arguments
    script = C.seeded_entropy(["printf", "<%s>", "a b", "$HOME"], "/x/y z")[6]
    fake = script.replace("mount --bind", "printf '[%s]' ", 1)
    out = subprocess.run(["sh", "-c", fake, "ovs", "/x/y z", "printf", "<%s>", "a b", "$HOME"],
                         capture_output=True, text=True, check=True).stdout
    assert out == "[/x/y z][/dev/urandom]<a b><$HOME>"


def test_open_vswitch():
    assert C.ovsdb_create("/run/openvswitch/conf.db") == [
        "ovsdb-tool", "create", "/run/openvswitch/conf.db", "/usr/share/openvswitch/vswitch.ovsschema"]
    assert C.ovsdb_server("/run/openvswitch", "/run/openvswitch/conf.db") == [
        "ovsdb-server", "/run/openvswitch/conf.db", "--remote=punix:/run/openvswitch/db.sock",
        "--pidfile=/run/openvswitch/ovsdb-server.pid", "--detach", "--no-chdir",
        "--log-file=/run/openvswitch/ovsdb-server.log"]
    assert C.ovs_init() == ["ovs-vsctl", "--no-wait", "init"]
    assert C.switch_forget_macs("ovs", "s1") == ["ovs-appctl", "fdb/flush", "s1"]
    assert C.switch_forget_macs("bridge", "s2") == ["ip", "link", "set", "dev", "s2", "type", "bridge", "fdb_flush"]
    assert C.ovs_vswitchd("/run/openvswitch") == [
        "ovs-vswitchd", "unix:/run/openvswitch/db.sock", "--pidfile=/run/openvswitch/ovs-vswitchd.pid",
        "--detach", "--no-chdir", "--log-file=/run/openvswitch/ovs-vswitchd.log"]


def test_tools():
    assert C.tool("/py", "bulk", "serve", "--port", "5001") == [
        "/py", "-m", "tortoiselab.tools.bulk", "serve", "--port", "5001"]


def test_tcpdump_and_dnsmasq():
    assert C.tcpdump("server-eth0", Path("/w/load-000/server.pcap"), user="nobody")[10:12] == ["-Z", "nobody"]
    assert C.tcpdump("server-eth0", Path("/w/load-000/server.pcap")) == [
        "tcpdump", "-i", "server-eth0", "-n", "-s", "128", "-B", "8192", "--immediate-mode", "-U",
        "-Z", "root", "-w", "/w/load-000/server.pcap", "tcp or udp port 53"]
    assert C.dnsmasq("10.0.0.53", {"www.lab.test": "10.0.0.2", "dead.lab.test": "10.0.0.99"},
                     Path("/run/w/dnsmasq.pid"), "/run/w/dnsmasq.log") == [
        "dnsmasq", "--keep-in-foreground", "--no-resolv", "--no-hosts", "--no-poll",
        "--listen-address=10.0.0.53", "--bind-interfaces", "--port=53", "--cache-size=0", "--user=root",
        "--pid-file=/run/w/dnsmasq.pid", "--log-facility=/run/w/dnsmasq.log", "--log-queries",
        "--address=/dead.lab.test/10.0.0.99", "--address=/www.lab.test/10.0.0.2",
        "--local=/dead.lab.test/", "--local=/www.lab.test/"]


LOADER_HEAD = ["/py", "-m", "tortoiselab.client", "https://www.lab.test/feed.html", "--ca", "/pki/ca.pem",
               "--protocol", "h2", "--cache-hit-ratio", "0.0", "--seed", "7", "--timeout", "120.0",
               "--har", "/w/page.har", "--summary", "/w/summary.json"]


def test_page_loader_through_the_lab_dns():
    argv = C.page_loader("/py", "https://www.lab.test/feed.html", ca="/pki/ca.pem", protocol="h2",
                         cache_hit_ratio=0.0, seed=7, timeout_s=120.0, har=Path("/w/page.har"),
                         summary=Path("/w/summary.json"), dns_server="10.0.0.53")
    assert argv == [*LOADER_HEAD, "--dns-server", "10.0.0.53"]


def test_page_loader_with_fixed_names_and_every_option():
    argv = C.page_loader("/py", "https://www.lab.test/feed.html", ca="/pki/ca.pem", protocol="h2",
                         cache_hit_ratio=0.0, seed=7, timeout_s=120.0, har="/w/page.har", summary="/w/summary.json",
                         resolve={"www.lab.test": "10.0.0.2", "static.lab.test": "10.0.0.3"}, coalescing=False,
                         tls="1.2", repeat_after_s=5.0)
    assert argv == [*LOADER_HEAD, "--resolve", "static.lab.test:10.0.0.3", "--resolve", "www.lab.test:10.0.0.2",
                    "--no-coalescing", "--tls", "1.2", "--repeat-after", "5.0"]


def test_page_loader_names_the_origins_that_speak_another_protocol():
    # an imported site that mixes h2 and HTTP/1.1: only the origins not on the page's protocol, sorted
    mixed = {"https://www.lab.test": "h2", "https://legacy.lab.test": "h1", "https://ads.lab.test": "h1"}
    argv = C.page_loader("/py", "https://www.lab.test/feed.html", ca="/pki/ca.pem", protocol="h2",
                         cache_hit_ratio=0.0, seed=7, timeout_s=120.0, har="/w/page.har", summary="/w/summary.json",
                         dns_server="10.0.0.53", origin_protocols=mixed)
    assert argv == [*LOADER_HEAD, "--dns-server", "10.0.0.53", "--origin-protocol", "https://ads.lab.test=h1",
                    "--origin-protocol", "https://legacy.lab.test=h1"]
    one = {"https://www.lab.test": "h2"}  # one protocol: the argv of a lab page
    assert C.page_loader("/py", "https://www.lab.test/feed.html", ca="/pki/ca.pem", protocol="h2",
                         cache_hit_ratio=0.0, seed=7, timeout_s=120.0, har=Path("/w/page.har"),
                         summary=Path("/w/summary.json"), dns_server="10.0.0.53", origin_protocols=one) == \
        [*LOADER_HEAD, "--dns-server", "10.0.0.53"]


def test_cross_check_loaders():
    assert C.nghttp("https://www.lab.test/tiny.html") == ["nghttp", "-nas", "https://www.lab.test/tiny.html"]
    assert C.h2load("https://www.lab.test/objects/1000000.bin", 3) == [
        "h2load", "-n", "3", "-c", "1", "-m", "1", "https://www.lab.test/objects/1000000.bin"]
