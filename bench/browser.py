"""Chromium against our loader on one path (issue 22): the agreement table
and what a browser load costs.

The four graded pages, the feed page, the app's feed and the article, each
loaded by our loader (tortoiselab.client) and by Chromium
(tortoiselab.browser) in one lab boot,
same path, same server (h2, TLS 1.3, the shared-rsa certificate: Chromium
takes no Ed25519), names cold for both (each resolves through the lab's
DNS, inside its PLT; --dns warm: a static map for both).
Per page and loader, from the server capture: connections opened and used
(tcpconn.carried_request), the bytes the server sent (payload, TLS
included) against the page's bytes (manifest); from the loaders: TTFB, PLT
(page start to last byte) and its difference, DNS time, first request to
last byte, the browser's onload PLT; DNS from the client capture
(analysis/dnstime.py, the same ruler for both); then the wall time each load took on
the host (the guest's marks, capture on to loaded) and the browser's cost
relative to ours.

    .venv/bin/python bench/browser.py [--clock virtual|real] [--rtt-ms 100] [--rate-mbit 50] [--reps 1] [--dns cold|warm]
        [--schedule chromium|eager] [--pages feed.html,...]

--schedule: our loader's client.schedule (chromium, its default: as
Chromium schedules a page's requests; eager: all at once, the loader before
issue 51).

Figures, not assertions; the lab's folder stays in --out for a look.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tortoiselab.analysis import dnstime
from tortoiselab.analysis.flights import analyze_pcap
from tortoiselab.host.pageload import run_loads
from tortoiselab.spec.pathspec import PathSpec
from tortoiselab.spec.sides import DOCUMENT_ONLY

PAGES = ("tiny.html", "small.html", "medium.html", "large.html", "feed.html", "app.html", "article.html")
LOADERS = ("loader", "chromium")
SERVER = {"cc": "cubic", "initcwnd_pkts": 10, "protocol": "h2", "tls": "1.3", "cert": "shared-rsa"}


def loads(reps: int, dns: str = "cold", schedule: str = "chromium", pages: tuple[str, ...] = PAGES) -> list[dict]:
    out = []
    for rep in range(reps):
        for page in pages:
            for loader in LOADERS:
                client = {"page": page, "loader": loader, "dns": dns, "timeout_s": 120}
                if loader == "loader" and page not in DOCUMENT_ONLY:
                    client["schedule"] = schedule
                out.append({"label": f"{page}:{loader}:{rep}", "server": SERVER, "client": client})
    return out


def capture_figures(ld: dict) -> dict:
    """From the load's server capture: connections opened and used, and the
    bytes the server sent (payload, retransmissions left out)."""
    conns = analyze_pcap(ld["pcap"], keep_series=False) if ld.get("pcap") else []
    return {"opened": len(conns), "used": sum(c["carried_request"] for c in conns),
            "server_bytes": sum(c["server_bytes_unique"] for c in conns)}


def _wall(ld: dict) -> float | None:
    w = ld.get("wall") or {}
    return w["loaded"] - w["capture_on"] if w.get("loaded") and w.get("capture_on") else None


def _med(xs: list) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _f(x: float | None, nd: int = 1) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def rows(res: dict) -> dict[tuple[str, str], dict]:
    """(page, loader) -> medians over the repetitions, with the page's bytes."""
    pages = (res.get("manifest") or {}).get("pages", {})
    by: dict[tuple[str, str], list[dict]] = {}
    for ld in res["loads"]:
        page, loader, _ = ld["label"].split(":")
        by.setdefault((page, loader), []).append(ld)
    out = {}
    for key, lds in by.items():
        ss = [ld.get("summary") or {} for ld in lds]
        cap = [capture_figures(ld) for ld in lds]
        out[key] = {
            "page_bytes": (pages.get(key[0]) or {}).get("total_bytes"),
            "opened": _med([c["opened"] for c in cap]), "used": _med([c["used"] for c in cap]),
            "server_bytes": _med([c["server_bytes"] for c in cap]),
            "dns": _med([sum(dnstime.lookups_ms(ld["client_pcap"]).values()) if ld.get("client_pcap") else None
                         for ld in lds]),
            "errors": [s.get("error") or ld.get("error") for s, ld in zip(ss, lds) if s.get("error") or ld.get("error")],
            "conns": _med([s.get("connections_opened") for s in ss]),
            "capture_conns": _med([len(ld.get("connections") or []) for ld in lds]),
            "plt": _med([s.get("plt_ms") for s in ss]),
            "onload": _med([s.get("plt_onload_ms") for s in ss]),
            "from_req": _med([s.get("plt_from_request_ms") for s in ss]),
            "ttfb": _med([s.get("ttfb_ms") for s in ss]),
            "requests": _med([s.get("requests") for s in ss]),
            "wall_s": _med([_wall(ld) for ld in lds]),
        }
    return out


