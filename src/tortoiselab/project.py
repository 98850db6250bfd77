"""Where the project's files are: the package and the repository around it
(an editable install). The one place that computes them; and `moved`, for
a folder seen at another path (a lab guest's mounts)."""

from __future__ import annotations

from pathlib import Path

PKG_DIR = Path(__file__).resolve().parent
REPO_DIR = PKG_DIR.parent.parent


def moved(obj, moves: list[tuple[str, str]]):
    """obj (JSON-like: dicts, lists, strings) with every string that is a
    folder of `moves` or lies under it rewritten to the same place under
    that folder's new path; the longest folder first, so a folder inside
    another moves with its own entry."""
    order = sorted(((a.rstrip("/"), b.rstrip("/")) for a, b in moves), key=lambda m: -len(m[0]))

    def one(v):
        if isinstance(v, dict):
            return {k: one(x) for k, x in v.items()}
        if isinstance(v, list):
            return [one(x) for x in v]
        if isinstance(v, str):
            for a, b in order:
                if v == a or v.startswith(a + "/"):
                    return b + v[len(a):]
        return v
    return one(obj)
