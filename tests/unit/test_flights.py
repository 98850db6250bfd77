"""Capture analysis (tortoiselab.analysis.flights): on lab captures whose windows are
known by construction (tests/data/flights_*.pcap, see flights_captures.json)
and on synthetic captures crafted with dpkt for the cases the lab does not
produce on demand (timeouts, tail loss probes, D-SACK, sequence wrap, other
link types)."""

import json
import resource
import struct
import time
from collections import Counter
from pathlib import Path

import dpkt
import pytest

from tortoiselab.analysis import flights as F
from tortoiselab.analysis import napkin as N

DATA = Path(__file__).parent.parent / "data"
META = json.loads((DATA / "flights_captures.json").read_text())


def one(name: str, **kw) -> dict:
    conns = F.analyze_pcap(DATA / name, **kw)
    assert len(conns) == 1, [c["client"] for c in conns]
    return conns[0]


def segs(conn: dict) -> list[int]:
    return [f["segments"] for f in conn]


# --- lab captures: windows known by construction -------------------------

@pytest.mark.parametrize("iw, want", [
    (3, [3, 6, 12, 24, 28]),
    (10, [10, 20, 36, 10]),
    (30, [30, 36, 11]),
])
def test_first_flight_is_the_initial_window_and_then_doubles(iw, want):
    c = one(f"flights_iw{iw}.pcap")
    print(f"\nIW {iw}\n{F.format_flights(c)}")
    assert c["vantage"] == "server" and c["flight_method"] == "ack"
    tf = F.transfer_flights(c)
    assert segs(tf) == want
    assert tf[0]["segments"] == iw  # exactly the initial window
    verdicts = F.slow_start_verdicts(tf, iw)
    assert all(v["ok"] for v in verdicts), verdicts
    # a flight that did not double reached the client's advertised window
    # (the lab's client advertises ~51 KB early on) or was the last one
    for f, v in zip(tf, verdicts):
        if v["reason"] == "rwnd":
            assert f["rwnd_limited"] and f["inflight_bytes_max"] > f["rwnd_bytes"] - 1448
    # the object and its framing (100000 bytes + TLS, HTTP/2 and tickets) is all there
    assert 100_000 < sum(f["bytes"] for f in tf) < 102_000
    assert sum(f["retransmissions"] for f in tf) == 0 and c["retrans_counts"]["fast"] == 0
    # the silence split agrees wherever flights are separated by idle time
    if iw < 30:
        assert segs(F.transfer_flights(c, "gap")) == want


def test_iw3_first_data_flight_is_three_small_packets():
    tf = F.transfer_flights(one("flights_iw3.pcap"))
    # TLS 1.3 session tickets and HTTP/2 SETTINGS fill the 3-packet window
    assert tf[0]["segments"] == 3 and tf[0]["bytes"] < 1448
    assert [f["bytes"] for f in tf[1:4]] == [6 * 1448, 12 * 1448, 24 * 1448]


def test_handshakes_in_round_trips():
    c = one("flights_iw10.pcap")
    assert c["tcp_rtt_ms"] == pytest.approx(100, abs=0.5)
    assert c["tls"]["version"] == "1.3" and c["tls"]["rtts"] == pytest.approx(1, abs=0.02)
    assert c["handshake_rtts"] == {"tcp": 1, "tls": 1}
    assert c["mss"] == {"client": 1460, "server": 1460} and c["sack"]
    hs = F.flights(c, phase="handshake")
    assert segs(hs) == [1] and hs[0]["bytes"] < 1448  # the small ECDSA chain fits one packet
    assert c["goodput_mbit"] > 1 and c["data_bytes"] > 100_000
    # the GOAWAY exchange at the end is not part of the transfer
    assert F.flights(c, phase="data")[-1]["exchange"] != F.transfer_flights(c)[0]["exchange"]


def test_napkin_article_reproduced_tls12_large_chain_at_iw3():
    """Seed 003: a 7.7 KB chain at initcwnd 3 costs TLS 1.2 a third round trip."""
    c = one("flights_tls12_large_iw3.pcap")
    print("\n" + F.format_flights(c))
    assert c["tls"]["version"] == "1.2"
    assert c["handshake_rtts"]["tls"] == 3
    hs = F.flights(c, phase="handshake")
    assert segs(hs) == [3, 3, 2]  # the chain in two windows, then the server's Finished
    chain = hs[0]["bytes"] + hs[1]["bytes"]
    assert N.tls_round_trips("1.2", 3, chain) == 3
    t13 = one("flights_tls13_large_iw3.pcap")
    assert t13["tls"]["version"] == "1.3" and t13["handshake_rtts"]["tls"] == 2
    assert N.tls_round_trips("1.3", 3, t13["tls"]["server_handshake_bytes"]) == 2


