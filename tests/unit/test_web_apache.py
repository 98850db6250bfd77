import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tortoiselab.web import apache, pages
from tortoiselab.web import pki as P

APACHE = Path(apache.APACHE2)


def fake_pki(root: Path) -> dict:
    """Paths only: rendering does not open the files."""
    def e(host, name):
        return {"host": host, "cert": str(root / f"{name}.pem"), "key": str(root / f"{name}.key")}
    shared = e("www.lab.test", "shared/cert")
    large = e("www.lab.test", "large/cert")
    return {"ca": str(root / "ca.pem"), "variants": {
        "shared": {"www": shared, "static": {**shared, "host": "static.lab.test"}},
        "separate": {"www": e("www.lab.test", "separate/www"), "static": e("static.lab.test", "separate/static")},
        "large": {"www": large, "static": {**large, "host": "static.lab.test"}}}}


def render(tmp_path, **kw) -> list[str]:
    args = dict(site_dir=tmp_path / "site", pki=fake_pki(tmp_path / "pki"))
    args.update(kw)
    return apache.render_httpd_conf(tmp_path / "run", **args).splitlines()


def vhosts(lines: list[str]) -> dict[str, list[str]]:
    out, cur = {}, None
    for line in lines:
        s = line.strip()
        if s.startswith("<VirtualHost"):
            cur = []
        elif s == "</VirtualHost>":
            name = next(x.split()[1] for x in cur if x.startswith("ServerName "))
            out[name], cur = cur, None
        elif cur is not None:
            cur.append(s)
    return out


@pytest.mark.parametrize("protocols,line", [("h2", "Protocols h2 http/1.1"), ("h1", "Protocols http/1.1")])
def test_protocols(tmp_path, protocols, line):
    lines = render(tmp_path, protocols=protocols)
    assert [x for x in lines if x.startswith("Protocols ")] == [line]


@pytest.mark.parametrize("tls,line", [("1.3", "SSLProtocol -all +TLSv1.3"), ("1.2", "SSLProtocol -all +TLSv1.2")])
def test_tls_version(tmp_path, tls, line):
    lines = render(tmp_path, tls=tls)
    assert [x for x in lines if x.startswith("SSLProtocol")] == [line]


@pytest.mark.parametrize("variant", ["shared", "large"])
def test_one_certificate_for_both_hosts(tmp_path, variant):
    v = vhosts(render(tmp_path, cert_variant=variant))
    assert list(v) == ["www.lab.test", "static.lab.test"]  # www first: the default for unknown names
    cert = tmp_path / "pki" / variant / "cert.pem"
    for host in v:
        assert f'SSLCertificateFile "{cert}"' in v[host]
        assert f'SSLCertificateKeyFile "{tmp_path / "pki" / variant / "cert.key"}"' in v[host]
        assert "SSLEngine on" in v[host]


def test_separate_certificates(tmp_path):
    v = vhosts(render(tmp_path, cert_variant="separate"))
    for host, name in (("www.lab.test", "www"), ("static.lab.test", "static")):
        assert f'SSLCertificateFile "{tmp_path / "pki" / "separate" / name}.pem"' in v[host]
        assert f'SSLCertificateKeyFile "{tmp_path / "pki" / "separate" / name}.key"' in v[host]
        assert f'DocumentRoot "{(tmp_path / "site" / name).resolve()}"' in v[host]
        assert f'<Directory "{(tmp_path / "site" / name).resolve()}">' in v[host]
        assert "Require all granted" in v[host]


