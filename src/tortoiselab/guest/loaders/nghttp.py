"""nghttp as the page loader: the page's objects over one connection, its
statistics parsed (analysis/parsers.py)."""

from __future__ import annotations

from pathlib import Path

from tortoiselab.analysis.parsers import parse_nghttp_stats
from tortoiselab.guest import commands as C
from tortoiselab.guest.executor import Executor
from tortoiselab.guest.loaderproc import LoaderProcess
from tortoiselab.guest.net import PathLab
from tortoiselab.guest.webtier import WebLab
from tortoiselab.spec.requests import LoadSpec


def load_page(ex: Executor, lab: PathLab, web: WebLab, loader_proc: LoaderProcess | None, load: LoadSpec,
            names: dict[str, str], d: Path) -> tuple[dict, str | None]:
    """nghttp resolves through the system resolver: the guest's resolv.conf
    points at the lab's DNS server (webtier.guest_name_files)."""
    rc, text, err = ex.capture(C.nghttp(load.client.target()), lab.client, timeout=load.client.timeout_s)
    st = parse_nghttp_stats(text)
    return {"rc": rc, "plt_ms": st["plt_ms"], "requests": st["requests"],
            "error": (err.strip()[-500:] or None) if rc else None,
            "raw": text[-8000:], "stderr": err[-2000:]}, None
