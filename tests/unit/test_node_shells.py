"""Mininet's node shells start under the default open-file limit
(guest/net.shells_under_default_fd_limit, docs/kernel-7.3.md): `mnexec -c`
closes every descriptor below the soft limit, one system call each."""

from __future__ import annotations

import resource
import subprocess

from tortoiselab.guest import net


def test_shells_start_under_the_default_limit_and_the_lab_keeps_its_own():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    raised = min(hard, 16384)  # what Mininet's fixLimits asks for, where the hard limit allows it
    resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
    try:
        with net.shells_under_default_fd_limit():
            # a child started here (a node's shell) inherits the lower limit
            child = subprocess.run(["sh", "-c", "ulimit -n"], capture_output=True, text=True, check=True)
            assert int(child.stdout) == min(raised, net.SHELL_NOFILE)
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (raised, hard)  # the lab's processes: Mininet's
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        with net.shells_under_default_fd_limit():  # never raised
            assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == 256
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (256, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_limit_comes_back_after_an_error():
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        with net.shells_under_default_fd_limit():
            raise RuntimeError("a node failed to start")
    except RuntimeError:
        pass
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == before
