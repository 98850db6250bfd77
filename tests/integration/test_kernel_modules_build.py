"""Our modules build out of tree against a stock Debian 6.12 kernel's headers
(the Vagrant VM's fast path), with no warnings."""

import glob
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import REPO


def _debian_headers() -> str | None:
    found = sorted(glob.glob("/usr/src/linux-headers-6.12.*-amd64"))
    return found[-1] if found else None


@pytest.mark.skipif(_debian_headers() is None, reason="Debian's linux-headers-6.12.*-amd64 not installed")
def test_modules_build_against_debian_headers():
    kdir = _debian_headers()
    build = Path(tempfile.mkdtemp(prefix="tortoise-kmod-"))
    try:
        p = subprocess.run(["make", "-C", str(REPO / "kernel"), "modules", f"KDIR={kdir}", f"BUILD={build}"],
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "warning" not in (p.stdout + p.stderr).lower()
        assert sorted(x.name for x in build.glob("*.ko")) == ["tcp_cubic_plus.ko", "tcp_reno_beta.ko"]
        info = subprocess.run(["modinfo", str(build / "tcp_cubic_plus.ko")], capture_output=True, text=True).stdout
        assert "vermagic:       6.12." in info and "parm:           n:" in info
    finally:
        shutil.rmtree(build, ignore_errors=True)
