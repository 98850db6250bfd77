"""The chromium loader's pure parts: its summary from canned DevTools events
and timings, its switches, the NSS commands, the lab's argv for it, the
process tree it ends, and what the spec refuses for it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from tortoiselab.browser import procs
from tortoiselab.browser.chromium import chromium_args
from tortoiselab.browser.names import file_texts, resolver_rules
from tortoiselab.browser.profile import nssdb_add_ca, nssdb_create
from tortoiselab.browser.summary import summarize
from tortoiselab.guest import commands as C
from tortoiselab.spec.experiment import RunConfig
from tortoiselab.spec.requests import LoadSpec

WWW, STATIC = "https://www.lab.test", "https://static.lab.test"


def _req(rid: str, url: str, t: float, kind: str = "Document") -> dict:
    return {"method": "Network.requestWillBeSent",
            "params": {"requestId": rid, "request": {"url": url}, "timestamp": t, "type": kind}}


def _resp(rid: str, conn: int, status: int = 200, ip: str = "10.0.0.2") -> dict:
    return {"method": "Network.responseReceived",
            "params": {"requestId": rid, "response": {"status": status, "protocol": "h2", "remoteIPAddress": ip,
                                                      "remotePort": 443, "connectionId": conn}}}


def _done(rid: str) -> dict:
    return {"method": "Network.loadingFinished", "params": {"requestId": rid}}


def _page(conns: dict[str, int], statuses: dict[str, int] | None = None) -> list[dict]:
    """The base page on www and two objects on static, each on the given connection."""
    urls = {"1": f"{WWW}/feed.html", "2": f"{STATIC}/a.css", "3": f"{STATIC}/b.js"}
    ev = []
    for i, (rid, url) in enumerate(urls.items()):
        ev += [_req(rid, url, 1.0 + i), _resp(rid, conns[rid], (statuses or {}).get(rid, 200)),
               {"method": "Network.dataReceived", "params": {"requestId": rid, "dataLength": 500 * int(rid)}},
               _done(rid)]
    # the browser's own favicon request, never the page's: left out
    ev += [_req("9", f"{WWW}/favicon.ico", 9.0, kind="Other"), _resp("9", conns["1"], 404), _done("9")]
    return ev


TIMINGS = {"nav": {"name": f"{WWW}/feed.html", "startTime": 0, "connectStart": 1.0, "requestStart": 201.0,
                   "responseStart": 302.0, "responseEnd": 310.0, "loadEventEnd": 520.0, "nextHopProtocol": "h2",
                   "decodedBodySize": 1000},
           "resources": [{"name": f"{STATIC}/a.css", "startTime": 311.0, "responseEnd": 450.5, "nextHopProtocol": "",
                          "decodedBodySize": 200},
                         {"name": f"{STATIC}/b.js", "startTime": 311.0, "responseEnd": 500.25,
                          "nextHopProtocol": "", "decodedBodySize": 300}]}


def _sum(events, timings=TIMINGS, error=None):
    return summarize(events=events, timings=timings, console_errors=[], error=error,
                     settings={"url": f"{WWW}/feed.html", "protocol": None})


def test_coalesced_load_counts_one_connection_and_full_reuse():
    s = _sum(_page({"1": 7, "2": 7, "3": 7}))
    assert s["ok"] and s["error"] is None
    assert (s["requests"], s["requests_failed"], s["connections_opened"]) == (3, 0, 1)
    assert (s["connections_reused"], s["reuse_ratio"]) == (2, 1.0)
    assert s["connections"][0]["origins"] == [f"{WWW}:443", f"{STATIC}:443"]
    assert (s["plt_ms"], s["plt_onload_ms"], s["plt_from_request_ms"], s["ttfb_ms"]) == (500.25, 520.0, 299.25, 302.0)
    assert s["content_download_ms"] == 198.25 and s["bytes"] == 3000  # 500 + 1000 + 1500, favicon left out
    assert s["protocols"] == {"h2": 1, "": 2}


def test_two_connections_without_coalescing():
    s = _sum(_page({"1": 7, "2": 9, "3": 9}))
    assert (s["connections_opened"], s["connections_reused"], s["reuse_ratio"]) == (2, 0, 0.0)


def test_a_failed_request_fails_the_load_and_says_which():
    s = _sum(_page({"1": 7, "2": 7, "3": 7}, statuses={"3": 404}))
    assert not s["ok"] and s["plt_ms"] is None and s["requests_failed"] == 1
    assert "b.js: status 404" in s["error"]


def test_the_browsers_error_is_kept_and_no_plt_is_given():
    s = _sum(_page({"1": 7, "2": 7, "3": 7}), timings=None, error="Page.goto: net::ERR_CERT_COMMON_NAME_INVALID")
    assert s["error"] == "Page.goto: net::ERR_CERT_COMMON_NAME_INVALID" and s["plt_ms"] is None
    assert _sum([], timings=None)["error"] == "the page's navigation timing was not read"


def test_chromium_switches_map_names_statically_and_never_ignore_certificates():
    args = chromium_args(resolver_rules({"www.lab.test": "10.0.0.2", "static.lab.test": "10.0.0.3"}, []), "h1")
    assert args[0] == "--host-resolver-rules=MAP static.lab.test 10.0.0.3, MAP www.lab.test 10.0.0.2, MAP * ~NOTFOUND"
    assert "--disable-http2" in args
    assert "--disable-http2" not in chromium_args("MAP * ~NOTFOUND", "h2")
    assert not any("ignore-certificate" in a for a in args + chromium_args("MAP * ~NOTFOUND", None))


def test_cold_names_are_left_to_the_lab_dns_and_every_other_name_is_not_found():
    assert resolver_rules({}, ["www.lab.test", "static.lab.test"]) == \
        "EXCLUDE static.lab.test, EXCLUDE www.lab.test, MAP * ~NOTFOUND"
    assert file_texts("10.0.0.53") == {"/etc/hosts": "127.0.0.1 localhost\n",
                                       "/etc/resolv.conf": "nameserver 10.0.0.53\noptions timeout:2 attempts:2\n"}


def test_the_browser_refuses_half_a_name_setting_before_it_starts(tmp_path, capsys):
    from tortoiselab.browser.__main__ import main
    base = ["https://www.lab.test/", "--ca", "ca.pem", "--har", str(tmp_path / "h"), "--summary", str(tmp_path / "s")]
    for extra, words in ((["--dns-server", "10.0.0.53"], "--dns-server and --lab-name go together"),
                         (["--dns-server", "10.0.0.53", "--lab-name", "www.lab.test", "--resolve", "www.lab.test:1.2.3.4"],
                          "names come from one or the other")):
        assert main(base + extra) == 2
        assert words in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="a private mount namespace needs root")
def test_private_name_files_are_seen_below_the_browser_and_nowhere_else(tmp_path):
    """In a child process (the namespace is the process's): the files are
    bind-mounted there, the parent's /etc/resolv.conf is untouched."""
    before = Path("/etc/resolv.conf").read_bytes()
    code = ("import sys; from pathlib import Path; from tortoiselab.browser.names import private_mounts, "
            "bind_name_files; private_mounts(); bind_name_files('10.0.0.53', Path(sys.argv[1])); "
            "print(open('/etc/resolv.conf').read() + open('/etc/hosts').read(), end='')")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    assert out.stdout == "nameserver 10.0.0.53\noptions timeout:2 attempts:2\n127.0.0.1 localhost\n"
    assert Path("/etc/resolv.conf").read_bytes() == before
    assert "10.0.0.53" not in Path("/proc/self/mounts").read_text()


def test_the_summary_counts_each_names_first_lookup():
    ev = _page({"1": 7, "2": 8, "3": 8})
    for e in ev:  # www looked up 101.5 ms, static 99 ms (its second request: no lookup, a connection was open)
        if e["method"] == "Network.responseReceived":
            rid = e["params"]["requestId"]
            e["params"]["response"]["timing"] = {"1": {"dnsStart": 0.5, "dnsEnd": 102.0},
                                                 "2": {"dnsStart": 1.0, "dnsEnd": 100.0}}.get(
                                                     rid, {"dnsStart": -1, "dnsEnd": -1})
    s = summarize(events=ev, timings=TIMINGS, console_errors=[], error=None,
                  settings={"url": f"{WWW}/feed.html", "protocol": None, "dns_server": "10.0.0.53"})
    assert s["dns_ms_per_host"] == {"www.lab.test": 101.5, "static.lab.test": 99.0}
    assert s["dns_ms"] == 200.5 and s["resolution"] == "lab DNS (10.0.0.53)"
    assert _sum(_page({"1": 7, "2": 8, "3": 8}))["dns_ms"] == 0.0


def test_nss_commands():
    db, ca = Path("/h/.pki/nssdb"), Path("/pki/ca-rsa.pem")
    assert nssdb_create(db) == ["certutil", "-N", "-d", "sql:/h/.pki/nssdb", "--empty-password"]
    assert nssdb_add_ca(db, ca) == ["certutil", "-A", "-d", "sql:/h/.pki/nssdb", "-n", "tortoise-lab-ca",
                                    "-t", "C,,", "-i", "/pki/ca-rsa.pem"]


def test_lab_argv_runs_the_browser_in_a_pid_namespace_of_its_own():
    argv = C.browser_loader("/venv/bin/python", "https://www.lab.test/feed.html", ca="/pki/ca-rsa.pem",
                            resolve={"www.lab.test": "10.0.0.2", "static.lab.test": "10.0.0.2"}, timeout_s=60,
                            har="/w/page.har", summary="/w/summary.json", protocol="h1", fault="hang")
    assert argv == ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "/venv/bin/python", "-m",
                    "tortoiselab.browser", "https://www.lab.test/feed.html", "--ca", "/pki/ca-rsa.pem",
                    "--timeout", "60", "--har", "/w/page.har", "--summary", "/w/summary.json",
                    "--resolve", "static.lab.test:10.0.0.2", "--resolve", "www.lab.test:10.0.0.2",
                    "--protocol", "h1", "--fault", "hang"]
    cold = C.browser_loader("/venv/bin/python", "https://www.lab.test/feed.html", ca="/pki/ca-rsa.pem",
                            resolve={"www.lab.test": "10.0.0.2", "static.lab.test": "10.0.0.2"}, timeout_s=60,
                            har="/w/page.har", summary="/w/summary.json", dns_server="10.0.0.53")
    assert cold[-6:] == ["--dns-server", "10.0.0.53", "--lab-name", "static.lab.test", "--lab-name", "www.lab.test"]


