"""A site made from a recorded page (web/harread.py): its origins as the
recording saw them, and its responses, as one canonical JSON document
(`site.json`) and its bodies by content hash (docs/your-own-site.md).

- **Addresses:** one lab address per recorded `serverIPAddress`
  (10.0.2.1, 10.0.2.2, ... in the order first seen); hosts that shared an
  address share one in the lab. A host recorded without an address gets
  one of its own. `hosts` is the DNS answer per host.
- **Certificates:** hosts whose requests shared a HAR `connection` id
  were on one connection, so one certificate covers them (a union over
  the connections, RFC 9113 §9.1.1 coalescing); every other https host has
  a certificate of its own. A grouping the user states replaces it; the
  recorded grouping is kept beside it (`recorded_certificates`).
- **Protocol per origin** as recorded: h2, else HTTP/1.1 (an h3 response is
  served over h2: the lab serves TCP).
- **Bodies:** the HAR's text, or a deterministic body of the recorded size
  valid for its type (HTML, CSS and JavaScript with a comment, JSON, SVG,
  PNG and JPEG as the generated site's images, web/images.py; other types
  seeded bytes). A body recorded with a content-encoding and carried
  decoded in the HAR is gzip-compressed again (gzip, mtime 0), and made
  bodies are sent without one (their size is the recorded bytes on the wire).
  Credential values the reader collected (8 characters or more) are
  replaced in bodies and kept headers by x's of the same length.
- One URL with two different bodies: the first is kept, and a note says so.

The document holds no time of import and no path: the same HAR, name and
options give the same bytes, and its SHA-256 names the site (`site_id`).
"""

from __future__ import annotations

import gzip
import hashlib
import html
import ipaddress
import json
import random

from tortoiselab.web import images
from tortoiselab.web.harread import Entry, Har, HarError

FORMAT = "tortoiselab.site/1"
LAB_NET = ipaddress.ip_network("10.0.2.0/24")  # the imported origins' addresses (the lab is 10.0.0.0/8)
MAX_IPS = 250
MIN_SECRET = 8  # shorter credential values are too common to replace safely in bodies
MAX_BODY = 256 * (1 << 20)  # one made body
MAX_SITE_BYTES = 1 << 30  # all bodies
_LETTERS = "abcdefghijklmnopqrstuvwxyz    "


def _rng(key: str) -> random.Random:
    return random.Random(int.from_bytes(hashlib.sha256(f"tortoiselab.web.harsite:{key}".encode()).digest()[:16],
                                        "big"))


def _text(n: int, head: str, tail: str, rng: random.Random, short: str = " ") -> bytes:
    """head + seeded letters + tail, exactly n bytes; `short` repeated when
    the skeleton does not fit (whitespace is a valid empty document)."""
    pad = n - len(head) - len(tail)
    if pad < 0:
        return (short + " " * n)[:n].encode("ascii")
    return (head + "".join(rng.choice(_LETTERS) for _ in range(pad)) + tail).encode("ascii")


def made_body(content_type: str, n: int, key: str) -> bytes:
    """A body of exactly n bytes, valid for content_type where the lab
    knows how (see the module's doc), drawn from `key` alone."""
    ct = content_type.split(";")[0].strip().lower()
    rng = _rng(f"{key}:{n}")
    if ct in ("image/png", "image/jpeg", "image/jpg"):
        try:
            return images.encode(".png" if ct == "image/png" else ".jpg", n, rng).data
        except ValueError:  # below the smallest valid file: seeded bytes
            return rng.randbytes(n)
    if ct == "text/html":
        return _text(n, "<!DOCTYPE html>\n<!--", "-->\n", rng)
    if ct == "text/css" or "javascript" in ct or ct == "text/ecmascript":
        return _text(n, "/*", "*/\n", rng)
    if ct == "application/json" or ct.endswith("+json"):
        return _text(n, "{\"_\":\"", "\"}", rng, short="0")
    if ct == "image/svg+xml":
        return _text(n, "<svg xmlns=\"http://www.w3.org/2000/svg\"><!--", "--></svg>", rng)
    if ct.startswith("text/"):
        return _text(n, "", "", rng)
    return rng.randbytes(n)


def _kind(content_type: str) -> str:
    ct = content_type.split(";")[0].strip().lower()
    if ct == "text/css":
        return "stylesheet"
    if "javascript" in ct or ct == "text/ecmascript":
        return "script"
    return "html" if ct == "text/html" else "image"


