"""Your own site in the lab (issue 55, docs/your-own-site.md), on the
virtual clock over 100 ms, 50 Mbit/s, no loss:

- round trip: Chromium loads the lab's feed page and saves a HAR; it is
  imported and replayed on the same path by both loaders: the same
  requests, body bytes and connections; with the bodies in the HAR (as
  DevTools saves it "with content") the PLT within 5 %, without them (as
  the lab's Chromium saves it) lower (the docs page's table says why);
  both loaders' PLTs within 5 % of each other on each replay;
- the multi-origin fixture (tests/data/har/multi-origin.har: 11 hosts on 5
  addresses, h2 and HTTP/1.1) in Chromium and in our loader (each origin
  over its recorded protocol): one connection per recorded certificate
  group (coalescing as recorded), one per host with a certificate per host
  or coalescing off; our loader's PLT within 5 % of Chromium's."""

import base64
import hashlib
import json
from pathlib import Path

import pytest

from tortoiselab.analysis.flights import analyze_pcap
from tortoiselab.host import sites, verify
from tortoiselab.host.pageload import run_loads
from tortoiselab.spec.pathspec import PathSpec
from tortoiselab.spec.requests import LAB_DOMAIN
from tortoiselab.web import pages

pytestmark = pytest.mark.lab

PATH = PathSpec(rtt_ms=100.0, loss_pct=0, rate_mbit=50)
H2 = {"cc": "cubic", "initcwnd_pkts": 10, "protocol": "h2", "tls": "1.3", "cert": "shared-rsa"}
CHROME = {"loader": "chromium", "dns": "warm", "timeout_s": 60}
FIXTURE = Path(__file__).resolve().parents[1] / "data" / "har" / "multi-origin.har"


def _loads(by: dict, work: Path, imported: Path | None = None) -> dict:
    res = run_loads([{"label": k, "server": H2, "client": c} for k, c in by.items()], PATH, clock="virtual",
                    work=work, imported_dir=imported)
    out = {ld["label"]: ld for ld in res["loads"]}
    for k, ld in out.items():
        s = ld.get("summary") or {}
        print(f"{k:<14} plt {s.get('plt_ms')} ms, requests {s.get('requests')}, bytes {s.get('bytes')}, "
              f"connections {s.get('connections_opened')} (capture {len(ld.get('connections') or [])}), "
              f"error {s.get('error') or ld.get('error')}")
    return out


def with_content(har: Path, out: Path) -> Path:
    """The HAR as DevTools' "Save all as HAR with content" would carry it:
    each response's body (the guest's site: the generator's seed 1,
    web/pages.py) in content.text, images base64. The lab's Chromium saves
    its HAR without bodies (record_har_content="omit")."""
    site = pages.generate_site(out.parent / "generated", seed=1, domain=LAB_DOMAIN)
    files = {f["url"]: out.parent / "generated" / f["file"]
             for p in site["pages"].values() for f in [p["document"], *p["objects"]]}
    doc = json.loads(har.read_text())
    for e in doc["log"]["entries"]:
        data, c = files[e["request"]["url"]].read_bytes(), e["response"]["content"]
        if c["mimeType"].startswith("image/"):
            c["text"], c["encoding"] = base64.b64encode(data).decode(), "base64"
        else:
            c["text"] = data.decode()
    out.write_text(json.dumps(doc))
    return out


@pytest.fixture(scope="module")
def round_trip(tmp_path_factory, lab_kernel):
    root = tmp_path_factory.mktemp("site-replay")
    original = _loads({"ours": {"page": "feed.html", "dns": "warm"}, "chromium": {"page": "feed.html", **CHROME}},
                      root / "original")
    har = Path(original["chromium"]["har"])
    made = {}
    for name, source in (("feed", har), ("feed-content", with_content(har, root / "content.har"))):
        got = sites.import_har(source, root / "sites", name)
        sites.stage(root / "sites", name, root / f"staged-{name}")
        page = got.site["page"]
        made[name] = (got.site, _loads({"ours": {"url": page, "dns": "warm"}, "chromium": {"url": page, **CHROME}},
                                       root / f"replay-{name}", root / f"staged-{name}"))
    return original, made


