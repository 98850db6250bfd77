"""A results folder's `.lab` made again from its generators and compared
(docs/faults.md, "A results folder as untrusted input"): the pages and the
PKI are derived from the seed, so nothing in them is taken on trust.

- the site: web/pages.generate_site for the runner's seed and domain
  (assets.SITE_SEED, assets.SITE_DOMAIN), made in a scratch folder outside
  the results folder (about 0.4 s, 17 MB) and compared file by file with
  `.lab/site`: every file's size (by lstat, before it is opened) and, where
  the size is right, its sha256; a file missing, added, a link or no
  regular file is named; and `.lab/SITE_VERSION` must be this generator's;
- the PKI: web/pki.make_pki for the folder's seed name (the experiment's
  name, as the runner makes it: host/assets.lab_assets) and the certificate
  groups the folder holds or its runs use. Files the seed name decides
  (web/pki.seed_determined: the Ed25519 CA, the small chains, their keys)
  must be byte for byte the same; pki.json the same once its paths are
  rebased; the RSA files, whose keys are random, must have the same shape
  (web/pki.pem_shape: DER lengths, names, serials, validity, SANs, padding,
  key types and sizes) and every chain must be signed link by link up to
  the folder's CA and served with its own leaf's key (web/pki.chain_problems).

What the generators make depends only on their source and the seed, so it
is kept in the user's cache (captures.cache_dir's parent, never the results
folder) by a hash of both: the RSA-4096 keys of the large chain take about
2 s to make, once.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from tortoiselab.host import assets, safefs, sitecheck
from tortoiselab.host.errors import RunnerError
from tortoiselab.host.store.captures import cache_dir
from tortoiselab.web import harserve, pages, pki

Entry = tuple  # (bytes, sha256) of a file; ("shape", digest) of a PKI file with random keys
MAX_FILE_BYTES = 64 * 1000 * 1000  # no generated file is larger (the largest, a bulk object, is 10 MB)


@dataclass
class LabCheck:
    """What differs between a folder's .lab and what its generators make."""

    exp_dir: Path
    differences: list[tuple[str, str]] = field(default_factory=list)  # (path under .lab, what differs)
    files: int = 0  # the files compared
    unchecked: str | None = None  # why nothing was compared (no .lab the runner made)

    @property
    def ok(self) -> bool:
        return not self.differences

    def lines(self, most: int = 12) -> list[str]:
        out = [f"{self.exp_dir / '.lab' / rel}: {what}" for rel, what in self.differences[:most]]
        return out + ([f"... and {len(self.differences) - most} more"] if len(self.differences) > most else [])


def fix(exp_dir: Path) -> str:
    return (f"its runs were made with pages or certificates that are not the lab's: move {exp_dir} aside (keep it) "
            "and run the experiment again into a fresh folder (the pages and PKI are made again)")


# --- what the generators make ------------------------------------------------------