def test_fixed_directives(tmp_path):
    run = (tmp_path / "run").resolve()
    lines = render(tmp_path)
    for want in ["User www-data", "Group www-data", "KeepAlive On", "H2Direct off", "H2MaxSessionStreams 100",
                 "TypesConfig /etc/mime.types", f'ServerRoot "{run}"', f'DefaultRuntimeDir "{run}"',
                 f'PidFile "{run}/httpd.pid"', f'ErrorLog "{run}/error.log"', f"Mutex file:{run} default",
                 f'CustomLog "{run}/access.log" tortoise', f'SSLSessionCache "shmcb:{run}/ssl_scache(512000)"',
                 "StartServers 1", "ServerLimit 1", "ThreadsPerChild 16", "MaxRequestWorkers 16",
                 "Listen 127.0.0.1:443 https", "<VirtualHost *:443>", "ServerName www.lab.test"]:
        assert want in lines, want
    loads = [x for x in lines if x.startswith("LoadModule ")]
    assert loads == [f"LoadModule {n} /usr/lib/apache2/modules/{so}" for n, so in apache.MODULES]
    assert {n for n, _ in apache.MODULES} == {"mpm_event_module", "authz_core_module", "mime_module", "dir_module",
                                              "socache_shmcb_module", "ssl_module", "http2_module"}
    logformat = next(x for x in lines if x.startswith("LogFormat "))
    assert "%D" in logformat and logformat.endswith(" tortoise")
    text = "\n".join(lines)
    directives = "\n".join(x for x in lines if not x.lstrip().startswith("#"))
    assert not re.search(r"^\s*Include", directives, re.M | re.I) and "/etc/apache2" not in directives
    assert "$" not in text.replace("%{", "")  # every placeholder filled


def test_listen_forms(tmp_path):
    lines = render(tmp_path, listen=["10.0.0.1", "10.0.0.3"], port=443)
    assert [x for x in lines if x.startswith("Listen")] == ["Listen 10.0.0.1:443 https", "Listen 10.0.0.3:443 https"]
    lines = render(tmp_path, listen=["127.0.0.2", "127.0.0.3:9443", "::1", "[::1]:7443"], port=8443)
    assert [x for x in lines if x.startswith("Listen")] == [
        "Listen 127.0.0.2:8443 https", "Listen 127.0.0.3:9443 https", "Listen [::1]:8443 https",
        "Listen [::1]:7443 https"]
    assert "<VirtualHost *:8443>" in lines
    assert [x for x in render(tmp_path, listen="127.0.0.1") if x.startswith("Listen")] == ["Listen 127.0.0.1:443 https"]


def test_other_domain_and_threads(tmp_path):
    lines = render(tmp_path, domain="example.test", threads=4)
    assert list(vhosts(lines)) == ["www.example.test", "static.example.test"]
    assert "ThreadsPerChild 4" in lines and "ThreadLimit 4" in lines and "MaxSpareThreads 8" in lines


@pytest.mark.parametrize("kw,msg", [({"protocols": "h3"}, "protocols"), ({"tls": "1.1"}, "tls"),
                                    ({"cert_variant": "huge"}, "cert_variant"), ({"threads": 0}, "threads"),
                                    ({"listen": []}, "listen"), ({"listen": ["1.2.3.4", "1.2.3.4"]}, "listen"),
                                    ({"site_dir": None}, "site_dir")])
def test_bad_settings_are_refused(tmp_path, kw, msg):
    with pytest.raises(ValueError, match=msg):
        render(tmp_path, **kw)


def test_argv():
    c = Path("/r/httpd.conf")
    assert apache.apache_argv(c) == ["/usr/sbin/apache2", "-f", "/r/httpd.conf", "-k", "start"]
    assert apache.apache_argv(c, foreground=True) == ["/usr/sbin/apache2", "-f", "/r/httpd.conf", "-DFOREGROUND"]
    assert apache.apache_stop_argv(c) == ["/usr/sbin/apache2", "-f", "/r/httpd.conf", "-k", "stop"]
    assert apache.check_config_argv(c) == ["/usr/sbin/apache2", "-t", "-f", "/r/httpd.conf"]
    assert apache.pid_file(Path("/r")) == Path("/r/httpd.pid")


