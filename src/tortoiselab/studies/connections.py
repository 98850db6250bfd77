"""The server capture of a run, as the studies read it: its connections
(the run's stored connections table, or for a run stored before tables
its capture parsed once: host/store/captures.py), the response's flights, the
TLS handshake's flight and whether its ACKs grew the window, the second
load's window, and hybla's first window. The notebooks use these to show a claim's mechanism
(notebooks/README.md; labs/04-initcwnd.md)."""

from __future__ import annotations

from pathlib import Path

from tortoiselab.analysis import flights
from tortoiselab.host.store import captures

MSS = 1448
HYBLA_RTT0_MS = 25  # tcp_hybla's rtt0 module parameter (Linux default)


def first_conn(run_dir: str | Path) -> dict | None:
    """The first connection of the run's server capture whose SYN it saw."""
    cs = [c for c in captures.connections(run_dir) if c.get("syn_seen")]
    return cs[0] if cs else None


def transfer(conn: dict) -> list[dict]:
    """The response's data flights, one per round trip (flights.transfer_flights)."""
    return flights.transfer_flights(conn)


def handshake_flight_bytes(conn: dict) -> int:
    """The server's first logical handshake flight (TLS 1.3: all of it; TLS
    1.2: all but its last flight, the ChangeCipherSpec + Finished)."""
    hs = flights.flights(conn, phase="handshake")
    if not hs:
        return 0
    total = sum(f["bytes"] for f in hs)
    if (conn.get("tls") or {}).get("version") == "1.2" and len(hs) > 1:
        total -= hs[-1]["bytes"]
    return total


def handshake_grew_window(conn: dict, iw: int) -> bool:
    """Could the TLS handshake's ACKs have grown the window before the
    response? Linux grows cwnd in slow start only while it is the limit,
    and counts it as the limit while cwnd < 2 * packets in flight
    (tcp_is_cwnd_limited, include/net/tcp.h): so when the server's handshake
    packets exceed IW / 2, the response no longer starts at IW."""
    packets = sum(f["segments"] for f in flights.flights(conn, phase="handshake"))
    return 2 * packets > iw


def second_load_window(run_dir: str | Path) -> int | None:
    """Packets of the first flight of the second load's response (the
    window the server used after the idle gap), from the server capture."""
    c = first_conn(run_dir)
    if c is None:
        return None
    tf = transfer(c)
    data = [f for f in flights.flights(c, "ack", phase="data") if f["bytes"] > MSS]
    later = [f for f in data if tf and f["exchange"] != tf[0]["exchange"] and f["t_ms"] > tf[-1]["t_ms"]]
    return later[0]["segments"] if later else None


def hybla_rho(rtt_ms: float) -> int:
    """Linux tcp_hybla: rho = max(srtt / rtt0, 1), integer, set as the
    connection's cwnd in hybla_init (net/ipv4/tcp_hybla.c)."""
    return max(1, int(rtt_ms // HYBLA_RTT0_MS))


def second_origin_connections(conns: list[dict]) -> tuple[int, int]:
    """A load's connections to the page's other origins, counted as seed 001
    counts them ("92% of connections are reused"): (reused, new). For each
    origin other than the page's (the first connection's) that the load
    sent requests to, one connection was needed: it was *reused* when the
    origin's requests all rode a connection opened for another origin
    (coalescing), *new* for each connection opened for the origin itself.
    A view that asked the other origins nothing (every asset cached) needs
    no connection and counts (0, 0). conns: the loader summary's
    connections (origin, origins served)."""
    if not conns:
        return 0, 0
    page = conns[0].get("origin")
    served = {o for c in conns for o in (c.get("origins") or [c.get("origin")])} - {page}
    opened = [c.get("origin") for c in conns[1:] if c.get("origin") != page]
    reused = len(served - set(opened))
    return reused, len(opened)


def reuse_in_connections(counts) -> tuple[float, int]:
    """Reused connections / all connections the loads needed to other
    origins, pooled over loads ((reused, new) pairs): (ratio, connections);
    NaN without any connection."""
    pairs = [(int(r), int(n)) for r, n in counts]  # any iterable, read once
    reused = sum(r for r, _ in pairs)
    total = reused + sum(n for _, n in pairs)
    return (reused / total if total else float("nan")), total
