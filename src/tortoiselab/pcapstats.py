"""What a capture says about each TCP connection: the handshakes in round
trips, read from packets (dpkt; no tshark per packet).

Used on the server side's capture: times are when packets left or reached
the server. Per connection:
- tcp_rtt_ms: SYN-ACK sent -> the client's ACK of it (one round trip);
- tls_ms: the client's first payload (ClientHello) -> its second payload
  flight (Finished, for TLS 1.3 together with or before the first request);
- tls_rtts: tls_ms / tcp_rtt_ms, rounded: 1 for a TLS 1.3 handshake whose
  server flight fits the initial window, 2 when it does not;
- server_flights: the server's payload packets before the client's Finished,
  grouped into flights by gaps longer than half a round trip.
"""

from __future__ import annotations

import socket
from dataclasses import asdict, dataclass, field

import dpkt


@dataclass
class Conn:
    client: tuple[str, int]
    server: tuple[str, int]
    t_syn: float | None = None
    t_synack: float | None = None
    t_ack: float | None = None
    client_payload_t: list[float] = field(default_factory=list)
    server_payload: list[tuple[float, int]] = field(default_factory=list)

    def summary(self) -> dict:
        out = {"client": f"{self.client[0]}:{self.client[1]}", "server": f"{self.server[0]}:{self.server[1]}"}
        rtt = (self.t_ack - self.t_synack) * 1e3 if self.t_ack and self.t_synack else None
        out["tcp_rtt_ms"] = round(rtt, 3) if rtt else None
        # client payload "flights": ClientHello, then the next payload sent
        # after the server has answered
        ch = self.client_payload_t[0] if self.client_payload_t else None
        first_srv = self.server_payload[0][0] if self.server_payload else None
        fin = next((t for t in self.client_payload_t[1:] if first_srv is not None and t > first_srv), None)
        out["tls_ms"] = round((fin - ch) * 1e3, 3) if ch is not None and fin is not None else None
        out["tls_rtts"] = round(out["tls_ms"] / rtt) if out["tls_ms"] is not None and rtt else None
        flights = []
        if ch is not None and fin is not None and rtt:
            for t, n in self.server_payload:
                if t >= fin:
                    break
                if flights and (t - flights[-1]["last"]) * 1e3 < rtt / 2:
                    flights[-1]["segments"] += 1
                    flights[-1]["bytes"] += n
                    flights[-1]["last"] = t
                else:
                    flights.append({"first": t, "last": t, "segments": 1, "bytes": n})
        out["server_flights_before_finished"] = [{"segments": f["segments"], "bytes": f["bytes"]} for f in flights]
        return out


def _addr(raw: bytes) -> str:
    return socket.inet_ntop(socket.AF_INET, raw)


def connections(pcap_path: str, server_port: int = 443) -> list[dict]:
    conns: dict[tuple, Conn] = {}
    with open(pcap_path, "rb") as fh:
        reader = dpkt.pcap.Reader(fh)
        linktype = reader.datalink()
        for ts, buf in reader:
            if linktype == dpkt.pcap.DLT_EN10MB:
                eth = dpkt.ethernet.Ethernet(buf)
                ip = eth.data
            elif linktype == dpkt.pcap.DLT_LINUX_SLL:
                ip = dpkt.sll.SLL(buf).data
            else:
                ip = dpkt.ip.IP(buf)
            if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.tcp.TCP):
                continue
            tcp = ip.data
            src, dst = (_addr(ip.src), tcp.sport), (_addr(ip.dst), tcp.dport)
            if tcp.dport == server_port:
                key, from_client = (src, dst), True
            elif tcp.sport == server_port:
                key, from_client = (dst, src), False
            else:
                continue
            c = conns.setdefault(key, Conn(client=key[0], server=key[1]))
            syn, ack = bool(tcp.flags & dpkt.tcp.TH_SYN), bool(tcp.flags & dpkt.tcp.TH_ACK)
            # payload length from the IP header (the capture's snaplen may cut the bytes)
            plen = ip.len - ip.hl * 4 - tcp.off * 4
            if from_client:
                if syn and c.t_syn is None:
                    c.t_syn = ts
                elif ack and c.t_synack is not None and c.t_ack is None and not syn:
                    c.t_ack = ts
                if plen > 0:
                    c.client_payload_t.append(ts)
            else:
                if syn and ack and c.t_synack is None:
                    c.t_synack = ts
                if plen > 0:
                    c.server_payload.append((ts, plen))
    return [c.summary() for c in conns.values()]