def test_a_spare_connect_carried_no_request_and_a_used_connection_did():
    """Chromium races connects and drops the spares in their handshakes:
    opened, not used (the store's tcp_connections vs tcp_connections_used)."""
    conns = {c["client"].split(":")[1]: c for c in F.analyze_pcap(DATA / "spares_chromium_two_ip.pcap")}
    assert {p: c["carried_request"] for p, c in conns.items()} == {"42716": True, "59210": False, "59224": False}
    assert conns["42716"]["tls"]["version"] == "1.3"
    for name in ("flights_tls12_large_iw3.pcap", "flights_tls13_large_iw3.pcap", "flights_iw10.pcap"):
        assert one(name)["carried_request"] is True, name


def test_handshake_summary_is_what_a_run_stores():
    """run.json -> connections: one compact line per connection of the capture."""
    s12 = F.handshake_summary(one("flights_tls12_large_iw3.pcap"))
    assert set(s12) == {"client", "server", "carried_request", "tcp_rtt_ms", "tls_version", "tls_ms", "tls_rtts",
                        "server_flights_before_finished"}
    assert s12["carried_request"] is True
    assert s12["tls_version"] == "1.2" and s12["tls_rtts"] == 3
    assert [f["segments"] for f in s12["server_flights_before_finished"]] == [3, 3, 2]
    assert s12["tls_ms"] == pytest.approx(3 * s12["tcp_rtt_ms"], rel=0.05)
    s13 = F.handshake_summary(one("flights_iw10.pcap", keep_series=False))
    assert s13["server"].endswith(":443") and s13["tls_rtts"] == 1
    assert s13["tcp_rtt_ms"] == pytest.approx(100, abs=0.5)
    # a client-side capture splits by silence, which needs the series
    cli = F.handshake_summary(one("flights_iw3_client.pcap", keep_series=False))
    assert cli["server_flights_before_finished"] == [] and cli["tls_rtts"] == 1


def test_client_side_capture_gives_the_same_flights_by_silence():
    srv, cli = one("flights_iw3.pcap"), one("flights_iw3_client.pcap")
    assert cli["vantage"] == "client" and cli["flight_method"] == "gap"
    assert cli["tcp_rtt_ms"] == pytest.approx(100, abs=0.5)
    assert cli["tls"]["rtts"] == pytest.approx(1, abs=0.02)
    assert segs(F.transfer_flights(cli)) == segs(F.flights(srv, phase="data"))


def test_single_drop_is_exactly_one_fast_retransmission():
    srv, cli = one("flights_drop1_iw10.pcap"), one("flights_drop1_iw10_client.pcap")
    print("\n" + F.format_flights(srv))
    # what the client never received: exactly one data segment
    def sent(c):
        s = c["series"]
        return Counter((q, n) for q, n, k in zip(s["seq"], s["len"], s["kind"]) if k != "ack")
    lost = list((sent(srv) - sent(cli)).elements())
    assert len(lost) == 1
    (r,) = srv["retransmissions"]
    assert (r["seq"], r["len"]) == lost[0]
    assert r["kind"] == "fast" and not r["spurious"]
    assert srv["retrans_counts"] == {"fast": 1, "rto": 0, "tlp": 0, "other": 0, "spurious": 0}
    # the loss came after slow start had reached the window; the first flights are untouched
    assert segs(F.transfer_flights(srv))[:3] == [10, 20, 36]


def test_time_sequence_series():
    c = one("flights_iw10.pcap")
    s = c["series"]
    assert len(s["t_ms"]) == len(s["seq"]) == len(s["len"]) == len(s["kind"])
    data = [(t, q) for t, q, k in zip(s["t_ms"], s["seq"], s["kind"]) if k == "data"]
    assert data == sorted(data) and data[0][1] == 0
    assert set(s["kind"]) == {"data", "ack"}
    assert F.analyze_pcap(DATA / "flights_iw10.pcap", keep_series=False)[0]["series"]["t_ms"] == []


