"""Imported sites on the user's machine: `tortoise site import PAGE.har`
(docs/your-own-site.md).

A site lives in `<sites>/<name>/`: `site.json`, the canonical import
(web/harsite.py; its SHA-256 is the site's id), and `bodies/<sha256>`, one
file per distinct body. The HAR is read with a bound (HAR_MAX_BYTES, by
fstat before a byte is read, no link followed: host/safefs.py) and checked
whole (web/harread.py) before anything is written; the site is written
into a temporary folder beside its place and renamed into it, so a failed
import leaves nothing. A name that holds another site is refused, never
overwritten; importing the same HAR again under its name changes nothing.

`load_site` reads a stored site back and checks every body against the
hash and size site.json gives it: a site folder is input like a results
folder, and nothing in it is trusted that its site.json does not back.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from tortoiselab.host import safefs
from tortoiselab.host.errors import RunnerError
from tortoiselab.host.store import files
from tortoiselab.spec import bounds
from tortoiselab.spec.sides import SITE_NAME
from tortoiselab.web import harserve, harsite
from tortoiselab.web.harread import HarError, read_har

HAR_MAX_BYTES = 128 * bounds.MiB  # a page's HAR with its bodies; parsed whole (some 10 times its bytes)
SITE_JSON_MAX_BYTES = 64 * bounds.MiB
NAME = SITE_NAME
SITE_JSON, BODIES = "site.json", "bodies"


@dataclass
class Imported:
    folder: Path
    site: dict
    site_id: str
    created: bool  # False: the same site was there already


def name_problem(name: str) -> str | None:
    if not NAME.match(name):
        return (f"site name {name!r}: 1-44 characters of lower-case letters, digits, '.', '_' and '-', "
                "starting with a letter or digit; give another --name")
    return None


def default_name(har_path: Path) -> str:
    """The HAR file's stem, lower-cased, other characters as '-'."""
    stem = re.sub(r"[^a-z0-9._-]+", "-", har_path.stem.lower()).strip("-._") or "site"
    return stem[:44]


def read_har_file(path: Path) -> bytes:
    try:
        return safefs.read_bytes_regular(path, path.parent, "site import", max_bytes=HAR_MAX_BYTES)
    except FileNotFoundError:
        raise RunnerError(f"{path}: no such file; give the .har file saved by the browser") from None
    except safefs.TooLarge:
        raise RunnerError(f"{path}: {bounds.size_words(os.stat(path).st_size)}, above the "
                          f"{bounds.size_words(HAR_MAX_BYTES)} an import reads (not read); record one page load "
                          "(a HAR of one page with its bodies is a few MB)") from None
    except (safefs.LinkRefused, safefs.NotRegular) as exc:
        raise RunnerError(f"{path}: {exc}") from None


def import_har(har_path: Path, sites_dir: Path, name: str | None = None, *, tokens: frozenset[str] = frozenset(),
               groups: list[list[str]] | None = None) -> Imported:
    """Make the site of a HAR file in sites_dir/<name>; RunnerError or
    HarError (a ValueError) naming the fix, before anything is written."""
    har_path, sites_dir = Path(har_path), Path(sites_dir)
    name = name if name is not None else default_name(har_path)
    problem = name_problem(name)
    if problem:
        raise RunnerError(problem)
    data = read_har_file(har_path)
    har = read_har(data, str(har_path), tokens)
    site, bodies = harsite.build_site(har, name, str(har_path), har_sha256=hashlib.sha256(data).hexdigest(),
                                      groups=groups)
    del data, har  # the HAR's bytes (cookies and all) are not kept
    text = harsite.site_bytes(site)
    sid = hashlib.sha256(text).hexdigest()
    folder = sites_dir / name
    if os.path.lexists(folder):
        try:
            there = safefs.read_bytes_regular(folder / SITE_JSON, sites_dir, "site import",
                                              max_bytes=SITE_JSON_MAX_BYTES)
        except (FileNotFoundError, *safefs.REFUSED):
            there = b""
        if there == text:
            load_site(sites_dir, name)  # the bodies too
            return Imported(folder, site, sid, created=False)
        raise RunnerError(f"{folder} holds another site{' (or something else)' if not there else ''}; nothing is "
                          f"overwritten: give another --name, or remove that folder first (rm -r {folder})")
    _write(sites_dir, name, text, bodies)
    return Imported(folder, site, sid, created=True)


