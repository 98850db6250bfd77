"""The one capture reader (tortoiselab.analysis.capture): TCP options as
RFC 9293, RFC 2018 and RFC 7323 lay them out, frames built byte by byte
into typed packets, every other module reading captures through it, and the
readers' outputs over tests/data's captures as they were before it
(tests/data/capture-asbefore.json, made by bench/capture_asbefore.py from
the readers each module had of its own)."""

import importlib.util
import json
import re
import struct
from pathlib import Path

import pytest

from tortoiselab.analysis import capture as C

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
TS = b"\x08\x0a" + struct.pack("!II", 111, 222)  # Timestamps: kind 8, length 10, TSval, TSecr (RFC 7323 §3.2)


def _opts(raw: bytes) -> C.TcpOptions:
    buf = bytes(20) + raw  # parse_tcp_options reads a header's option bytes in place
    return C.parse_tcp_options(buf, 20, len(buf))


def test_options_of_a_syn():
    # MSS 1460, SACK permitted, Timestamps, NOP, window scale 7: what Linux sends
    o = _opts(b"\x02\x04\x05\xb4\x04\x02" + TS + b"\x01\x03\x03\x07")
    assert o == C.TcpOptions(mss=1460, window_scale=7, sack_permitted=True, tsval=111, tsecr=222)


def test_timestamps_alone_and_with_sack_blocks():
    assert _opts(b"\x01\x01" + TS) == C.TcpOptions(tsval=111, tsecr=222)  # the common layout
    sack = b"\x01\x01\x05\x12" + struct.pack("!IIII", 10, 20, 30, 40)
    assert _opts(b"\x01\x01" + TS + sack) == C.TcpOptions(sack_blocks=((10, 20), (30, 40)), tsval=111, tsecr=222)


@pytest.mark.parametrize("raw, want", [
    (b"\x03\x03\x0f\x01", C.TcpOptions(window_scale=14)),  # a shift above 14 is taken as 14 (RFC 7323 §2.3)
    (b"\x00" + TS, C.TcpOptions()),  # nothing after End of Option List (RFC 9293 §3.1)
    (b"\x08\x0a\x00\x00", C.TcpOptions()),  # a length past the header's end: the walk stops
    (b"\x02\x01" + TS, C.TcpOptions()),  # a length below 2: the walk stops
    (b"\x08\x06\x00\x00\x00\x01", C.TcpOptions()),  # Timestamps of the wrong length are not read
])
def test_malformed_or_clamped_options(raw, want):
    assert _opts(raw) == want


def _eth_ip4(proto: int, l4: bytes, total: int | None = None, frag: int = 0x4000, ip_id: int = 7) -> bytes:
    """An Ethernet frame with an IPv4 header (no options) before l4; total:
    the IP total length (default: what the frame carries)."""
    tot = 20 + len(l4) if total is None else total
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, tot, ip_id, frag, 64, proto, 0, bytes([10, 0, 0, 1]),
                     bytes([10, 0, 0, 2]))
    return bytes(12) + b"\x08\x00" + ip + l4


