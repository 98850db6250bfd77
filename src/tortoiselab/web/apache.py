"""Apache httpd 2.4 (mod_http2, mod_ssl) for one run: the configuration,
rendered from webroot/httpd.conf.tmpl and webroot/vhost.conf.tmpl with
string.Template, and the argv lists that check, start and stop it.

Everything the server writes lives in the run dir (pid file, error log,
access log, mutexes, the TLS session cache): the lab guest's /run and /tmp
are tmpfs, and nothing of Debian's /etc/apache2 is read.

Permissions the caller gives (Apache starts as root, binds, opens its logs
and reads the keys, then its children run as www-data):
- the docroots and all their parents: world-readable files, traversable
  folders (`pages.generate_site` writes 0644 / 0755);
- the run dir: 0755 is enough (children only use what the parent opened);
- keys: readable by root alone is fine (`pki.make_pki` writes 0600).

Lifecycle: `apache_argv(conf)` is `apache2 -f conf -k start`: it returns once
the server has detached, and the server writes its pid file (`pid_file(run_dir)`)
when it listens. Stop it by that pid: `stop_by_pidfile(pid_file, started=...)` sends
SIGTERM to the recorded pid and waits (or run `apache_stop_argv(conf)`, which does the
same through httpd). `running(...)` wraps both as a context manager. A pid
is signalled only while it is the server that wrote it: `started`, its start
time read when it came up (`start_ticks`), and `cmd`, its command line then
(`cmdline`), must still match, so a pid file
left over, with its pid used again by another process, ends nothing (as
host/procid.py does for the host's recorded pids).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from string import Template
from typing import Callable, Iterator, Sequence

from tortoiselab.project import REPO_DIR

APACHE2 = "/usr/sbin/apache2"
MODULES_DIR = "/usr/lib/apache2/modules"
WEBROOT = REPO_DIR / "webroot"
TEMPLATE = WEBROOT / "httpd.conf.tmpl"
VHOST_TEMPLATE = WEBROOT / "vhost.conf.tmpl"
PROXY_VHOST_TEMPLATE = WEBROOT / "vhost-proxy.conf.tmpl"
# a reverse proxy's (topologies/pop.py: the edge PoP) further modules
PROXY_MODULES: tuple[tuple[str, str], ...] = (
    ("proxy_module", "mod_proxy.so"),
    ("proxy_http2_module", "mod_proxy_http2.so"),
)

# exactly the modules the configuration uses (order: MPM first); Debian's
# apache2 has mod_unixd (User, Group) and mod_log_config (LogFormat,
# CustomLog) compiled in (`apache2 -l`), so they are not loaded.
MODULES: tuple[tuple[str, str], ...] = (
    ("mpm_event_module", "mod_mpm_event.so"),
    ("authz_core_module", "mod_authz_core.so"),
    ("mime_module", "mod_mime.so"),
    ("dir_module", "mod_dir.so"),
    ("socache_shmcb_module", "mod_socache_shmcb.so"),
    ("ssl_module", "mod_ssl.so"),
    ("http2_module", "mod_http2.so"),
)

PROTOCOLS = {"h2": "h2 http/1.1", "h1": "http/1.1"}
TLS_VERSIONS = {"1.3": "-all +TLSv1.3", "1.2": "-all +TLSv1.2"}
CERT_VARIANTS = ("shared", "separate", "large", "shared-rsa", "separate-rsa")

CONF_NAME = "httpd.conf"
PID_NAME = "httpd.pid"
ERROR_LOG = "error.log"
ACCESS_LOG = "access.log"


def pid_file(run_dir: Path) -> Path:
    return Path(run_dir) / PID_NAME


def _listen_lines(listen: Sequence[str] | str, port: int) -> str:
    if isinstance(listen, str):
        listen = [listen]
    if not listen:
        raise ValueError("listen: at least one address")
    lines = []
    for addr in listen:
        addr = str(addr)
        if addr.startswith("[") or addr.count(":") == 0:
            hostport = addr if "]:" in addr else f"{addr}:{port}"
        elif addr.count(":") == 1:
            hostport = addr  # "ip:port" given
        else:
            hostport = f"[{addr}]:{port}"  # bare IPv6
        lines.append(f"Listen {hostport} https")
    if len(set(lines)) != len(lines):
        raise ValueError(f"listen: duplicate addresses {list(listen)}")
    return "\n".join(lines)


def _docroots(site_dir: Path | None, docroots: dict | None) -> dict[str, Path]:
    if docroots is not None:
        return {"www": Path(docroots["www"]).resolve(), "static": Path(docroots["static"]).resolve()}
    if site_dir is None:
        raise ValueError("render_httpd_conf: give site_dir (from pages.generate_site) or docroots")
    return {"www": (Path(site_dir) / "www").resolve(), "static": (Path(site_dir) / "static").resolve()}


def render_httpd_conf(run_dir: Path, *, site_dir: Path | None = None, docroots: dict | None = None,
                      pki: dict, cert_variant: str = "shared", protocols: str = "h2", tls: str = "1.3",
                      listen: Sequence[str] | str = ("127.0.0.1",), port: int = 443, domain: str = "lab.test",
                      threads: int = 16, user: str = "www-data", group: str = "www-data",
                      log_level: str = "warn", modules_dir: str = MODULES_DIR,
                      template: Path = TEMPLATE, vhost_template: Path = VHOST_TEMPLATE,
                      proxy_to: str | None = None) -> str:
    """The httpd.conf text for one server setting.

    protocols: "h2" (Protocols h2 http/1.1) or "h1" (Protocols http/1.1);
    tls: "1.3" or "1.2" (SSLProtocol -all +TLSv1.x);
    cert_variant: a key of pki["variants"] ("shared", "separate", "large"):
    with "separate" each virtual host has its own certificate; with "shared"
    and "large" both use the same one (so a client may coalesce).
    listen: addresses ("10.0.0.1", "10.0.0.1:8443", "::1"), each on `port`
    unless it names one. Two name-based virtual hosts, www.<domain> (first,
    the default) and static.<domain>, on *:port.
    proxy_to: an origin's address: the virtual hosts terminate TLS and pass
    every request on to https://<proxy_to> over HTTP/2 (mod_proxy_http2),
    one backhaul connection per virtual host (the edge PoP of topologies/pop.py).
    """
    if protocols not in PROTOCOLS:
        raise ValueError(f"protocols: {protocols!r}; use one of {sorted(PROTOCOLS)}")
    if tls not in TLS_VERSIONS:
        raise ValueError(f"tls: {tls!r}; use one of {sorted(TLS_VERSIONS)}")
    if cert_variant not in pki.get("variants", {}):
        raise ValueError(f"cert_variant: {cert_variant!r}; this PKI has {sorted(pki.get('variants', {}))}")
    if not 1 <= int(threads) <= 1024:
        raise ValueError(f"threads: 1..1024, got {threads}")
    if not 1 <= int(port) <= 65535:
        raise ValueError(f"port: 1..65535, got {port}")
    run_dir = Path(run_dir).resolve()
    roots = _docroots(site_dir, docroots)
    variant = pki["variants"][cert_variant]
    vt = Template(Path(PROXY_VHOST_TEMPLATE if proxy_to else vhost_template).read_text(encoding="utf-8"))
    vhosts = []
    for i, role in enumerate(("www", "static")):
        # a worker per virtual host (distinct URLs): a backhaul connection carries one host's SNI
        origin = f"h2://{proxy_to}:{port}" if i == 0 else f"h2://{proxy_to}" if proxy_to else ""
        vhosts.append(vt.substitute(port=port, host=f"{role}.{domain}", docroot=roots[role],
                                    cert=variant[role]["cert"], key=variant[role]["key"], ca=pki["ca"],
                                    origin=origin))
    load = "\n".join(f"LoadModule {name} {modules_dir}/{so}"
                     for name, so in (*MODULES, *(PROXY_MODULES if proxy_to else ())))
    summary = (f"protocols={protocols} tls={tls} cert={cert_variant} domain={domain} "
               f"listen={','.join(listen) if not isinstance(listen, str) else listen} port={port}"
               + (f" proxy_to={proxy_to}" if proxy_to else ""))
    return Template(Path(template).read_text(encoding="utf-8")).substitute(
        summary=summary, run_dir=run_dir, pid_file=run_dir / PID_NAME, error_log=run_dir / ERROR_LOG,
        access_log=run_dir / ACCESS_LOG, log_level=log_level, www_host=f"www.{domain}", load_modules=load,
        user=user, group=group, threads=int(threads), max_spare_threads=2 * int(threads),
        protocols=PROTOCOLS[protocols], ssl_protocol=TLS_VERSIONS[tls], listen=_listen_lines(listen, port),
        vhosts="\n".join(vhosts))


def write_httpd_conf(run_dir: Path, **kw) -> Path:
    """Render (see render_httpd_conf) into run_dir/httpd.conf; creates
    run_dir (0755) if needed. Returns the config's path."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        run_dir.mkdir(parents=True)
        os.chmod(run_dir, 0o755)
    conf = run_dir / CONF_NAME
    conf.write_text(render_httpd_conf(run_dir, **kw), encoding="utf-8")
    os.chmod(conf, 0o644)
    return conf