def made_document(n: int, children: list[tuple[str, str]], key: str) -> bytes:
    """A made HTML document of n bytes (more when its references need more)
    that references `children` ((url, kind), in the recorded order) as a
    browser and our loader fetch them: style sheets and scripts (defer) in
    <head>, everything else as <img> in <body> (client/page.py reads
    img, script and link rel=stylesheet)."""
    esc = [(html.escape(u, quote=True), k) for u, k in children]
    head = ("<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n<title>Tortoise Lab: a recorded page</title>\n"
            + "".join(f"<link rel=\"stylesheet\" href=\"{u}\">\n" for u, k in esc if k == "stylesheet")
            + "".join(f"<script src=\"{u}\" defer></script>\n" for u, k in esc if k == "script")
            + "</head>\n<body>\n"
            + "".join(f"<img src=\"{u}\" alt=\"\">\n" for u, k in esc if k not in ("stylesheet", "script"))
            + "<!--")
    return _text(max(n, len(head) + 20), head, "-->\n</body>\n</html>\n", _rng(f"{key}:{n}"))


def made_script(n: int, children: list[tuple[str, str]], key: str) -> bytes:
    """A made script of n bytes (more when its requests need more) that,
    run by a browser, asks for `children` ((url, kind)) as the recorded
    script did: a script or style sheet element, an image, else a hidden
    iframe (a fetch() would not hold the load event, and the loader ends
    at it: Chromium aborted one). Our loader runs no script but this kind:
    it reads the list (client/page.made_script_requests, which knows its
    first bytes) when the script has arrived."""
    urls = ",".join(json.dumps([u, k]) for u, k in children)
    head = ("/* Tortoise Lab: the requests a recorded script made */\n(function(){var u=[" + urls + "];"
            "for(var i=0;i<u.length;i++){var x=u[i][0],k=u[i][1],e;"
            "if(k==\"script\"){e=document.createElement(\"script\");e.src=x;document.head.appendChild(e);}"
            "else if(k==\"stylesheet\"){e=document.createElement(\"link\");e.rel=\"stylesheet\";e.href=x;"
            "document.head.appendChild(e);}else if(k==\"image\"){e=new Image();e.src=x;}"
            "else{e=document.createElement(\"iframe\");e.src=x;e.hidden=true;(document.body||document.documentElement).appendChild(e);}}})();\n/*")
    return _text(max(n, len(head) + 20), head, "*/\n", _rng(f"{key}:{n}"))


def _carriers(requests: list[dict], responses: dict[str, dict]) -> dict[str, list[tuple[str, str]]]:
    """What each made HTML document or script must ask for: every request
    whose initiator chain (its `_initiator`, else the page's document) first
    reaches it, not a body of the HAR's own that could ask for it itself
    (HTML, CSS or JavaScript recorded with its text; a made style sheet
    asks for nothing, so the chain goes on above it)."""
    first = {}
    for r in requests:
        first.setdefault(r["url"], r)
    doc = requests[0]["url"]

    def kind(url: str) -> str:
        return _kind(responses[f"{first[url]['method']} {url}"]["headers"].get("content-type", ""))

    def made(url: str) -> bool:
        return responses[f"{first[url]['method']} {url}"]["body_from"] == "made"

    out: dict[str, list[tuple[str, str]]] = {}
    for r in requests[1:]:
        if r["url"] == doc or first[r["url"]] is not r:
            continue
        up, hops = r["initiator"] if r["initiator"] in first else doc, 0
        while hops < len(first) and not (kind(up) in ("html", "script") or not made(up)):
            nxt = first[up]["initiator"]
            up, hops = (nxt if nxt in first and nxt != up else doc), hops + 1
        if made(up) and kind(up) in ("html", "script"):
            k = kind(r["url"])
            if kind(up) == "script" and k == "image":
                ct = responses[f"{r['method']} {r['url']}"]["headers"].get("content-type", "")
                k = "image" if ct.startswith("image/") else "fetch"
            out.setdefault(up, []).append((r["url"], k))
    return out


def _scrub(data: bytes, secrets: list[bytes]) -> tuple[bytes, int]:
    count = 0
    for s in secrets:
        if s in data:
            count += data.count(s)
            data = data.replace(s, b"x" * len(s))
    return data, count


