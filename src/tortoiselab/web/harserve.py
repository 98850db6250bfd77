"""An imported site (web/harsite.py, docs/your-own-site.md) served by Apache
as it was recorded: its certificates, its document roots and one httpd.conf.

- `make_site_pki(out_dir, site, seed_name)`: an RSA-2048 lab root and
  intermediate (as the `-rsa` variants of web/pki.py: Chromium verifies no
  Ed25519, docs/browser.md) and one leaf per certificate group of the site,
  its SANs the group's hosts, so that a client may coalesce exactly the
  hosts the recording's connections did (RFC 9113 §9.1.1).
- `write_docroots(out_dir, site, bodies)`: per host a folder of `r<N>.asis`
  files, each the recorded status line and kept headers, a blank line and
  the body (mod_asis sends the file as it is), and a RewriteMap text file
  from the URL's path and query as sent to its file.
- `render_conf(run_dir, site, served, pki, addresses)`: the httpd.conf of
  webroot/httpd.conf.tmpl with a virtual host per origin (webroot/vhost-replay.conf.tmpl)
  on its lab address, with its protocol (h2 or HTTP/1.1 as recorded) and
  its group's certificate; a URL the recording did not fetch gets 404.
"""

from __future__ import annotations

import http
import json
import os
from pathlib import Path
from string import Template
from typing import Mapping
from urllib.parse import urlsplit

from tortoiselab.web import apache
from tortoiselab.web.pki import _build, _leaf_entry, _new_key, _write_chain, _write_key

REPLAY_VHOST_TEMPLATE = apache.WEBROOT / "vhost-replay.conf.tmpl"
REPLAY_MODULES: tuple[tuple[str, str], ...] = (
    ("rewrite_module", "mod_rewrite.so"),
    ("asis_module", "mod_asis.so"),
)
PROTOCOLS = {"h2": "h2 http/1.1", "http/1.1": "http/1.1"}
PKI_JSON = "pki.json"


def make_site_pki(out_dir: Path, site: dict, seed_name: str) -> dict:
    """The site's CA and one certificate per group under out_dir; returns
    {"ca", "certificates": {group id: leaf entry (host, cert, key, sans, ...)}}."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ca_key = _new_key("rsa-2048")
    ca = _build(f"Tortoise Lab CA {seed_name} RSA", ca_key, None, ca_key, ca=True, serial_seed=seed_name)
    _write_chain(out_dir / "ca.pem", [ca])
    int_key = _new_key("rsa-2048")
    inter = _build("Tortoise Lab RSA-2048 Intermediate", int_key, ca, ca_key, ca=True, path_len=0,
                   serial_seed=seed_name)
    certs = {}
    for group in site["certificates"]:
        key = _new_key("rsa-2048")
        leaf = _build(group["hosts"][0], key, inter, int_key, ca=False, sans=list(group["hosts"]),
                      serial_seed=f"{seed_name}:{group['id']}")
        chain, keyfile = out_dir / f"{group['id']}.pem", out_dir / f"{group['id']}.key"
        _write_chain(chain, [leaf, inter])
        _write_key(keyfile, key)
        certs[group["id"]] = _leaf_entry(group["hosts"][0], chain, keyfile, [leaf, inter], key)
    made = {"ca": str(out_dir / "ca.pem"), "certificates": certs}
    # pki.json names its files relative to its folder: a uml guest sees the folder elsewhere
    rel = json.loads(json.dumps(made).replace(json.dumps(str(out_dir) + "/")[1:-1], ""))
    (out_dir / PKI_JSON).write_text(json.dumps(rel, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.chmod(out_dir, 0o755)
    return made


def read_site_pki(folder: Path) -> dict:
    """make_site_pki's result, its paths under `folder` (wherever it is seen)."""
    folder = Path(folder)
    rel = json.loads((folder / PKI_JSON).read_text(encoding="utf-8"))
    certs = {g: {**c, "cert": str(folder / c["cert"]), "key": str(folder / c["key"])}
             for g, c in rel["certificates"].items()}
    return {"ca": str(folder / rel["ca"]), "certificates": certs}


def request_target(url: str) -> str:
    """The path and query of url as a client sends them ("/" for none)."""
    p = urlsplit(url)
    return (p.path or "/") + (f"?{p.query}" if p.query else "")


def asis(resp: dict, body: bytes) -> bytes:
    """One response as mod_asis sends it: Status, the kept headers, the body."""
    try:
        phrase = http.HTTPStatus(resp["status"]).phrase
    except ValueError:
        phrase = "Status"
    head = [f"Status: {resp['status']} {phrase}"]
    head += [f"{k}: {v}" for k, v in sorted(resp["headers"].items()) if "\n" not in v and "\r" not in v]
    head.append(f"Content-Length: {len(body)}")
    return ("\n".join(head) + "\n\n").encode("utf-8", "replace") + body


