"""Every notebook in notebooks/ executed top to bottom (nbclient) against
the small dataset its metadata declares (notebooks/README.md): each declared
test experiment is run once per session into one temporary results folder
(uml backend, virtual clock) and the kernel gets TORTOISE_RESULTS pointing
there. The quickstart's dataset is also where the floor is checked: loss-free
runs on the virtual clock have measured PLT / floor >= 1."""

import os
import secrets
import signal
import socket
import subprocess
import time
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from nbclient import NotebookClient

from tests.conftest import REPO, TORTOISE
from tests.unit.test_notebooks import NOTEBOOKS, declared
from tortoiselab.spec import experiment
from tortoiselab import jupyter_api, notebook

pytestmark = pytest.mark.lab


@pytest.fixture(scope="session")
def notebook_results(tmp_path_factory, lab_kernel):
    """A function: test experiment file (and the `tortoise site import`
    arguments of the site its runs load, if any) -> the results folder
    holding its run (made once per file and session)."""
    results = tmp_path_factory.mktemp("notebook-results")
    sites = tmp_path_factory.mktemp("notebook-sites")
    made: dict[str, str] = {}  # experiment name -> the file that made it

    def make(test_experiment: str, site_import: list[str] | None = None) -> Path:
        f = REPO / test_experiment
        name = experiment.load(f).name
        if made.get(name) == test_experiment:
            return results
        assert name not in made, f"{test_experiment} and {made.get(name)} both make experiment {name!r}"
        if site_import:  # an imported site (docs/your-own-site.md): importing it again changes nothing
            p = subprocess.run([*TORTOISE, "site", "import", *site_import, "--sites", str(sites)],
                               capture_output=True, text=True, timeout=300, cwd=REPO)
            assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        p = subprocess.run([*TORTOISE, "run", str(f), "--results", str(results), "--backend", "uml",
                            "--clock", "virtual", "--sites", str(sites)], capture_output=True, text=True,
                           timeout=900, cwd=REPO)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        made[name] = test_experiment
        return results

    return make


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes_on_its_test_dataset(path, notebook_results, study_results, monkeypatch, tmp_path):
    nb = nbformat.read(path, as_version=4)
    decl = declared(nb)
    study_ids = (nb.metadata.get("tortoiselab") or {}).get("studies")
    if study_ids:  # a study notebook: the studies' ci folders (conftest.study_results), read as its test_grid
        folders = {study_results(s) for s in study_ids}
        (grid,) = {d["test_grid"] for d in decl}
        monkeypatch.setenv("TORTOISE_GRID", grid)
    else:
        folders = {notebook_results(d["test_experiment"], d.get("site_import")) for d in decl}
    (results,) = folders
    monkeypatch.setenv(notebook.RESULTS_ENV, str(results))  # the kernel inherits the environment
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # figures a notebook writes to a temporary folder: ours to remove
    before = path.read_bytes()
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    assert path.read_bytes() == before  # executed in memory; the committed file stays stripped
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code)
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    src = "\n".join(c.source for c in code)
    if "sns." in src or "plt." in src:  # what draws, shows a figure
        assert any("image/png" in o.get("data", {}) for c in code for o in c.outputs)
    if path.name == "00_quickstart.ipynb":
        text = "\n".join(str(o.get("data", {}).get("text/plain", "")) + str(o.get("text", ""))
                         for c in code for o in c.outputs)
        for word in ("cubic", "hybla", "p90_low", "mann-whitney"):
            assert word in text, word


def test_loss_free_runs_are_above_their_floor(notebook_results):
    """Every run of the quickstart's dataset (0 % loss, virtual clock) has a
    floor in its record and its table row, and measured / floor >= 1."""
    results = notebook_results("tests/data/notebooks/quick.yaml")
    df = pd.read_parquet(results / "quick" / "runs.parquet")
    assert len(df) == 2 and df["ok"].all() and (df["clock"] == "virtual").all()
    assert df["floor_ms"].notna().all() and df["plt_over_floor"].notna().all()
    ratio = df["plt_ms"] / df["floor_ms"]
    print("\n" + df[["server.cc", "plt_ms", "floor_ms", "plt_over_floor"]].to_string())
    assert (ratio >= 1).all(), ratio
    assert (df["plt_over_floor"] - ratio).abs().max() < 1e-3


# --- the same notebook through a running JupyterLab (make notebook) ----------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_jupyterlab_serves_the_notebooks_and_runs_one(notebook_results, tmp_path):
    """`make notebook`'s server (scripts/notebook.sh): its page answers, and
    the quickstart runs top to bottom in a kernel it started, driven through
    its REST API and the kernel's websocket as the browser does."""
    path = REPO / "notebooks" / "00_quickstart.ipynb"
    results = notebook_results(declared(nbformat.read(path, as_version=4))[0]["test_experiment"])
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, notebook.RESULTS_ENV: str(results), "TMPDIR": str(tmp_path),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"), "NOTEBOOK_PORT": str(port)}
    proc = subprocess.Popen(["bash", str(REPO / "scripts" / "notebook.sh"), f"--IdentityProvider.token={token}"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                status, page = jupyter_api.get(f"{base}/lab", token)
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read().decode()[-3000:]
                time.sleep(0.5)
        assert status == 200 and b"JupyterLab" in page
        listing = jupyter_api.api("GET", f"{base}/api/contents", token)
        assert "00_quickstart.ipynb" in {c["name"] for c in listing["content"]}
        nb = jupyter_api.api("GET", f"{base}/api/contents/00_quickstart.ipynb", token)["content"]
        with jupyter_api.kernel(base, token, path="00_quickstart.ipynb") as k:
            outputs = [k.run("".join(c["source"]) if isinstance(c["source"], list) else c["source"], 300)
                       for c in nb["cells"] if c["cell_type"] == "code"]
        flat = [o for out in outputs for o in out]
        assert not [o for o in flat if o["output_type"] == "error"], [o for o in flat if o["output_type"] == "error"]
        text = "\n".join(str(o.get("data", {}).get("text/plain", "")) + str(o.get("text", "")) for o in flat)
        for word in ("cubic", "hybla", "p90_low"):
            assert word in text, word
        assert any("image/png" in o.get("data", {}) for o in flat)  # the figure, sent to the browser
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server we started, and the kernels it started
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