def test_measured_plt_is_above_the_napkin_floor():
    for iw in (3, 10, 30):
        m = META[f"flights_iw{iw}.pcap"]
        p = m["path"]
        floor = N.floor_ms(p["rtt_ms"], p["rate_mbit"], 100_000, iw, tls="1.3", dns_lookups=1)
        r = N.ratio(m["plt_ms"], floor)
        print(f"IW {iw}: PLT {m['plt_ms']} ms, floor {floor['total_ms']} ms, ratio {r}")
        assert 1 <= r < 1.25


# --- synthetic captures ------------------------------------------------------

CLI4, SRV4 = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
CLI6, SRV6 = bytes(15) + b"\x01", bytes(15) + b"\x02"
TS_OPT = b"\x01\x01\x08\x0a" + bytes(8)
MSS = 1448


class Synth:
    """A hand-made connection, written as the server's capture would show it."""

    def __init__(self, link: str = "eth", v6: bool = False, c_isn: int = 1000, s_isn: int = 5000,
                 snaplen: int = 128, sport: int = 443):
        self.link, self.v6, self.c_isn, self.s_isn, self.snaplen, self.sport = link, v6, c_isn, s_isn, snaplen, sport
        self.pkts: list[tuple[float, bytes]] = []
        self.c_off = 0  # client payload bytes so far

    def _pkt(self, t: float, from_client: bool, seq: int, ack: int, flags: int, payload: bytes = b"",
             opts: bytes = TS_OPT, win: int = 1000) -> None:
        tcp = dpkt.tcp.TCP(sport=40000 if from_client else self.sport, dport=self.sport if from_client else 40000,
                           seq=seq & 0xFFFFFFFF, ack=ack & 0xFFFFFFFF, flags=flags, win=win, opts=opts, data=payload)
        tcp.off = 5 + len(opts) // 4
        src, dst = (CLI6, SRV6) if self.v6 else (CLI4, SRV4)
        if not from_client:
            src, dst = dst, src
        if self.v6:
            ip = dpkt.ip6.IP6(src=src, dst=dst, nxt=6, hlim=64, data=tcp, plen=len(bytes(tcp)))
        else:
            ip = dpkt.ip.IP(src=src, dst=dst, p=6, ttl=64, data=tcp)
        if self.link == "sll":
            frame = dpkt.sll.SLL(type=0, hrd=1, hlen=6, ethtype=0x86DD if self.v6 else 0x0800, data=ip)
        else:
            frame = dpkt.ethernet.Ethernet(type=0x86DD if self.v6 else 0x0800, data=ip)
        self.pkts.append((t, bytes(frame)))

    def handshake(self, t: float = 0.0, rtt: float = 0.1) -> float:
        syn_opts = b"\x02\x04\x05\xb4\x04\x02\x01\x01\x01\x03\x03\x07"
        self._pkt(t, True, self.c_isn, 0, dpkt.tcp.TH_SYN, opts=syn_opts)
        self._pkt(t, False, self.s_isn, self.c_isn + 1, dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK, opts=syn_opts)
        self._pkt(t + rtt, True, self.c_isn + 1, self.s_isn + 1, dpkt.tcp.TH_ACK)
        return t + rtt

    def request(self, t: float, payload: bytes, ack: int = 0) -> None:
        self._pkt(t, True, self.c_isn + 1 + self.c_off, self.s_isn + 1 + ack, dpkt.tcp.TH_ACK | dpkt.tcp.TH_PUSH,
                  payload)
        self.c_off += len(payload)

    def data(self, t: float, i: int, n: int = MSS) -> None:
        """Server segment number i (offset i*MSS)."""
        self._pkt(t, False, self.s_isn + 1 + i * MSS, self.c_isn + 1 + self.c_off, dpkt.tcp.TH_ACK, bytes(n))

    def ack(self, t: float, segs_acked: int, sack: list[tuple[int, int]] = (), win: int = 1000) -> None:
        """Client ACK of segs_acked segments; sack blocks in segment numbers [lo, hi)."""
        opts = TS_OPT
        if sack:
            opts += b"\x01\x01\x05" + bytes([2 + 8 * len(sack)]) + b"".join(
                struct.pack("!II", (self.s_isn + 1 + lo * MSS) & 0xFFFFFFFF, (self.s_isn + 1 + hi * MSS) & 0xFFFFFFFF)
                for lo, hi in sack)
        self._pkt(t, True, self.c_isn + 1 + self.c_off, self.s_isn + 1 + segs_acked * MSS, dpkt.tcp.TH_ACK,
                  opts=opts, win=win)

    def write(self, path: Path, ng: bool = False) -> Path:
        linktype = dpkt.pcap.DLT_LINUX_SLL if self.link == "sll" else dpkt.pcap.DLT_EN10MB
        with open(path, "wb") as fh:
            w = dpkt.pcapng.Writer(fh, snaplen=self.snaplen, linktype=linktype) if ng else \
                dpkt.pcap.Writer(fh, snaplen=self.snaplen, linktype=linktype)
            # dpkt's writers record the length of what they are given: give them
            # the frame cut at the snaplen, and (pcap) patch the wire length in
            for t, frame in self.pkts:
                w.writepkt(frame[: self.snaplen], ts=1000 + t)
        if not ng:
            _fix_origlen(path, [len(f) for _t, f in self.pkts])
        return path


