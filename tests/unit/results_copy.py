"""Results folders for the record tests (test_records.py,
test_results_damage.py): a canned CI folder of tests/data/runs (real runs,
format 1, their manifests written when manifests became required: issue 35)
copied and stored again as this version's runner stores a run: the record
written by host/store.write_record, then the manifest
(host/manifests.write_manifest), then runs.parquet."""

from __future__ import annotations

import shutil
from pathlib import Path

from tortoiselab.host import store
from tortoiselab.host.manifests import MANIFEST, write_manifest

CANNED = Path(__file__).resolve().parents[1] / "data" / "runs"


def stored_copy(name: str, root: Path, manifests: bool = True) -> Path:
    """root/<name>: a copy of the canned folder <name>, its runs stored anew
    (with manifests unless manifests=False), its table written."""
    dst = Path(root) / name
    shutil.copytree(CANNED / name, dst)
    for st in store.read_records(dst):
        (st.run_dir / MANIFEST).unlink()  # the canned one: over the record as canned
        if manifests:
            store.write_record(st.run_dir, st.record)
            write_manifest(st.run_dir)
    store.rebuild_table(dst)
    return dst


def tree(root: Path) -> dict[str, bytes | str]:
    """Every file's bytes (a link's target) under root, by relative path."""
    out: dict[str, bytes | str] = {}
    for p in sorted(Path(root).rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = f"-> {p.readlink()}"
        elif p.is_file():
            out[rel] = p.read_bytes()
    return out
