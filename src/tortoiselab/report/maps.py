"""The report's "Sensitivity maps" section (docs/maps.md): the maps that
`tortoise map` drew for this experiment (map.json and map.png in each
results/<name>@map-<map> beside this folder, or in this folder when it is
a map's own), each as its figure and its cells' table."""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path

from tortoiselab.host import safefs

MAP_JSON, MAP_PNG, MAP_SVG = "map.json", "map.png", "map.svg"


def map_folders(exp_dir: Path) -> list[Path]:
    """This experiment's map folders: itself when it is a map's, else the
    <name>@map-* folders beside it that hold a drawn map."""
    exp_dir = Path(exp_dir)
    if (exp_dir / MAP_JSON).is_file():
        return [exp_dir]
    base = exp_dir.name.split("@")[0]
    return sorted(p for p in exp_dir.parent.glob(f"{base}@map-*") if (p / MAP_JSON).is_file())


def _num(v: float | None, fmt: str) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)


def _value(v) -> str:
    """A compare value as the file writes it (a string bare, anything else as JSON)."""
    return v if isinstance(v, str) else json.dumps(v)


# the cells' table: its header (the report's and the notebook's) and cell_rows()' order
CELL_COLUMNS = ["size", "arm", "RTT ms", "loss %", "n", "change %", "interval %", "PLT ms (control -> arm)",
                "PLT change %", "rounds (control -> arm)", "why", "label", "cause"]


def cell_rows(doc: dict) -> list[list[str]]:
    """A map's cells as table rows in CELL_COLUMNS' order: size, arm, RTT,
    loss, n, change, interval, each arm's PLT and its change, each arm's
    rounds and the reason (rounds saved, or the same rounds), label, cause.
    A map.json written before the PLT and rounds were read shows "-" there."""
    rows = []
    for c in doc.get("cells", []):
        ci = "exact" if c["exact"] else (f"[{_num(c['low_pct'], '+.1f')}, {_num(c['high_pct'], '+.1f')}]"
                                         if c.get("low_pct") is not None else "-")
        plt = f"{_num(c.get('control_plt_ms'), '.1f')} -> {_num(c.get('arm_plt_ms'), '.1f')}"
        rounds = f"{_num(c.get('control_rounds'), 'g')} -> {_num(c.get('arm_rounds'), 'g')}"
        rows.append([c.get("size_name", c.get("size")) or "", c.get("arm_name", c["arm"]), f"{c['rtt_ms']:g}",
                     f"{c['loss_pct']:g}", str(c["n"]), _num(c.get("effect_pct"), "+.1f"), ci, plt,
                     _num(c.get("plt_change_pct"), "+.1f"), rounds, c.get("reason") or "-", c["label"],
                     c.get("cause") or ""])
    return rows


def map_sections(exp_dir: Path) -> list[dict]:
    """Each drawn map of the experiment: folder, title, what it compares,
    the PNG and SVG (base64) and its cells' rows."""
    out = []
    for folder in map_folders(exp_dir):
        root, doing = folder.parent, f"reading the map in {folder}"
        doc = json.loads(safefs.read_text_regular(folder / MAP_JSON, root, doing))
        figs = {k: base64.b64encode(safefs.read_bytes_regular(folder / name, root, doing)).decode()
                if (folder / name).is_file() else "" for k, name in (("png", MAP_PNG), ("svg", MAP_SVG))}
        out.append({"folder": folder.name, "title": doc.get("title", folder.name),
                    "what": f"{doc.get('compare')}: {', '.join(map(_value, doc.get('arms') or []))} against "
                            f"{_value(doc.get('control'))}, "
                            f"{doc.get('metric')} ({doc.get('better')} is the claimed side)",
                    **figs, "columns": CELL_COLUMNS, "rows": cell_rows(doc)})
    return out