def _tcp(flags: int, opts: bytes = b"", payload: bytes = b"") -> bytes:
    return struct.pack("!HHIIHHHH", 40000, 443, 1000, 2000, (5 + len(opts) // 4) << 12 | flags, 512, 0, 0) \
        + opts + payload


def _dns_query(name: str) -> bytes:
    qname = b"".join(bytes([len(x)]) + x.encode() for x in name.split(".")) + b"\x00"
    return struct.pack("!HHHHHH", 1, 0x0100, 1, 0, 0, 0) + qname + struct.pack("!HH", 1, 1)


def _write(path: Path, frames: list[tuple[bytes, int]], snaplen: int = 128) -> Path:
    """A classic pcap (Ethernet) of (frame, wire length) at 1.5 s, 2.5 s, ..."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, 1))
        for i, (fr, wire) in enumerate(frames):
            cap = fr[:snaplen]
            f.write(struct.pack("<IIII", 1 + i, 500_000, len(cap), wire) + cap)
    return path


def test_frames_become_typed_packets(tmp_path):
    big = _tcp(0x18 | 0x40, b"\x01\x01" + TS, bytes(1000))  # PSH ACK ECE, 1000 bytes, cut at the snaplen
    udp = _dns_query("www.lab.test")
    frames = [(fr, len(fr)) for fr in (
        _eth_ip4(6, big),
        _eth_ip4(17, struct.pack("!HHHH", 5353, 53, 8 + len(udp), 0) + udp),
        bytes(12) + b"\x08\x06" + bytes(28),  # ARP
        _eth_ip4(6, bytes(40), frag=0x0010),  # a later fragment: no TCP header in it
        _eth_ip4(1, bytes(8)),  # ICMP
    )]
    tcp, dns, arp, frag, icmp = C.read_packets(_write(tmp_path / "a.pcap", frames))
    assert (tcp.t_s, tcp.ip_version, tcp.src, tcp.dst, tcp.ip_len, tcp.ip_id) == \
        (1.5, 4, bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]), 20 + 32 + 1000, 7)
    assert (tcp.transport, tcp.sport, tcp.dport, tcp.seq, tcp.ack, tcp.flags, tcp.window) == \
        (C.TCP, 40000, 443, 1000, 2000, 0x58, 512)
    assert tcp.options == C.TcpOptions(tsval=111, tsecr=222)
    assert tcp.payload_len == 1000 and len(tcp.payload) == 128 - 14 - 20 - 32  # lengths from IP, bytes as captured
    assert tcp.frame_len == 128
    assert dns.transport == C.UDP and dns.dns == C.DnsMessage(False, ("www.lab.test",), ())
    assert (arp.ip_version, arp.transport, arp.frame_len) == (0, None, 42)
    assert (frag.ip_version, frag.proto, frag.transport) == (4, 6, None)
    assert (icmp.proto, icmp.transport) == (1, None)


def test_a_link_type_other_than_asked_is_named(tmp_path):
    p = tmp_path / "sll.pcap"
    p.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 128, 113))  # Linux cooked
    assert list(C.read_packets(p)) == []
    with pytest.raises(ValueError, match=r"sll.pcap: link type 113 is not supported \(Ethernet\)"):
        list(C.read_packets(p, link="eth"))


def test_no_module_but_the_reader_parses_captures():
    """One capture reader: no other module of the package imports a packet
    library or reads TCP options by itself."""
    src = ROOT / "src" / "tortoiselab"
    readers = sorted(str(p.relative_to(src)) for p in src.rglob("*.py")
                     if re.search(r"^\s*(import|from)\s+(dpkt|scapy|pcapy|pyshark)\b|parse_opts|TCP_OPT_",
                                  p.read_text(), re.M))
    assert readers == ["analysis/capture.py"]


def _asbefore():
    spec = importlib.util.spec_from_file_location("capture_asbefore", ROOT / "bench" / "capture_asbefore.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_reader_reads_tests_data_as_before(monkeypatch):
    """The connections tables, determinism fingerprints and retransmission
    counts, pathloss's packets and losses and the DNS lookups of every pcap
    in tests/data, digested as bench/capture_asbefore.py digests them, are
    those of the readers before the one reader (main at the commit named in
    the file)."""
    monkeypatch.chdir(ROOT)
    bench = _asbefore()
    want = json.loads((DATA / "capture-asbefore.json").read_text())["digests"]
    pairs = [[f"tests/data/{s}", f"tests/data/{c}"] for s, c in bench.DATA_PAIRS]
    got = bench.dump(bench.data_pcaps(), pairs)["digests"]
    assert len(want) >= 6 * 30 and set(got) == set(want)
    assert [k for k in want if got[k] != want[k]] == []
