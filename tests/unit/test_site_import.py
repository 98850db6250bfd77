"""`tortoise site import` (issue 55, docs/your-own-site.md): a HAR made into
a site, its origins as recorded, credentials never copied, and each bad
input refused with the entry and the fix before anything is written."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tortoiselab import cli
from tortoiselab.host import sites
from tortoiselab.host.errors import RunnerError
from tortoiselab.web.harread import KEPT_HEADERS, HarError, host_problem
from tortoiselab.web.harsite import made_body

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "har" / "multi-origin.har"
SECRETS = ("s3ss10n-c00k1e-VALUE-8f2a", "eyJhbGciOiJIUzI1NiJ9.bearer-TOKEN-42", "q-t0ken-SECRET-77")


def _har() -> dict:
    return json.loads(FIXTURE.read_text())


def _write(tmp_path: Path, har: dict | bytes, name: str = "page.har") -> Path:
    p = tmp_path / name
    p.write_bytes(har if isinstance(har, bytes) else json.dumps(har).encode())
    return p


def _import(tmp_path: Path, har: dict | bytes, **kw) -> sites.Imported:
    return sites.import_har(_write(tmp_path, har), tmp_path / "sites", "page", **kw)


def _refused(tmp_path: Path, har: dict | bytes, *words: str) -> str:
    with pytest.raises((HarError, RunnerError)) as info:
        _import(tmp_path, har)
    msg = str(info.value)
    for w in words:
        assert w in msg, msg
    assert not (tmp_path / "sites").exists()  # nothing written
    return msg


# --- the multi-origin fixture -----------------------------------------------------------------------
def test_the_fixture_keeps_its_origins_addresses_protocols_and_certificate_groups(tmp_path):
    got = sites.import_har(FIXTURE, tmp_path / "sites", None, tokens=frozenset({"session_token"}))
    s = got.site
    assert got.created and s["name"] == "multi-origin" and s["page"] == "https://www.shop.example/"
    assert s["totals"]["hosts"] == 11 and s["totals"]["addresses"] == 5 and s["totals"]["requests"] == 15
    # hosts that shared a recorded address share one lab address, and only those
    by_recorded = {a["recorded"]: set(a["hosts"]) for a in s["addresses"]}
    assert by_recorded["192.0.2.10"] == {"www.shop.example", "static.shop.example", "img.shop.example"}
    assert by_recorded["198.51.100.6"] == {"legacy.shop.example", "ads.partner.example"}
    assert len({a["lab"] for a in s["addresses"]}) == 5
    assert s["hosts"]["static.shop.example"] == s["hosts"]["www.shop.example"] != s["hosts"]["api.shop.example"]
    # certificates: the hosts of one recorded connection together; two multi-host groups
    groups = [set(c["hosts"]) for c in s["certificates"]]
    assert {"www.shop.example", "static.shop.example", "img.shop.example"} in groups
    assert {"fonts.shopcdn.example", "js.shopcdn.example", "cdn.shopcdn.example"} in groups
    assert {"metrics.tracker.example"} in groups and {"tags.tracker.example"} in groups  # one IP, two connections
    assert sum(len(g) > 1 for g in groups) == 2 and len(groups) == 7 and s["certificates_from"] == "connections"
    o = s["origins"]
    assert o["https://legacy.shop.example"]["protocol"] == "http/1.1" and o["https://legacy.shop.example"]["certificate"]
    assert {"legacy.shop.example"} in groups  # HTTP/1.1: a connection carries one host
    assert o["https://ads.partner.example"]["protocol"] == "http/1.1" and o["https://www.shop.example"]["protocol"] == "h2"
    assert s["recorded_connections"] == 8


def test_order_initiators_and_bodies_are_as_recorded(tmp_path):
    got = sites.import_har(FIXTURE, tmp_path / "sites", "shop")
    s, folder = got.site, got.folder
    req = {r["url"].split("?")[0]: r for r in s["requests"]}
    assert [r["start_ms"] for r in s["requests"]] == sorted(r["start_ms"] for r in s["requests"])
    assert req["https://img.shop.example/bg.png"]["initiator"] == "https://static.shop.example/site.css"
    assert req["https://api.shop.example/v1/feed"]["initiator"] == "https://js.shopcdn.example/app.js"  # a script's stack
    assert req["https://www.shop.example/"]["initiator"] is None
    resp = {k.split(" ", 1)[1].split("?")[0]: v for k, v in s["responses"].items()}
    har = {e["request"]["url"]: e for e in _har()["log"]["entries"]}

    def body(url: str) -> bytes:
        return (folder / "bodies" / resp[url]["body"]).read_bytes()
    css = "https://static.shop.example/site.css"
    assert body(css) == har[css]["response"]["content"]["text"].encode() and resp[css]["body_from"] == "har"
    assert resp[css]["headers"] == {"cache-control": "max-age=31536000", "content-type": "text/css", "vary": "Accept-Encoding"}
    hero = body("https://img.shop.example/hero.jpg")  # made: a JPEG of the recorded size
    assert len(hero) == 85000 and hero[:2] == b"\xff\xd8" and hero[-2:] == b"\xff\xd9"
    js = resp["https://js.shopcdn.example/app.js"]  # recorded gzip, no text: the wire's 15,000 bytes, no encoding
    assert js["bytes"] == 15000 and "content-encoding" not in js["headers"] and js["body_from"] == "made"
    assert body("https://img.shop.example/logo.png").startswith(b"\x89PNG")  # base64 decoded
    assert "x-request-id" not in resp["https://www.shop.example/"]["headers"]


def test_the_same_har_makes_the_same_site_and_another_is_refused_not_overwritten(tmp_path):
    a = sites.import_har(FIXTURE, tmp_path / "sites", "shop")
    before = {p: p.read_bytes() for p in a.folder.rglob("*") if p.is_file()}
    again = sites.import_har(FIXTURE, tmp_path / "sites", "shop")
    assert not again.created and again.site_id == a.site_id
    other = _har()
    other["log"]["entries"] = other["log"]["entries"][:3]
    with pytest.raises(RunnerError, match="holds another site; nothing is overwritten"):
        sites.import_har(_write(tmp_path, other), tmp_path / "sites", "shop")
    assert {p: p.read_bytes() for p in a.folder.rglob("*") if p.is_file()} == before
    assert sorted(os.listdir(tmp_path / "sites")) == ["shop"]  # no temporary folder left
    site, sid = sites.load_site(tmp_path / "sites", "shop")
    assert sid == a.site_id == hashlib.sha256((a.folder / "site.json").read_bytes()).hexdigest()


def test_a_changed_body_is_found(tmp_path):
    a = sites.import_har(FIXTURE, tmp_path / "sites", "shop")
    f = next((a.folder / "bodies").iterdir())
    f.write_bytes(b"x" + f.read_bytes()[1:])
    with pytest.raises(RunnerError, match="not the body site.json names"):
        sites.load_site(tmp_path / "sites", "shop")


def test_no_cookie_authorization_or_marked_token_reaches_the_site(tmp_path):
    a = sites.import_har(FIXTURE, tmp_path / "sites", "shop", tokens=frozenset({"session_token"}))
    blob = b"".join(p.read_bytes() for p in a.folder.rglob("*") if p.is_file())
    for secret in SECRETS:
        assert secret.encode() not in blob
    for resp in a.site["responses"].values():  # only the headers that matter, never a credential's
        assert set(resp["headers"]) <= set(KEPT_HEADERS)
    assert a.site["never_copied"] == {"authorization": 1, "cookie": 1, "cookies": 3, "set-cookie": 1}
    # lengths kept: the document's body is as long as recorded
    doc = a.site["responses"]["GET https://www.shop.example/"]
    assert doc["bytes"] == len(_har()["log"]["entries"][0]["response"]["content"]["text"].encode())
    assert "session_token=" + "x" * len(SECRETS[2]) in json.dumps(a.site["requests"])


def test_a_stated_grouping_replaces_the_recorded_one(tmp_path):
    a = sites.import_har(FIXTURE, tmp_path / "sites", "shop",
                         groups=[["www.shop.example", "api.shop.example"]])
    groups = [set(c["hosts"]) for c in a.site["certificates"]]
    assert {"www.shop.example", "api.shop.example"} in groups and {"static.shop.example"} in groups
    assert a.site["certificates_from"] == "user" and len(a.site["recorded_certificates"]) == 7
    with pytest.raises(HarError, match="'nope.example' is no https host"):
        sites.import_har(FIXTURE, tmp_path / "sites", "shop2", groups=[["nope.example"]])


def test_made_bodies_are_exact_and_deterministic():
    for ct in ("text/html", "text/css", "application/javascript", "application/json", "image/svg+xml",
               "image/png", "image/jpeg", "font/woff2", "text/plain"):
        for n in (0, 3, 500, 5000):
            b = made_body(ct, n, "k")
            assert len(b) == n and b == made_body(ct, n, "k")
    assert json.loads(made_body("application/json", 300, "k"))
    assert made_body("text/css", 300, "k") != made_body("text/css", 300, "other")


# --- bad input: each refused with the entry and the fix, nothing written ---------------------------------
def test_not_json(tmp_path):
    _refused(tmp_path, b"{\"log\": ", "not JSON", "line 1", "unedited")
    _refused(tmp_path, b"\xff\xfe{}", "not JSON: byte 0 is not UTF-8")
    _refused(tmp_path, b"{\"log\": NaN}", "NaN is not a JSON number")
    _refused(tmp_path, b"[" * 100_000 + b"]" * 100_000, "nested too deeply")


def test_not_har_1_2(tmp_path):
    har = _har()
    har["log"]["version"] = "1.1"
    _refused(tmp_path, har, "not HAR 1.2: log.version is '1.1'", "save the HAR again")
    _refused(tmp_path, {"entries": []}, "not a HAR file", "HAR 1.2")
    har["log"]["version"], har["log"]["entries"] = "1.2", []
    _refused(tmp_path, har, "log.entries is empty")


def test_over_the_size_bound(tmp_path):
    p = tmp_path / "page.har"
    with open(p, "wb") as fh:  # sparse: refused by its size before a byte is read
        fh.truncate(sites.HAR_MAX_BYTES + 1)
    with pytest.raises(RunnerError, match="above the .* an import reads .not read.; record one page load"):
        sites.import_har(p, tmp_path / "sites", "page")
    assert not (tmp_path / "sites").exists()


def test_a_url_that_is_not_http(tmp_path):
    har = _har()
    har["log"]["entries"][3]["request"]["url"] = "data:image/png;base64,iVBORw0KGgo="
    msg = _refused(tmp_path, har, "entry 3 (data:image/png", "'data'", "remove the entry")
    assert "nothing was written" in msg


def test_one_url_with_two_bodies_keeps_the_first_and_says_so(tmp_path):
    har = _har()
    twin = copy.deepcopy(har["log"]["entries"][1])
    twin["startedDateTime"] = "2026-03-02T10:00:05.000Z"
    twin["response"]["content"]["text"] = "p{}"
    twin["response"]["content"]["size"] = 3
    har["log"]["entries"].append(twin)
    s = _import(tmp_path, har).site
    note = [n for n in s["notes"] if "again with a different body" in n]
    assert note and "entry 15" in note[0] and "the first is kept" in note[0]
    assert s["responses"]["GET https://static.shop.example/site.css"]["bytes"] > 3
    assert s["totals"]["requests"] == 16  # the request itself is kept, in its place


def test_missing_sizes(tmp_path):
    har = _har()
    r = har["log"]["entries"][5]["response"]
    del r["content"]["size"]
    r["bodySize"] = -1
    _refused(tmp_path, har, "entry 5 (https://img.shop.example/hero.jpg)", "no body", "no size",
             "Save all as HAR with content")


@pytest.mark.parametrize("host, words", [
    ("img_1.shop.example", "letters, digits and hyphens"),
    ("192.0.2.1", "is an IP address"),
    ("bücher.example", "'xn--bcher-kva.example'"),
    ("localhost", "with a dot"),
    ("a" * 64 + ".example", "1-63 characters"),
])
def test_a_host_name_the_lab_ca_cannot_carry(tmp_path, host, words):
    har = _har()
    har["log"]["entries"][2]["request"]["url"] = f"https://{host}/font.css"
    _refused(tmp_path, har, "entry 2", words)


def test_host_names_the_ca_carries():
    assert host_problem("www.shop.example") is None and host_problem("xn--bcher-kva.example") is None


def test_every_problem_is_listed_at_once(tmp_path):
    har = _har()
    for i in (2, 4, 6):
        har["log"]["entries"][i]["request"]["url"] = "blob:https://www.shop.example/1"
    msg = _refused(tmp_path, har, "3 entries the lab cannot serve", "entry 2", "entry 4", "entry 6")
    assert "Traceback" not in msg


def test_left_out_entries_are_said(tmp_path):
    har = _har()
    har["log"]["entries"][4]["_fromCache"] = "disk"
    har["log"]["entries"][6]["request"]["method"] = "POST"
    s = _import(tmp_path, har).site
    assert any("entry 4: served from the browser's disk cache" in n for n in s["notes"])
    assert any("entry 6: a POST request" in n for n in s["notes"])
    assert s["totals"]["requests"] == 13


def test_the_cli_prints_the_error_without_a_traceback(tmp_path, capsys):
    p = _write(tmp_path, b"not json")
    assert cli.main(["site", "import", str(p), "--sites", str(tmp_path / "sites")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tortoise: ") and "not JSON" in err and "Traceback" not in err
    assert cli.main(["site", "import", str(FIXTURE), "--sites", str(tmp_path / "sites"), "--name", "Bad Name"]) == 2
    assert "site name 'Bad Name'" in capsys.readouterr().err
    assert cli.main(["site", "import", str(FIXTURE), "--sites", str(tmp_path / "sites"),
                     "--drop-query", "session_token"]) == 0
    out = capsys.readouterr().out
    assert "11 hosts on 5 addresses, 7 certificates (connections)" in out and "never copied" in out


def test_a_made_document_references_what_it_started(tmp_path):
    """A HAR without bodies (as our loaders save them): the page's made
    document references every other request, so that a loader reading it
    fetches what the recording fetched, in the recorded order by kind."""
    from tortoiselab.client.page import discover_assets

    har = _har()
    for e in har["log"]["entries"]:
        c = e["response"]["content"]
        c.pop("text", None), c.pop("encoding", None)
        c["size"] = c.get("size") or 100
    s = _import(tmp_path, har).site
    doc = s["responses"]["GET https://www.shop.example/"]
    recorded = len(_har()["log"]["entries"][0]["response"]["content"]["text"].encode())
    assert doc["body_from"] == "made" and doc["bytes"] > recorded  # 14 references need more: said
    assert any(f"not the recorded {recorded:,}: its 10 references need more" in n for n in s["notes"])
    body = (tmp_path / "sites" / "page" / "bodies" / doc["body"]).read_bytes()
    found = discover_assets(body.decode(), s["page"])
    by_scripts = {"https://api.shop.example/v1/feed?page=1&session_token=q-t0ken-SECRET-77",
                  "https://metrics.tracker.example/m.js", "https://tags.tracker.example/t.js",
                  "https://legacy.shop.example/old2.js"}  # their initiators are scripts: those ask for them
    assert sorted(a.url for a in found) == sorted(r["url"] for r in s["requests"][1:] if r["url"] not in by_scripts)
    app = s["responses"]["GET https://js.shopcdn.example/app.js"]
    js = (tmp_path / "sites" / "page" / "bodies" / app["body"]).read_bytes().decode()
    assert app["bytes"] == 15000 and len(js) == 15000
    assert '["https://metrics.tracker.example/m.js", "script"]' in js and '["https://tags.tracker.example/t.js", "script"]' in js
    assert '["https://api.shop.example/v1/feed?page=1&session_token=q-t0ken-SECRET-77", "fetch"]' in js
    kinds = {a.url: a.kind for a in found}
    assert kinds["https://static.shop.example/site.css"] == "stylesheet"
    assert kinds["https://js.shopcdn.example/app.js"] == "script"
    assert kinds["https://img.shop.example/hero.jpg"] == "image"


def test_a_recorded_style_sheet_keeps_what_it_asks_for(tmp_path):
    """The document made, the style sheet recorded with its text: the image
    the sheet asks for (url(...)) is left to the sheet, not the document."""
    har = _har()
    c = har["log"]["entries"][0]["response"]["content"]
    del c["text"]
    s = _import(tmp_path, har).site
    doc = s["responses"]["GET https://www.shop.example/"]
    body = (tmp_path / "sites" / "page" / "bodies" / doc["body"]).read_bytes()
    assert b"https://static.shop.example/site.css" in body and b"bg.png" not in body
    assert b"metrics.tracker.example" not in body  # its initiator app.js is made: the made script asks for it


def test_without_connection_ids_one_address_and_certificate_group_hosts(tmp_path):
    """Playwright's HAR has no `connection`; its `_securityDetails` names the
    certificate each response came with: hosts on one address served with
    one certificate are one group (a browser may coalesce them)."""
    har = _har()
    cert_of = {"192.0.2.10": "www.shop.example", "192.0.2.20": "cdn.shopcdn.example"}
    for e in har["log"]["entries"]:
        del e["connection"]
        host = e["request"]["url"].split("/")[2]
        subject = cert_of.get(e["serverIPAddress"], host)
        e["_securityDetails"] = {"protocol": "TLS 1.3", "subjectName": subject, "issuer": "Some CA"}
    s = _import(tmp_path, har).site
    groups = [set(c["hosts"]) for c in s["certificates"]]
    assert {"www.shop.example", "static.shop.example", "img.shop.example"} in groups
    assert {"fonts.shopcdn.example", "js.shopcdn.example", "cdn.shopcdn.example"} in groups
    assert {"metrics.tracker.example"} in groups and len(groups) == 7


def test_an_encoded_body_without_text_is_its_bytes_on_the_wire(tmp_path):
    """HAR 1.2: content.size is the decoded size, content.compression what
    the encoding saved; a made body (sent without the encoding) has the
    wire's size. Without an encoding, content.size, whatever bodySize says
    (Playwright's counts more than the body)."""
    har = _har()
    js = har["log"]["entries"][3]["response"]
    js["content"]["compression"], js["bodySize"] = 36000, 15555
    hero = har["log"]["entries"][5]["response"]
    hero["bodySize"] = 85058
    s = _import(tmp_path, har).site
    assert s["responses"]["GET https://js.shopcdn.example/app.js"]["bytes"] == 12000
    assert s["responses"]["GET https://img.shop.example/hero.jpg"]["bytes"] == 85000


def test_a_replay_of_a_site_that_is_not_there_is_refused_before_a_lab_starts(tmp_path, capsys):
    started = time.time() - 1
    assert cli.main(["pageload", "--site", "nope", "--sites", str(tmp_path / "sites")]) == 2
    assert "no imported site of that name" in capsys.readouterr().err
    assert not [p for p in Path(tempfile.gettempdir()).iterdir() if p.name.startswith("tortoise-site-")
                and p.stat().st_mtime >= started]  # no staging folder made


# --- any HAR-shaped input: a site or a clear refusal, never another exception -----------------------------
_scalar = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=False, allow_infinity=False),
                    st.text(max_size=20))