def write_docroots(out_dir: Path, site: dict, bodies: Mapping[str, bytes]) -> dict[str, dict]:
    """Per origin {"docroot", "map"} under out_dir (folders 0755, files 0644:
    Apache's children run as www-data). bodies: SHA-256 -> bytes."""
    out_dir = Path(out_dir)
    served: dict[str, dict] = {}
    n = 0
    for key, resp in site["responses"].items():
        method, url = key.split(" ", 1)
        origin = next(o for o, v in site["origins"].items() if _origin_of(url) == o)
        s = served.get(origin)
        if s is None:
            d = out_dir / f"o{len(served) + 1}"
            d.mkdir(parents=True, exist_ok=True)
            os.chmod(d, 0o755)
            s = served[origin] = {"docroot": d, "map": out_dir / f"o{len(served) + 1}.map", "lines": []}
        n += 1
        f = s["docroot"] / f"r{n}.asis"
        f.write_bytes(asis(resp, bodies[resp["body"]]))
        os.chmod(f, 0o644)
        if method == "GET":  # HEAD of the same URL answers from the GET's file; a HEAD alone gets its own
            s["lines"].append(f"{request_target(url)} r{n}.asis")
        elif not any(line.startswith(request_target(url) + " ") for line in s["lines"]):
            s["lines"].append(f"{request_target(url)} r{n}.asis")
    for s in served.values():
        s["map"].write_text("\n".join(s.pop("lines")) + "\n", encoding="utf-8")
        os.chmod(s["map"], 0o644)
    os.chmod(out_dir, 0o755)
    return served


def _origin_of(url: str) -> str:
    p = urlsplit(url)
    default = 443 if p.scheme == "https" else 80
    return f"{p.scheme}://{(p.hostname or '').lower()}" + ("" if (p.port or default) == default else f":{p.port}")


def render_conf(run_dir: Path, site: dict, served: Mapping[str, dict], pki: dict, addresses: Mapping[str, str],
                *, ports: Mapping[int, int] | None = None, threads: int = 16, user: str = "www-data",
                group: str = "www-data", log_level: str = "warn", modules_dir: str = apache.MODULES_DIR) -> str:
    """httpd.conf serving the site: `addresses` maps each lab address of the
    site (site["addresses"][i]["lab"]) to the address the server listens
    on (the same in the lab; loopback ones in a test), `ports` a recorded
    port to the port listened on (default: the same)."""
    run_dir = Path(run_dir).resolve()
    ports = dict(ports or {})
    vt = Template(REPLAY_VHOST_TEMPLATE.read_text(encoding="utf-8"))
    vhosts, listen = [], []
    for origin, o in site["origins"].items():
        if origin not in served:
            continue
        addr, port = addresses[o["ip"]], ports.get(o["port"], o["port"])
        line = f"Listen {addr}:{port} {o['scheme']}"
        if line not in listen:
            listen.append(line)
        tls = ""
        if o["scheme"] == "https":
            c = pki["certificates"][o["certificate"]]
            tls = (f"    SSLEngine on\n    SSLCertificateFile \"{c['cert']}\"\n"
                   f"    SSLCertificateKeyFile \"{c['key']}\"")
        vhosts.append(vt.substitute(address=addr, port=port, host=o["host"], docroot=served[origin]["docroot"],
                                    protocols=PROTOCOLS[o["protocol"]] if o["scheme"] == "https" else "http/1.1",
                                    tls=tls, map=served[origin]["map"]))
    load = "\n".join(f"LoadModule {name} {modules_dir}/{so}" for name, so in (*apache.MODULES, *REPLAY_MODULES))
    return Template(apache.TEMPLATE.read_text(encoding="utf-8")).substitute(
        summary=f"imported site {site['name']} ({len(vhosts)} origins)", run_dir=run_dir,
        pid_file=run_dir / apache.PID_NAME, error_log=run_dir / apache.ERROR_LOG,
        access_log=run_dir / apache.ACCESS_LOG, log_level=log_level, www_host=site["origins"][_origin_of(site["page"])]["host"],
        load_modules=load, user=user, group=group, threads=int(threads), max_spare_threads=2 * int(threads),
        protocols="h2 http/1.1", ssl_protocol=apache.TLS_VERSIONS["1.3"], listen="\n".join(listen),
        vhosts="\n".join(vhosts))