def _fix_origlen(path: Path, lens: list[int]) -> None:
    raw = bytearray(path.read_bytes())
    off = 24
    for n in lens:
        caplen = struct.unpack_from("<I", raw, off + 8)[0]
        struct.pack_into("<I", raw, off + 12, n)
        off += 16 + caplen
    path.write_bytes(bytes(raw))


GET = b"GET /x HTTP/1.1\r\nHost: www.lab.test\r\n\r\n"


def _slow_start(s: Synth, total: int, iw: int, rtt: float = 0.1, t: float = 0.1) -> None:
    """A loss-free slow start: each round a burst, acknowledged one RTT later
    (an ACK per two segments), before the next round's burst."""
    sent, w = 0, iw
    while sent < total:
        n = min(w, total - sent)
        for j in range(n):
            s.data(t + j * 1e-4, sent + j)
        for j in range(2, n + 1, 2):
            s.ack(t + rtt + j * 1e-4, sent + j)
        if n % 2:
            s.ack(t + rtt + n * 1e-4 + 1e-5, sent + n)
        sent += n
        w *= 2
        t += rtt + n * 1e-4 + 2e-5


def _conn(s: Synth, tmp_path: Path, **kw) -> dict:
    (c,) = F.analyze_pcap(s.write(tmp_path / "x.pcap"), **kw)
    return c


def test_synthetic_slow_start_across_a_sequence_wrap(tmp_path):
    s = Synth(s_isn=2**32 - 30_000)  # the server's sequence numbers wrap in round 2
    t = s.handshake()
    s.request(t, GET)
    _slow_start(s, 100, 10, t=t)
    c = _conn(s, tmp_path)
    assert c["tls"] is None and c["handshake_rtts"] == {"tcp": 1, "tls": 0}
    assert segs(F.flights(c)) == [10, 20, 40, 30]
    assert segs(F.flights(c, "gap")) == [10, 20, 40, 30]
    assert c["server_bytes_acked"] == 100 * MSS and c["retransmissions"] == []
    assert F.slow_start_verdicts(F.transfer_flights(c), 10)[-1]["reason"] == "end"


@pytest.mark.parametrize("link, v6, ng", [("sll", False, False), ("eth", True, False), ("sll", True, False),
                                          ("eth", False, True)])
def test_link_types_ipv6_and_pcapng(tmp_path, link, v6, ng):
    s = Synth(link=link, v6=v6)
    t = s.handshake()
    s.request(t, GET)
    _slow_start(s, 30, 10, t=t)
    (c,) = F.analyze_pcap(s.write(tmp_path / "x.pcap", ng=ng))
    assert segs(F.flights(c)) == [10, 20]
    assert c["tcp_rtt_ms"] == pytest.approx(100, abs=1e-3)


def test_server_port_inferred_from_the_syn(tmp_path):
    s = Synth(sport=8443)
    t = s.handshake()
    s.request(t, GET)
    _slow_start(s, 30, 10, t=t)
    path = s.write(tmp_path / "x.pcap")
    assert F.analyze_pcap(path) == []  # nothing on port 443
    (c,) = F.analyze_pcap(path, server_port=None)
    assert c["server"] == "10.0.0.2:8443" and segs(F.flights(c)) == [10, 20]


def _ten_then(s: Synth) -> float:
    t = s.handshake()
    s.request(t, GET)
    for i in range(10):
        s.data(t + i * 1e-4, i)
    return t + 0.1  # when the first ACKs are back


