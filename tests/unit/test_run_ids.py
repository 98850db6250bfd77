"""Every experiment file's run ids, grid by grid, against the ids stored in
tests/data/run-ids.json (issue 40): a run id names a stored run (resume,
--reuse-from, a reproduction's results), so a change to the configuration's
types or its canonical form must leave every id of every shipped experiment
what it was. A deliberate change of an experiment file updates the file:
`python -m tests.unit.test_run_ids --write` (and the commit says why)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from tortoiselab.spec.experiment import expand, load
from tortoiselab.spec.maps import MAP_PREFIX

REPO = Path(__file__).resolve().parents[2]
STORED = REPO / "tests" / "data" / "run-ids.json"
FILES = sorted((REPO / "experiments").glob("*.yaml"))


def ids_of(f: Path) -> dict[str, str]:
    """Per grid of the file (and "-", the whole sweep): the sha256 of its
    sorted run ids (16 hex digits) and their count."""
    exp, out = load(f), {}
    for grid in [None, *sorted(exp.grids), *sorted(f"{MAP_PREFIX}{m}" for m in (exp.maps or {}))]:
        ids = sorted(r.run_id for r in expand(load(f, grid=grid)))
        out[grid or "-"] = f"{hashlib.sha256(' '.join(ids).encode()).hexdigest()[:16]} {len(ids)}"
    return out


@pytest.mark.parametrize("f", FILES, ids=[f.name for f in FILES])
def test_run_ids_are_what_they_were(f: Path):
    stored = json.loads(STORED.read_text())
    assert f.name in stored, f"{f.name} has no stored run ids: python -m tests.unit.test_run_ids --write"
    assert ids_of(f) == stored[f.name]


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.unit.test_run_ids --write")
    STORED.write_text(json.dumps({f.name: ids_of(f) for f in FILES}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {STORED}")
