"""What a run records about the software around it: versions of the tools
the lab runs (the guest uses the host's binaries) and the project's git
revision."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

from pathlib import Path

from tortoiselab.host import safefs
from tortoiselab.host.umlcmd import VIRTUAL_EPOCH_S
from tortoiselab.project import REPO_DIR


# what tool_versions asks: name -> argv (a tool's version on the first line of its output)
IMPORTED_SITE = "imported_site"  # the seeds' key of an imported site's id (run_seeds)

VERSION_PROBES = {
    "apache2": ["/usr/sbin/apache2", "-v"],
    "tcpdump": ["tcpdump", "--version"],
    "h2load": ["h2load", "--version"],
    "nghttp": ["nghttp", "--version"],
    "ovs": ["ovs-vswitchd", "--version"],
    "tc": ["tc", "-V"],
}
GIT_PROBES = {"tortoiselab_git": ["git", "rev-parse", "HEAD"],
              "tortoiselab_dirty": ["git", "status", "--porcelain", "--untracked-files=no"]}


def outputs(argvs: dict[str, list[str]], cwd: Path | None = None, timeout_s: float = 10) -> dict[str, tuple | None]:
    """Each command's (stdout, stderr), the commands run side by side (one
    after the other they cost ~4 ms each, docs/speed.md); None for one that
    could not start or did not end within timeout_s (then killed)."""
    procs: dict[str, subprocess.Popen | None] = {}
    for name, argv in argvs.items():
        try:
            procs[name] = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                           stdin=subprocess.DEVNULL, cwd=cwd, encoding="utf-8", errors="replace")
        except OSError:
            procs[name] = None
    out: dict[str, tuple | None] = {}
    for name, p in procs.items():
        if p is None:
            out[name] = None
            continue
        try:
            out[name] = p.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            out[name] = None
    return out


def first_line(output: tuple | None) -> str:
    """A version probe's first line of output (stdout, else stderr), or
    "not found"."""
    try:
        return (output[0] or output[1]).strip().splitlines()[0] if output else "not found"
    except IndexError:
        return "not found"


def tool_versions() -> dict:
    """Versions of what runs in the lab (the guest uses the host's binaries)
    and the project's git revision."""
    tools, git = outputs(VERSION_PROBES), outputs(GIT_PROBES, cwd=REPO_DIR)
    return {
        "python": sys.version.split()[0],
        **{name: first_line(tools[name]) for name in VERSION_PROBES},
        "tortoiselab_git": (git["tortoiselab_git"] or ("",))[0].strip(),
        "tortoiselab_dirty": bool((git["tortoiselab_dirty"] or ("",))[0].strip()),
    }


def code_revision() -> str:
    """The project's git revision as a report names it: the short hash, with
    "+ uncommitted changes" when the work tree differs from it ("unknown"
    outside a git checkout)."""
    git = outputs(GIT_PROBES, cwd=REPO_DIR)
    rev = (git["tortoiselab_git"] or ("",))[0].strip()
    dirty = bool((git["tortoiselab_dirty"] or ("",))[0].strip())
    return (rev[:12] + (" + uncommitted changes" if dirty else "")) if rev else "unknown"


def run_seeds(run_seed: int, client_seed: int, site: Path, pki_seed_name: str, task_seeds: dict,
              clock: str, imported: Path | None = None) -> dict:
    """Every seed a run used: the run's own, the loader's (cache-hit choices),
    netem's per direction (derived from the run's seed in the guest), the
    page generator's (from the site's manifest), the PKI's seed name, on
    the virtual clock the guest's wall-clock start, and for an imported
    site (client.site, staged at `imported`) what decided its pages: the
    import's id, the SHA-256 of its site.json (host/sitecheck.py compares a
    folder's staged copy with it; docs/your-own-site.md)."""
    try:
        site_seed = json.loads(safefs.read_bytes_regular(Path(site) / "manifest.json")).get("seed")  # host/safefs.py
    except (OSError, ValueError):
        site_seed = None
    out = {"run": run_seed, "client": client_seed, "site": site_seed, "pki": pki_seed_name,
           **{k: v for k, v in sorted(task_seeds.items())}}
    if clock == "virtual":
        out["virtual_epoch_s"] = VIRTUAL_EPOCH_S
    if imported is not None:
        out[IMPORTED_SITE] = hashlib.sha256(safefs.read_bytes_regular(Path(imported) / "site.json",
                                                                      max_bytes=64 << 20)).hexdigest()
    return out


# --- fingerprints ------------------------------------------------------------