def test_the_browser_and_our_loader_draw_the_same_warm_views():
    """spec/browsercfg.warm_view is client/page.view_from_cache's draw (the
    two processes import nothing of each other)."""
    from tortoiselab.client.page import view_from_cache
    from tortoiselab.spec.browsercfg import warm_view
    for ratio in (0.0, 0.3, 0.8):
        draws = [warm_view(ratio, seed) for seed in range(400)]
        assert draws == [view_from_cache(ratio, seed) for seed in range(400)]
        assert abs(sum(draws) / 400 - ratio) < 0.08


def test_a_warm_view_primes_a_kept_profile_then_loads_from_it():
    argv = C.browser_loader("/py", "https://www.lab.test/feed.html", ca="/pki/ca-rsa.pem", resolve={}, timeout_s=60,
                            har="/w/prime.har", summary="/w/prime.json", profile_dir="/w/browser-profile", prime=True)
    assert argv[-3:] == ["--profile-dir", "/w/browser-profile", "--prime"]
    ev = _page({"1": 7, "2": 8, "3": 8})
    for e in ev:  # static's two objects from the HTTP cache
        if e["method"] == "Network.responseReceived" and e["params"]["requestId"] in ("2", "3"):
            e["params"]["response"]["fromDiskCache"] = True
    s = summarize(events=ev, timings=TIMINGS, console_errors=[], error=None,
                  settings={"url": f"{WWW}/feed.html", "protocol": None, "cache": "warm"})
    assert (s["cache"], s["requests"], s["requests_from_cache"], s["connections_opened"]) == ("warm", 1, 2, 1)
    assert s["ok"] and s["bytes"] == 500


