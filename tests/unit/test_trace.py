from tortoiselab.guest.trace import parse_tcp_probe

LINES = """# tracer: nop
#
          python-321     [000] ..s1.   12.345678: tcp_probe: family=AF_INET src=10.0.0.2:7000 dest=10.0.0.1:40312 mark=0x0 data_len=0 snd_nxt=0x5f3a2b10 snd_una=0x5f3a25c0 snd_cwnd=64 ssthresh=64 snd_wnd=262144 srtt=100215 rcv_wnd=65160 sock_cookie=3 skbaddr=0000000012345678 skaddr=0000000087654321
          <idle>-0       [000] ..s2.   12.445901: tcp_probe: family=AF_INET src=10.0.0.2:7000 dest=10.0.0.1:40312 mark=0x0 data_len=0 snd_nxt=0x5f3a3000 snd_una=0x5f3a2b10 snd_cwnd=65 ssthresh=64 snd_wnd=262144 srtt=100301 rcv_wnd=65160 sock_cookie=3 skbaddr=0000000012345678 skaddr=0000000087654321
garbage line
"""


def test_parse_tcp_probe():
    s = parse_tcp_probe(LINES)
    assert len(s) == 2
    a = s[0]
    assert (a.t, a.sport, a.dport, a.snd_cwnd, a.current_ssthresh, a.srtt_us) == (12.345678, 7000, 40312, 64, 64, 100215)
    assert a.snd_una == 0x5F3A25C0 and s[1].snd_cwnd == 65


def _fake_tracefs(tmp_path, monkeypatch):
    from tortoiselab.guest import trace

    root = tmp_path / "tracing"
    event = root / "events" / "tcp" / "tcp_probe"
    event.mkdir(parents=True)
    for name, text in (("tracing_on", "1\n"), ("trace_clock", "[local] global counter uptime perf mono\n"),
                       ("buffer_size_kb", "7 (expanded: 1408)\n"), ("trace", "")):
        (root / name).write_text(text)
    for name in ("filter", "enable"):
        (event / name).write_text("0\n")
    monkeypatch.setattr(trace, "TRACEFS", root)
    monkeypatch.setattr(trace, "EVENT", event)
    return trace, root


def test_tcp_probe_puts_the_global_tracing_settings_back_when_asked(tmp_path, monkeypatch):
    """Native: the host's tracing is global; its settings go back as found."""
    trace, root = _fake_tracefs(tmp_path, monkeypatch)
    assert trace.current_settings() == {"tracing_on": "1", "trace_clock": "local", "buffer_size_kb": "7"}
    with trace.tcp_probe(7000, restore=True):
        assert (root / "trace_clock").read_text() == "mono" and (root / "buffer_size_kb").read_text() == "16384"
    assert [(root / n).read_text() for n in ("tracing_on", "trace_clock", "buffer_size_kb")] == ["1", "local", "7"]
    assert (root / "events/tcp/tcp_probe/enable").read_text() == "0"


def test_tcp_probe_in_the_lab_guest_leaves_its_settings(tmp_path, monkeypatch):
    trace, root = _fake_tracefs(tmp_path, monkeypatch)
    with trace.tcp_probe(7000):
        pass
    assert [(root / n).read_text() for n in ("tracing_on", "trace_clock")] == ["0", "mono"]
