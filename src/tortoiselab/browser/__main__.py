"""python -m tortoiselab.browser URL --ca FILE --har OUT.har --summary OUT.json [...]

One page load in headless Chromium (browser/chromium.py). Writes both files
on every outcome (the error recorded in them) and exits 0 when the page
loaded, 1 when the load failed, 2 on bad arguments.

Bounded: a watchdog thread ends the load at --timeout plus KILL_SLACK_S
whatever the browser does (hung, stopped, crashed mid-close): it writes the
summary with the error, kills every process below this one by pid and
exits. Every process below this one is ended on a normal exit too, and
named in the summary (leftover_processes) if any was still running.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from .chromium import CHROMIUM, BrowserLoad, Collected, run_load
from .names import NamesError, bind_name_files, private_mounts, resolver_rules
from .procs import end_descendants
from .profile import ProfileError, make_profile, remove_profile, reuse_profile
from .summary import summarize

PROG = "python -m tortoiselab.browser"
PRIME_QUERY = "?tortoise-prime"  # the priming load's page URL: its own cache entry, the page's objects shared
KILL_SLACK_S = 20.0  # past --timeout before the watchdog ends the load


class _ArgError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # raise instead of exiting, so the files still get written
        raise _ArgError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Load a web page in headless Chromium and write its HAR and a summary.")
    p.add_argument("url", metavar="URL")
    p.add_argument("--ca", required=True, metavar="FILE", help="the CA (PEM) trusted for this load only")
    p.add_argument("--resolve", action="append", default=[], metavar="HOST:IP",
                   help="static name resolution (warm: no lookup), repeatable; every other name is not found")
    p.add_argument("--dns-server", default=None, metavar="IP",
                   help="cold: resolve the --lab-name names through this DNS server (needs root: a private "
                        "mount namespace with its own /etc/hosts and /etc/resolv.conf)")
    p.add_argument("--lab-name", action="append", default=[], metavar="HOST",
                   help="with --dns-server: a name the lab's DNS serves, repeatable; every other name is not found")
    p.add_argument("--protocol", choices=["h2", "h1"], default=None,
                   help="h1: HTTP/2 off (--disable-http2); default: what ALPN gives")
    p.add_argument("--timeout", type=float, default=60.0, metavar="S", help="bound on the whole load (default 60)")
    p.add_argument("--chromium", default=CHROMIUM, metavar="PATH", help=f"the browser (default {CHROMIUM})")
    p.add_argument("--profile-dir", default=None, metavar="DIR",
                   help="keep the profile (home, NSS database, HTTP cache) in DIR: made there if DIR does not "
                        "exist, reused (warm) if it does; default: a fresh one, removed after the load")
    p.add_argument("--prime", action="store_true",
                   help=f"with --profile-dir: load URL{PRIME_QUERY} (the page's objects, not the page itself, "
                        "land in the cache: the page is another URL) and write a summary of that load")
    p.add_argument("--fault", choices=["hang", "crash"], default=None,
                   help="tests only: stop or kill the browser's processes before the navigation")
    p.add_argument("--har", required=True, metavar="OUT.har")
    p.add_argument("--summary", required=True, metavar="OUT.json")
    return p


def _write(path: str | None, data: dict) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(f"{path}.tmp{os.getpid()}")
        tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        tmp.replace(path)


def empty_har(url: str | None, comment: str) -> dict:
    """A HAR 1.2 with no entries, for a load that produced none."""
    return {"log": {"version": "1.2", "creator": {"name": "tortoiselab.browser", "version": "1"},
                    "pages": [], "entries": [], "comment": comment[:500], "_url": url}}


def _failed(url: str | None, error: str) -> dict:
    return {"url": url, "loader": "chromium", "ok": False, "error": error, "errors": [error], "requests": 0,
            "requests_failed": 0, "plt_ms": None}


def _resolve(pairs: list[str]) -> dict[str, str]:
    out = {}
    for p in pairs:
        host, sep, ip = p.rpartition(":")
        if not sep or not host or not ip:
            raise _ArgError(f"--resolve {p!r}: write HOST:IP")
        out[host] = ip
    return out


class _Watchdog:
    """Ends the load at its deadline however stuck the main thread is."""

    def __init__(self, seconds: float, a: argparse.Namespace) -> None:
        self.a, self.seconds, self.profile, self.keep = a, seconds, None, False
        self.timer = threading.Timer(seconds, self._fire)
        self.timer.daemon = True

    def _fire(self) -> None:
        error = (f"the browser did not finish within {self.seconds:.0f} s (hung); its processes were killed")
        killed = end_descendants(os.getpid())
        summary = {**_failed(self.a.url, error), "leftover_processes": [list(p) for p in killed]}
        try:
            _write(self.a.summary, summary)
            if not Path(self.a.har).exists():
                _write(self.a.har, empty_har(self.a.url, error))
        finally:
            if self.profile is not None and not self.keep:
                remove_profile(self.profile)
            print(f"{PROG}: {error}", file=sys.stderr, flush=True)
            os._exit(1)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        a = build_parser().parse_args(argv)
        resolve = _resolve(a.resolve)
        if (a.dns_server is None) != (not a.lab_name):
            raise _ArgError("--dns-server and --lab-name go together (cold), or give neither (--resolve: warm)")
        if a.prime and a.profile_dir is None:
            raise _ArgError("--prime needs --profile-dir (the profile the measured load reuses)")
        if a.dns_server is not None and resolve:
            raise _ArgError("--resolve with --dns-server: the names come from one or the other")
        if a.dns_server is not None:
            private_mounts()  # before the watchdog's thread (browser/names.py)
    except _ArgError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except NamesError as exc:
        print(f"{PROG}: error: --dns-server: {exc}", file=sys.stderr)
        return 2
    dog = _Watchdog(a.timeout + KILL_SLACK_S, a)
    dog.timer.start()
    started = datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")
    t0 = time.monotonic()
    warm = a.profile_dir is not None and Path(a.profile_dir).exists() and not a.prime
    try:
        if a.profile_dir is None:
            dog.profile = make_profile(Path(a.ca))
        else:
            dog.keep, home = True, Path(a.profile_dir)
            dog.profile = reuse_profile(home) if warm else make_profile(Path(a.ca), home=home)
        if a.dns_server is not None:
            bind_name_files(a.dns_server, dog.profile.home)
    except (ProfileError, NamesError) as exc:
        _write(a.summary, _failed(a.url, f"browser profile: {exc}"))
        _write(a.har, empty_har(a.url, str(exc)))
        return 1
    out = Collected()
    try:
        run_load(BrowserLoad(url=a.url + (PRIME_QUERY if a.prime else ""), user_data=dog.profile.user_data, env=dog.profile.env(dict(os.environ)),
                             har=Path(a.har), resolver_rules=resolver_rules(resolve, a.lab_name), timeout_s=a.timeout, protocol=a.protocol,
                             executable=a.chromium, fault=a.fault), out)
    finally:
        leftovers = end_descendants(os.getpid())
        if not dog.keep:
            remove_profile(dog.profile)
    summary = summarize(events=out.events, timings=out.timings, console_errors=out.console_errors, error=out.error,
                        settings={"url": a.url, "protocol": a.protocol, "dns_server": a.dns_server,
                                  "cache": "priming" if a.prime else "warm" if warm else "cold"},
                        started_at=started, browser_version=out.browser_version, leftover_processes=leftovers,
                        images=out.images)
    summary["browser_seconds"] = round(time.monotonic() - t0, 6)
    dog.timer.cancel()
    _write(a.summary, summary)
    if not Path(a.har).exists():
        _write(a.har, empty_har(a.url, summary["error"] or "no HAR"))
    if summary["error"]:
        print(f"{PROG}: load failed: {summary['error']}", file=sys.stderr)
        return 1
    print(f"{a.url}: {summary['requests']} requests, plt {summary['plt_ms']} ms (onload {summary['plt_onload_ms']}), "
          f"ttfb {summary['ttfb_ms']} ms, {summary['connections_opened']} connections, "
          f"reuse ratio {summary['reuse_ratio']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
