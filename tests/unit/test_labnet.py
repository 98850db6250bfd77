"""The batches that build a lab's graph (guest/labnet.py): what each
`ip -batch` and the ovs-vsctl transaction say, without a lab."""

from __future__ import annotations

import pytest

pytest.importorskip("mininet.net")

from tortoiselab.guest.labnet import VethEnd, host_lines, ovs_vsctl_argv, veth_lines  # noqa: E402
from tortoiselab.guest.topo import link_macs  # noqa: E402
from tortoiselab.spec.topology import Graph, Host  # noqa: E402


def test_every_pair_is_born_in_its_namespaces_with_its_macs_then_the_root_ends_come_up():
    client = (VethEnd("client-eth0", "00:00:00:00:00:01", 69), VethEnd("s1-eth1", "02:00:00:00:01:02", None))
    wan = (VethEnd("s1-eth2", "02:00:00:00:02:01", None), VethEnd("s2-eth1", "02:00:00:00:02:02", None))
    assert veth_lines([client, wan]) == [
        "link add name client-eth0 address 00:00:00:00:00:01 netns 69 type veth peer name s1-eth1 address 02:00:00:00:01:02",
        "link add name s1-eth2 address 02:00:00:00:02:01 type veth peer name s2-eth1 address 02:00:00:00:02:02",
        "link set dev s1-eth1 up", "link set dev s1-eth2 up", "link set dev s2-eth1 up"]
    assert veth_lines([]) == []


def test_a_host_gets_its_address_interfaces_up_and_one_permanent_entry_per_other_host():
    lines = host_lines(["client-eth0"], ("10.0.0.1/8", "client-eth0"),
                       [("10.0.0.2", "00:00:00:00:00:02"), ("10.0.0.53", "00:00:00:00:00:03")])
    assert lines == ["link set dev lo up", "address add 10.0.0.1/8 broadcast + dev client-eth0",
                     "link set dev client-eth0 up",
                     "neighbour replace 10.0.0.2 lladdr 00:00:00:00:00:02 dev client-eth0 nud permanent",
                     "neighbour replace 10.0.0.53 lladdr 00:00:00:00:00:03 dev client-eth0 nud permanent"]
    # static ARP off, or a host without an address: no entries
    assert host_lines(["h-eth0"], ("10.0.0.9/8", "h-eth0"), []) == [
        "link set dev lo up", "address add 10.0.0.9/8 broadcast + dev h-eth0", "link set dev h-eth0 up"]
    assert host_lines(["h-eth0", "h-eth1"], None, [("10.0.0.2", "00:00:00:00:00:02")]) == [
        "link set dev lo up", "link set dev h-eth0 up", "link set dev h-eth1 up"]


def test_the_switches_start_in_one_transaction_split_as_a_shell_would():
    queued = [" -- --if-exists del-br s1 -- add-br s1 -- set bridge s1 controller=[] fail_mode=standalone"
              " -- add-port s1 s1-eth1", " -- --if-exists del-br s2 -- add-br s2"]
    argv = ovs_vsctl_argv(queued)
    assert argv[0] == "ovs-vsctl" and argv.count("add-br") == 2 and "controller=[]" in argv
    assert argv[1:7] == ["--", "--if-exists", "del-br", "s1", "--", "add-br"]


def test_link_ends_have_fixed_macs_a_host_its_own():
    g = Graph(hosts=(Host("client", "10.0.0.1/8"), Host("server", "10.0.0.2/8")), switches=("s1", "s2"),
              links=(("client", "s1"), ("s1", "s2"), ("s2", "server")), wan=("s1", "s2"))
    assert link_macs(g) == [{"addr1": "00:00:00:00:00:01", "addr2": "02:00:00:00:01:02"},
                            {"addr1": "02:00:00:00:02:01", "addr2": "02:00:00:00:02:02"},
                            {"addr1": "02:00:00:00:03:01", "addr2": "00:00:00:00:00:02"}]
