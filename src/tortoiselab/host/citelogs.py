"""A failed run's error as it is stored: it cites only files the run's
folder holds (issue 35: an error citing a console.log in a boot folder
deleted afterwards sent the reader nowhere). docs/faults.md.
"""

from __future__ import annotations

import os
from pathlib import Path

from tortoiselab.host.store import files

LAB_LOGS = ("console.log", "native.log", "commands.log")  # what a lab's error may cite (host/backends.py)


def cite_stored(why: str, boot_dir: Path, tmp: Path, run_dir: Path) -> str:
    """A failed run's error citing only files it is stored with: a log of the
    boot folder (removed once the batch ends) that the error names is copied
    into the run's folder (tmp, renamed to run_dir) and named there; any
    other path in the boot folder is no longer cited."""
    work = boot_dir / "lab"
    for name in LAB_LOGS:
        cited = [str(p / name) for p in {work, work.resolve()} if str(p / name) in why]
        if cited and (work / name).is_file() and not os.path.islink(work / name):
            files.copy_in(tmp.parent, work / name, tmp / name, doing=f"keeping {name} with run {run_dir.name}")
        for c in cited:
            why = why.replace(c, str(run_dir / name) if (tmp / name).is_file() else f"{name} (not kept)")
    for b in sorted({str(boot_dir), str(boot_dir.resolve())}, key=len, reverse=True):
        why = why.replace(b, "(the lab's work folder, removed)")
    return why