def _mostly(good, bad=_scalar):
    """good values 19 times in 20: a HAR with one bad entry is refused whole."""
    return st.integers(0, 19).flatmap(lambda k: bad if k == 19 else good)


_url = _mostly(st.sampled_from(["https://a.example/", "https://b.example/x.css?q=1", "http://c.example:8080/i.png",
                                "https://a.example/j.js", "https://xn--bcher-kva.example/j.js"]),
               st.one_of(st.sampled_from(["data:,x", "https://a_b.example/", "https://[::1]/",
                                          "https://a.example:99999/", "ftp://a.example/"]), st.text(max_size=30)))
_entry = st.fixed_dictionaries({
    "startedDateTime": _mostly(st.sampled_from(["2026-03-02T10:00:00.000Z", "2026-03-02T10:00:01Z",
                                                "2026-03-02T10:00:00.5+00:00"]),
                               st.one_of(st.just("2026-03-02T10:00:00"), _scalar)),
    "request": st.fixed_dictionaries({"method": _mostly(st.just("GET"), st.sampled_from(["HEAD", "POST"])),
                                      "url": _url,
                                      "headers": st.lists(st.fixed_dictionaries({"name": st.sampled_from(
                                          ["cookie", "authorization", "accept"]), "value": st.text(max_size=30)}),
                                          max_size=2)}),
    "response": st.fixed_dictionaries({
        "status": _mostly(st.sampled_from([200, 200, 200, 301, 404]), st.one_of(st.sampled_from([304, 0]), _scalar)),
        "httpVersion": st.sampled_from(["h2", "http/1.1", "h3", "HTTP/2.0", ""]),
        "headers": st.lists(st.fixed_dictionaries({"name": st.sampled_from(
            ["content-type", "content-encoding", "set-cookie", "vary", "location"]),
            "value": st.text(max_size=30)}), max_size=3),
        "content": st.fixed_dictionaries({"size": _mostly(st.integers(0, 5000)), "mimeType": st.sampled_from(
            ["text/html", "text/css", "image/png", "image/jpeg", "application/json", "font/woff2"])},
            optional={"text": st.text(max_size=200), "encoding": st.sampled_from(["base64", "utf-8"]),
                      "compression": _mostly(st.integers(0, 100))}),
        "bodySize": _mostly(st.integers(-1, 5000))}),
}, optional={"serverIPAddress": st.sampled_from(["192.0.2.1", "192.0.2.2", "[2001:db8::1]", ""]),
             "connection": st.sampled_from(["1", "2", "3"]),
             "_initiator": st.one_of(_scalar, st.fixed_dictionaries({"type": st.text(max_size=5), "url": _url}),
                                     st.fixed_dictionaries({"type": st.just("script"), "stack": st.recursive(
                                         st.fixed_dictionaries({"callFrames": st.lists(st.fixed_dictionaries(
                                             {"url": _url}), max_size=2)}),
                                         lambda inner: st.fixed_dictionaries({"parent": inner}), max_leaves=3)})),
             "_fromCache": st.sampled_from(["", "disk", None])})