@pytest.mark.parametrize("name", ["feed", "feed-content"])
@pytest.mark.parametrize("loader", ["ours", "chromium"])
def test_the_replay_has_the_recorded_requests_bytes_and_connections(round_trip, loader, name):
    original, made = round_trip
    site, replay = made[name]
    o, r = original[loader]["summary"], replay[loader]["summary"]
    assert o["error"] is None and r["error"] is None, (o["error"], r["error"])
    assert site["totals"]["requests"] == o["requests"] == r["requests"] == 47
    assert site["totals"]["bytes"] == o["bytes"] == r["bytes"] == 861_528
    assert o["connections_opened"] == r["connections_opened"] == 1
    assert len(original[loader]["connections"]) == len(replay[loader]["connections"]) == 1
    assert replay[loader]["names"] == {"www.lab.test": "10.0.2.1", "static.lab.test": "10.0.2.1"}
    print(f"{name} {loader}: PLT original {o['plt_ms']} ms, replay {r['plt_ms']} ms "
          f"({100 * (r['plt_ms'] - o['plt_ms']) / o['plt_ms']:+.1f} %)")
    if name == "feed-content":  # the recorded bodies: the page itself, so its PLT too
        assert abs(r["plt_ms"] - o["plt_ms"]) <= 0.05 * o["plt_ms"]
    else:  # made bodies: the made document references everything at its start (docs/your-own-site.md)
        assert r["plt_ms"] < o["plt_ms"]


@pytest.mark.parametrize("name", ["feed", "feed-content"])
def test_our_loader_and_chromium_agree_on_the_replay(round_trip, name):
    ours, chromium = (round_trip[1][name][1][k]["summary"]["plt_ms"] for k in ("ours", "chromium"))
    assert abs(chromium - ours) <= 0.05 * ours


@pytest.fixture(scope="module")
def multi_origin(tmp_path_factory, lab_kernel):
    root = tmp_path_factory.mktemp("site-multi")
    recorded = sites.import_har(FIXTURE, root / "sites", "shop", tokens=frozenset({"session_token"})).site
    hosts = [o["host"] for o in recorded["origins"].values()]
    sites.import_har(FIXTURE, root / "sites", "shop-apart", tokens=frozenset({"session_token"}),
                     groups=[[h] for h in hosts])  # a certificate per host: nothing to coalesce
    out = {}
    for name in ("shop", "shop-apart"):
        sites.stage(root / "sites", name, root / f"staged-{name}")
        ours = {"url": recorded["page"], "dns": "warm", "timeout_s": 60}
        got = _loads({name: {"url": recorded["page"], **CHROME}, f"{name} ours": ours,
                      f"{name} ours apart": {**ours, "coalescing": False}}, root / f"w-{name}", root / f"staged-{name}")
        out.update(got)
    return recorded, out


def test_chromium_opens_one_connection_per_recorded_group(multi_origin):
    site, loads = multi_origin
    s = loads["shop"]["summary"]
    assert s["error"] is None, s["error"]
    assert s["requests"] == 15 and s["requests_failed"] == 0  # the scripts' requests included (made scripts)
    assert s["connections_opened"] == len(site["certificates"]) == 7
    assert _used(loads["shop"]) == 7  # the capture's TCP connections that carried a request (a spare may not)


def _used(ld: dict) -> int:
    """The capture's TCP connections that carried a request (analysis/tcpconn.carried_request)."""
    return sum(1 for c in analyze_pcap(ld["pcap"], keep_series=False) if c["carried_request"])


def test_with_a_certificate_per_host_chromium_coalesces_nothing(multi_origin):
    site, loads = multi_origin
    s = loads["shop-apart"]["summary"]
    assert s["error"] is None, s["error"]
    assert s["requests"] == 15 and s["connections_opened"] == len(site["hosts"]) == 11
    assert _used(loads["shop-apart"]) == 11


def _protocols(ld: dict) -> dict[str, str]:
    """Each origin's protocol in the load's HAR."""
    har = json.loads(Path(ld["har"]).read_text())
    out: dict[str, str] = {}
    for e in har["log"]["entries"]:
        origin = "/".join(e["request"]["url"].split("/")[:3])
        out[origin] = e["response"]["httpVersion"].lower().replace("http/2.0", "h2")
    return out


@pytest.mark.parametrize("name", ["shop", "shop-apart"])
def test_our_loader_loads_the_mixed_site_with_each_origins_recorded_protocol(multi_origin, name):
    site, loads = multi_origin
    on, off = (loads[f"{name} ours"], loads[f"{name} ours apart"])
    for ld in (on, off):
        s = ld["summary"]
        assert s["error"] is None, s["error"]
        # Chromium's 15 but bg.png (our loader reads no style sheet): the made scripts' requests included
        assert s["requests"] == 14 and s["requests_failed"] == 0
        got = _protocols(ld)
        assert got and all(got[o] == site["origins"][o]["protocol"] for o in got), got
        assert {p for p in got.values()} == {"h2", "http/1.1"}
    reached = {"/".join(e["request"]["url"].split("/")[:3])
               for e in json.loads(Path(on["har"]).read_text())["log"]["entries"]}
    assert reached == set(site["origins"])  # every recorded origin, the made scripts' included
    # coalescing on: one connection per certificate group as Chromium (the recorded grouping; per host for
    # shop-apart); off: one per host (each HTTP/1.1 origin's one request needs no second)
    groups = len(site["certificates"]) if name == "shop" else len(site["hosts"])
    assert on["summary"]["connections_opened"] == _used(on) == groups == loads[name]["summary"]["connections_opened"]
    assert off["summary"]["connections_opened"] == _used(off) == len(site["hosts"]) == 11
    print(f"{name}: connections {groups} coalescing on, 11 off; Chromium "
          f"{loads[name]['summary']['connections_opened']}")