def _write(sites_dir: Path, name: str, text: bytes, bodies: dict[str, bytes]) -> None:
    """The site into a new temporary folder beside its place (mkdtemp: made
    here, so no link can stand in it), files created exclusively, then
    renamed into place; on any error the temporary folder is removed."""
    sites_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.tmp-", dir=sites_dir))
    try:
        os.chmod(tmp, 0o755)
        (tmp / BODIES).mkdir(mode=0o755)
        for sha, body in sorted(bodies.items()):
            with open(tmp / BODIES / sha, "xb") as fh:
                fh.write(body)
        with open(tmp / SITE_JSON, "xb") as fh:
            fh.write(text)
        os.rename(tmp, sites_dir / name)  # not os.replace: a folder that appeared meanwhile is not replaced
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def load_site(sites_dir: Path, name: str) -> tuple[dict, str]:
    """(site.json's document, the site's id) of a stored site, every body
    checked against its hash and size; RunnerError naming the file and the fix."""
    problem = name_problem(name)
    if problem:
        raise RunnerError(problem)
    folder = Path(sites_dir) / name
    doing = f"site {name}"
    try:
        text = safefs.read_bytes_regular(folder / SITE_JSON, sites_dir, doing, max_bytes=SITE_JSON_MAX_BYTES)
        site = json.loads(text)
    except FileNotFoundError:
        raise RunnerError(f"{folder}: no imported site of that name; make it with "
                          f"`tortoise site import PAGE.har --name {name}`") from None
    except (ValueError, *safefs.REFUSED) as exc:
        raise RunnerError(f"{folder / SITE_JSON}: {exc}; import the HAR again into another --name") from None
    if not isinstance(site, dict) or site.get("format") != harsite.FORMAT or harsite.site_bytes(site) != text:
        raise RunnerError(f"{folder / SITE_JSON}: not a site written by `tortoise site import` ({harsite.FORMAT}, "
                          "canonical form); import the HAR again into another --name")
    for key, resp in site.get("responses", {}).items():
        sha = resp.get("body", "")
        if not re.fullmatch(r"[0-9a-f]{64}", str(sha)):
            raise RunnerError(f"{folder / SITE_JSON}: response {key!r} names no body hash; import the HAR again")
        try:
            body = safefs.read_bytes_regular(folder / BODIES / sha, sites_dir, doing, max_bytes=harsite.MAX_BODY * 2)
        except (FileNotFoundError, *safefs.REFUSED) as exc:
            raise RunnerError(f"{folder / BODIES / sha}: {exc or 'missing'}; import the HAR again") from None
        if len(body) != resp.get("bytes") or hashlib.sha256(body).hexdigest() != sha:
            raise RunnerError(f"{folder / BODIES / sha}: not the body site.json names ({resp.get('bytes')} bytes, "
                              "that SHA-256); the folder was changed: import the HAR again")
    return site, hashlib.sha256(text).hexdigest()


def stage(sites_dir: Path, name: str, out_dir: Path) -> tuple[dict, str]:
    """A stored site, checked (load_site), copied into out_dir (a new
    folder) with its PKI (web/harserve.make_site_pki), as a page-load
    request names it (PageLoadRequest.imported_dir); (site, its id)."""
    site, sid = load_site(sites_dir, name)
    out_dir = Path(out_dir)
    (out_dir / BODIES).mkdir(parents=True)
    for resp in site["responses"].values():
        dst = out_dir / BODIES / resp["body"]
        if not dst.exists():
            dst.write_bytes(safefs.read_bytes_regular(Path(sites_dir) / name / BODIES / resp["body"], sites_dir,
                                                      f"site {name}", max_bytes=harsite.MAX_BODY * 2))
    (out_dir / SITE_JSON).write_bytes(harsite.site_bytes(site))
    harserve.make_site_pki(out_dir / "pki", site, f"site {name}")
    for d in (out_dir, out_dir / BODIES):
        os.chmod(d, 0o755)
    return site, sid


def stage_for_experiment(exp_dir: Path, names: Iterable[str], sites_dir: Path) -> dict[str, str]:
    """Each imported site an experiment's runs name (client.site), staged
    once into <exp>/.lab/imported/<name> (host/pageload.imported_dir), the
    lab reading it there; {name: site id}. The store makes the staging
    folder and renames it into place (host/store/files.py). A staged copy
    is input like the rest of a results folder: it is checked whole (every
    body against its hash) and, where sites/<name> is here, must be that
    import, byte for byte; else RunnerError naming both and the fix,
    before any run starts."""
    out: dict[str, str] = {}
    root = Path(exp_dir) / ".lab" / "imported"
    for name in sorted(set(names)):
        staged = root / name
        here = (Path(sites_dir) / name / SITE_JSON).exists()
        if os.path.lexists(staged):
            site, sid = load_site(root, name)
            there = load_site(sites_dir, name)[1] if here else sid
            if there != sid:
                raise RunnerError(f"client.site {name}: {staged} is another import than {Path(sites_dir) / name} "
                                  f"(ids {sid[:16]} and {there[:16]}): the runs stored here loaded the former; "
                                  "use another --results, or import under another name")
            out[name] = sid
            continue
        if not here:
            raise RunnerError(f"client.site {name}: no imported site {Path(sites_dir) / name}; make it with "
                              f"`tortoise site import PAGE.har --name {name}` (or give --sites)")
        doing = f"client.site {name}"
        files.make_dirs(exp_dir, root, doing)
        tmp = files.fresh_dir(exp_dir, root / f".{name}.tmp-{os.getpid()}", doing)
        try:
            _, out[name] = stage(sites_dir, name, tmp)
            files.replace(exp_dir, tmp, staged, doing)
        except BaseException:
            files.remove(exp_dir, tmp, doing, quiet=True)
            raise
    return out
