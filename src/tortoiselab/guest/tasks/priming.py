"""A warm page view's priming load (spec/browsercfg.warm_view): the page
loaded once before by the same Chromium profile, so that the measured load
meets a warm cache (guest/tasks/pageload.py runs it before the load's
set-up)."""

from __future__ import annotations

import json
from pathlib import Path

from tortoiselab.guest.loaders.base import LOADER_GRACE_S
from tortoiselab.guest.loaders.chromium import PROFILE_DIR, browser_argv
from tortoiselab.guest.net import LabContext, PathLab
from tortoiselab.guest.webtier import NameFiles, WebLab, set_up_server
from tortoiselab.spec.browsercfg import warm_view
from tortoiselab.spec.requests import LoadSpec, PageLoadRequest


def prime_browser(ctx: LabContext, lab: PathLab, web: WebLab, req: PageLoadRequest, load: LoadSpec,
                   name_files: NameFiles | None, d: Path) -> dict | None:
    """A chromium load of a page view the cache serves (spec/browsercfg.warm_view):
    the page loaded once before, by the same browser profile (--prime: the
    page's objects enter its HTTP cache, the page itself does not), over
    the load's path without loss, before the load's set-up, its capture and
    its seeded netem, so the measured load meets a warm cache, fresh
    servers (stopped after) and netem's draws as a run alone does. Returns
    the priming load's summary; None for every other load."""
    c = load.client
    if c.loader != "chromium" or not warm_view(c.cache_hit_ratio, c.seed):
        return None
    names = set_up_server(ctx.ex, lab, web, load, name_files)
    lab.set_netem(load.path or req.path, loss_on=False, seed=req.seed if load.seed is None else load.seed)
    argv = browser_argv(lab, web, load, names, d / "prime.har", d / "prime.json", profile_dir=d / PROFILE_DIR,
                         prime=True)
    rc, _timed_out = ctx.ex.run_to_file(argv, lab.client, d / "prime.log", timeout=c.timeout_s + LOADER_GRACE_S)
    web.stop()
    try:
        primed = json.loads((d / "prime.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        primed = {"ok": False, "error": f"the priming load wrote no summary (exit {rc})"}
    return {k: primed.get(k) for k in ("ok", "error", "requests", "requests_failed", "bytes", "plt_ms")}