@pytest.mark.parametrize("name", ["shop", "shop-apart"])
def test_our_loader_beside_chromium_on_the_mixed_site(multi_origin, name):
    ours, chromium = (multi_origin[1][k]["summary"]["plt_ms"] for k in (f"{name} ours", name))
    print(f"{name}: PLT ours {ours} ms, Chromium {chromium} ms ({100 * (ours - chromium) / chromium:+.1f} %)")
    assert abs(chromium - ours) <= 0.05 * chromium


# --- an experiment naming an imported site (client.site) -------------------------------------------------
EXPERIMENT = """
name: site-run
repetitions: 1
seed: 1
path: {rtt_ms: 100, loss_pct: 0, rate_mbit: 50}
server: {cc: cubic, initcwnd_pkts: 10}
client: {site: shop-h2, dns: warm}
sweep:
  server.cc: [cubic, hybla]
"""


def _all_h2(out: Path) -> Path:
    """The fixture with every origin on h2: our loader speaks one protocol a page."""
    doc = json.loads(FIXTURE.read_text())
    for e in doc["log"]["entries"]:
        e["request"]["httpVersion"] = e["response"]["httpVersion"] = "h2"
    out.write_text(json.dumps(doc))
    return out


def test_an_experiment_runs_an_imported_site_and_refuses_another_import(tmp_path, lab_kernel):
    from tortoiselab.host.errors import RunnerError
    from tortoiselab.host.runner import run_experiment

    got = sites.import_har(_all_h2(tmp_path / "h2.har"), tmp_path / "sites", "shop-h2",
                           tokens=frozenset({"session_token"}))
    exp = tmp_path / "site-run.yaml"
    exp.write_text(EXPERIMENT)
    res = run_experiment(exp, tmp_path / "results", jobs=1, backend="uml", clock="virtual",
                         sites=tmp_path / "sites")
    assert res["done_now"] == 2 and res["failed_now"] == 0, [r.get("error") for r in res["records"]]
    for rec in res["records"]:
        s = rec["summary"]
        # the document, what its recorded HTML references and what its made scripts ask for (not bg.png, from a
        # style sheet: our loader reads none)
        assert s["requests"] == 14 and s["requests_failed"] == 0
        # at least one per certificate group (7), and fewer than its 11 origins: coalesced where a connection
        # was up (two requests racing to one group open two: measured 7 with CUBIC, 8 with Hybla)
        assert len(got.site["certificates"]) <= s["connections_opened"] < len(got.site["hosts"]), \
            s["connections_opened"]
        assert rec["config"]["client"]["site"] == "shop-h2"
        # the record names the import it loaded (host/sitecheck.py compares the staged copy with it)
        assert rec["meta"]["seeds"]["imported_site"] == got.site_id
        # a floor from what the load fetched (napkin.imported_floor), below what was measured
        assert s["floor_ms"] and s["plt_over_floor"] >= 1, (s["plt_ms"], s["floor_model"])
    staged = Path(res["dir"]) / ".lab" / "imported" / "shop-h2" / "site.json"
    assert hashlib.sha256(staged.read_bytes()).hexdigest() == got.site_id
    for where in (tmp_path / "sites", None):  # the copy backed by the import, and by the records alone
        c = verify.verify_folder(Path(res["dir"]), lab=True, sites_dir=where)
        assert c.ok, verify.problem_lines(c.problems)
    # another import under the same name: the stored runs loaded the former, so it is refused
    other = json.loads((tmp_path / "h2.har").read_text())
    other["log"]["entries"] = other["log"]["entries"][:9]
    (tmp_path / "other.har").write_text(json.dumps(other))
    sites.import_har(tmp_path / "other.har", tmp_path / "sites2", "shop-h2")
    with pytest.raises(RunnerError, match="is another import than"):
        run_experiment(exp, tmp_path / "results", jobs=1, backend="uml", clock="virtual", sites=tmp_path / "sites2")
