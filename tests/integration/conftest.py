"""Shared lab fixtures of the integration tests."""

from pathlib import Path

import pytest


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
