"""Our page loader (tortoiselab.client), run in the load's client host by the
loader process started once per boot (guest/loaderproc.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tortoiselab.guest import commands as C
from tortoiselab.guest.executor import Executor
from tortoiselab.guest.loaderproc import LoaderProcess
from tortoiselab.guest.loaders.base import LOADER_GRACE_S
from tortoiselab.guest.net import PathLab
from tortoiselab.guest.webtier import DNS_IP, WebLab
from tortoiselab.spec.requests import LoadSpec


def load_page(ex: Executor, lab: PathLab, web: WebLab, loader_proc: LoaderProcess | None, load: LoadSpec,
                names: dict[str, str], d: Path) -> tuple[dict, str | None]:
    s, c = load.server, load.client
    argv = C.page_loader(sys.executable, c.target(), ca=web.ca(s.cert),
                         protocol=c.protocol or s.protocol,
                         cache_hit_ratio=c.cache_hit_ratio, seed=c.seed, timeout_s=c.timeout_s,
                         har=d / "page.har", summary=d / "summary.json",
                         dns_server=DNS_IP if c.dns == "cold" else None,
                         resolve=None if c.dns == "cold" else names,
                         coalescing=c.coalescing, tls=c.tls_client, repeat_after_s=c.repeat_after_idle_s,
                         cache_unit=c.cache_unit, schedule=c.schedule,
                         origin_protocols=web.imported.origin_protocols if web.imported is not None else None)
    timeout = c.timeout_s + (c.repeat_after_idle_s or 0) + LOADER_GRACE_S
    # argv[:3] is `python -m tortoiselab.client`: the loader process runs the rest
    loader_proc.load(argv[3:], d / "loader.log", timeout=timeout)
    summary = json.loads((d / "summary.json").read_text(encoding="utf-8")) if (d / "summary.json").exists() else \
        {"error": "the loader wrote no summary"}
    return summary, str(d / "page.har")
