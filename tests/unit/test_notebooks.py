"""Notebooks are committed thin and stripped, and say which data they need
(notebooks/README.md); tests/integration/test_notebooks.py executes them."""

import json
from pathlib import Path

import pytest

from tortoiselab.spec import experiment
from tortoiselab import notebook

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def declared(nb: dict) -> list[dict]:
    """The experiments a notebook's metadata declares (README convention)."""
    meta = nb.get("metadata", {}).get("tortoiselab") or {}
    return list(meta.get("experiments") or ([meta] if meta.get("experiment") else []))


def test_there_is_a_quickstart():
    assert REPO / "notebooks" / "00_quickstart.ipynb" in NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_with_outputs_stripped(path):
    nb = json.loads(path.read_text())
    dirty = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
             and (c.get("outputs") or c.get("execution_count") is not None)]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs; run python -m tortoiselab.notebook --strip {path}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_declares_a_test_dataset_that_validates(path):
    nb = json.loads(path.read_text())
    decl = declared(nb)
    assert decl, f"{path.name}: metadata.tortoiselab names no experiment (see notebooks/README.md)"
    for d in decl:
        f = REPO / d["test_experiment"]
        assert f.exists(), f"{path.name}: test_experiment {d['test_experiment']} is missing"
        assert experiment.load(f).name == d["experiment"], f"{f}: its name must be {d['experiment']!r}"
    src = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "import tortoiselab" in src or "from tortoiselab" in src  # thin: the package does the work
    assert "/results" not in src and "TORTOISE_RESULTS" not in src  # data only through tortoiselab.notebook


def test_strip_removes_outputs_and_counts(tmp_path):
    nb = json.loads((REPO / "notebooks" / "00_quickstart.ipynb").read_text())
    code = next(c for c in nb["cells"] if c["cell_type"] == "code")
    code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["hi\n"]}]
    code["execution_count"] = 3
    code["metadata"]["execution"] = {"iopub.status.busy": "2026-01-01"}
    p = tmp_path / "n.ipynb"
    p.write_text(json.dumps(nb))
    assert notebook.strip(p) is True
    out = json.loads(p.read_text())
    assert all(c.get("outputs", []) == [] and c.get("execution_count") is None for c in out["cells"]
               if c["cell_type"] == "code")
    assert "execution" not in out["cells"][1]["metadata"]
    assert notebook.strip(p) is False  # idempotent
    # the committed notebook is byte-for-byte what strip writes
    q = tmp_path / "q.ipynb"
    q.write_bytes((REPO / "notebooks" / "00_quickstart.ipynb").read_bytes())
    assert notebook.strip(q) is False


def test_results_folder_from_argument_env_or_default(tmp_path, monkeypatch):
    monkeypatch.delenv(notebook.RESULTS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert notebook.results_dir() == Path("results")
    assert notebook.results_dir(tmp_path / "x") == tmp_path / "x"
    monkeypatch.setenv(notebook.RESULTS_ENV, str(tmp_path / "env"))
    assert notebook.results_dir() == tmp_path / "env"
    with pytest.raises(FileNotFoundError, match="TORTOISE_RESULTS"):
        notebook.load("nope")


def test_a_grid_list_reads_the_first_grid_the_experiment_defines(tmp_path):
    """TORTOISE_GRID=powered,reduced: a study notebook reads tortoise's
    powered grid and tortoise-screen's reduced one (it has no powered)."""
    canned = Path(__file__).resolve().parents[1] / "data" / "runs" / "tortoise@ci"
    import shutil
    shutil.copytree(canned, tmp_path / "tortoise@ci")
    assert notebook.context("tortoise@nosuch,ci", tmp_path).exp_dir == tmp_path / "tortoise@ci"
    with pytest.raises(FileNotFoundError, match="tortoise-screen@reduced"):
        notebook.context("tortoise-screen@powered,reduced", tmp_path)
