"""Chromium as the page loader (tortoiselab.browser, docs/browser.md): its
argv, its run in the client host and the check that it left no process."""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

from tortoiselab.guest import commands as C
from tortoiselab.guest.executor import Executor
from tortoiselab.guest.loaderproc import LoaderProcess
from tortoiselab.guest.loaders.base import LOADER_GRACE_S
from tortoiselab.guest.net import PathLab
from tortoiselab.guest.webtier import DNS_IP, WebLab
from tortoiselab.spec.requests import LoadSpec


PROFILE_DIR = "browser-profile"  # a warm view's browser profile, in the load's folder, removed after it


def load_page(ex: Executor, lab: PathLab, web: WebLab, loader_proc: LoaderProcess | None, load: LoadSpec,
              names: dict[str, str], d: Path) -> tuple[dict, str | None]:
    """Chromium through tortoiselab.browser (docs/browser.md), in a PID
    namespace of its own, the lab CA of the certificate variant trusted in a
    private NSS database, names through the lab's DNS (cold) or the load's
    static map (warm). Bounded twice:
    the loader's own watchdog (its --timeout plus slack), then the
    executor's kill at the timeout plus LOADER_GRACE_S, which ends the
    namespace. Afterwards the guest is searched for browser processes left
    running (uml only: there the guest's processes are the lab's alone)."""
    c = load.client
    profile = d / PROFILE_DIR if (d / PROFILE_DIR).exists() else None  # primed: a warm view
    argv = browser_argv(lab, web, load, names, d / "page.har", d / "summary.json", fault=c.browser_fault,
                         profile_dir=profile)
    t0 = time.monotonic()
    rc, timed_out = ex.run_to_file(argv, lab.client, d / "browser.log", timeout=c.timeout_s + LOADER_GRACE_S)
    try:
        summary = json.loads((d / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        log = (d / "browser.log").read_text(encoding="utf-8", errors="replace").strip()[-500:]
        why = "killed at the lab's timeout" if timed_out else f"exit {rc}"
        summary = {"loader": "chromium", "ok": False, "requests": 0, "plt_ms": None,
                   "error": f"the browser loader wrote no summary ({why} after {time.monotonic() - t0:.1f} s): {log}"}
    if profile is not None:
        shutil.rmtree(profile, ignore_errors=True)  # the cache's copies of the site: not part of the record
        if summary.get("cache") != "warm" and not summary.get("error"):
            summary["error"] = f"the page view was to be warm, the browser says {summary.get('cache')!r}"
    summary["exit_code"] = rc
    summary["processes_left"] = browser_processes() if lab.ctx.private_ovs else None
    if summary["processes_left"] and not summary.get("error"):
        summary["error"] = f"browser processes left running after the load: {summary['processes_left']}"
    return summary, str(d / "page.har") if (d / "page.har").exists() else None


def browser_argv(lab: PathLab, web: WebLab, load: LoadSpec, names: dict[str, str], har: Path, summary: Path,
                  **kw) -> list[str]:
    """The browser loader's argv for this load, names cold or warm as the
    client says (kw: browser_loader's fault, profile_dir, prime); on uml
    first io_uring off: the lab kernel's io_uring mmap broke Chromium's
    pages ("Bad page map", the process stuck); without it Chromium and node
    fall back to plain system calls. The guest's kernel is the lab's alone."""
    c = load.client
    if lab.ctx.private_ovs:
        lab.ex.sysctl({"kernel.io_uring_disabled": 2})
    return C.browser_loader(sys.executable, c.target(), ca=web.ca(load.server.cert),
                            resolve=names, timeout_s=c.timeout_s, har=har, summary=summary, protocol=c.protocol,
                            dns_server=DNS_IP if c.dns == "cold" else None, **kw)


BROWSER_COMMS = ("chromium", "chrome", "node")  # Chromium's processes and Playwright's driver


def browser_processes() -> list[str]:
    """'pid name' of every Chromium or Playwright process in the guest."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                comm = (p / "comm").read_text(encoding="utf-8").strip()
            except OSError:
                continue
            if comm.startswith(BROWSER_COMMS):
                out.append(f"{p.name} {comm}")
    return out
