"""A run's server capture as the host's readers take it: its connections
table (analysis/conntable.py: packets, flights, RTT samples and
retransmissions of every TCP connection), read by the studies, the maps,
the physics checks, the report's flight figure and the determinism check.

The table is parsed once, in the lab guest right after the load, and
stored with the run as connections.json beside server.pcap, in the run's
manifest like every file of it (host/verify.py). `connections(run_dir)`
reads it; for a run stored before the table existed (or with a table of
an older analysis: conntable.TABLE_FORMAT) it parses the capture once and
keeps the answer in the user's cache (cache_dir) under the capture's
sha256, never in a results folder.

A results folder is untrusted input (docs/faults.md): the capture and the
table are opened with no link followed and only if they are regular files
(host/safefs.py); the table is read only if it was made from the very
bytes of the capture beside it (its capture_sha256), else the run is named
as damaged with the fix. A table edited but still naming its capture is
what `tortoise verify` finds (its sha256 in the manifest).
"""

from __future__ import annotations

import hashlib
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tortoiselab.analysis.conntable import TABLE, TABLE_FORMAT, analyze_pcap, table_connections, table_of
from tortoiselab.host import labkernel, safefs
from tortoiselab.host.store import StoreError, redo_fix
from tortoiselab.spec import bounds

CAPTURE = "server.pcap"
SERVER_PORT = 443  # the server's side of the page's connections (guest/tasks/pageload.py)
CACHE_ENV = labkernel.CACHE_ENV  # the user's cache (the lab kernel's too): labkernel.user_cache


class DamagedTable(StoreError):
    """A run's connections.json that is not its capture's table (edited,
    cut short, made from other bytes): the run is damaged."""


def cache_dir() -> Path:
    """Where captures parsed on the host are kept: the user's own cache, by
    the capture's sha256, never a results folder. A results folder is
    untrusted input (docs/faults.md): figures kept there would be numbers no
    record or manifest backs, and anyone who can write the folder could
    plant them."""
    return labkernel.user_cache() / "flights"


def cache_name(capture_sha256: str) -> str:
    """A parsed capture's file in cache_dir(): by its sha256 and the table's
    format, so an analysis of another format (or the bare lists kept before
    tables, <sha256>.json, which older versions still read) is never taken
    for this one's."""
    return f"{capture_sha256}.table{TABLE_FORMAT}.json"


@contextmanager
def _capture(run_dir: Path) -> Iterator[tuple[str, str] | None]:
    """The run's server capture opened once (no link followed, a regular
    file only): (a path that reads that very descriptor, its sha256); None
    without a capture."""
    pcap = run_dir / CAPTURE
    try:  # sized before a byte is hashed or parsed (spec/bounds.py)
        fd = safefs.open_regular(pcap, run_dir.parent.parent, f"reading {pcap}", bounds.read_bound(CAPTURE),
                                 fix=f"move it out of the folder (mv {pcap} SOMEWHERE), then {redo_fix(run_dir)}")
    except FileNotFoundError:
        fd = None
    if fd is None:
        yield None
        return
    with os.fdopen(fd, "rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
        yield f"/proc/self/fd/{fd}", digest


def connections(run_dir: str | Path) -> list[dict]:
    """The connections of the run's server capture (analyze_pcap's dicts
    without "series"): its stored table, else the capture parsed (kept in
    cache_dir); [] without a capture. DamagedTable for a table that is not
    the capture's; safefs's refusals for a link or a FIFO in either's place."""
    d = Path(run_dir)
    with _capture(d) as cap:
        if cap is None:
            return []
        path, digest = cap
        stored = _stored(d, digest)
        if stored is not None:
            return stored
        cached = cache_dir() / cache_name(digest)
        try:
            return _conns_of(json.loads(cached.read_text(encoding="utf-8")), digest)
        except (OSError, ValueError, TypeError):  # not parsed yet (or a cache file cut short): parse it
            pass
        conns = analyze_pcap(Path(path), SERVER_PORT, keep_series=False)
    for c in conns:
        c.pop("series", None)
    _keep(cached, table_of(conns, digest, SERVER_PORT))
    return conns


def connections_with_series(run_dir: str | Path) -> list[dict]:
    """The connections of the run's server capture with their series (the
    packet-level time-sequence points, which the table leaves out: the
    report's and the physics check's few readers of single ACKs), parsed
    from the capture each time, opened as connections opens it; []
    without a capture."""
    with _capture(Path(run_dir)) as cap:
        return analyze_pcap(Path(cap[0]), SERVER_PORT) if cap is not None else []


def _stored(d: Path, digest: str) -> list[dict] | None:
    """The run's stored table's connections; None without one or for one
    of another format (parse the capture)."""
    f = d / TABLE
    try:
        raw = safefs.read_bytes_regular(f, d.parent.parent, doing=f"reading {f}")
    except FileNotFoundError:
        return None
    except safefs.REFUSED as exc:
        raise DamagedTable(f"run {d.name}: {f}: not read: {exc}; then {redo_fix(d)}") from None
    try:
        return table_connections(json.loads(raw), digest, SERVER_PORT)
    except ValueError as exc:
        raise DamagedTable(f"run {d.name}: {f}: not the table of {d / CAPTURE} ({exc}); fix: {redo_fix(d)}") \
            from None


def _conns_of(table: object, digest: str) -> list[dict]:
    """A cache file's connections; ValueError for one of another format
    (or of the format before tables: a bare list)."""
    conns = table_connections(table, digest, SERVER_PORT)
    if conns is None:
        raise ValueError("another format")
    return conns


def _keep(cached: Path, table: dict) -> None:
    """A parsed capture's table kept in cache_dir() (the user's, never a
    results folder) under its sha256, atomically: a reader sees the whole
    answer or none; a read-only home keeps nothing (parsed again next time)."""
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(f".{cached.name}.{os.getpid()}")
        tmp.write_text(json.dumps(table), encoding="utf-8")
        os.replace(tmp, cached)
    except OSError:
        pass
