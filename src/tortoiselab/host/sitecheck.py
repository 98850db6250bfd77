"""An imported site's staged copy in a results folder (`.lab/imported/NAME`,
host/sites.stage_for_experiment) checked as the lab's own site is
(host/labcheck.py; docs/your-own-site.md, "Checking a results folder").

A results folder is untrusted input, and so is its staged copy: its
site.json, bodies and PKI decided what every run of the site loaded. The
import is made from the HAR, which is not kept (it holds the user's cookies),
so the copy is compared with what can back it:

- **the import on this machine**, `sites/NAME` (`--sites DIR`) where it is
  there: the staged site.json must be that import's, byte for byte (its
  SHA-256 is the site's id, web/harsite.py);
- **the run records**: every run of an imported site records the id of the
  copy it loaded (`meta.seeds.imported_site`, host/provenance.run_seeds;
  the record is covered by the run's manifest). The staged site.json must
  hash to that id for every run that loaded it.

Once site.json is backed, what it names is checked from it: every body
against its hash and size, no other file, and the PKI against one made
again for the site (web/harserve.make_site_pki: pki.json byte for byte, the
certificates and keys, whose keys are random, by shape: names, serials,
validity, SANs, key types and sizes; each leaf signed up to the copy's CA
and served with its own key). A copy that nothing backs (no `sites/NAME`
here and runs whose records carry no id: stored before records carried
it) is named as such: a forged copy whose site.json agrees with itself
cannot be told from the real one without the import or the records' id.
A forger who rewrites the records and their manifests as well is caught
only by a grader who holds the import (`--sites`).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tortoiselab.host import safefs, sites, store
from tortoiselab.host.errors import RunnerError
from tortoiselab.host.provenance import IMPORTED_SITE
from tortoiselab.web import harserve, harsite, pki

IMPORTED = "imported"  # under .lab


def recorded_ids(exp_dir: Path) -> dict[str, dict[str, str | None]]:
    """{site name: {run id: the id of the import its record says it loaded
    (None: the record carries none)}} over the folder's readable records."""
    out: dict[str, dict[str, str | None]] = {}
    for st in store.read_records(Path(exp_dir), strict=False):
        rec = st.record
        name = (rec.config.get("client") or {}).get("site") if rec is not None else None
        if not name:
            continue
        sid = rec.meta.seeds.get(IMPORTED_SITE)
        out.setdefault(str(name), {})[rec.run_id] = sid if isinstance(sid, str) else None
    return out


@dataclass
class Staged:
    """One staged copy read and set against what backs it."""

    name: str
    text: bytes | None = None  # its site.json as read (None: unreadable, named in differences)
    site: dict | None = None  # site.json parsed, when it is backed and a canonical site document
    differences: list[tuple[str, str]] = field(default_factory=list)  # (path under the copy, what differs)


def _runs(ids: list[str]) -> str:
    return ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")


