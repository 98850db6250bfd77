"""What a run records about the software around it: versions of the tools
the lab runs (the guest uses the host's binaries) and the project's git
revision."""

from __future__ import annotations

import json
import subprocess
import sys

from pathlib import Path

from tortoiselab.host import safefs
from tortoiselab.host.backends import VIRTUAL_EPOCH_S
from tortoiselab.project import REPO_DIR


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, timeout=10,
                              cwd=REPO_DIR).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def tool_versions() -> dict:
    """Versions of what runs in the lab (the guest uses the host's binaries)."""
    def first(argv: list[str]) -> str:
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
            return (p.stdout or p.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "not found"

    return {
        "python": sys.version.split()[0],
        "apache2": first(["/usr/sbin/apache2", "-v"]),
        "tcpdump": first(["tcpdump", "--version"]),
        "h2load": first(["h2load", "--version"]),
        "nghttp": first(["nghttp", "--version"]),
        "ovs": first(["ovs-vswitchd", "--version"]),
        "tc": first(["tc", "-V"]),
        "tortoiselab_git": _git("rev-parse", "HEAD"),
        "tortoiselab_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
    }


def run_seeds(run_seed: int, client_seed: int, site: Path, pki_seed_name: str, task_seeds: dict,
              clock: str) -> dict:
    """Every seed a run used: the run's own, the loader's (cache-hit choices),
    netem's per direction (derived from the run's seed in the guest), the
    page generator's (from the site's manifest), the PKI's seed name, and on
    the virtual clock the guest's wall-clock start."""
    try:
        site_seed = json.loads(safefs.read_bytes_regular(Path(site) / "manifest.json")).get("seed")  # host/safefs.py
    except (OSError, ValueError):
        site_seed = None
    out = {"run": run_seed, "client": client_seed, "site": site_seed, "pki": pki_seed_name,
           **{k: v for k, v in sorted(task_seeds.items())}}
    if clock == "virtual":
        out["virtual_epoch_s"] = VIRTUAL_EPOCH_S
    return out


# --- fingerprints ------------------------------------------------------------
