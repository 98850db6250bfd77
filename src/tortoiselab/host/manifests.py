"""A run folder's manifest.json (`tortoise verify` checks it: host/verify.py).

At store time each run folder gets manifest.json, written last (the runner's
_store, host/reuse.take), before the folder is renamed into place:

    {"format": 1, "algorithm": "sha256",
     "files": {"run.json": {"bytes": 18734, "sha256": "9f2c..."}, "server.pcap": {...}, ...}}

every file of the run folder but the manifest itself, by its path relative
to the folder. A file is sized by fstat before it is hashed, and never
hashed when larger than its bound (spec/bounds.read_bound) or than the
manifest says.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

from tortoiselab.host import safefs, store
from tortoiselab.host.store import files
from tortoiselab.spec import bounds, regular

MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
FIRST_VERSION_WITH_MANIFEST = 4  # host/store.FORMAT_VERSION that began writing manifests


def sized_digest(path: Path, expect_bytes: int | None = None, bounded: bool = True) -> tuple[int, str | None]:
    """(bytes, sha256) of a regular file, opened without following a link
    and sized by fstat on that descriptor first: a file above its bound
    (spec/bounds.read_bound; bounded), or whose size is not expect_bytes
    (its manifest's), comes back as (its size, None), never hashed: a
    sparse 10 GB page.har costs a stat, not 72 s of hashing. A file that
    is not regular raises safefs.NotRegular."""
    try:
        with regular.opened(path, nofollow=True) as (f, st):
            size = st.st_size
            if (bounded and size > bounds.read_bound(Path(path).name)) or expect_bytes not in (None, size):
                return size, None
            h, n = hashlib.sha256(), 0
            for chunk in regular.chunks(f, size + 1):  # never past the size checked, also of a growing file
                h.update(chunk)
                n += len(chunk)
    except regular.NotRegularFile as exc:
        raise safefs.not_regular(Path(path), exc.kind, "hashing") from None
    return n, h.hexdigest() if n == size else None


def run_files(run_dir: Path) -> tuple[dict[str, Path], list[str]]:
    """(relative path -> file) of every regular file under run_dir but the
    manifest, and the relative paths of what is neither a file nor a folder
    (links above all), which are never followed."""
    files, odd = {}, []
    for root, dirs, names in os.walk(run_dir, followlinks=False):
        for name in sorted(dirs):
            p = Path(root) / name
            if p.is_symlink():
                odd.append(str(p.relative_to(run_dir)))
        for name in names:
            p = Path(root) / name
            rel = str(p.relative_to(run_dir))
            if stat.S_ISREG(os.lstat(p).st_mode):
                if rel != MANIFEST:
                    files[rel] = p
            else:
                odd.append(rel)
    return files, sorted(odd)


def manifest_of(run_dir: Path, bounded: bool = False) -> dict:
    """The manifest of a run folder as it is now (not written). bounded (a
    folder not the runner's own: adopt): a file above its bound
    (spec/bounds.read_bound) is refused, never hashed."""
    files, odd = run_files(Path(run_dir))
    if odd:
        raise store.StoreError(f"run {Path(run_dir).name}: {run_dir}: {', '.join(odd)} is not a regular file "
                               "(a link?); a run folder holds files only")
    out = {}
    for rel, p in sorted(files.items()):
        size, digest = sized_digest(p, bounded=bounded)
        if digest is None:
            raise store.StoreError(f"run {Path(run_dir).name}: " + str(safefs.too_large(
                p, size, bounds.read_bound(p.name), fix=f"its manifest is not written; {store.redo_fix(run_dir)}")))
        out[rel] = {"bytes": size, "sha256": digest}
    return {"format": MANIFEST_FORMAT, "algorithm": "sha256", "files": out}


def write_manifest(run_dir: Path, bounded: bool = False) -> Path:
    """run_dir/manifest.json, written last (the caller then renames the
    folder into place); refuses to write through a link or over a file.
    bounded: as manifest_of."""
    text = json.dumps(manifest_of(run_dir, bounded), indent=1, sort_keys=True)
    return files.write_new(Path(run_dir).parent, Path(run_dir) / MANIFEST, text, doing=f"writing {run_dir}'s manifest")


def manifest_differences(listed: dict, present: dict) -> list[tuple[str, str]]:
    """(file, what differs) between a manifest's files and those of the
    folder now (both as manifest_of's "files"). Pure."""
    out = []
    for rel in sorted(set(listed) | set(present)):
        if rel not in present:
            out.append((rel, "missing (the manifest lists it)"))
        elif rel not in listed:
            out.append((rel, "not in the manifest (added after the run was stored)"))
        elif listed[rel] != present[rel]:
            a, b = listed[rel], present[rel]
            out.append((rel, f"changed since the run was stored ({a.get('bytes')} bytes, sha256 "
                             f"{str(a.get('sha256'))[:12]}.. in the manifest; {b['bytes']} bytes, "
                             f"sha256 {str(b.get('sha256'))[:12]}.. now)"))
    return out