def test_prime_needs_a_profile_to_keep(tmp_path, capsys):
    from tortoiselab.browser.__main__ import main
    assert main(["https://www.lab.test/", "--ca", "ca.pem", "--har", str(tmp_path / "h"), "--summary",
                 str(tmp_path / "s"), "--resolve", "www.lab.test:10.0.0.2", "--prime"]) == 2
    assert "--prime needs --profile-dir" in capsys.readouterr().err


def test_descendants_follow_parentage_only():
    table = {10: (1, "python"), 11: (10, "node"), 12: (11, "chromium"), 13: (12, "chromium"), 20: (1, "chromium")}
    assert procs.descendants_in(table, 10) == [(11, "node"), (12, "chromium"), (13, "chromium")]
    assert procs.descendants_in(table, 13) == []


def test_end_descendants_kills_a_grandchild_in_its_own_process_group():
    # a child that starts a grandchild in a new session (as Playwright starts Chromium), then sleeps
    code = "import subprocess, time; subprocess.Popen(['sleep', '300'], start_new_session=True); time.sleep(300)"
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 10
        while len(procs.descendants(os.getpid())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        below = procs.descendants(child.pid)
        assert [n for _, n in below] == ["sleep"]
        ended = procs.end_descendants(child.pid)
        assert [p for p, _ in ended] == [below[0][0]]
        assert procs.gone(below[0][0])  # a zombie until its parent waits
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("server,client,words", [
    ({"cert": "shared"}, {}, "server.cert: Chromium accepts no Ed25519"),
    ({"cert": "shared-rsa"}, {"cache_hit_ratio": 0.5}, "client.cache_hit_ratio: the browser's warm views are whole"),
    ({"cert": "shared-rsa"}, {"coalescing": False}, "separate-rsa or client.resolution: two-ip"),
    ({"cert": "shared-rsa"}, {"repeat_after_idle_s": 5}, "client.repeat_after_idle_s"),
])
def test_the_spec_refuses_what_the_browser_cannot_do(server, client, words):
    with pytest.raises(ValidationError, match=words.replace("(", r"\(").replace(".", r"\.")):
        RunConfig(server=server, client={"loader": "chromium", **client})
    with pytest.raises(ValidationError, match="server.cert" if "cert" in words else "client"):
        LoadSpec(label="x", server=server, client={"loader": "chromium", **client})


def test_the_spec_takes_a_browser_run_and_keeps_faults_for_the_browser():
    RunConfig(server={"cert": "separate-rsa"}, client={"loader": "chromium", "resolution": "two-ip"})
    RunConfig(server={"cert": "shared-rsa"}, client={"loader": "chromium", "cache_hit_ratio": 0.8, "cache_unit": "page"})
    LoadSpec(label="x", server={"cert": "shared-rsa"}, client={"loader": "chromium", "browser_fault": "hang"})
    with pytest.raises(ValidationError, match="browser_fault: only for loader chromium"):
        LoadSpec(label="x", client={"browser_fault": "crash"})


def test_images_count_those_the_browser_did_not_decode():
    """summary["images"]: an image that did not decode (a broken file:
    decode() rejected, naturalWidth 0) is named; not read -> None."""
    imgs = [{"src": f"{STATIC}/a.png", "width": 4, "decoded": True},
            {"src": f"{STATIC}/b.jpg", "width": 0, "decoded": False},
            {"src": f"{STATIC}/c.jpg", "width": 0, "decoded": True}]
    s = summarize(events=_page({"1": 7, "2": 7, "3": 7}), timings=TIMINGS, console_errors=[], error=None,
                  settings={"url": f"{WWW}/feed.html", "protocol": None}, images=imgs)
    assert s["images"] == {"count": 3, "decoded": 1, "not_decoded": [f"{STATIC}/b.jpg", f"{STATIC}/c.jpg"]}
    assert _sum(_page({"1": 7, "2": 7, "3": 7}))["images"] is None
