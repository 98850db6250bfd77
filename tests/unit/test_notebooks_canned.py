"""Every notebook executed top to bottom (nbclient) on canned results, without
the lab: the studies' ci folders (tests/data/runs) and
tests/data/notebooks/runs, real runs stored by `tortoise run`:

- quick: tests/data/notebooks/quick.yaml's two runs (the quickstart's data);
- tortoise@reduced: four runs of experiments/tortoise.yaml's reduced grid,
  H-TCP and Hybla on India desktop's clean base-HTML load, each on the CDN
  set-up and with one server, repetition 0 (`tortoise run --grid reduced
  --runs-file`). The reduced grid holds both set-ups for the same path and
  load; notebooks/01_tortoise.ipynb grouped them together, so every seed
  appeared twice per arm, no run could be paired, and the p90 differences
  were all NA (issue 53: `ValueError: Encountered all NA values` after
  `make reproduce`);
- your-site: tests/data/notebooks/your-site.yaml's six runs, CUBIC and Hybla
  loading the imported site `shop` (tests/data/har/multi-origin.har) by
  Chromium, three pairs by seed (notebooks/05_your_site.ipynb; issue 55).

tests/integration/test_notebooks.py executes them on runs the lab makes."""

import json
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.unit.test_notebooks import NOTEBOOKS
from tortoiselab import notebook, studies
from tortoiselab.spec.experiment import expand, load

REPO = Path(__file__).resolve().parents[2]
CANNED = [REPO / "tests" / "data" / "runs", REPO / "tests" / "data" / "notebooks" / "runs"]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """A copy of the canned folders under one root (reading captures writes
    caches beside the runs, which must not land in the repository)."""
    root = tmp_path_factory.mktemp("canned-notebooks") / "results"
    for src in CANNED:
        shutil.copytree(src, root, dirs_exist_ok=True)
    return root


def _execute(path: Path, results: Path, grid: str, monkeypatch, tmp_path) -> list[str]:
    """Run the notebook in a kernel; its text outputs (stream and plain)."""
    monkeypatch.setenv(notebook.RESULTS_ENV, str(results))  # the kernel inherits the environment
    if grid:
        monkeypatch.setenv("TORTOISE_GRID", grid)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the figures it writes: ours to remove
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    return [str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for c in code for o in c.outputs]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes_on_canned_results(path, results, monkeypatch, tmp_path):
    meta = nbformat.read(path, as_version=4).metadata.get("tortoiselab") or {}
    (grid,) = {d.get("test_grid", "") for d in meta.get("experiments") or [meta]}  # "" for the quickstart
    text = "\n".join(_execute(path, results, grid, monkeypatch, tmp_path))
    assert "Traceback" not in text


def test_the_tortoise_reduced_runs_are_of_the_reduced_grid():
    """The canned tortoise@reduced runs are runs of the file's reduced grid
    now (else the notebook would read none of them and pass on nothing)."""
    folder = CANNED[1] / "tortoise@reduced"
    have = {p.parent.name for p in folder.glob("*/run.json")}
    assert len(have) == 4 and have <= studies.current_run_ids(REPO / "experiments" / "tortoise.yaml", "reduced")


def test_tortoise_notebook_compares_each_setup_on_its_own(results, monkeypatch, tmp_path):
    """The reduced grid's groups that stopped notebook 01: the CDN set-up and
    the one-server variant of one path and load are two comparisons, each
    with its pair, and a comparison without a pair is said, not ranked."""
    path = REPO / "notebooks" / "01_tortoise.ipynb"
    text = "\n".join(_execute(path, results, "reduced", monkeypatch, tmp_path))
    assert "4 runs, 4 completed" in text
    for setup in ("cdn", "one server"):
        assert f"india-desktop-2017 (clean, {setup}), base.html (p90 content_download_ms against htcp, 1 pairs)" \
            in text, text[:3000]


def test_your_site_notebook_compares_the_arms_on_the_imported_site(results, monkeypatch, tmp_path):
    """notebooks/05_your_site.ipynb on the canned runs of an imported site:
    the site and the import id each run's record carries, p90 PLT per
    algorithm with its bootstrap interval, and Hybla against CUBIC over the
    three pairs."""
    folder = CANNED[1] / "your-site"
    recs = [json.loads(p.read_text()) for p in sorted(folder.glob("*/run.json"))]
    made = expand(load(REPO / "tests" / "data" / "notebooks" / "your-site.yaml"))
    assert len(recs) == 6 and {r["run_id"] for r in recs} == {r.run_id for r in made}
    (sid,) = {r["meta"]["seeds"]["imported_site"] for r in recs}
    text = "\n".join(_execute(REPO / "notebooks" / "05_your_site.ipynb", results, "", monkeypatch, tmp_path))
    assert "6 runs, 6 completed; imported site(s) ['shop']; algorithms ['cubic', 'hybla'], control cubic, " \
           "paired by seed" in text, text[:2000]
    assert sid[:16] in text
    for cc in ("cubic", "hybla"):
        assert f"IW 10, {cc}: p90 PLT " in text and "over 3 runs" in text
    assert "3 pairs by seed" in text


def test_your_site_notebook_without_results_says_how_to_make_them(tmp_path, monkeypatch):
    (tmp_path / "empty").mkdir()
    text = "\n".join(_execute(REPO / "notebooks" / "05_your_site.ipynb", tmp_path / "empty", "", monkeypatch,
                              tmp_path))
    assert "no results for experiment 'your-site'" in text
    assert "tortoise site import tests/data/har/multi-origin.har --name shop" in text
    assert "tortoise run experiments/your-site.yaml" in text
