"""By hand: `python -m tortoiselab.web site OUT [--seed N] [--port P]`,
`python -m tortoiselab.web pki OUT`, `python -m tortoiselab.web conf RUN_DIR
--site SITE --pki PKI_DIR [--variant shared] [--protocols h2] [--tls 1.3]
[--listen 127.0.0.1] [--port 443]`. Prints a short summary as JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import apache, pages, pki


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tortoiselab.web")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("site", help="generate the site")
    s.add_argument("out", type=Path)
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--domain", default="lab.test")
    s.add_argument("--port", type=int, default=443)
    p = sub.add_parser("pki", help="make the lab PKI")
    p.add_argument("out", type=Path)
    p.add_argument("--domain", default="lab.test")
    c = sub.add_parser("conf", help="render httpd.conf into a run dir")
    c.add_argument("run_dir", type=Path)
    c.add_argument("--site", type=Path, required=True)
    c.add_argument("--pki", type=Path, required=True, help="the folder make_pki wrote (pki.json)")
    c.add_argument("--variant", default="shared", choices=apache.CERT_VARIANTS)
    c.add_argument("--protocols", default="h2", choices=sorted(apache.PROTOCOLS))
    c.add_argument("--tls", default="1.3", choices=sorted(apache.TLS_VERSIONS))
    c.add_argument("--listen", action="append", default=None)
    c.add_argument("--port", type=int, default=443)
    c.add_argument("--domain", default="lab.test")
    a = ap.parse_args(argv)
    if a.cmd == "site":
        m = pages.generate_site(a.out, seed=a.seed, domain=a.domain, port=a.port)
        out = {name: {k: pg[k] for k in ("n_objects", "document_bytes", "object_bytes", "total_bytes")}
               for name, pg in m["pages"].items()}
        out["totals"] = m["totals"]
    elif a.cmd == "pki":
        r = pki.make_pki(a.out, domain=a.domain)
        out = {v: {role: {k: d[role][k] for k in ("cert", "sans", "chain_der_bytes", "tls13_flight_estimate_bytes",
                                                  "tls13_flight_segments")} for role in ("www", "static")}
               for v, d in r["variants"].items()}
        out["ca"] = r["ca"]
    else:
        r = json.loads((a.pki / "pki.json").read_text(encoding="utf-8"))
        conf = apache.write_httpd_conf(a.run_dir, site_dir=a.site, pki=r, cert_variant=a.variant,
                                       protocols=a.protocols, tls=a.tls, listen=a.listen or ["127.0.0.1"],
                                       port=a.port, domain=a.domain)
        out = {"conf": str(conf), "start": apache.apache_argv(conf), "stop": apache.apache_stop_argv(conf),
               "check": apache.check_config_argv(conf), "pid_file": str(apache.pid_file(conf.parent))}
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
