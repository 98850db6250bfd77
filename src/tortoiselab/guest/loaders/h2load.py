"""h2load as the loader: the URL requested h2load_requests times, its
throughput parsed (analysis/parsers.py)."""

from __future__ import annotations

from pathlib import Path

from tortoiselab.analysis.parsers import parse_h2load
from tortoiselab.guest import commands as C
from tortoiselab.guest.executor import Executor
from tortoiselab.guest.loaderproc import LoaderProcess
from tortoiselab.guest.net import PathLab
from tortoiselab.guest.webtier import WebLab
from tortoiselab.spec.requests import LoadSpec


def load_page(ex: Executor, lab: PathLab, web: WebLab, loader_proc: LoaderProcess | None, load: LoadSpec,
            names: dict[str, str], d: Path) -> tuple[dict, str | None]:
    c = load.client
    rc, text, err = ex.capture(C.h2load(c.target(), c.h2load_requests), lab.client, timeout=c.timeout_s)
    try:
        return {"rc": rc, "error": None, **parse_h2load(text), "raw": text[-4000:]}, None
    except ValueError as exc:
        return {"rc": rc, "error": f"{exc}: {err.strip()[-300:]}", "raw": text[-4000:]}, None
