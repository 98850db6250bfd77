"""A results folder turned against the machine (docs/faults.md), with a real
lab: `tortoise run` into a folder whose stale work folder names a foreign
process group (as a folder copied out of another VM called like this one
would) kills nothing, does the run and leaves no work folder."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

import pytest

from tests.conftest import TORTOISE, experiment_yaml, group_alive, write_yaml
from tortoiselab.host import store
from tortoiselab.host.locks import claim
from tortoiselab.spec.experiment import expand, load

pytestmark = pytest.mark.lab

EXP = experiment_yaml("tiny")


def test_run_spares_a_foreign_group_a_stale_work_folder_names(tmp_path, lab_kernel):
    f = write_yaml(tmp_path, EXP, "tiny.yaml")
    exp_dir = tmp_path / "res" / "tiny"
    run_id = expand(load(f))[0].run_id
    foreign = subprocess.Popen(["sleep", "600"], start_new_session=True)  # ended by its pid below
    try:
        work = exp_dir / f".{run_id}.tmp-0000001-00001-boot" / "lab"
        work.mkdir(parents=True)
        (work / "uml.pgid").write_text(str(foreign.pid))
        with claim(exp_dir, run_id) as fh:  # "this" host: every Vagrant VM is called vm
            fh.write(f"start {socket.gethostname()} 4242 2026-01-01T00:00:00+00:00\n")
        p = subprocess.run([*TORTOISE, "run", str(f), "--results", str(exp_dir.parent), "--backend", "uml",
                            "--clock", "virtual"], capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        time.sleep(0.2)
        assert foreign.poll() is None and group_alive(foreign.pid), "a foreign process group was signalled"
        assert not list(exp_dir.glob(".*.tmp-*")) and store.completed(exp_dir, run_id)
    finally:
        if foreign.poll() is None:
            os.killpg(foreign.pid, signal.SIGKILL)
        foreign.wait()