@pytest.mark.parametrize("with_sack", [True, False])
def test_synthetic_fast_retransmit(tmp_path, with_sack):
    s = Synth()
    t = _ten_then(s)
    s.ack(t, 1)
    s.ack(t + 2e-4, 3)  # segment 3 lost
    for k in range(4, 10):
        s.ack(t + k * 1e-4, 3, sack=[(4, k + 1)] if with_sack else ())
        if k == 6:
            s.data(t + k * 1e-4 + 1e-5, 3)  # after the third duplicate ACK
    s.ack(t + 0.1, 10)
    c = _conn(s, tmp_path)
    assert [r["kind"] for r in c["retransmissions"]] == ["fast"]
    assert c["retransmissions"][0]["seq"] == 3 * MSS


def test_synthetic_timeout(tmp_path):
    s = Synth()
    t = s.handshake()
    s.request(t, GET)
    for i in range(4):
        s.data(t + i * 1e-4, i)
    s.ack(t + 0.1, 2)  # segments 2 and 3 lost, no duplicate ACKs
    s.data(t + 0.4, 2)  # RTO: the first unacknowledged segment after silence
    s.ack(t + 0.5, 3)
    s.data(t + 0.5 + 1e-5, 3)  # go-back-N in the same recovery
    s.ack(t + 0.6, 4)
    c = _conn(s, tmp_path)
    assert [r["kind"] for r in c["retransmissions"]] == ["rto", "rto"]
    assert c["retrans_counts"]["rto"] == 2 and c["retrans_counts"]["fast"] == 0


def test_synthetic_tail_loss_probe_then_fast(tmp_path):
    s = Synth()
    t = s.handshake()
    s.request(t, GET)
    for i in range(4):
        s.data(t + i * 1e-4, i)
    s.ack(t + 0.1, 2)  # 2 and 3 lost
    s.data(t + 0.3, 3)  # the probe re-sends the last segment
    s.ack(t + 0.4, 2, sack=[(3, 4)])
    s.data(t + 0.4 + 1e-5, 2)  # the SACK reveals the hole
    s.ack(t + 0.5, 4)
    c = _conn(s, tmp_path)
    assert [r["kind"] for r in c["retransmissions"]] == ["tlp", "fast"]


def test_synthetic_spurious_timeout_found_by_dsack(tmp_path):
    s = Synth()
    t = s.handshake()
    s.request(t, GET)
    for i in range(4):
        s.data(t + i * 1e-4, i)
    s.ack(t + 0.1, 2)
    s.data(t + 0.4, 2)  # the originals were only late
    s.ack(t + 0.45, 4)
    s.ack(t + 0.5, 4, sack=[(2, 3)])  # D-SACK: segment 2 arrived twice
    c = _conn(s, tmp_path)
    (r,) = c["retransmissions"]
    assert r["kind"] == "rto" and r["spurious"]
    assert c["retrans_counts"]["spurious"] == 1


def _tls_record(typ: int, body_len: int, hs_type: int | None = None) -> bytes:
    body = (bytes([hs_type]) if hs_type is not None else b"") + bytes(body_len - (hs_type is not None))
    return bytes([typ, 3, 3]) + struct.pack("!H", body_len) + body


@pytest.mark.parametrize("version", ["1.3", "1.2"])
def test_synthetic_tls_records_tracked_past_the_snaplen(tmp_path, version):
    s = Synth()
    t = s.handshake()
    ch = _tls_record(22, 1800, hs_type=1)  # a ClientHello over two segments
    s.request(t, ch[:1448])
    s.request(t + 1e-5, ch[1448:])
    s.data(t + 2e-5, 0)  # the server's handshake flight
    t += 0.1
    if version == "1.3":
        s.request(t, _tls_record(20, 1) + _tls_record(23, 53) + _tls_record(23, 60), ack=0)
        s.ack(t, 0)
    else:
        s.request(t, _tls_record(22, 70, hs_type=16) + _tls_record(20, 1) + _tls_record(22, 40, hs_type=0))
        s.data(t + 1e-5, 1, 300)  # the server's ChangeCipherSpec and Finished
        t += 0.1
        s.request(t, _tls_record(23, 100))
    c = _conn(s, tmp_path)
    assert c["tls"]["version"] == version
    assert c["handshake_rtts"]["tls"] == (1 if version == "1.3" else 2)
    assert c["tls"]["handshake_ms"] == pytest.approx(100 if version == "1.3" else 200, abs=0.1)


