"""How the browser finds the lab's names.

Cold (`--dns-server IP`): as a real browser does, through a DNS server, the
lab's, inside the load's time. Chromium takes its resolver from
/etc/resolv.conf and /etc/hosts (its own DNS client reads both; the system's
getaddrinfo, its fallback, too), so this process moves into a mount
namespace of its own and bind-mounts two files of the load's private home
over them: a hosts file with localhost alone and a resolv.conf naming the
lab's server. The browser, started after, inherits the namespace; nothing
outside this process tree sees the files, and the mounts end with it.

Warm (`--resolve HOST:IP`): a static map (--host-resolver-rules); no lookup.

Either way every name the lab does not serve is refused by the browser
itself (`MAP * ~NOTFOUND`), so it reaches nothing outside the lab.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

# <sched.h>, <sys/mount.h>
CLONE_NEWNS = 0x00020000
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
NAME_FILES = ("/etc/hosts", "/etc/resolv.conf")


class NamesError(Exception):
    """The private name files could not be set up (the message says why)."""


def resolver_rules(resolve: dict[str, str], lab_names: list[str]) -> str:
    """Chromium's --host-resolver-rules: the static map (warm), or the lab's
    names left to the resolver (cold: EXCLUDE them from the catch-all);
    every other name is not found."""
    rules = [f"MAP {host} {ip}" for host, ip in sorted(resolve.items())]
    rules += [f"EXCLUDE {host}" for host in sorted(lab_names)]
    return ", ".join(rules + ["MAP * ~NOTFOUND"])


def file_texts(dns_server: str) -> dict[str, str]:
    """The private /etc/hosts and /etc/resolv.conf (one try per query, 2 s:
    a lost query costs what it costs a user)."""
    return {"/etc/hosts": "127.0.0.1 localhost\n",
            "/etc/resolv.conf": f"nameserver {dns_server}\noptions timeout:2 attempts:2\n"}


def _libc_call(name: str, *args) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) != 0:
        err = ctypes.get_errno()
        raise NamesError(f"{name}: {os.strerror(err)}" + (" (needs root)" if err == 1 else ""))


def private_mounts() -> None:
    """This process's own mount namespace, its mounts private (nothing it
    mounts propagates back). Call it before any thread is started: a
    namespace belongs to the thread that made it and the threads and
    processes it starts after."""
    _libc_call("unshare", CLONE_NEWNS)
    _libc_call("mount", None, b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None)


def bind_name_files(dns_server: str, home: Path) -> None:
    """After private_mounts(): the two files of file_texts() written under
    home and bind-mounted over /etc, so this process and its children
    resolve through dns_server."""
    for target, text in file_texts(dns_server).items():
        src = home / Path(target).name
        src.write_text(text, encoding="utf-8")
        _libc_call("mount", str(src).encode(), target.encode(), None, ctypes.c_ulong(MS_BIND), None)
