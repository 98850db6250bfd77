"""One page load in Debian's Chromium, driven by Playwright for Python.

Why Playwright: it is maintained, installs from PyPI, drives a system
Chromium through `executable_path` (no browser download: make setup sets
PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD and never runs `playwright install`),
records a HAR itself and hands out a raw DevTools session for what its own
API does not show (the connection each response came over).

What a load collects (browser/summary.py turns it into the lab's summary):

- Navigation Timing and Resource Timing entries, read in the page after
  its load event (loadEventEnd set);
- DevTools Network events: every request, its response (status, protocol,
  remote address, connectionId, connectionReused), its end or failure;
- every <img src> of the page after the load: its natural width and whether
  `HTMLImageElement.decode()` resolved (the browser decoded it whole);
- the page's console errors and uncaught exceptions;
- the HAR Playwright writes when the context closes.

Each load runs in a fresh private home and profile (browser/profile.py):
cold cache, the lab CA trusted there alone, certificates verified.
Names resolve through the lab's DNS server or a static map
(browser/names.py); every other name is not found, so the browser reaches
nothing outside the lab.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import sync_playwright

from .procs import descendants

CHROMIUM = "/usr/bin/chromium"
TEARDOWN_S = 15.0  # of the budget kept for closing the browser and writing the HAR
# the resource timing buffer holds 250 entries by default; the largest lab
# page has 51 objects, a user's page may have more
INIT_SCRIPT = "performance.setResourceTimingBufferSize(10000);"
READ_TIMINGS = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  return {nav: nav ? nav.toJSON() : null, timeOrigin: performance.timeOrigin,
          resources: performance.getEntriesByType('resource').map(e => e.toJSON())};
}"""
# read after the timings, so the decodes are not in the load's figures; an
# <img> without src (base.html's data-src) requests nothing and is left out
READ_IMAGES = """async () => Promise.all(Array.from(document.images).filter(i => i.getAttribute('src'))
  .map(async (i) => {
    let decoded = true;
    try { await i.decode(); } catch (e) { decoded = false; }
    return {src: i.currentSrc || i.src, width: i.naturalWidth, decoded: decoded};
  }))"""
LOAD_DONE = "() => { const n = performance.getEntriesByType('navigation')[0]; return !!n && n.loadEventEnd > 0; }"
NETWORK_EVENTS = ("Network.requestWillBeSent", "Network.responseReceived", "Network.dataReceived",
                  "Network.loadingFinished", "Network.loadingFailed", "Network.resourceChangedPriority")


def chromium_args(resolver_rules: str, protocol: str | None) -> list[str]:
    """Chromium's switches beyond Playwright's own defaults (which already
    turn off background networking, component updates, sync and the
    first-run UI): the names' rules (browser/names.py), no proxy, no QUIC,
    HTTP/2 off when the client is to speak HTTP/1.1."""
    args = ["--host-resolver-rules=" + resolver_rules, "--no-proxy-server", "--disable-quic",
            "--disable-gpu", "--no-first-run", "--no-default-browser-check"]
    if protocol == "h1":
        args.append("--disable-http2")
    return args


# the profile's preferences: no network prediction (Chromium's loading
# predictor preconnects to a page's origin as its navigation starts, and the
# navigation opens a connection of its own: two TLS handshakes, one thrown
# away, seen in the lab's capture)
PREFERENCES = {"net": {"network_prediction_options": 2}}


def write_preferences(user_data: Path) -> None:
    d = user_data / "Default"
    d.mkdir(parents=True, exist_ok=True)
    (d / "Preferences").write_text(json.dumps(PREFERENCES), encoding="utf-8")


@dataclass
class Collected:
    """What one load saw, before summarizing."""

    events: list[dict] = field(default_factory=list)  # DevTools Network events: {"method", "params"}
    console_errors: list[str] = field(default_factory=list)
    timings: dict | None = None  # READ_TIMINGS' result
    images: list[dict] | None = None  # READ_IMAGES' result
    browser_version: str | None = None
    error: str | None = None
    goto_status: int | None = None