def test_benchmark_100mb_capture(tmp_path):
    """A 100 MB capture at snaplen 128 (~810k packets): seconds, not minutes."""
    path = tmp_path / "big.pcap"
    n = _write_bulk(path, 100_000_000)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    (c,) = F.analyze_pcap(path)
    dt = time.perf_counter() - t
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    print(f"\n100 MB capture, {n} data segments: {dt:.2f} s, peak RSS grew {grew / 1024:.0f} MB")
    assert c["data_segments"] == n and c["server_bytes_acked"] > 0.99 * n * MSS
    assert dt < 30


def _write_bulk(path: Path, target: int, snaplen: int = 128) -> int:
    """Struct-built for speed: a long transfer, an ACK per two segments."""
    eth = bytes(12) + b"\x08\x00"

    def pkt(src, dst, sp, dp, seq, ack, flags, plen, opts=TS_OPT):
        doff = 20 + len(opts)
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + doff + plen, 0, 0x4000, 64, 6, 0, src, dst)
        tcp = struct.pack("!HHIIHHHH", sp, dp, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, (doff // 4) << 12 | flags,
                          1000, 0, 0) + opts
        return eth + ip + tcp, len(eth) + len(ip) + len(tcp) + plen

    n = 0
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, 1))

        def w(fr, t):
            hdr, full = fr
            cap = (hdr + bytes(max(0, snaplen - len(hdr))))[: min(snaplen, full)]
            f.write(struct.pack("<IIII", int(t), int((t % 1) * 1e6), len(cap), full) + cap)

        c_isn, s_isn, t = 1000, 2**32 - 10**6, 1000.0
        syn = b"\x02\x04\x05\xb4\x04\x02\x01\x01\x01\x03\x03\x07"
        w(pkt(CLI4, SRV4, 40000, 443, c_isn, 0, 0x02, 0, syn), t)
        w(pkt(SRV4, CLI4, 443, 40000, s_isn, c_isn + 1, 0x12, 0, syn), t)
        t += 0.1
        w(pkt(CLI4, SRV4, 40000, 443, c_isn + 1, s_isn + 1, 0x10, 0), t)
        w(pkt(CLI4, SRV4, 40000, 443, c_isn + 1, s_isn + 1, 0x18, 100), t)
        seq = s_isn + 1
        while f.tell() < target:
            w(pkt(SRV4, CLI4, 443, 40000, seq, c_isn + 101, 0x10, MSS), t)
            seq += MSS
            n += 1
            t += 0.00012
            if n % 2 == 0:
                w(pkt(CLI4, SRV4, 40000, 443, c_isn + 101, seq - 20 * MSS, 0x10, 0), t)
        w(pkt(CLI4, SRV4, 40000, 443, c_isn + 101, seq, 0x10, 0), t + 0.1)
    return n


def test_steady_throughput_leaves_slow_start_out():
    """The second half of the bytes of a transfer, from the ACKs in the
    server capture: on the canned 1 MB-object runs of reno_beta@ci it is a
    real rate near h2load's, and the definition is checked by hand."""
    from tortoiselab.analysis.flights import steady_throughput_mbit

    conn = {"series": {"t_ms": [0, 10, 20, 100, 200, 300], "seq": [1, 1, 1001, 0, 50001, 100001],
                       "len": [0, 0, 0, 1000, 0, 0], "kind": ["ack", "ack", "ack", "data", "ack", "ack"]}}
    # acks at 0..300 ms cover 1 .. 100001; half (50001) first at 200 ms; 50000 bytes in 100 ms
    assert steady_throughput_mbit(conn) == pytest.approx(50000 * 8 / 0.1 / 1e6)
    assert steady_throughput_mbit({"series": {"t_ms": [0], "seq": [1], "len": [0], "kind": ["ack"]}}) is None
    runs = Path(__file__).resolve().parents[1] / "data" / "runs" / "reno_beta@ci"
    for pcap in sorted(runs.glob("*/server.pcap")):
        c = max(F.analyze_pcap(pcap), key=lambda c: c["server_bytes_acked"])
        assert 1 < steady_throughput_mbit(c) < 100


def test_dns_lookups_from_the_client_capture():
    """Per name, first query to its address answer: a capture of two
    lookups, one of which Chromium made for a request it coalesced (its
    DevTools timing shows none)."""
    from tortoiselab.analysis.dnstime import lookups_ms
    assert lookups_ms(DATA / "dns_chromium_coalesced.pcap") == {"www.lab.test": 100.038, "static.lab.test": 100.04}
    assert lookups_ms(DATA / "flights_iw10.pcap") == {}
    assert lookups_ms(DATA / "no-such.pcap") == {}
