"""The kernel's own view of a connection: the `tcp:tcp_probe` tracepoint
(snd_cwnd, ssthresh, srtt at every ACK the sender receives), read through
tracefs inside the lab.

Its `ssthresh` field is not the socket's snd_ssthresh: the tracepoint
records tcp_current_ssthresh(), which outside the CWR and Recovery states
is max(snd_ssthresh, 3/4 snd_cwnd). It rises with cwnd in slow start and
congestion avoidance, so a scan for drops of this column finds dozens of
phantom reductions; a multiplicative decrease shows as cwnd falling
(analysis/ccanalysis.py). The sample calls it `current_ssthresh`, and so
does the third column of a run's cwnd.json.

The trace clock is `mono`: the default (`local`) advanced in 10 ms steps in
the UML guest (docs/determinism.md); `mono` follows the guest's clock, which on the
virtual clock is the simulated time.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

TRACEFS = Path("/sys/kernel/tracing")
EVENT = TRACEFS / "events" / "tcp" / "tcp_probe"

_LINE = re.compile(r"\s(\d+\.\d+): tcp_probe: (.*)$")
_KV = re.compile(r"(\w+)=(\S+)")


@dataclass(frozen=True)
class ProbeSample:
    t: float  # seconds, trace clock
    sport: int
    dport: int
    data_len: int
    snd_nxt: int
    snd_una: int
    snd_cwnd: int
    current_ssthresh: int  # tcp_current_ssthresh(): max(snd_ssthresh, 3/4 cwnd) outside recovery
    srtt_us: int


def _port(addr: str) -> int:
    return int(addr.rsplit(":", 1)[1])


def parse_tcp_probe(text: str) -> list[ProbeSample]:
    """Parse tracefs `trace` lines of the tcp:tcp_probe event (6.12 format:
    ``src=10.0.0.2:5001 dest=10.0.0.1:40000 mark=0x0 data_len=0
    snd_nxt=0x... snd_una=0x... snd_cwnd=10 ssthresh=2147483647 snd_wnd=...
    srtt=... rcv_wnd=... sock_cookie=...``)."""
    out = []
    for line in text.splitlines():
        m = _LINE.search(line)
        if not m:
            continue
        kv = dict(_KV.findall(m.group(2)))
        try:
            out.append(ProbeSample(
                t=float(m.group(1)), sport=_port(kv["src"]), dport=_port(kv["dest"]),
                data_len=int(kv.get("data_len", "0")),
                snd_nxt=int(kv["snd_nxt"], 16), snd_una=int(kv["snd_una"], 16),
                snd_cwnd=int(kv["snd_cwnd"]), current_ssthresh=int(kv["ssthresh"]), srtt_us=int(kv["srtt"]),
            ))
        except (KeyError, ValueError):
            continue
    return out


def _write(path: Path, value: str) -> None:
    path.write_text(value, encoding="utf-8")


# tracefs settings tcp_probe changes, put back with restore=True
SETTINGS = ("tracing_on", "trace_clock", "buffer_size_kb")


def current_settings() -> dict[str, str]:
    """The global tracefs settings as they are: trace_clock is the one in
    brackets, buffer_size_kb the per-CPU size (without "(expanded: ...)")."""
    out = {}
    for name in SETTINGS:
        text = (TRACEFS / name).read_text(encoding="utf-8").strip()
        if name == "trace_clock":
            text = next((w[1:-1] for w in text.split() if w.startswith("[")), "local")
        out[name] = text.split()[0] if text else text
    return out


@contextmanager
def tcp_probe(sport: int, buffer_kb: int = 16384, restore: bool = False) -> Iterator["TraceReader"]:
    """Record tcp_probe events of connections whose source port is `sport`
    (the sender's side), and switch the event off again afterwards. With
    restore (the native backend: tracing is the host's, and global), the
    global settings changed here go back as they were; the trace buffer's
    contents are gone either way."""
    if not EVENT.exists():
        raise RuntimeError(f"{EVENT} is missing: the kernel lacks the tcp_probe tracepoint or tracefs "
                           "is not mounted")
    found = current_settings() if restore else {}
    _write(TRACEFS / "tracing_on", "0")
    _write(TRACEFS / "trace_clock", "mono")
    _write(TRACEFS / "buffer_size_kb", str(buffer_kb))
    _write(TRACEFS / "trace", "")  # clear
    _write(EVENT / "filter", f"sport == {sport}")
    _write(EVENT / "enable", "1")
    _write(TRACEFS / "tracing_on", "1")
    reader = TraceReader()
    try:
        yield reader
    finally:
        _write(TRACEFS / "tracing_on", "0")
        reader.text = (TRACEFS / "trace").read_text(encoding="utf-8")
        _write(EVENT / "enable", "0")
        _write(EVENT / "filter", "0")
        for name in ("trace_clock", "buffer_size_kb", "tracing_on"):  # tracing_on last
            if name in found:
                _write(TRACEFS / name, found[name])


class TraceReader:
    text: str = ""

    def samples(self) -> list[ProbeSample]:
        return parse_tcp_probe(self.text)
