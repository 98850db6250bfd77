"""A lab's work folder, used again: before a boot, what an earlier boot of
the lab left there is removed, so the boot starts as in a new folder.

The lab's own files in its work folder (LAB_FILES) are those host/backends.py
writes (the request, the console, the UML process's records) and those the
guest writes (guest/__main__.py: the wall-clock readings of guest/clock.py
in `.wall/`, boot.json, result.json, the command log). Left in place they
break the next boot: the guest's `.wall` cannot be made again
(FileExistsError, the bug of issue 37), and a result.json of the earlier
boot would be read as this boot's if the guest wrote none. Everything else
in the folder (a command's own files: experiment files, `results/`) is the
caller's and stays.

A work folder may be a copied or edited results folder (docs/faults.md): no
link in it is followed. A link at one of the lab's names is refused with its
name and the fix, never removed; the rest goes through host/safefs.py. A
folder whose lab still runs (its uml.proc.json names a live lab guard whose
home is this folder, host/procid.py) is refused: two labs would share it.
"""

from __future__ import annotations

import os
from pathlib import Path

from tortoiselab.host import procid, safefs
from tortoiselab.host.errors import RunnerError

# what a boot writes into its work folder (host/backends.py; the guest: guest/__main__.py,
# guest/tasks/__init__.py, guest/tasks/command.py, guest/record.write_json_atomic's temporaries)
LAB_FILES = (
    "request.json", "ro_paths", "console.log", "console-seccomp-refused.log", "native.log", "uml_userspace",
    "uml.pgid", "uml.proc.json", ".uml",
    ".wall", "boot.json", ".boot.json.tmp", "result.json", ".result.json.tmp", "commands.log", "command.log",
)


class WorkFolderError(RunnerError):
    """A work folder a boot cannot use; the message names it and the fix."""


def live_lab(work: Path) -> int | None:
    """The process group of a lab that still runs in work (its uml.proc.json,
    read without following a link, names a process that is still that
    record's and is a lab guard whose home is work: host/procid.py); None
    when there is none or the record proves nothing."""
    rec = work / "uml.proc.json"
    try:
        recorded = procid.loads(safefs.read_text_regular(rec, work))
    except (OSError, *safefs.REFUSED):
        return None
    ours, _why = procid.is_ours(recorded, group=True)
    if not ours:
        return None
    pid = recorded["pid"]  # type: ignore[index]
    return pid if procid.is_lab_in(pid, work)[0] else None


def linked_lab_files(work: Path) -> list[Path]:
    """The lab's names in work that are links (none is followed)."""
    return [work / n for n in LAB_FILES if os.path.islink(work / n)]


def prepare(work: Path) -> list[str]:
    """Make work ready for a boot of the lab: create it if missing, else
    remove what an earlier boot left (LAB_FILES), never through a link.
    Returns the names removed. Raises WorkFolderError, naming the folder and
    the fix, when a lab still runs there or one of the lab's names is a
    link."""
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    pid = live_lab(work)
    if pid is not None:
        raise WorkFolderError(f"the work folder {work} is in use: a lab started there still runs (process group "
                              f"{pid}); wait for it to end, or give another work folder")
    links = linked_lab_files(work)
    if links:
        raise WorkFolderError(f"the work folder {work} holds {', '.join(safefs.describe(p) for p in links)} where the "
                              "lab writes its own files, and nothing in a work folder follows links "
                              f"(docs/faults.md); remove {'it' if len(links) == 1 else 'them'} "
                              f"(rm {' '.join(str(p) for p in links)}) or give another work folder")
    try:
        return [n for n in LAB_FILES if safefs.rmtree(work / n, work, doing=f"work folder {work}")]
    except safefs.LinkRefused as exc:  # a link made since the check above
        raise WorkFolderError(str(exc)) from None