@settings(max_examples=150, deadline=None)
@given(entries=st.lists(_entry, min_size=1, max_size=6), version=_mostly(st.just("1.2"), st.just("1.1")))
def test_any_har_shaped_input_is_a_site_or_a_clear_refusal(tmp_path_factory, entries, version):
    tmp = tmp_path_factory.mktemp("fuzz")
    har = {"log": {"version": version, "creator": {"name": "fuzz", "version": "1"}, "entries": entries}}
    try:
        got = sites.import_har(_write(tmp, har), tmp / "sites", "page")
    except (HarError, RunnerError) as exc:
        assert "Traceback" not in str(exc) and str(exc)
        assert not (tmp / "sites").exists()
        return
    site, _ = sites.load_site(tmp / "sites", "page")  # what was written reads back whole
    assert site == got.site and site["totals"]["requests"] >= 1


# --- client.site in an experiment -------------------------------------------------------------------------
def test_client_site_is_checked_where_the_experiment_is():
    from pydantic import ValidationError

    from tortoiselab.spec.idform import LATER
    from tortoiselab.spec.sides import ClientCfg

    assert ClientCfg(site="shop").site == "shop" and ClientCfg(site="shop", loader="chromium").loader == "chromium"
    for bad, words in [({"site": "Shop Site"}, "no imported site's name"),
                       ({"site": "shop", "url": "objects/500.bin"}, "not with a url"),
                       ({"site": "shop", "loader": "nghttp"}, "not with the nghttp loader")]:
        with pytest.raises(ValidationError, match=words):
            ClientCfg(**bad)
    assert LATER["client.site"] is None  # every run without a site keeps its id (tests/unit/test_run_ids.py)


