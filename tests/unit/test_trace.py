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
