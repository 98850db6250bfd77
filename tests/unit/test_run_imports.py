"""`tortoise run` imports only what its path uses: scipy.stats (about 0.8 s
to import, docs/speed.md) is needed by the fidelity checks of probes and
by the studies, never by a run's record, so the runner and the CLI's run
command must not import it."""

from __future__ import annotations

import json
import subprocess
import sys

from tortoiselab.project import PKG_DIR

# what cli.cmd_run imports before it starts the first lab
RUN_PATH = ("tortoiselab.cli", "tortoiselab.host.runner", "tortoiselab.host.runsummary", "tortoiselab.host.slurm",
            "tortoiselab.host.shards", "tortoiselab.host.store", "tortoiselab.host.columns")


def test_the_run_path_does_not_import_scipy():
    code = ("import importlib, sys\n"
            f"for m in {RUN_PATH!r}:\n"
            "    importlib.import_module(m)\n"
            "print(sorted(m for m in sys.modules if m == 'scipy' or m.startswith('scipy.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(PKG_DIR.parent), "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "[]", f"imported on the run path: {out.stdout.strip()[:300]}"


def test_the_lazy_scipy_functions_still_work():
    from tortoiselab.analysis import burstloss, fidelity

    assert fidelity.loss_check("down", 1.0, 1000, 990).ok
    lo, hi = burstloss.wilson(10, 1000)
    assert 0 < lo < 0.01 < hi < 0.02
    assert burstloss.burst_interval([1, 2, 3])[0] < 2 < burstloss.burst_interval([1, 2, 3])[1]


def test_the_lab_task_imports_neither_the_experiment_models_nor_setuptools():
    """The guest's lab task (python -m tortoiselab.guest at every boot) reads
    each imported module through hostfs: it needs the request models
    (spec/requests.py), not the experiment's (spec/experiment.py, with the
    population and maps models), and with the environment guest/init.sh
    gives it where the interpreter's standard library has distutils,
    Mininet's distutils.version comes from there, not through setuptools'
    shim (setuptools, pkg_resources)."""
    code = ("import json, sys, tortoiselab.guest.tasks\n"
            "bad = ('tortoiselab.spec.experiment', 'tortoiselab.spec.population', 'setuptools', 'pkg_resources')\n"
            "print(json.dumps(sorted(m for m in bad if m in sys.modules)))")
    init = (PKG_DIR / "guest" / "init.sh").read_text()
    assert "export SETUPTOOLS_USE_DISTUTILS=stdlib" in init
    env = {"PYTHONPATH": str(PKG_DIR.parent), "PATH": "/usr/bin:/bin", "SETUPTOOLS_USE_DISTUTILS": "stdlib"}
    has_distutils = subprocess.run([sys.executable, "-S", "-c", "import distutils.version"], env=env,
                                   capture_output=True).returncode == 0
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    imported = json.loads(out.stdout)
    if not has_distutils:  # Python 3.12+: init.sh leaves setuptools' shim on
        imported = [m for m in imported if m not in ("setuptools", "pkg_resources")]
    assert imported == [], f"the lab task imports {imported}"