def test_an_experiments_site_is_staged_once_and_another_import_refused(tmp_path):
    sites.import_har(FIXTURE, tmp_path / "sites", "shop")
    exp = tmp_path / "results" / "exp"
    lab = exp / ".lab"
    lab.mkdir(parents=True)
    ids = sites.stage_for_experiment(exp, {"shop"}, tmp_path / "sites")
    staged = lab / "imported" / "shop"
    assert ids["shop"] == hashlib.sha256((staged / "site.json").read_bytes()).hexdigest()
    assert (staged / "pki" / "pki.json").exists() and sorted(os.listdir(lab / "imported")) == ["shop"]
    before = (staged / "pki" / "ca.pem").read_bytes()
    assert sites.stage_for_experiment(exp, {"shop"}, tmp_path / "sites") == ids  # kept, not made again
    assert (staged / "pki" / "ca.pem").read_bytes() == before
    assert sites.stage_for_experiment(exp, {"shop"}, tmp_path / "elsewhere") == ids  # sites/ moved: the copy, checked
    other = _har()
    other["log"]["entries"] = other["log"]["entries"][:5]
    sites.import_har(_write(tmp_path, other), tmp_path / "sites2", "shop")
    with pytest.raises(RunnerError, match="is another import than"):
        sites.stage_for_experiment(exp, {"shop"}, tmp_path / "sites2")
    with pytest.raises(RunnerError, match="no imported site .*tortoise site import PAGE.har --name nope"):
        sites.stage_for_experiment(exp, {"nope"}, tmp_path / "sites")
    body = next((staged / "bodies").iterdir())
    body.write_bytes(body.read_bytes() + b"x")
    with pytest.raises(RunnerError, match="not the body site.json names"):
        sites.stage_for_experiment(exp, {"shop"}, tmp_path / "sites")