def read_staged(root: Path, name: str, runs: dict[str, str | None], sites_dir: Path | None) -> Staged:
    """The copy root/name's site.json (no link followed, bounded) against
    the import in sites_dir (where there) and the ids its runs recorded."""
    out = Staged(name)
    staged, diff = root / name, out.differences
    if sites.name_problem(name):
        diff.append(("", "no imported site's name: the runner stages nothing here"))
        return out
    if not os.path.lexists(staged):
        diff.append(("", f"missing: {len(runs)} runs loaded it ({_runs(sorted(runs))})"))
        return out
    if safefs.is_link(staged) or not staged.is_dir():
        diff.append(("", "is a link or no folder, not a staged site"))
        return out
    try:
        out.text = safefs.read_bytes_regular(staged / sites.SITE_JSON, root, f"checking {staged}",
                                             max_bytes=sites.SITE_JSON_MAX_BYTES)
    except FileNotFoundError:
        diff.append((sites.SITE_JSON, "missing: the staged site's description"))
        return out
    except safefs.REFUSED as exc:
        diff.append((sites.SITE_JSON, f"not read: {exc}"))
        return out
    sid = hashlib.sha256(out.text).hexdigest()
    local = None
    if sites_dir is not None and os.path.lexists(Path(sites_dir) / name):
        try:
            local = sites.load_site(sites_dir, name)[1]
        except RunnerError as exc:
            diff.append((sites.SITE_JSON, f"not compared with {Path(sites_dir) / name}, which is damaged: {exc}"))
    if local is not None and local != sid:
        diff.append((sites.SITE_JSON, f"is another import than {Path(sites_dir) / name} (sha256 {sid[:16]} here, "
                                      f"{local[:16]} there): the runs here did not load that import"))
    wrong = sorted(r for r, i in runs.items() if i is not None and i != sid)
    if wrong:
        diff.append((sites.SITE_JSON, f"sha256 {sid[:16]}, not the import's id the records of {len(wrong)} runs "
                                      f"that loaded it carry ({_runs(wrong)}: {str(runs[wrong[0]])[:16]}): "
                                      "changed after they ran"))
    unbacked = sorted(r for r, i in runs.items() if i is None)
    if unbacked and local is None:
        diff.append((sites.SITE_JSON, f"nothing backs it: the records of {len(unbacked)} runs that loaded it "
                                      f"({_runs(unbacked)}) carry no import id (stored before they did) and there "
                                      f"is no {Path(sites_dir or 'sites') / name} to compare it with; give the "
                                      "import with --sites DIR"))
    if diff or (local != sid and sid not in runs.values()):
        return out  # a copy nothing backs (none of its runs stored yet): its files decided nothing
    try:
        doc = json.loads(out.text)
    except ValueError as exc:
        diff.append((sites.SITE_JSON, f"not JSON ({exc})"))
        return out
    if not isinstance(doc, dict) or doc.get("format") != harsite.FORMAT or harsite.site_bytes(doc) != out.text \
            or not isinstance(doc.get("responses"), dict) or not isinstance(doc.get("certificates"), list):
        diff.append((sites.SITE_JSON, f"not a site written by `tortoise site import` ({harsite.FORMAT})"))
        return out
    out.site = doc
    return out


def shape_digest(data: bytes) -> str:
    return hashlib.sha256(json.dumps(pki.pem_shape(data), sort_keys=True).encode()).hexdigest()


def expected_files(site: dict, text: bytes, name: str) -> dict[str, tuple]:
    """rel path -> (bytes, sha256) of site.json and every body it names,
    (bytes, sha256) of the PKI's pki.json and ("shape", digest) of its
    certificates and keys, as host/sites.stage makes them (labcheck.Entry)."""
    out: dict[str, tuple] = {sites.SITE_JSON: (len(text), hashlib.sha256(text).hexdigest())}
    for resp in site["responses"].values():
        if isinstance(resp, dict) and isinstance(resp.get("bytes"), int):
            out[f"{sites.BODIES}/{resp.get('body')}"] = (resp["bytes"], str(resp.get("body")))
    with tempfile.TemporaryDirectory(prefix="tortoise-site-pki-") as d:
        harserve.make_site_pki(Path(d), site, f"site {name}")
        for p in sorted(Path(d).iterdir()):
            data = p.read_bytes()
            out[f"pki/{p.name}"] = (len(data), hashlib.sha256(data).hexdigest()) if p.name == harserve.PKI_JSON \
                else ("shape", shape_digest(data))
    return out


def chain_differences(staged: Path, site: dict) -> list[tuple[str, str]]:
    """Each group's chain signed up to the copy's CA and served with its own key."""
    out = []
    for group in site["certificates"]:
        gid = str(group.get("id", "")) if isinstance(group, dict) else ""
        try:
            data = [safefs.read_bytes_regular(staged / "pki" / f, staged, limit=1 << 20)
                    for f in (f"{gid}.pem", "ca.pem", f"{gid}.key")]
        except (OSError, *safefs.REFUSED):
            continue  # named by the file comparison
        out += [(f"pki/{gid}.pem", why) for why in pki.chain_problems(*data)]
    return out
