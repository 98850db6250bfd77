"""The `tortoise` command."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from pathlib import Path

from .backends import LabError
from .ccparams import ParamError, parse_assignments
from .pathspec import PathError, parse_path


def _sigterm_as_interrupt(signum, frame):  # so the lab's finally-blocks run
    raise KeyboardInterrupt


def cmd_probe(a: argparse.Namespace) -> int:
    from .probe import run_probe

    fields = {"rtt_ms": a.rtt_ms, "loss_pct": a.loss_pct, "rate_mbit": a.rate_mbit,
              "jitter_ms": a.jitter_ms}
    if a.queue_pkts is not None:
        fields["queue_pkts"] = a.queue_pkts
    path = parse_path(fields)
    measure = {"bulk_seconds": a.bulk_seconds, "loss_probes": a.loss_probes}
    module_params = parse_assignments(a.module_param)
    rep = run_probe(path, cc=a.cc, backend=a.backend, clock=a.clock,
                    work=Path(a.work) if a.work else None, measure=measure, switch=a.switch, seed=a.seed,
                    module_params=module_params)
    print(json.dumps(rep.as_dict(), indent=1) if a.json else rep.text())
    print(f"\n(work folder: {rep.work})", file=sys.stderr)
    return 0 if rep.ok else 3


def cmd_cc_check(a: argparse.Namespace) -> int:
    from .probe import run_cc_check

    res = run_cc_check(a.algorithms or None, backend=a.backend, clock=a.clock)
    bad = 0
    print(f"backend {res['backend']}, clock {res['clock']}")
    print(f"{'selected':<12} {'socket says':<12} {'ss -ti says':<14} ok")
    for cc, r in res["algorithms"].items():
        ok = r["sockopt"] == cc and any(s is not None and s.split("-")[0] == cc for s in r["ss"])
        bad += not ok
        print(f"{cc:<12} {r['sockopt']:<12} {','.join(map(str, r['ss'])):<14} {'yes' if ok else 'NO'}")
    return 0 if bad == 0 else 3


def cmd_loss_response(a: argparse.Namespace) -> int:
    from . import lossresponse

    rows, meta = lossresponse.run(backend=a.backend, clock=a.clock, work=Path(a.work) if a.work else None)
    if a.json:
        print(json.dumps({"meta": meta, "rows": rows}, indent=1))
    else:
        print(f"backend {meta['backend']}, clock {meta['clock']}, kernel {meta['kernel_release']}")
        for alg, ps in sorted(meta["modules"].items()):
            print(f"module tcp_{alg}: " + " ".join(f"{k}={v}" for k, v in ps.items()))
        print(f"path: {lossresponse.PATH.rtt_ms:g} ms, {lossresponse.PATH.rate_mbit:g} Mbit/s, no random loss; "
              f"data segment #{lossresponse.DROP_NTH} dropped\n")
        print(lossresponse.format_rows(rows))
    print(f"\n(work folder: {meta['work']})", file=sys.stderr)
    return 0 if all(r["ok"] for r in rows) else 3


def cmd_pageload(a: argparse.Namespace) -> int:
    from .pageload import run_loads
    from .probe import known_algorithms
    from .pathspec import check_algorithm

    path = parse_path({"rtt_ms": a.rtt_ms, "loss_pct": a.loss_pct, "rate_mbit": a.rate_mbit})
    check_algorithm(a.cc, known_algorithms(), field="cc")
    if not 0 <= a.cache_hit_ratio < 1:
        raise PathError("cache_hit_ratio: give a fraction in [0, 1), e.g. 0.3")
    server = {"cc": a.cc, "initcwnd_pkts": a.initcwnd, "initrwnd_pkts": a.initrwnd, "protocol": a.server_protocol,
              "tls": a.tls, "cert": a.cert}
    client = {"page": a.page, "url": a.url, "loader": a.loader, "coalescing": not a.no_coalescing,
              "cache_hit_ratio": a.cache_hit_ratio, "resolution": a.resolution, "protocol": a.protocol,
              "seed": a.seed}
    res = run_loads([{"label": "load", "server": server, "client": client}], path, backend=a.backend,
                    clock=a.clock, work=Path(a.work) if a.work else None, seed=a.seed)
    ld = res["loads"][0]
    s = ld["summary"]
    if a.json:
        print(json.dumps({"backend": res["backend"], "clock": res["clock"], **ld}, indent=1))
    else:
        print(f"backend {res['backend']}, clock {res['clock']}; {a.loader} loading "
              f"{a.url or 'https://www.lab.test/' + a.page}")
        for k in ("error", "plt_ms", "plt_from_request_ms", "content_download_ms", "ttfb_ms", "dns_ms",
                  "requests", "bytes", "connections_opened", "reuse_ratio", "throughput_mbit"):
            if k in s:
                print(f"  {k:<22} {s[k]}")
        for c in ld["connections"]:
            print(f"  capture: {c['client']} -> {c['server']}: TCP RTT {c['tcp_rtt_ms']} ms, "
                  f"TLS {c['tls_ms']} ms = {c['tls_rtts']} RTT")
        print(f"  HAR {ld['har']}\n  pcap {ld['pcap']} ({ld['capture']})")
    return 0 if not s.get("error") else 3


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="tortoise", description="Tortoise Lab: TCP and HTTP/2 on long, lossy paths")
    ap.add_argument("-v", "--verbose", action="store_true")
    sub = ap.add_subparsers(dest="cmd", required=True)

    def lab_opts(p: argparse.ArgumentParser) -> None:
        p.add_argument("--backend", default="auto", choices=["auto", "native", "uml"])
        p.add_argument("--clock", default="auto", choices=["auto", "real", "virtual"],
                       help="uml only: virtual = time-travel (CPU costs no simulated time); auto = virtual on uml")

    p = sub.add_parser("probe", help="boot the lab and measure one path against its configuration")
    lab_opts(p)
    p.add_argument("--rtt-ms", type=float, default=200.0)
    p.add_argument("--loss-pct", type=float, default=1.0)
    p.add_argument("--rate-mbit", type=float, default=10.0)
    p.add_argument("--jitter-ms", type=float, default=0.0)
    p.add_argument("--queue-pkts", type=int, default=None)
    p.add_argument("--cc", default="cubic", help="server's congestion control algorithm")
    p.add_argument("--switch", default="ovs", choices=["ovs", "bridge"])
    p.add_argument("--bulk-seconds", type=float, default=10.0)
    p.add_argument("--loss-probes", type=int, default=4000, help="UDP probes per direction")
    p.add_argument("--module-param", action="append", default=[], metavar="ALG.PARAM=VALUE",
                   help="a parameter of our modules for this run, e.g. reno_beta.beta=0.8 (repeatable)")
    p.add_argument("--seed", type=int, default=1, help="seed of netem's loss draws (per direction, derived)")
    p.add_argument("--work", help="folder for the run's files (default: a new temporary folder)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_probe)

    p = sub.add_parser("loss-response", help="each algorithm's cwnd reduction after exactly one loss")
    lab_opts(p)
    p.add_argument("--work")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_loss_response)

    p = sub.add_parser("pageload", help="load one page over an emulated path (Apache h2 + TLS in the lab)")
    lab_opts(p)
    p.add_argument("--rtt-ms", type=float, default=100.0)
    p.add_argument("--loss-pct", type=float, default=0.0)
    p.add_argument("--rate-mbit", type=float, default=10.0)
    p.add_argument("--cc", default="cubic")
    p.add_argument("--initcwnd", type=int, default=10)
    p.add_argument("--initrwnd", type=int, default=None)
    p.add_argument("--server-protocol", default="h2", choices=["h2", "h1"], help="Apache: h2 (+http/1.1) or h1 only")
    p.add_argument("--tls", default="1.3", choices=["1.3", "1.2"])
    p.add_argument("--cert", default="shared", choices=["shared", "separate", "large"])
    p.add_argument("--page", default="feed.html",
                   help="tiny.html, small.html, medium.html, large.html, feed.html, base.html")
    p.add_argument("--url", default=None, help="any URL instead of --page (e.g. objects/1000000.bin for h2load)")
    p.add_argument("--loader", default="loader", choices=["loader", "nghttp", "h2load"])
    p.add_argument("--protocol", default=None, choices=["h2", "h1"], help="client side (default: the server's)")
    p.add_argument("--no-coalescing", action="store_true")
    p.add_argument("--cache-hit-ratio", type=float, default=0.0)
    p.add_argument("--resolution", default="same-ip", choices=["same-ip", "two-ip"])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--work")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_pageload)

    p = sub.add_parser("cc-check", help="select each algorithm on the server and confirm it with ss -ti")
    lab_opts(p)
    p.add_argument("algorithms", nargs="*")
    p.set_defaults(func=cmd_cc_check)
    return ap


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if a.verbose else logging.INFO, format="%(message)s")
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        return a.func(a)
    except (PathError, LabError, ParamError) as exc:
        print(f"tortoise: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tortoise: interrupted; the lab was stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
