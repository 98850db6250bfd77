"""The UML lab kernel this host runs labs on: where it is, our modules
built for it, and the congestion control algorithms it offers
(kernel/build-uml.sh builds and caches both; docs/architecture.md)."""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

from tortoiselab.host.errors import RunnerError
from tortoiselab.project import REPO_DIR
from tortoiselab.spec.algorithms import STOCK_ALGORITHMS


class LabError(RuntimeError):
    """The lab could not run a task; the message says what to do."""


# kernel config symbol -> registered name (net/ipv4/Kconfig)
CONFIG_TO_ALGO = {
    "BIC": "bic", "CUBIC": "cubic", "WESTWOOD": "westwood", "HTCP": "htcp", "HSTCP": "highspeed",
    "HYBLA": "hybla", "VEGAS": "vegas", "NV": "nv", "SCALABLE": "scalable", "LP": "lp",
    "VENO": "veno", "YEAH": "yeah", "ILLINOIS": "illinois", "DCTCP": "dctcp", "CDG": "cdg",
    "BBR": "bbr",
}



CACHE_ENV = "TORTOISE_CACHE"  # the user's cache, else $XDG_CACHE_HOME/tortoiselab, else ~/.cache/tortoiselab


def user_cache() -> Path:
    """The user's cache (the lab kernel's, analysed captures'), found as
    kernel/build-uml.sh finds it: $TORTOISE_CACHE, else
    $XDG_CACHE_HOME/tortoiselab, else ~/.cache/tortoiselab, where ~ is
    $HOME or, without HOME (a cron job, `env -i`), the user's home in the
    password database. Neither: a RunnerError naming the variables to set."""
    env = os.environ
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV])
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]) / "tortoiselab"
    try:
        home = env.get("HOME") or pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        home = ""
    if not home:
        raise RunnerError(f"no cache folder: HOME is unset and user {os.getuid()} has no home in the password "
                          f"database; set {CACHE_ENV} (or XDG_CACHE_HOME, or HOME) to a folder of yours")
    return Path(home) / ".cache" / "tortoiselab"


def _build_script(option: str) -> Path:
    """kernel/build-uml.sh's answer to --path or --modules-path, its cache
    given as user_cache() (so that it runs without HOME too)."""
    try:
        out = subprocess.run(["bash", str(REPO_DIR / "kernel" / "build-uml.sh"), option], capture_output=True,
                             check=True, env={**os.environ, CACHE_ENV: str(user_cache())}, encoding="utf-8",
                             errors="replace")
    except subprocess.CalledProcessError as exc:
        raise RunnerError(f"kernel/build-uml.sh {option} failed (exit {exc.returncode}): "
                          f"{exc.stderr.strip()[-500:]}") from None
    return Path(out.stdout.strip())


def kernel_path() -> Path:
    """The UML lab kernel: $TORTOISE_KERNEL, else the cache kernel/build-uml.sh fills."""
    env = os.environ.get("TORTOISE_KERNEL")
    if env:
        return Path(env)
    return _build_script("--path")


def modules_path(kernel: Path | None = None) -> Path | None:
    """Our modules built for the lab kernel: $TORTOISE_MODULES; else, for the
    cache's kernel, the folder kernel/build-uml.sh names for the current
    module sources; for a kernel elsewhere ($TORTOISE_KERNEL), a modules-*
    folder beside it. None if there is none."""
    env = os.environ.get("TORTOISE_MODULES")
    if env:
        return Path(env)
    p = _build_script("--modules-path")
    if kernel is None or kernel.parent == p.parent:
        return p if (p / "BUILD_OK").exists() else None
    cands = sorted(kernel.parent.glob("modules-*/BUILD_OK"), key=lambda f: f.stat().st_mtime)
    return cands[-1].parent if cands else None



def kernel_algorithms(kernel: Path) -> list[str]:
    """Algorithms a built lab kernel has, read from the config saved beside it."""
    cfg = kernel.parent / "config"
    algos = ["reno"]
    if cfg.exists():
        for line in cfg.read_text(encoding="utf-8").splitlines():
            if line.startswith("CONFIG_TCP_CONG_") and line.endswith(("=y", "=m")):
                sym = line[len("CONFIG_TCP_CONG_"):].split("=")[0]
                if sym in CONFIG_TO_ALGO:
                    algos.append(CONFIG_TO_ALGO[sym])
    else:
        algos = list(STOCK_ALGORITHMS)
    mods = modules_path(kernel)
    if mods is not None:
        algos += [ko.stem[len("tcp_"):] for ko in sorted(mods.glob("tcp_*.ko"))]
    return algos



def lab_algorithms() -> list[str]:
    """Every algorithm the lab offers: the stock ones and ours (kernel/modules/)."""
    ours = sorted(c.stem[len("tcp_"):] for c in (REPO_DIR / "kernel" / "modules").glob("tcp_*.c"))
    return [*STOCK_ALGORITHMS, *ours]

