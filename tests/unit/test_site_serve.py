"""An imported site served by a real Apache (web/harserve.py): every
recorded response with its status, kept headers and bytes, each origin
over its recorded protocol, each certificate group's certificate covering
exactly its hosts, and 404 for what the recording did not fetch. Apache
and curl of the host, on loopback addresses standing for the lab's."""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from tortoiselab.host import sites
from tortoiselab.web import apache, harserve

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "har" / "multi-origin.har"
pytestmark = pytest.mark.skipif(not (Path(apache.APACHE2).exists() and shutil.which("curl") and shutil.which("openssl")
                                     and os.geteuid() == 0),
                                reason="needs the host's apache2 (started as root), curl and openssl")


def _free_port(addrs: list[str]) -> int:
    rng = random.Random()
    for _ in range(50):
        port = rng.randint(20000, 45000)
        try:
            for a in addrs:
                for p in (port, port + 1):
                    with socket.socket() as s:
                        s.bind((a, p))
            return port
        except OSError:
            continue
    raise RuntimeError("no free port pair on the loopback addresses")


@pytest.fixture(scope="module")
def served():
    # Apache's children run as www-data: a folder they can enter (pytest's tmp_path is 0700)
    root = Path(tempfile.mkdtemp(prefix="tortoise-site-serve-"))
    os.chmod(root, 0o755)
    try:
        got = sites.import_har(FIXTURE, root / "sites", "shop", tokens=frozenset({"session_token"}))
        site, _ = sites.load_site(root / "sites", "shop")
        bodies = {r["body"]: (got.folder / "bodies" / r["body"]).read_bytes() for r in site["responses"].values()}
        pki = harserve.make_site_pki(root / "pki", site, "serve-test")
        os.chmod(root / "pki", 0o755)
        docs = harserve.write_docroots(root / "www", site, bodies)
        addrs = {a["lab"]: f"127.0.3.{i + 1}" for i, a in enumerate(site["addresses"])}
        port = _free_port(list(addrs.values()))
        conf = root / "run" / "httpd.conf"
        conf.parent.mkdir()
        os.chmod(conf.parent, 0o755)
        conf.write_text(harserve.render_conf(conf.parent, site, docs, pki, addrs, ports={443: port, 80: port + 1}))
        check = subprocess.run(apache.check_config_argv(conf), capture_output=True, text=True, timeout=30)
        assert check.returncode == 0, check.stderr
        with apache.running(conf, timeout=30):
            yield {"site": site, "bodies": bodies, "pki": pki, "addrs": addrs, "port": port, "root": root}
    finally:
        shutil.rmtree(root)


def _get(sv, url: str, head: bool = False) -> tuple[int, str, dict, bytes]:
    o = next(v for k, v in sv["site"]["origins"].items() if url.startswith(k + "/"))
    port = sv["port"] if o["scheme"] == "https" else sv["port"] + 1
    default = 443 if o["scheme"] == "https" else 80
    target = url.replace(f"{o['host']}/", f"{o['host']}:{port}/", 1)
    out = Path(sv["root"]) / "body.bin"
    hdr = Path(sv["root"]) / "head.txt"
    r = subprocess.run(["curl", "-s", "--http2" if o["scheme"] == "https" else "--http1.1",
                        "--resolve", f"{o['host']}:{port}:{sv['addrs'][o['ip']]}", "--cacert", sv["pki"]["ca"],
                        "-D", str(hdr), "-o", str(out), "-w", "%{http_code} %{http_version}", target],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, (url, r.stderr, default)
    code, version = r.stdout.split()
    headers = {}
    for line in hdr.read_text().splitlines()[1:]:
        k, _, v = line.partition(":")
        if v:
            headers[k.strip().lower()] = v.strip()
    return int(code), version, headers, out.read_bytes()


def test_every_recorded_response_is_served_as_recorded(served):
    site = served["site"]
    for key, resp in site["responses"].items():
        url = key.split(" ", 1)[1]
        code, version, headers, body = _get(served, url)
        assert code == resp["status"], url
        assert body == served["bodies"][resp["body"]] and len(body) == resp["bytes"], url
        for k, v in resp["headers"].items():
            assert headers.get(k) == v, (url, k, headers)
        origin = next(o for k, o in site["origins"].items() if url.startswith(k + "/"))
        assert version == ("2" if origin["protocol"] == "h2" else "1.1"), url


def test_a_url_the_recording_did_not_fetch_is_404(served):
    assert _get(served, "https://api.shop.example/v1/feed?page=2")[0] == 404
    assert _get(served, "https://www.shop.example/r1.asis")[0] == 404


def test_each_certificate_covers_its_group_alone(served):
    for group in served["site"]["certificates"]:
        host = group["hosts"][0]
        o = next(v for v in served["site"]["origins"].values() if v["host"] == host and v["scheme"] == "https")
        r = subprocess.run(["openssl", "s_client", "-connect", f"{served['addrs'][o['ip']]}:{served['port']}",
                            "-servername", host, "-CAfile", served["pki"]["ca"], "-verify_return_error"],
                           input="", capture_output=True, text=True, timeout=30)
        assert "Verify return code: 0 (ok)" in r.stdout, r.stdout[-500:]
        pem = r.stdout[r.stdout.index("-----BEGIN CERTIFICATE-----"):r.stdout.index("-----END CERTIFICATE-----") + 25]
        sans = subprocess.run(["openssl", "x509", "-noout", "-ext", "subjectAltName"], input=pem,
                              capture_output=True, text=True, timeout=30).stdout
        assert sorted(x.strip()[4:] for x in sans.splitlines()[1].split(",")) == sorted(group["hosts"])