def test_stop_by_pidfile_stops_only_the_recorded_pid(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        pidf = tmp_path / "httpd.pid"
        pidf.write_text(f"{proc.pid}\n")
        assert apache.wait_for_pid(pidf, timeout=2) == proc.pid
        assert apache.stop_by_pidfile(pidf, timeout=5) is True
        assert proc.wait(timeout=5) == -15
        assert other.poll() is None
        assert apache.stop_by_pidfile(pidf) is False  # nothing left to stop
        assert apache.stop_by_pidfile(tmp_path / "missing.pid") is False
    finally:
        other.kill()
        other.wait()


def test_a_pid_used_again_by_another_process_is_not_signalled(tmp_path):
    """A pid file whose pid is another process's now (a start time other
    than the server's when it came up): nothing is signalled; the server's
    own start time stops it."""
    foreign = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        pidf = tmp_path / "httpd.pid"
        pidf.write_text(f"{foreign.pid}\n")
        started = apache.start_ticks(foreign.pid)
        assert started is not None
        assert apache.stop_by_pidfile(pidf, timeout=1, started=started - 1) is False
        # the same start time, another command line (a record forged or mixed up): not the server
        assert apache.stop_by_pidfile(pidf, timeout=1, started=started, cmd=b"/usr/sbin/apache2\0-k\0start\0") \
            is False
        time.sleep(0.2)
        assert foreign.poll() is None
        assert apache.cmdline(foreign.pid) == b"sleep\x0060\x00"
        assert apache.stop_by_pidfile(pidf, timeout=5, started=started, cmd=apache.cmdline(foreign.pid)) is True
        assert foreign.wait(timeout=5) == -15
    finally:
        if foreign.poll() is None:
            foreign.kill()
        foreign.wait()


def test_wait_for_pid_reports_the_error_log(tmp_path):
    (tmp_path / "error.log").write_text("AH00015: Unable to open logs\n")
    with pytest.raises(RuntimeError, match="AH00015"):
        apache.wait_for_pid(tmp_path / "httpd.pid", timeout=0.2, error_log=tmp_path / "error.log")


# --- against the installed httpd --------------------------------------------------
@pytest.fixture(scope="module")
def real(tmp_path_factory):
    base = tmp_path_factory.mktemp("apache")
    pages.generate_site(base / "site", bulk_sizes=(1000,))
    return base, P.make_pki(base / "pki")


@pytest.mark.skipif(not APACHE.exists(), reason="/usr/sbin/apache2 is not installed")
@pytest.mark.parametrize("variant", ["shared", "separate", "large"])
@pytest.mark.parametrize("protocols,tls", [("h2", "1.3"), ("h1", "1.2")])
def test_apache_accepts_the_config(real, variant, protocols, tls):
    base, pki = real
    run = base / f"run-{variant}-{protocols}-{tls}"
    conf = apache.write_httpd_conf(run, site_dir=base / "site", pki=pki, cert_variant=variant, protocols=protocols,
                                   tls=tls, listen=["127.0.0.1", "127.0.0.2"], port=8443)
    assert conf == run / "httpd.conf" and oct(os.stat(run).st_mode & 0o777) == "0o755"
    for name, so in apache.MODULES:
        assert (Path(apache.MODULES_DIR) / so).exists(), so
    r = subprocess.run(apache.check_config_argv(conf), capture_output=True, text=True, timeout=30)
    # `apache2 -t` checks syntax, modules, users and file existence; it needs no root
    assert r.returncode == 0 and "Syntax OK" in r.stderr + r.stdout, r.stderr


def test_a_reverse_proxy_terminates_tls_and_passes_requests_to_the_origin_over_h2(tmp_path):
    """pop's edge PoP (topologies/pop.py): the same virtual hosts and
    certificates, no docroot, every request to the origin over h2 + TLS,
    its certificate checked against the lab CA; one worker per host."""
    lines = render(tmp_path, proxy_to="10.0.3.1")
    assert "LoadModule proxy_http2_module /usr/lib/apache2/modules/mod_proxy_http2.so" in lines
    hosts = vhosts(lines)
    assert "ProxyPass / h2://10.0.3.1:443/" in hosts["www.lab.test"]
    assert "ProxyPass / h2://10.0.3.1/" in hosts["static.lab.test"]
    for v in hosts.values():
        assert f"SSLProxyCACertificateFile \"{tmp_path / 'pki' / 'ca.pem'}\"" in v
        assert "SSLProxyVerify require" in v and not any(x.startswith("DocumentRoot") for x in v)
    plain = render(tmp_path / "plain")  # a server: as before
    assert not any(x.startswith(("LoadModule proxy", "ProxyPass", "SSLProxy")) for x in map(str.strip, plain))
