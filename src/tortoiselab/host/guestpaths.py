"""Where a uml lab guest sees the host's folders of a run, and the paths
of its request and result moved between the two (guest/init.sh mounts
them; docs/determinism.md: a run must not depend on where they lie on the
host, since every path lookup in the guest costs virtual time)."""

from __future__ import annotations

from pathlib import Path

from tortoiselab.project import moved

# the run's work folder: one path in every boot, whatever the host's; result
# paths map back
GUEST_WORK = "/run/tortoise-work"
# the request's read-only folders (ro_paths: the results folder's site and
# PKI, trace folders), the i-th at GUEST_RO/i
GUEST_RO = "/run/tortoise-ro"


def guest_request(req: dict, ro: list[str]) -> dict:
    """A request (its JSON dump) as the guest reads it: every path under the
    i-th of the host folders ro moved to GUEST_RO/i."""
    return moved(req, [(p, f"{GUEST_RO}/{i}") for i, p in enumerate(ro)])


def host_paths(obj, work: Path, backend: str):
    """A uml guest's result with every string under its work folder
    (GUEST_WORK) rewritten to the same place under the host's work folder.
    A native result is the host's already and comes back as it is (a native
    run whose work folder lies under GUEST_WORK, as inside a lab guest,
    would otherwise be sent to a folder that does not exist)."""
    return moved(obj, [(GUEST_WORK, str(work))]) if backend == "uml" else obj
