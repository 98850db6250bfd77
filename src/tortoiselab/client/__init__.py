"""tortoiselab.client: a page loader that behaves like a browser.

    from tortoiselab.client import load_page, load_page_sync, LoadOptions, LoadResult
    result = load_page_sync(LoadOptions(url="https://www.lab.test/feed.html",
                                        resolve={"www.lab.test": "10.0.0.2"}, ca_file="ca.pem"))
    result.har, result.summary, result.error

HTTP/2 on the sans-IO `h2` library with asyncio and `ssl`, or HTTP/1.1 with
six keep-alive connections per host; connection coalescing, seeded cache
hits, HAR 1.2 output (validate_har checks any HAR), and a summary whose
definitions are in tortoiselab.client.summary. CLI: python -m tortoiselab.client.
"""

from .coalesce import CoalesceDecision, cert_covers, coalesce_decision, san_matches
from .errors import LoadError
from .har import build_har, validate_har
from .loader import LoadResult, PageLoad, load_page, load_page_sync
from .options import LoadOptions, OptionError
from .page import Asset, choose_cached, discover_assets, resolve_url
from .summary import summarize

__all__ = [
    "Asset", "CoalesceDecision", "LoadError", "LoadOptions", "LoadResult", "OptionError", "PageLoad",
    "build_har", "cert_covers", "choose_cached", "coalesce_decision", "discover_assets", "load_page",
    "load_page_sync", "resolve_url", "san_matches", "summarize", "validate_har",
]
