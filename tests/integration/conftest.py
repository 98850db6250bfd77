"""Shared lab fixtures and helpers of the integration tests."""

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import TORTOISE


@pytest.fixture(scope="session")
def study_results(tmp_path_factory, lab_kernel):
    """A function: study id -> the results root holding <experiment>@ci for
    every experiment of that study (tortoiselab.studies.STUDIES), run once
    per session (uml backend, virtual clock, 2 lab jobs). Notebooks of the
    studies can read the same folders (results/<name>@ci under the root)."""
    from tortoiselab import studies

    root = tmp_path_factory.mktemp("study-results")
    done: set[str] = set()

    def make(study_id: str) -> Path:
        if study_id not in done:
            studies.ensure_results(study_id, grid="ci", results=root, jobs=2, backend="uml", clock="virtual")
            done.add(study_id)
        return root

    return make


def lossfree_probe(work, *args, timeout=600):
    """`tortoise probe` on the virtual clock, without loss and with few loss
    probes (the tests of topologies and traces measure RTT and rate): the
    finished process and its JSON report (None if it wrote none)."""
    p = subprocess.run([*TORTOISE, "probe", "--backend", "uml", "--clock", "virtual", "--json",
                        "--work", str(work), "--loss-pct", "0", "--loss-probes", "200", *args],
                       capture_output=True, text=True, timeout=timeout)
    rep = json.loads(p.stdout) if p.stdout.strip().startswith("{") else None
    return p, rep