class _Groups:
    """Union-find over host names."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, h: str) -> str:
        self.parent.setdefault(h, h)
        while self.parent[h] != h:
            self.parent[h] = self.parent[self.parent[h]]
            h = self.parent[h]
        return h

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra

    def sets(self, order: list[str]) -> list[list[str]]:
        out: dict[str, list[str]] = {}
        for h in order:
            out.setdefault(self.find(h), []).append(h)
        return list(out.values())


def _recorded_groups(entries: list[Entry], https_hosts: list[str]) -> list[list[str]]:
    """Hosts one certificate covers: those whose requests shared a HAR
    `connection`; in a HAR without connection ids (Playwright's), those
    served from one address with one certificate (`_securityDetails`), as a
    browser may coalesce them."""
    g = _Groups()
    first: dict[tuple, str] = {}
    ids = any(e.connection is not None for e in entries)
    for e in entries:
        if e.scheme != "https":
            continue
        g.find(e.host)
        if e.connection is not None:
            g.union(first.setdefault(("connection", e.connection), e.host), e.host)
        elif not ids and e.certificate is not None and e.server_ip is not None:
            g.union(first.setdefault(("certificate", e.server_ip, e.port, e.certificate), e.host), e.host)
    return g.sets(https_hosts)


def _user_groups(groups: list[list[str]], https_hosts: list[str], where: str) -> list[list[str]]:
    seen: dict[str, int] = {}
    for k, group in enumerate(groups):
        for h in group:
            if h not in https_hosts:
                raise HarError(f"{where}: --group {','.join(group)}: {h!r} is no https host of the page "
                               f"(its hosts: {', '.join(https_hosts)}); name hosts of the HAR")
            if h in seen:
                raise HarError(f"{where}: host {h!r} is in two --group lists; give each host one certificate")
            seen[h] = k
    rest = [[h] for h in https_hosts if h not in seen]
    return [[h for h in https_hosts if h in g] for g in groups] + rest


def _addresses(har: Har, hosts: list[str], where: str) -> tuple[dict[str, str], list[dict]]:
    """Each host's lab address, and the address table (lab, recorded, hosts)."""
    recorded: dict[str, str | None] = {}
    for e in har.entries:
        if e.host not in recorded or (recorded[e.host] is None and e.server_ip):
            recorded[e.host] = e.server_ip
        elif e.server_ip and recorded[e.host] != e.server_ip:
            har.notes.append(f"entry {e.index}: {e.host} answered from {e.server_ip}, earlier from "
                             f"{recorded[e.host]}: the first is kept (one DNS answer per host)")
    lab: dict[str, str] = {}
    table: dict[str, dict] = {}
    pool = iter(LAB_NET.hosts())
    for h in hosts:
        key = recorded[h] or f"(none: {h})"
        if key not in table:
            if len(table) >= MAX_IPS:
                raise HarError(f"{where}: the page's hosts answered from over {MAX_IPS} addresses; "
                               f"the lab gives them {LAB_NET}: record a page with fewer origins")
            table[key] = {"lab": str(next(pool)), "recorded": recorded[h], "hosts": []}
        table[key]["hosts"].append(h)
        lab[h] = table[key]["lab"]
    return lab, list(table.values())


def _origins(entries: list[Entry], notes: list[str]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for e in entries:
        o = out.setdefault(e.origin, {"host": e.host, "scheme": e.scheme, "port": e.port, "protocol": e.protocol,
                                      "recorded_protocols": []})
        if e.recorded_protocol and e.recorded_protocol not in o["recorded_protocols"]:
            o["recorded_protocols"].append(e.recorded_protocol)
        if e.scheme == "http" and e.protocol == "h2":
            o["protocol"] = "http/1.1"  # no h2 without TLS in browsers
        elif e.protocol != o["protocol"]:
            notes.append(f"entry {e.index}: {e.origin} over {e.recorded_protocol}, earlier over "
                         f"{o['protocol']}: the first is kept")
    return out


def _response(e: Entry, secrets: list[bytes], counts: dict[str, int]) -> tuple[dict, bytes]:
    headers = {}
    for k, v in sorted(e.headers.items()):
        vb, n = _scrub(v.encode("utf-8", "replace"), secrets)
        counts["scrubbed"] += n
        headers[k] = vb.decode("utf-8", "replace")
    if e.body is not None:
        body, n = _scrub(e.body, secrets)
        counts["scrubbed"] += n
        source = "har"
        if "content-encoding" in headers and body:
            if headers["content-encoding"] not in ("gzip", "x-gzip"):
                counts["recoded"] += 1
            body, headers["content-encoding"] = gzip.compress(body, compresslevel=6, mtime=0), "gzip"
    else:
        if e.size > MAX_BODY:
            raise HarError(f"entry {e.index} ({e.url}): a recorded size of {e.size:,} bytes, over the lab's bound "
                           f"of {MAX_BODY:,} for one response; remove the entry")
        body, source = made_body(headers.get("content-type", ""), e.size, e.url), "made"
        if headers.pop("content-encoding", None):
            counts["unencoded"] += 1
    sha = hashlib.sha256(body).hexdigest()
    return {"status": e.status, "headers": headers, "body": sha, "bytes": len(body), "body_from": source,
            "entry": e.index}, body


def build_site(har: Har, name: str, where: str, *, har_sha256: str,
               groups: list[list[str]] | None = None) -> tuple[dict, dict[str, bytes]]:
    """(site.json's document, bodies by SHA-256) of a read HAR."""
    hosts = list(dict.fromkeys(e.host for e in har.entries))
    https_hosts = list(dict.fromkeys(e.host for e in har.entries if e.scheme == "https"))
    lab_ip, addresses = _addresses(har, hosts, where)  # may add notes to har.notes
    notes = list(har.notes)
    recorded = _recorded_groups(har.entries, https_hosts)
    certs = _user_groups(groups, https_hosts, where) if groups else recorded
    cert_of = {h: f"cert-{k + 1}" for k, g in enumerate(certs) for h in g}
    origins = _origins(har.entries, notes)
    for o in origins.values():
        o["ip"], o["certificate"] = lab_ip[o["host"]], cert_of.get(o["host"])
    secrets = sorted({s.encode("utf-8", "replace") for s in har.secrets if len(s) >= MIN_SECRET},
                     key=lambda s: (-len(s), s))  # longest first: a value inside another goes with it
    counts = {"scrubbed": 0, "recoded": 0, "unencoded": 0}
    responses: dict[str, dict] = {}
    bodies: dict[str, bytes] = {}
    conn_ids: dict[str, str] = {}
    requests = []
    for e in har.entries:
        resp, body = _response(e, secrets, counts)
        key = f"{e.method} {e.url}"
        if key not in responses:
            responses[key] = resp
            bodies[resp["body"]] = body
        elif responses[key]["body"] != resp["body"]:
            notes.append(f"entry {e.index}: {e.url} again with a different body ({resp['bytes']:,} bytes, "
                         f"entry {responses[key]['entry']} had {responses[key]['bytes']:,}): the first is kept")
        conn = conn_ids.setdefault(e.connection, f"k{len(conn_ids) + 1}") if e.connection else None
        requests.append({"method": e.method, "url": e.url, "start_ms": e.start_ms, "initiator": e.initiator,
                         "initiator_type": e.initiator_type, "resource_type": e.resource_type,
                         "connection": conn, "entry": e.index})
    for url, children in _carriers(requests, responses).items():
        key = f"GET {url}" if f"GET {url}" in responses else f"HEAD {url}"
        old = responses[key]
        script = _kind(old["headers"].get("content-type", "")) == "script"
        body = (made_script if script else made_document)(old["bytes"], children, url)
        if len(body) > old["bytes"]:
            notes.append(f"{url}: made {'script' if script else 'document'} of {len(body):,} bytes, not the "
                         f"recorded {old['bytes']:,}: its {len(children)} references need more")
        if not any(o is not old and o["body"] == old["body"] for o in responses.values()):
            bodies.pop(old["body"], None)
        old["body"], old["bytes"] = hashlib.sha256(body).hexdigest(), len(body)
        bodies[old["body"]] = body
    total = sum(len(b) for b in bodies.values())
    if total > MAX_SITE_BYTES:
        raise HarError(f"{where}: the site's bodies come to {total:,} bytes, over the lab's bound of "
                       f"{MAX_SITE_BYTES:,}; record a smaller page")
    if counts["recoded"]:
        notes.append(f"{counts['recoded']} response(s) recorded with br/zstd/deflate are served with gzip "
                     "(the HAR carries them decoded)")
    if counts["unencoded"]:
        notes.append(f"{counts['unencoded']} response(s) with no body in the HAR are made bodies of the recorded "
                     "size, sent without their content-encoding")
    site = {
        "format": FORMAT, "name": name, "page": har.page_url, "title": har.title,
        "har": {"sha256": har_sha256, "creator": har.creator, "entries_kept": len(har.entries)},
        "origins": origins, "hosts": {h: lab_ip[h] for h in hosts}, "addresses": addresses,
        "certificates": [{"id": cert_of[g[0]], "hosts": g} for g in certs],
        "certificates_from": "user" if groups else "connections",
        "recorded_certificates": recorded, "responses": responses, "requests": requests,
        "recorded_connections": len(conn_ids),
        "never_copied": dict(sorted(har.dropped.items())), "credential_values_replaced": counts["scrubbed"],
        "notes": notes,
        "totals": {"requests": len(requests), "responses": len(responses), "bodies": len(bodies),
                   "bytes": sum(responses[f"{r['method']} {r['url']}"]["bytes"] for r in requests),
                   "hosts": len(hosts), "addresses": len(addresses), "certificates": len(certs)},
    }
    return site, bodies


def site_bytes(site: dict) -> bytes:
    """site.json's canonical bytes (sorted keys, ASCII): its SHA-256 is the site's id."""
    return (json.dumps(site, indent=1, sort_keys=True, ensure_ascii=True) + "\n").encode("ascii")


def site_id(site: dict) -> str:
    return hashlib.sha256(site_bytes(site)).hexdigest()
