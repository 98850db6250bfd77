"""Which host served which objects of a page load: the HAR's entries
grouped by the address they came from (the CDN set-up, spec/cdn.py)."""

from __future__ import annotations

from urllib.parse import urlsplit

FROM_CACHE = "cache"  # an entry without a server address: the loader's cache answered it


def served_by(entries: list[dict], roles: dict[str, str]) -> dict[str, dict]:
    """Per role (roles maps a server address to a name, e.g. {"10.0.0.2":
    "server", "10.0.4.1": "cdn"}; an address not in it is its own name,
    an entry without one FROM_CACHE): {"requests", "bytes" (response
    bodies), "hosts" (the URLs' hostnames, sorted), "connections" (distinct
    connection ids)}."""
    out: dict[str, dict] = {}
    conns: dict[str, set] = {}
    for e in entries:
        ip = e.get("serverIPAddress")
        role = roles.get(ip, ip) if ip else FROM_CACHE
        row = out.setdefault(role, {"requests": 0, "bytes": 0, "hosts": [], "connections": 0})
        row["requests"] += 1
        row["bytes"] += max(int(e.get("response", {}).get("bodySize", 0) or 0), 0)
        host = urlsplit(e.get("request", {}).get("url", "")).hostname or ""
        if host and host not in row["hosts"]:
            row["hosts"] = sorted([*row["hosts"], host])
        if e.get("connection"):
            conns.setdefault(role, set()).add(str(e["connection"]))
    for role, ids in conns.items():
        out[role]["connections"] = len(ids)
    return out


def misplaced(entries: list[dict], names: dict[str, str]) -> list[str]:
    """URLs answered from another address than their hostname resolves to
    in names (hostname -> address): a static object the PoP served in the
    CDN set-up, say. Cache hits (no address) are not counted."""
    out = []
    for e in entries:
        url = e.get("request", {}).get("url", "")
        ip, host = e.get("serverIPAddress"), urlsplit(url).hostname
        if ip and host in names and names[host] != ip:
            out.append(url)
    return out
