import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TORTOISE = [sys.executable, "-m", "tortoiselab.cli"]


def host_state() -> dict:
    """What a lab run must leave as it found it on the host."""
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names = sorted(line.split(":")[1].strip().split("@")[0] for line in links.splitlines() if ":" in line)
    mounts = sorted(line.split()[1] for line in Path("/proc/mounts").read_text().splitlines())
    return {"netns": netns.split(), "links": names, "mounts": mounts}


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


@pytest.fixture(scope="session")
def lab_kernel() -> Path:
    out = subprocess.run(["bash", str(REPO / "kernel" / "build-uml.sh"), "--path"], capture_output=True,
                         text=True, check=True).stdout.strip()
    k = Path(os.environ.get("TORTOISE_KERNEL", out))
    if not k.exists():
        pytest.fail(f"the UML lab kernel is not built ({k}): run 'make kernel' (make test does)")
    return k


def write_yaml(folder: Path, text: str, name: str = "e.yaml") -> Path:
    """An experiment file in folder, from an indented literal."""
    f = folder / name
    f.write_text(textwrap.dedent(text))
    return f
