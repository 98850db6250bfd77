"""python -m tortoiselab.client.loadserver: the page loader, started once
and run in-process for every load.

Inside the lab guest a Python start with the loader's imports (ssl,
asyncio, h2, dnspython) costs more CPU than a load's own work. This process
starts once in the client's network namespace, imports the loader (and what a
load would import on first use, `warm_up`), and then waits on
its stdin. For each request it calls the loader's main with the request's
arguments in this same process, exactly as `python -m tortoiselab.client
ARGS` would, its stdout and stderr redirected (dup2) to the request's log
for the load's duration. No process is made or ended per load (no fork: on
the virtual clock in UML's seccomp mode every guest address space is a host
process, and a forked child's end reached the guest kernel at a host-timed
moment; docs/determinism.md, "Our loader in one process per boot").

What a load could leave to the next, and what is done about it after every
load (`settle`): the root logger's handlers and level (main's basicConfig
is a no-op once a handler exists, so -v would stick): removed and reset;
the `random` module's global generator: its state restored (the loader
draws from its own seeded generators; a library's draw must not reach the
next load); file descriptors (a socket not closed): closed, as an exit
would; cyclic garbage: collected; warnings shown once per place: shown
again (`warnings.catch_warnings` around each load). Threads still running
cannot be ended from here, nor can a load that raised be trusted to have
cleaned up: the reply then asks for a new process ("restart"), and this
one ends.

Protocol, one JSON object per line:

    stdout  {"ready": 1234}                          once, when the loader is imported
    stdin   {"argv": ["https://www.lab.test/", "--ca", ...], "log": "/path/loader.log"}
    stdout  {"pid": 1234, "rc": 0, "left": [...]}   when the load is done
            {..., "restart": "why"}                  and then this process ends
            {"error": "bad request: ..."}            and the next request is read

rc is main's return value; EXIT_CRASH if it raised. `left` names what the
load left behind and `settle` undid (empty normally). The caller bounds a
load by killing this process (a hung load) and starts another for the next.
End of stdin ends the process.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import random
import ssl
import sys
import threading
import traceback
import warnings
from dataclasses import dataclass, field

import dns.asyncbackend
import dns.rdata
import dns.rdataclass
import dns.rdatatype

from . import __main__ as client_main

EXIT_CRASH = 70  # main raised instead of returning (sysexits' EX_SOFTWARE)


@dataclass
class Channel:
    """This process's own descriptors: where requests come from and replies
    go (private copies: fds 0-2 are the load's), and the stderr to put back
    after a load."""
    requests: int
    replies: int
    stderr: int
    known_fds: frozenset[int] = field(default_factory=frozenset)


@dataclass
class Baseline:
    """The process's state before a load, to compare and restore after it."""
    handlers: list = field(default_factory=list)
    level: int = logging.WARNING
    random_state: object = None
    modules: frozenset[str] = field(default_factory=frozenset)


def parse_request(line: str) -> tuple[list[str], str]:
    """(argv, log path) of a request line; ValueError naming what is wrong."""
    try:
        req = json.loads(line)
    except ValueError as exc:
        raise ValueError(f"bad request: not JSON ({exc})") from None
    if not isinstance(req, dict) or not isinstance(req.get("argv"), list) or not isinstance(req.get("log"), str):
        raise ValueError('bad request: expected {"argv": [...], "log": "path"}')
    return [str(a) for a in req["argv"]], req["log"]


def open_channel() -> Channel:
    """Move the request and reply pipes off fds 0 and 1 (a load's main reads
    no stdin and prints to fd 1): 0 becomes /dev/null, 1 this process's
    stderr between loads."""
    requests, replies, stderr = os.dup(0), os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return Channel(requests, replies, stderr, frozenset(open_fds()))


def open_fds() -> set[int]:
    """This process's open descriptors (the listing's own, closed by the
    time it is read back, left out)."""
    out = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        out.add(int(name))
    return out


def baseline() -> Baseline:
    root = logging.getLogger()
    return Baseline(list(root.handlers), root.level, random.getstate(), frozenset(sys.modules))


def run_load(argv: list[str], log: str, stderr_fd: int) -> int:
    """main(argv) with fds 1 and 2 on the log (created or truncated) and the
    warnings' once-per-place memory fresh; fds 1 and 2 put back afterwards.
    Returns main's exit code, EXIT_CRASH (the traceback in the log) if it
    raised."""
    rc = EXIT_CRASH
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        with warnings.catch_warnings():
            rc = client_main.main(argv)
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - the load fails, the reply still goes out
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os.dup2(stderr_fd, 2)
        os.dup2(stderr_fd, 1)
    return rc


def settle(base: Baseline, known_fds: frozenset[int]) -> list[str]:
    """Undo what a load left behind (module docstring); returns what it
    found, one phrase each (empty: nothing)."""
    left = []
    root = logging.getLogger()
    for h in [h for h in root.handlers if h not in base.handlers]:
        root.removeHandler(h)
        h.close()
    root.setLevel(base.level)
    if random.getstate() != base.random_state:
        left.append("a draw from the random module's global generator (state restored)")
        random.setstate(base.random_state)
    gc.collect()  # unreachable sockets and transports are closed by their finalizers
    for fd in sorted(open_fds() - known_fds):
        try:
            what = os.readlink(f"/proc/self/fd/{fd}")
            os.close(fd)
        except OSError:
            continue
        left.append(f"fd {fd} ({what}) open (closed)")
    threads = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if threads:
        left.append(f"threads still running: {', '.join(threads)}")
    new = sorted(set(sys.modules) - base.modules)
    if new:  # not undone (harmless, but the first load then differs from the later ones)
        left.append(f"modules imported: {' '.join(new)}")
    return left


def restart_reason(rc: int, left: list[str]) -> str | None:
    """Why this process must not serve another load (None: it may)."""
    if rc == EXIT_CRASH:
        return "the load raised"
    running = [x for x in left if x.startswith("threads still running")]
    return running[0] if running else None


def warm_up() -> None:
    """What a load does once per process, on first use, done here so that
    the first load does what every later one does: dnspython's asyncio
    backend chosen (and imported) and the A record's class imported and
    cached (found by listing sys.modules after a lab load); OpenSSL's
    random generators instantiated (at the first SSL context; seen on the
    host: a getrandom, futex and getpid calls in the first load only) and
    its handshake's algorithms fetched, by a ClientHello written into
    memory."""
    dns.asyncbackend.set_default_backend("asyncio")
    dns.rdata.get_rdata_class(dns.rdataclass.IN, dns.rdatatype.A)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    hello = ctx.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname="warm-up.invalid")
    try:
        hello.do_handshake()
    except ssl.SSLWantReadError:  # the ClientHello is out; no server answers it
        pass


def _reply(ch: Channel, obj: dict) -> None:
    os.write(ch.replies, (json.dumps(obj) + "\n").encode())


def serve() -> int:
    warm_up()
    ch = open_channel()
    _reply(ch, {"ready": os.getpid()})
    with os.fdopen(ch.requests, "r", encoding="utf-8") as requests:
        for line in requests:
            if not line.strip():
                continue
            try:
                argv, log = parse_request(line)
            except ValueError as exc:
                _reply(ch, {"error": str(exc)})
                continue
            base = baseline()
            try:
                rc = run_load(argv, log, ch.stderr)
            except OSError as exc:  # the log could not be opened
                _reply(ch, {"error": f"cannot open the log {log}: {exc.strerror or exc}"})
                continue
            left = settle(base, ch.known_fds)
            why = restart_reason(rc, left)
            _reply(ch, {"pid": os.getpid(), "rc": rc, "left": left} | ({"restart": why} if why else {}))
            if why:
                return 0
    return 0


if __name__ == "__main__":
    sys.exit(serve())
