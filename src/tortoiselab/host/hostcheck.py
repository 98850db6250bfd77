"""Whether this host can run labs natively (root, netem and the
algorithms in the host kernel); the uml backend needs none of it.

    python -m tortoiselab.host.hostcheck native-ready

exits 0 when the native backend runs every experiment here (the Makefile
then builds no UML lab kernel), else 1, saying why.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

from tortoiselab.host.labkernel import CONFIG_TO_ALGO, lab_algorithms


def host_kernel_config() -> str | None:
    for p in (Path("/proc/config.gz"), Path(f"/boot/config-{os.uname().release}")):
        try:
            return gzip.decompress(p.read_bytes()).decode() if p.suffix == ".gz" else p.read_text(encoding="utf-8")
        except OSError:
            continue
    return None


def host_can_emulate(algorithms: list[str]) -> tuple[bool, str]:
    """Native needs root, netem in the host kernel and every requested
    algorithm available (built in, or a module present to load)."""
    if os.geteuid() != 0:
        return False, "not root"
    cfg = host_kernel_config()
    if cfg is None:
        return False, "host kernel config not readable (no /proc/config.gz or /boot/config-*)"
    netem = [ln for ln in cfg.splitlines() if ln.startswith("CONFIG_NET_SCH_NETEM=")]
    if not netem:
        return False, "host kernel has no netem (CONFIG_NET_SCH_NETEM)"
    if netem[0].endswith("=m") and not Path(f"/lib/modules/{os.uname().release}").is_dir():
        return False, "netem is a module but the host has no modules for its kernel"
    have = set(Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text(encoding="utf-8").split())
    for line in cfg.splitlines():
        if line.startswith("CONFIG_TCP_CONG_") and line.endswith("=m"):
            sym = line[len("CONFIG_TCP_CONG_"):].split("=")[0]
            if sym in CONFIG_TO_ALGO and Path(f"/lib/modules/{os.uname().release}").is_dir():
                have.add(CONFIG_TO_ALGO[sym])
    missing = [a for a in algorithms if a not in have and not installed_module(f"tcp_{a}")]
    if missing:
        return False, f"host kernel lacks {', '.join(missing)}"
    return True, "host kernel has netem and the algorithms"



def native_ready() -> tuple[bool, str]:
    """Whether `auto` runs every experiment on the native backend here (root,
    netem, every algorithm the lab offers): then `make experiment` needs no
    UML lab kernel, and building one would only cost time (a compile is ten
    times slower in a VM under software emulation, docs/vm.md)."""
    return host_can_emulate(lab_algorithms())


def installed_module(name: str) -> bool:
    """A module the host can load though its config does not name it, e.g.
    our congestion control modules that DKMS built for the VM's kernel."""
    try:
        p = subprocess.run(["modinfo", "-F", "filename", name], capture_output=True, timeout=10,
                           encoding="utf-8", errors="replace")
    except (OSError, subprocess.TimeoutExpired):
        return False
    return p.returncode == 0 and bool(p.stdout.strip())



def main(argv: list[str]) -> int:
    """`python -m tortoiselab.host.hostcheck native-ready`: exit 0 and say why
    when the native backend runs everything here, else 1 (the Makefile then
    builds the UML lab kernel)."""
    if argv != ["native-ready"]:
        print("usage: python -m tortoiselab.host.hostcheck native-ready", file=sys.stderr)
        return 2
    ok, why = native_ready()
    print(f"native backend {'ready' if ok else 'not usable'}: {why}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
