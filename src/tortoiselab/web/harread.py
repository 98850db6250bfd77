"""A recorded page's HAR 1.2 file, read and checked for `tortoise site import`
(docs/your-own-site.md): every entry of the page in the order it started,
with what a site needs of it and nothing else.

HAR 1.2 is http://www.softwareishard.com/blog/har-12-spec/ (as Chrome
DevTools, Playwright and the lab's own loaders save it). Chromium's own
fields are read where present: `_initiator` (who asked for a request),
`_resourceType`, `_fromCache`. Bad input is refused before anything is
written, each problem naming the entry (its index in `log.entries` and its
URL) and the fix; at most MAX_PROBLEMS are listed.

Never kept: request headers, cookies, response headers other than KEPT_HEADERS,
and the values of query parameters the user marks as tokens (replaced by
x's of the same length, so every URL and size stays as recorded). The values
of cookies, authorization headers and marked tokens are collected
(`Har.secrets`) so that the site's writer can also scrub them from bodies
(web/harsite.py).
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import unquote_plus, urlsplit, urlunsplit

MAX_ENTRIES = 10_000
MAX_PROBLEMS = 10
# response headers a replay needs (issue 55); every other header is dropped
KEPT_HEADERS = ("content-type", "content-encoding", "cache-control", "vary", "location")
# headers whose values are credentials: never kept, their values scrubbed from bodies
CREDENTIAL_HEADERS = ("cookie", "set-cookie", "set-cookie2", "authorization", "proxy-authorization",
                      "x-api-key", "x-auth-token", "x-csrf-token", "x-xsrf-token", "www-authenticate")
_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


class HarError(ValueError):
    """A HAR file the lab cannot make a site of; the message names the
    file, the entries and the fix (the CLI prints it, exit 2)."""


@dataclass
class Entry:
    """One recorded request and its response, as the site keeps it."""

    index: int  # in log.entries
    url: str  # tokens scrubbed, no fragment
    scheme: str
    host: str
    port: int
    method: str
    status: int
    protocol: str  # "h2" or "http/1.1" (as recorded: h3 is served as h2)
    recorded_protocol: str
    server_ip: str | None
    connection: str | None
    start_ms: float  # from the first entry's start
    headers: dict[str, str]  # KEPT_HEADERS only, lower-case names
    body: bytes | None  # content.text decoded, None when the HAR carries none
    size: int  # the body's bytes as served: the text's, else the recorded size
    resource_type: str
    initiator: str | None  # the URL that asked for it (tokens scrubbed), None: the document
    initiator_type: str
    certificate: str | None = None  # Playwright's _securityDetails: subject and issuer of the server's certificate

    @property
    def origin(self) -> str:
        default = 443 if self.scheme == "https" else 80
        return f"{self.scheme}://{self.host}" + ("" if self.port == default else f":{self.port}")


@dataclass
class Har:
    page_url: str
    title: str
    creator: str
    entries: list[Entry]
    notes: list[str] = field(default_factory=list)  # what was left out or changed, and why
    dropped: dict[str, int] = field(default_factory=dict)  # credential header/cookie names -> count
    secrets: set[str] = field(default_factory=set)  # credential values seen (never written)


def host_problem(host: str) -> str | None:
    """Why the lab CA cannot put `host` into a certificate (a DNS name of
    letters, digits and hyphens, RFC 5280 §4.2.1.6 and RFC 1123 §2.1), or None."""
    if not host:
        return "no host name"
    try:
        ipaddress.ip_address(host.strip("[]"))
        return (f"host {host!r} is an IP address: the lab's certificates carry DNS names only; "
                "record the page through its host name")
    except ValueError:
        pass
    if not host.isascii():
        try:
            alabel = host.encode("idna").decode("ascii")
        except UnicodeError:
            alabel = "its xn-- form"
        return f"host {host!r} is not ASCII; write it as {alabel!r} in the HAR"
    labels = host.split(".")
    if len(host) > 253 or len(labels) < 2 or not all(_LABEL.match(x) for x in labels) or labels[-1].isdigit():
        return (f"host {host!r} is not a DNS name of letters, digits and hyphens with a dot (labels of "
                "1-63 characters, 253 in all): the lab CA cannot put it into a certificate; rename it in "
                "every entry of the HAR, or remove its entries")
    return None


def scrub_query(url: str, tokens: frozenset[str], secrets: set[str]) -> str:
    """url without its fragment, each value of a query parameter named in
    `tokens` replaced by as many x's (the raw text, so the length and every
    other byte stay); the values go into `secrets`."""
    parts = urlsplit(url)
    query = parts.query
    if tokens and query:
        out = []
        for item in query.split("&"):
            name, eq, value = item.partition("=")
            if eq and unquote_plus(name) in tokens and value:
                secrets.add(value)
                secrets.add(unquote_plus(value))
                value = "x" * len(value)
            out.append(name + eq + value)
        query = "&".join(out)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))


def _protocol(version: str) -> str:
    v = version.strip().lower()
    if v in ("h2", "http/2", "http/2.0", "h3", "http/3", "http/3.0", "h3-29"):
        return "h2"
    return "http/1.1"


def _headers(raw: object) -> list[tuple[str, str]]:
    if not isinstance(raw, list):
        return []
    return [(str(h.get("name", "")).lower(), str(h.get("value", ""))) for h in raw if isinstance(h, dict)]


def _initiator(raw: object) -> tuple[str | None, str]:
    """The URL that started a request, from Chromium's `_initiator`
    (parser: its url; script: the top frame of its stack or a parent's)."""
    if not isinstance(raw, dict):
        return None, "document order"
    kind = str(raw.get("type", "other"))
    if isinstance(raw.get("url"), str) and raw["url"]:
        return raw["url"], kind
    stack = raw.get("stack")
    for _ in range(64):  # async parents; bounded
        if not isinstance(stack, dict):
            break
        frames = stack.get("callFrames")
        if isinstance(frames, list):
            for f in frames:
                if isinstance(f, dict) and isinstance(f.get("url"), str) and f["url"]:
                    return f["url"], kind
        stack = stack.get("parent")
    return None, kind


def _certificate(raw: object) -> str | None:
    if isinstance(raw, dict) and isinstance(raw.get("subjectName"), str):
        return f"{raw['subjectName']} / {raw.get('issuer', '')}"
    return None


def _collect_secrets(req: dict, resp: dict, secrets: set[str], dropped: dict[str, int]) -> None:
    for side in (req, resp):
        for c in side.get("cookies") or []:
            if isinstance(c, dict):
                dropped["cookies"] = dropped.get("cookies", 0) + 1
                if isinstance(c.get("value"), str):
                    secrets.add(c["value"])
        for name, value in _headers(side.get("headers")):
            if name in CREDENTIAL_HEADERS:
                dropped[name] = dropped.get(name, 0) + 1
                secrets.add(value)
                for part in re.split(r"[;,\s]+", value):  # cookie pairs, "Bearer <token>"
                    secrets.add(part.partition("=")[2] or part)


class _Reader:
    def __init__(self, where: str, tokens: frozenset[str]) -> None:
        self.where, self.tokens = where, tokens
        self.problems: list[str] = []
        self.notes: list[str] = []
        self.secrets: set[str] = set()
        self.dropped: dict[str, int] = {}

    def bad(self, i: int, url: str, what: str) -> None:
        short = url if len(url) <= 100 else url[:97] + "..."
        self.problems.append(f"entry {i} ({short}): {what}")

    def entry(self, i: int, e: object) -> tuple[datetime, Entry] | None:
        if not isinstance(e, dict) or not isinstance(e.get("request"), dict) or not isinstance(e.get("response"), dict):
            self.bad(i, "?", "not a HAR entry (an object with request and response); remove it or save the HAR again")
            return None
        req, resp = e["request"], e["response"]
        raw_url = req.get("url")
        url = raw_url if isinstance(raw_url, str) else "?"
        _collect_secrets(req, resp, self.secrets, self.dropped)
        try:
            started = datetime.fromisoformat(str(e.get("startedDateTime")))
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            self.bad(i, url, f"{exc}; an entry needs an ISO 8601 startedDateTime and a URL that parses")
            return None
        status = resp.get("status")
        if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
            self.bad(i, url, f"response.status is {status!r}, not an HTTP status (100-599); save the HAR again")
            return None
        if parts.scheme not in ("http", "https"):
            self.bad(i, url, f"the URL's scheme is {parts.scheme or 'missing'!r}: a site serves http(s) URLs "
                     "only; remove the entry (DevTools: save the HAR without data: and extension URLs)")
            return None
        host = (parts.hostname or "").lower()
        problem = host_problem(host)
        if problem:
            self.bad(i, url, problem)
            return None
        content = resp.get("content") if isinstance(resp.get("content"), dict) else {}
        body, size = self.body(i, url, resp, content)
        if size is None:
            return None
        headers = {k: v for k, v in _headers(resp.get("headers")) if k in KEPT_HEADERS}
        if "content-type" not in headers and isinstance(content.get("mimeType"), str) and content["mimeType"]:
            headers["content-type"] = content["mimeType"]
        if "location" in headers:
            headers["location"] = scrub_query(headers["location"], self.tokens, self.secrets)
        ini, ini_type = _initiator(e.get("_initiator"))
        version = str(resp.get("httpVersion") or req.get("httpVersion") or "")
        ip = e.get("serverIPAddress")
        conn = e.get("connection")
        return started, Entry(
            index=i, url=scrub_query(url, self.tokens, self.secrets), scheme=parts.scheme, host=host,
            port=port or (443 if parts.scheme == "https" else 80), method=str(req.get("method", "GET")).upper(),
            status=status, protocol=_protocol(version),
            recorded_protocol=version, server_ip=ip.strip("[]") if isinstance(ip, str) and ip else None,
            connection=str(conn) if conn not in (None, "") else None, start_ms=0.0, headers=headers,
            body=body, size=size, resource_type=str(e.get("_resourceType") or ""),
            initiator=scrub_query(ini, self.tokens, self.secrets) if ini else None, initiator_type=ini_type,
            certificate=_certificate(e.get("_securityDetails")))

    def body(self, i: int, url: str, resp: dict, content: dict) -> tuple[bytes | None, int | None]:
        text = content.get("text")
        if isinstance(text, str):
            if content.get("encoding") == "base64":
                try:
                    return (b := base64.b64decode(text, validate=True)), len(b)
                except (binascii.Error, ValueError):
                    self.bad(i, url, "content.text is marked base64 but does not decode; save the HAR again")
                    return None, None
            return (b := text.encode("utf-8")), len(b)
        def count(v: object) -> int | None:
            return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None
        size, wire, saved = count(content.get("size")), count(resp.get("bodySize")), count(content.get("compression"))
        encoded = any(k == "content-encoding" for k, _ in _headers(resp.get("headers")))
        # HAR 1.2: content.size is the decoded body, content.compression the bytes the encoding saved;
        # bodySize the body received (Playwright counts more in it): the bytes on the wire of an encoded
        # body, which a made body (sent without an encoding) stands for
        if encoded and size is not None and saved:
            return None, size - saved
        if encoded and wire:
            return None, wire
        if size is not None:
            return None, size
        if wire is not None:
            return None, wire
        self.bad(i, url, "no body (content.text) and no size (content.size, response.bodySize): save the HAR "
                 "with content (DevTools: 'Save all as HAR with content'), or remove the entry")
        return None, None


def _left_out(e: object) -> str | None:
    """Why a well-formed entry is no part of a cold load's site, or None."""
    if not isinstance(e, dict) or not isinstance(e.get("response"), dict) or not isinstance(e.get("request"), dict):
        return None  # the reader names the problem
    if e.get("_fromCache"):
        return f"served from the browser's {e['_fromCache']} cache (record with the cache disabled)"
    status = e["response"].get("status")
    if isinstance(status, bool):
        return None  # the reader names the problem
    if status == 0 or e["response"].get("_error"):
        return f"no response was recorded (status {status}, {e['response'].get('_error') or 'failed or blocked'})"
    if status == 304:
        return "a revalidation (304) of a cached copy (record with the cache disabled)"
    method = str(e["request"].get("method", "")).upper()
    if method not in ("GET", "HEAD"):
        return f"a {method} request (the site serves GET and HEAD; a form or beacon is no part of a page's load)"
    return None


def _parse_json(data: bytes, where: str) -> object:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise HarError(f"{where}: not JSON: byte {exc.start} is not UTF-8; save the page's HAR again "
                       "(DevTools, Network panel: 'Save all as HAR with content')") from None

    def no_constant(name: str) -> None:
        raise ValueError(f"{name} is not a JSON number")
    try:
        return json.loads(text, parse_constant=no_constant)
    except json.JSONDecodeError as exc:
        raise HarError(f"{where}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}; "
                       "give the .har file the browser saved, unedited") from None
    except RecursionError:
        raise HarError(f"{where}: not JSON the lab reads: nested too deeply; "
                       "give the .har file the browser saved, unedited") from None
    except ValueError as exc:
        raise HarError(f"{where}: not JSON the lab reads: {exc}; "
                       "give the .har file the browser saved, unedited") from None


def _log(doc: object, where: str) -> dict:
    log = doc.get("log") if isinstance(doc, dict) else None
    if not isinstance(log, dict):
        raise HarError(f"{where}: not a HAR file (no top-level \"log\" object); give a HAR 1.2 file "
                       "(DevTools, Network panel: 'Save all as HAR with content')")
    if log.get("version") != "1.2":
        raise HarError(f"{where}: not HAR 1.2: log.version is {log.get('version')!r}; save the HAR again "
                       "from Chrome DevTools or Playwright, which write 1.2")
    entries = log.get("entries")
    if not isinstance(entries, list) or not entries:
        raise HarError(f"{where}: log.entries is {'empty' if entries == [] else 'missing'}: the HAR recorded no "
                       "request; record the page's load with the Network panel open")
    if len(entries) > MAX_ENTRIES:
        raise HarError(f"{where}: {len(entries):,} entries, over the lab's bound of {MAX_ENTRIES:,}; "
                       "record one page load only")
    return log


def read_har(data: bytes, where: str, tokens: frozenset[str] = frozenset()) -> Har:
    """The first page of a HAR file's bytes (`where`: its name, for errors),
    its entries in the order they started; HarError with every problem
    (at most MAX_PROBLEMS) and its fix."""
    log = _log(_parse_json(data, where), where)
    pages = log.get("pages") if isinstance(log.get("pages"), list) else []
    page = pages[0] if pages and isinstance(pages[0], dict) else {}
    r = _Reader(where, tokens)
    got: list[tuple[datetime, Entry]] = []
    for i, e in enumerate(log["entries"]):
        if isinstance(e, dict) and page.get("id") and e.get("pageref") not in (None, page["id"]):
            r.notes.append(f"entry {i}: of another page ({e.get('pageref')!r}), left out (the site is the "
                           f"HAR's first page, {page['id']!r})")
            continue
        skip = _left_out(e)
        if skip:
            _collect_secrets(e["request"], e["response"], r.secrets, r.dropped)
            r.notes.append(f"entry {i}: {skip}, left out")
            continue
        one = r.entry(i, e)
        if one is not None:
            got.append(one)
    if r.problems:
        more = len(r.problems) - MAX_PROBLEMS
        raise HarError(f"{where}: {len(r.problems)} entr{'y' if len(r.problems) == 1 else 'ies'} the lab cannot "
                       "serve; nothing was written:\n  " + "\n  ".join(r.problems[:MAX_PROBLEMS])
                       + (f"\n  ... and {more} more" if more > 0 else ""))
    if not got:
        raise HarError(f"{where}: no entry of a cold load is left, nothing was written:\n  "
                       + "\n  ".join(r.notes[:MAX_PROBLEMS]) + "\nrecord the page's load again with the cache "
                       "disabled (DevTools, Network panel: 'Disable cache')")
    try:
        got.sort(key=lambda p: p[0])  # stable: equal times keep the file's order
    except TypeError:
        raise HarError(f"{where}: startedDateTime mixes times with and without a time zone; "
                       "save the HAR again from one tool") from None
    t0 = got[0][0]
    for started, en in got:
        en.start_ms = round((started - t0).total_seconds() * 1000.0, 3)
    creator = log.get("creator") if isinstance(log.get("creator"), dict) else {}
    return Har(page_url=got[0][1].url, title=str(page.get("title", "")), entries=[en for _, en in got],
               creator=f"{creator.get('name', '?')} {creator.get('version', '')}".strip(), notes=r.notes,
               dropped=r.dropped, secrets={s for s in r.secrets if s})