def digests(folder: Path) -> dict[str, Entry]:
    """(bytes, sha256) of every file under a folder this process made, by relative path."""
    return {str(p.relative_to(folder)): (p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(Path(folder).rglob("*")) if p.is_file()}


def _cached(name: str, make) -> dict:
    """make() kept in the user's cache as name (JSON); made again when absent or unreadable."""
    f = cache_dir().parent / "lab-expected" / name
    try:
        return {k: tuple(v) for k, v in json.loads(f.read_text(encoding="utf-8")).items()}
    except (OSError, ValueError, AttributeError):
        pass
    out = make()
    try:  # a read-only home keeps nothing: made again next time
        f.parent.mkdir(parents=True, exist_ok=True)
        tmp = f.with_name(f".{f.name}.{os.getpid()}")
        tmp.write_text(json.dumps(out, sort_keys=True), encoding="utf-8")
        os.replace(tmp, f)
    except OSError:
        pass
    return out


def _source_hash(*modules) -> str:
    h = hashlib.sha256()
    for m in modules:
        h.update(hashlib.sha256(Path(m.__file__).read_bytes()).digest())
    return h.hexdigest()[:16]


def expected_site(seed: int = assets.SITE_SEED, domain: str = assets.SITE_DOMAIN) -> dict[str, Entry]:
    """rel path -> (bytes, sha256) of the site the runner makes (and the
    SITE_VERSION file beside it, as "../SITE_VERSION")."""
    def make() -> dict:
        with tempfile.TemporaryDirectory(prefix="tortoise-site-") as d:
            pages.generate_site(Path(d), seed=seed, domain=domain)
            return digests(Path(d))
    return _cached(f"site-{assets.site_version()}-{seed}-{domain}.json", make)


def pki_canonical(doc: dict) -> str:
    """A pki.json's content with its paths rebased to one place (PKI/),
    wherever the folder was made or lies now."""
    return json.dumps(pki.rebased(doc, "PKI"), sort_keys=True)


def expected_pki(seed_name: str, variants: Iterable[str], domain: str = assets.SITE_DOMAIN) -> dict[str, Entry]:
    """rel path -> (bytes, sha256) for the files the seed name decides,
    ("shape", sha256 of web/pki.pem_shape) for those with random keys,
    ("json", sha256 of pki_canonical) for pki.json."""
    variants = sorted(set(variants))

    def make() -> dict:
        with tempfile.TemporaryDirectory(prefix="tortoise-pki-") as d:
            doc = pki.make_pki(Path(d), domain=domain, seed_name=seed_name, variants=variants)
            out: dict[str, Entry] = {}
            for rel, entry in digests(Path(d)).items():
                if rel == "pki.json":
                    out[rel] = ("json", hashlib.sha256(pki_canonical(doc).encode()).hexdigest())
                elif pki.seed_determined(rel):
                    out[rel] = entry
                else:
                    out[rel] = ("shape", _shape_digest((Path(d) / rel).read_bytes()))
            return out
    key = hashlib.sha256(json.dumps([seed_name, variants, domain]).encode()).hexdigest()[:16]
    return _cached(f"pki-{_source_hash(pki)}-{key}.json", make)


def _shape_digest(data: bytes) -> str:
    return hashlib.sha256(json.dumps(pki.pem_shape(data), sort_keys=True).encode()).hexdigest()


# --- what the folder holds -----------------------------------------------------------


def found_entries(folder: Path, expected: dict[str, Entry]) -> dict[str, Entry | str]:
    """rel path -> (bytes, sha256 or None) of every entry under folder,
    walked without following a link; a link or anything but a regular file
    or folder is its kind (a str). A file is hashed only when its size (by
    lstat) is the expected one and at most MAX_FILE_BYTES: a sparse giant
    is named by its size, never read."""
    out: dict[str, Entry | str] = {}
    for root, dirs, names in os.walk(folder, followlinks=False):
        for name in sorted(dirs + names):
            p = Path(root, name)
            rel = str(p.relative_to(folder))
            st = os.lstat(p)
            if stat.S_ISDIR(st.st_mode):
                continue
            if stat.S_ISLNK(st.st_mode):
                out[rel] = "a link"
            elif not stat.S_ISREG(st.st_mode):
                out[rel] = safefs.kind_of(st.st_mode)
            else:
                want = expected.get(rel)
                sized = want is not None and (want[0] == st.st_size or isinstance(want[0], str))
                out[rel] = (st.st_size, _hash(p, folder, want) if sized and st.st_size <= MAX_FILE_BYTES else None)
    return out


def _hash(p: Path, folder: Path, want: Entry) -> str | None:
    try:
        data = safefs.read_bytes_regular(p, folder, doing=f"checking {folder}", limit=MAX_FILE_BYTES)
    except (OSError, safefs.REFUSED):
        return None
    if want[0] == "json":
        try:
            return hashlib.sha256(pki_canonical(json.loads(data)).encode()).hexdigest()
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
    if want[0] == "shape":
        try:
            return _shape_digest(data)
        except (ValueError, TypeError):
            return None
    return hashlib.sha256(data).hexdigest()


def _size(n) -> str:
    return f"{n:,} bytes" if isinstance(n, int) else "?"


def tree_differences(expected: dict[str, Entry], found: dict[str, Entry | str]) -> list[tuple[str, str]]:
    """(rel path, what differs) for every file of `found` that is not the
    one `expected` holds: missing, added, a link or no regular file, of
    another size, other bytes, another shape. Pure."""
    out = []
    for rel in sorted(set(expected) | set(found)):
        want, got = expected.get(rel), found.get(rel)
        if got is None:
            out.append((rel, "missing: the generator makes it"))
        elif isinstance(got, str):
            out.append((rel, f"is {got}, not the generator's file"))
        elif want is None:
            out.append((rel, f"{_size(got[0])}, a file the generator does not make"))
        elif want[0] == "shape":
            if got[1] != want[1]:
                out.append((rel, "not a certificate chain or key of the shape the generator makes (names, serials, "
                                 "validity, extensions, key types and sizes, DER lengths)"))
        elif want[0] == "json":
            if got[1] != want[1]:
                out.append((rel, "not the PKI description the generator writes"))
        elif got[0] != want[0]:
            out.append((rel, f"{_size(got[0])}, the generator makes {_size(want[0])} (sha256 {want[1][:12]})"))
        elif got[1] != want[1]:
            out.append((rel, f"{_size(got[0])} as made, other bytes: sha256 "
                             f"{(got[1] or 'unreadable')[:12]}, the generator's {want[1][:12]}"))
    return out


# --- the check ------------------------------------------------------------------------------


def _folder_variants(exp_dir: Path) -> list[str]:
    try:
        return [v for v in json.loads(safefs.read_bytes_regular(
            exp_dir / ".lab" / "pki" / "pki.json", exp_dir, limit=1 << 20)).get("variants", {}) if v in pki.VARIANTS]
    except (OSError, ValueError, AttributeError, *safefs.REFUSED):
        return []


def _chains(exp_dir: Path, expected: dict[str, Entry]) -> list[tuple[str, str]]:
    """Each chain with random keys signed up to its CA and served with its own key."""
    d = exp_dir / ".lab" / "pki"
    pairs = [("large/cert.pem", "ca.pem", "large/key.pem"), ("shared-rsa/cert.pem", "ca-rsa.pem", "shared-rsa/key.pem"),
             ("separate-rsa/www.pem", "ca-rsa.pem", "separate-rsa/www.key"),
             ("separate-rsa/static.pem", "ca-rsa.pem", "separate-rsa/static.key")]
    out = []
    for chain, ca, key in pairs:
        if chain not in expected:
            continue
        try:
            data = [safefs.read_bytes_regular(d / f, exp_dir, limit=1 << 20) for f in (chain, ca, key)]
        except (OSError, *safefs.REFUSED):
            continue  # named by the file comparison
        out += [(f"pki/{chain}", why) for why in pki.chain_problems(*data)]
    return out


def imported_differences(exp_dir: Path, sites_dir: Path | None = None) -> tuple[list[tuple[str, str]], int]:
    """(differences, files compared) of the imported sites staged in
    .lab/imported (host/sitecheck.py): each copy its runs loaded, or any
    there, against the import in sites_dir (where there) and the ids the
    run records carry, then every file against what its site.json names."""
    exp_dir = Path(exp_dir)
    root = exp_dir / ".lab" / sitecheck.IMPORTED
    used = sitecheck.recorded_ids(exp_dir)
    if os.path.lexists(root) and (safefs.is_link(root) or not root.is_dir()):
        return [(sitecheck.IMPORTED, "is a link or no folder, not the staged imported sites")], 0
    there = sorted(n for n in os.listdir(root) if not n.startswith(".")) if os.path.lexists(root) else []
    out, files = [], 0
    for name in sorted(set(there) | set(used)):  # a hidden .NAME.tmp-PID: a staging cut short, never loaded
        st = sitecheck.read_staged(root, name, used.get(name, {}), sites_dir)
        out += [(f"{sitecheck.IMPORTED}/{name}/{r}".rstrip("/"), w) for r, w in st.differences]
        if st.site is None or st.text is None:
            continue
        sid = hashlib.sha256(st.text).hexdigest()
        want = _cached(f"imported-{_source_hash(harserve, pki, sitecheck)}-{name}-{sid[:32]}.json",
                       lambda: sitecheck.expected_files(st.site, st.text, name))
        out += [(f"{sitecheck.IMPORTED}/{name}/{r}", w)
                for r, w in tree_differences(want, found_entries(root / name, want))]
        out += [(f"{sitecheck.IMPORTED}/{name}/{r}", w) for r, w in sitecheck.chain_differences(root / name, st.site)]
        files += len(want)
    return out, files


def check_lab(exp_dir: Path, seed_name: str | None = None, certs: Iterable[str] = (),
              sites_dir: Path | None = None) -> LabCheck:
    """The folder's .lab against its generators: the site, SITE_VERSION and
    the PKI of the seed name (default: the folder's name, as the runner
    makes it) with the certificate groups the folder holds or `certs` need,
    and the imported sites staged there against the import in sites_dir
    and the run records (imported_differences).
    A folder without a .lab the runner made (its READY written last) is
    not compared (`unchecked` says why): a copy without .lab, the canned
    folders of the tests; nothing can be rerun from it (host/audit.py)."""
    exp_dir = Path(exp_dir)
    out = LabCheck(exp_dir)
    lab = exp_dir / ".lab"
    if safefs.is_link(lab) or (os.path.lexists(lab) and not lab.is_dir()):
        out.differences.append(("", "is a link or no folder, not the lab's pages and PKI"))
        return out
    if not os.path.lexists(lab / "READY"):
        out.unchecked = f"{lab} is missing or has no READY: no pages or certificates the runner made to compare"
        return out
    site = expected_site()
    out.differences += [(f"site/{r}", w) for r, w in tree_differences(site, found_entries(lab / "site", site))]
    try:
        version = safefs.read_bytes_regular(lab / "SITE_VERSION", exp_dir, limit=100).decode(errors="replace").strip()
    except (OSError, *safefs.REFUSED):
        version = "(none)"
    if version != assets.site_version():
        out.differences.append(("SITE_VERSION", f"{version[:16]!r}, this page generator is "
                                                f"{assets.site_version()!r}"))
    variants = [v for g in assets.pki_groups(set(_folder_variants(exp_dir)) | set(certs)) for v in g]
    want = expected_pki(seed_name or exp_dir.name, variants or ["shared", "separate"])
    out.differences += [(f"pki/{r}", w) for r, w in tree_differences(want, found_entries(lab / "pki", want))]
    out.differences += _chains(exp_dir, want)
    imported, files = imported_differences(exp_dir, sites_dir)
    out.differences += imported
    out.files = len(site) + len(want) + files
    return out


def refuse_other_lab(exp_dir: Path, sites_dir: Path | None = None) -> None:
    """RunnerError naming each file of the folder's .lab that differs from
    what its generators make (the imported sites: from the import in
    sites_dir and the records), and the fix: a run must not use them."""
    check = check_lab(exp_dir, sites_dir=sites_dir)
    if not check.ok:
        raise RunnerError(f"{exp_dir / '.lab'}: its pages or certificates differ from what their generators make "
                          f"({len(check.differences)} files):\n  " + "\n  ".join(check.lines())
                          + f"\n  fix: {fix(exp_dir)}")


def checked_assets(exp_dir: Path, certs: Iterable[str], sites_dir: Path | None = None) -> tuple[Path, Path]:
    """host/assets.lab_assets, and a .lab made before this invocation
    compared with its generators first: a run must not use pages or
    certificates unlike theirs (refuse_other_lab)."""
    made_before = os.path.lexists(Path(exp_dir) / ".lab" / "READY")
    site, pki_dir = assets.lab_assets(exp_dir, certs=certs)
    if made_before:
        refuse_other_lab(exp_dir, sites_dir)
    return site, pki_dir