# --- argv -------------------------------------------------------------------------
def apache_argv(conf_path: Path, *, foreground: bool = False, binary: str = APACHE2) -> list[str]:
    """Start httpd with this config. Default: `-k start` (detaches; returns
    once the parent has forked; the pid file appears when it listens).
    foreground=True: `-DFOREGROUND` for a supervisor that keeps the process."""
    if foreground:
        return [binary, "-f", str(conf_path), "-DFOREGROUND"]
    return [binary, "-f", str(conf_path), "-k", "start"]


def apache_stop_argv(conf_path: Path, *, graceful: bool = False, binary: str = APACHE2) -> list[str]:
    """Stop the server started with this config: httpd reads the PidFile the
    config names and signals that pid (SIGTERM; graceful: SIGWINCH)."""
    return [binary, "-f", str(conf_path), "-k", "graceful-stop" if graceful else "stop"]


def check_config_argv(conf_path: Path, *, binary: str = APACHE2) -> list[str]:
    """Syntax check: `apache2 -t -f conf` (exit 0 and "Syntax OK")."""
    return [binary, "-t", "-f", str(conf_path)]


# --- lifecycle ----------------------------------------------------------------------
def read_pid(pid_path: Path) -> int | None:
    try:
        text = Path(pid_path).read_text(encoding="utf-8").strip()
        return int(text) if text else None
    except (FileNotFoundError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child of ours is gone for our purposes
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def start_ticks(pid: int) -> int | None:
    """A process's start time in clock ticks since boot (field 22 of
    /proc/<pid>/stat; the fields follow the command name's last ')'), or
    None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return int(f.read().rsplit(")", 1)[1].split()[22 - 3])
    except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
        return None


def cmdline(pid: int) -> bytes | None:
    """A process's command line (/proc/<pid>/cmdline: its argv, each
    followed by a NUL), or None if there is no such process."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None


