"""tortoiselab.browser: Debian's Chromium as a page loader, driven by
Playwright for Python, for cross-checks against our own loader
(tortoiselab.client). CLI: python -m tortoiselab.browser URL --ca FILE
--har OUT --summary OUT [--resolve HOST:IP ...] [--protocol h1|h2].

Like the client, a process of its own in the lab: it imports nothing else
of the project. Its summary has the keys of our loader's (definitions in
tortoiselab.browser.summary).
"""