@dataclass(frozen=True)
class BrowserLoad:
    url: str
    user_data: Path
    env: dict[str, str]
    har: Path
    resolver_rules: str  # --host-resolver-rules (browser/names.py)
    timeout_s: float
    protocol: str | None = None
    executable: str = CHROMIUM
    fault: str | None = None  # tests: "hang" stops the browser's processes, "crash" kills them


def _left_ms(deadline: float) -> float:
    return max(1.0, (deadline - time.monotonic()) * 1e3)


def run_load(load: BrowserLoad, out: Collected) -> None:
    """Launch, load, read the timings, close; fills `out` as it goes (what
    was seen so far stays there if the load fails). Errors are recorded in
    out.error, never raised."""
    deadline = time.monotonic() + max(1.0, load.timeout_s - TEARDOWN_S)
    try:
        write_preferences(load.user_data)
        with sync_playwright() as pw:
            ctx = pw.chromium.launch_persistent_context(
                str(load.user_data), executable_path=load.executable, headless=True, env=load.env,
                args=chromium_args(load.resolver_rules, load.protocol), timeout=_left_ms(deadline),
                record_har_path=str(load.har), record_har_content="omit", ignore_https_errors=False,
                service_workers="block")
            try:
                out.browser_version = ctx.browser.version if ctx.browser else None
                _load_page(ctx, load, out, deadline)
            finally:
                ctx.close()  # writes the HAR
    except PlaywrightError as exc:
        out.error = out.error or _clean(str(exc))
    except Exception as exc:  # noqa: BLE001 - the summary records whatever went wrong
        out.error = out.error or f"{type(exc).__name__}: {exc}"


def _load_page(ctx: Any, load: BrowserLoad, out: Collected, deadline: float) -> None:
    page = ctx.pages[0] if ctx.pages else ctx.new_page()
    page.add_init_script(INIT_SCRIPT)
    cdp = ctx.new_cdp_session(page)
    for name in NETWORK_EVENTS:
        cdp.on(name, lambda params, name=name: out.events.append({"method": name, "params": params}))
    cdp.send("Network.enable")
    page.on("console", lambda m: _console(out, m))
    page.on("pageerror", lambda e: out.console_errors.append(f"uncaught: {e}"))
    page.on("crash", lambda _p: setattr(out, "error", out.error or "the page's renderer crashed"))
    if load.fault:
        inject_fault(load.fault)
    try:
        resp = page.goto(load.url, wait_until="load", timeout=_left_ms(deadline))
    except PlaywrightError as exc:
        if "Timeout" in type(exc).__name__ or "Timeout" in str(exc).split("\n")[0]:
            out.error = (f"the page did not finish loading within {load.timeout_s} s "
                         f"(the browser hung or the network is too slow)")
        else:
            out.error = out.error or _clean(str(exc))
        return
    out.goto_status = resp.status if resp is not None else None
    page.wait_for_function(LOAD_DONE, timeout=_left_ms(deadline))
    out.timings = page.evaluate(READ_TIMINGS)
    out.images = page.evaluate(READ_IMAGES)


def _console(out: Collected, msg: Any) -> None:
    """The page's console errors, less the browser's own favicon request
    (the lab's site has none: a 404 the page never asked for)."""
    if msg.type == "error" and not (msg.location or {}).get("url", "").endswith("/favicon.ico"):
        out.console_errors.append(msg.text)


def inject_fault(kind: str) -> None:
    """Tests of the bounds: stop ("hang") or kill ("crash") every browser
    process below this one (the Playwright driver is spared)."""
    sig = {"hang": signal.SIGSTOP, "crash": signal.SIGKILL}[kind]
    for pid, comm in descendants(os.getpid()):
        if comm.startswith("chrom"):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass


def _clean(msg: str) -> str:
    """Playwright's message without its call log."""
    first = msg.split("\nCall log:")[0].strip()
    return first.replace("BrowserType.launch_persistent_context: ", "browser launch: ")[:1000]
