"""What the chromium page loader (tortoiselab.browser, docs/browser.md)
cannot do of an experiment's server and client settings, each refused with
its fix before anything runs."""

from __future__ import annotations

import random
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
    if client.cache_hit_ratio and client.cache_unit != "page":
        out.append("client.cache_hit_ratio: the browser's warm views are whole page views (a second navigation "
                   "in the same profile); set client.cache_unit: page, or use 0")
    if not client.coalescing:
        out.append("client.coalescing: Chromium has no switch to turn coalescing off; prevent it with "
                   "server.cert: separate-rsa or client.resolution: two-ip")
    if client.repeat_after_idle_s is not None:
        out.append("client.repeat_after_idle_s: not supported by the chromium loader; leave it out")
    return out


def warm_view(ratio: float, seed: int) -> bool:
    """Is this page view one the browser's cache serves (cache_unit page)?
    The draw of our loader's view_from_cache (client/page.py, a process
    that imports nothing of the project, hence this copy; a test holds the
    two equal), so both loaders see the same views of a paired run."""
    return ratio > 0 and random.Random(f"page-cache:{seed}").random() < ratio