def _same(pid: int, started: int | None, cmd: bytes | None = None) -> bool:
    """Whether pid is still the server recorded: its start time and (cmd
    given) its command line as they were when it came up."""
    return (started is None or start_ticks(pid) == started) and (cmd is None or cmdline(pid) == cmd)


def wait_for_pid(pid_path: Path, timeout: float = 10.0, error_log: Path | None = None) -> int:
    """Wait until httpd has written its pid file; return the pid."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = read_pid(pid_path)
        if pid is not None and _alive(pid):
            return pid
        time.sleep(0.05)
    tail = ""
    if error_log is not None and Path(error_log).exists():
        tail = Path(error_log).read_text(encoding="utf-8")[-2000:]
    raise RuntimeError(f"apache did not write {pid_path} within {timeout} s. {tail}")


def stop_by_pidfile(pid_path: Path, timeout: float = 10.0, started: int | None = None,
                    cmd: bytes | None = None) -> bool:
    """SIGTERM the pid recorded in pid_path (httpd's parent: it stops its
    children and removes the file) and wait until it is gone. Returns False
    if there was nothing to stop, or (started, cmd given: its start_ticks
    and cmdline when it came up) if the pid is another process's now;
    SIGKILLs the recorded pid after timeout, if it still is that server."""
    pid = read_pid(pid_path)
    if pid is None or not _alive(pid) or not _same(pid, started, cmd):
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid) or not _same(pid, started, cmd):
            return True
        time.sleep(0.05)
    if _same(pid, started, cmd):
        os.kill(pid, signal.SIGKILL)
    return True


@contextlib.contextmanager
def running(conf_path: Path, *, run: Callable[[list[str]], object] | None = None,
            timeout: float = 10.0) -> Iterator[int]:
    """Start httpd with conf_path (whose pid file and error log are in the
    same run dir, as write_httpd_conf makes them), yield its pid, stop it
    by that pid on exit, also on error. `run` executes an argv (default:
    subprocess.run with check=True)."""
    conf_path = Path(conf_path)
    pidf, err = conf_path.parent / PID_NAME, conf_path.parent / ERROR_LOG
    if read_pid(pidf) is not None and _alive(read_pid(pidf)):
        raise RuntimeError(f"{pidf} names a running process; stop it first")
    pidf.unlink(missing_ok=True)  # a stale one (its pid not running) is not the new server's
    (run or (lambda argv: subprocess.run(argv, check=True)))(apache_argv(conf_path))
    started, cmd = None, None
    try:
        pid = wait_for_pid(pidf, timeout, err)
        started, cmd = start_ticks(pid), cmdline(pid)
        yield pid
    finally:
        # before it came up, the file can only be the new server's (the stale one is gone)
        stop_by_pidfile(pidf, timeout, started, cmd)