def _pct(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or not a else 100.0 * (b - a) / a


def table(r: dict[tuple[str, str], dict]) -> str:
    """Ours against Chromium per page (o/c: ours / chromium)."""
    head = (f"{'page':<12} {'conns used o/c':>14} {'opened o/c':>10} {'page KB':>8} {'server KB o/c':>15} "
            f"{'TTFB o':>7} {'TTFB c':>7} {'DNS o':>6} {'DNS c':>6} {'PLT ours':>9} {'PLT chr':>8} {'diff':>7} "
            f"{'onload':>8} {'wall o s':>8} {'wall c s':>8}")
    lines = [head, "-" * len(head)]
    for page in [p for p in PAGES if any(k[0] == p for k in r)]:
        o, b = r.get((page, "loader"), {}), r.get((page, "chromium"), {})
        kb = (lambda x: None if x is None else x / 1000)
        diff = _pct(o.get("plt"), b.get("plt"))
        lines.append(
            f"{page:<12} {_f(o.get('used'), 0) + '/' + _f(b.get('used'), 0):>14} "
            f"{_f(o.get('opened'), 0) + '/' + _f(b.get('opened'), 0):>10} {_f(kb(o.get('page_bytes'))):>8} "
            f"{_f(kb(o.get('server_bytes'))) + '/' + _f(kb(b.get('server_bytes'))):>15} "
            f"{_f(o.get('ttfb')):>7} {_f(b.get('ttfb')):>7} {_f(o.get('dns')):>6} {_f(b.get('dns')):>6} "
            f"{_f(o.get('plt')):>9} {_f(b.get('plt')):>8} {_f(diff, 1) + '%':>7} {_f(b.get('onload')):>8} "
            f"{_f(o.get('wall_s'), 2):>8} {_f(b.get('wall_s'), 2):>8}")
        for who, x in (("ours", o), ("chromium", b)):
            for e in x.get("errors", []):
                lines.append(f"    {page} {who}: {e}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clock", default="virtual", choices=["virtual", "real"])
    p.add_argument("--backend", default="uml", choices=["uml", "native"])
    p.add_argument("--rtt-ms", type=float, default=100.0)
    p.add_argument("--rate-mbit", type=float, default=50.0)
    p.add_argument("--loss-pct", type=float, default=0.0)
    p.add_argument("--reps", type=int, default=1)
    p.add_argument("--dns", default="cold", choices=["cold", "warm"])
    p.add_argument("--schedule", default="chromium", choices=["chromium", "eager"])
    p.add_argument("--pages", default=",".join(PAGES), help="comma-separated, of " + ", ".join(PAGES))
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args(argv)
    pages = tuple(x for x in a.pages.split(",") if x)
    if not pages or set(pages) - set(PAGES):
        p.error(f"--pages: give some of {', '.join(PAGES)}")
    work = a.out or Path(tempfile.mkdtemp(prefix="tortoise-bench-browser-"))
    path = PathSpec(rtt_ms=a.rtt_ms, loss_pct=a.loss_pct, rate_mbit=a.rate_mbit)
    t0 = time.monotonic()
    res = run_loads(loads(a.reps, a.dns, a.schedule, pages), path, backend=a.backend, clock=a.clock, work=work / "lab")
    wall = time.monotonic() - t0
    r = rows(res)
    print(f"browser vs our loader: {a.backend} backend, {a.clock} clock, rtt {a.rtt_ms} ms, {a.rate_mbit} Mbit/s, "
          f"loss {a.loss_pct} %, h2 + TLS 1.3, cert shared-rsa, same-ip, names {a.dns}, our schedule {a.schedule}; "
          f"median of {a.reps} "
          f"repetition(s); one lab boot, {wall:.1f} s of wall time in all")
    print(table(r))
    chrome = [x["wall_s"] for (pg, ld), x in r.items() if ld == "chromium" and x.get("wall_s")]
    ours = [x["wall_s"] for (pg, ld), x in r.items() if ld == "loader" and x.get("wall_s")]
    if chrome and ours:
        print(f"wall time per load (capture on to loaded, host clock): ours {statistics.mean(ours):.2f} s, "
              f"chromium {statistics.mean(chrome):.2f} s on average ({statistics.mean(chrome) / statistics.mean(ours):.1f}x)")
    (work / "table.json").write_text(json.dumps({f"{k[0]}:{k[1]}": v for k, v in r.items()}, indent=1))
    print(f"(runs in {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
