"""A sweep's points as plain dicts (spec/experiment.py expands them):
setting a dotted value, the canonical JSON a run id is hashed from, and
naming the sweep value behind an error. Pure functions of dicts."""

from __future__ import annotations

import json
from typing import Any


def set_value(d: dict, dotted: str, value: Any) -> None:
    """Set one sweep value; a linked axis ("a+b") sets each of its fields."""
    fields = dotted.split("+")
    for f, v in zip(fields, value if len(fields) > 1 else [value]):
        section, _, name = f.partition(".")
        d.setdefault(section, {})[name] = v


def canonical(obj: Any) -> str:
    """The JSON a run id and a seed are hashed from (sorted keys, no blanks)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def where(sweep: dict[str, list[Any]], point: dict[str, Any]) -> str:
    """Where a point's values stand in the file: sweep.<axis>[<index>], ..."""
    return ", ".join(f"sweep.{k}[{sweep[k].index(v)}]" for k, v in point.items())


def relocate(msg: str, point: dict[str, Any], at: str) -> list[str]:
    """Name the sweep value that caused an error, where one did."""
    out = []
    for line in msg.splitlines():
        field = line.split(":", 1)[0]
        swept = [k for k in point if any(field.startswith(f) for f in k.split("+"))]
        out.append(f"{line} [from {at}]" if swept else line)
    return out
