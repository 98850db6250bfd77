"""What the chromium page loader (tortoiselab.browser, docs/browser.md)
cannot do of an experiment's server and client settings, each refused with
its fix before anything runs."""

from __future__ import annotations

from typing import Any

# certificate variants Chromium accepts: it verifies no Ed25519 signature
# (nor does NSS, where the lab CA is trusted for it; docs/browser.md)
BROWSER_CERTS = ("shared-rsa", "separate-rsa")


def browser_problems(server: Any, client: Any) -> list[str]:
    """What the chromium loader cannot do of these settings, each with its
    fix; empty for any other loader."""
    if client.loader != "chromium":
        return []
    out = []
    if server.cert not in BROWSER_CERTS:
        out.append(f"server.cert: Chromium accepts no Ed25519 certificate; use {' or '.join(BROWSER_CERTS)} "
                   f"(RSA-2048 chains; shared-rsa lets it coalesce)")
    if client.cache_hit_ratio:
        out.append("client.cache_hit_ratio: the browser loads every page cold (a fresh profile per load); use 0")
    if not client.coalescing:
        out.append("client.coalescing: Chromium has no switch to turn coalescing off; prevent it with "
                   "server.cert: separate-rsa or client.resolution: two-ip")
    if client.repeat_after_idle_s is not None:
        out.append("client.repeat_after_idle_s: not supported by the chromium loader; leave it out")
    return out
