"""What `tortoise run` says at the end: the summary table's rows from the
runs table, and the exit code from this invocation's records. Pure (no
lab, no files), tested with stored records (tests/unit/test_runsummary.py).

Exit codes of `tortoise run` (docs/running.md, docs/faults.md):
  0    every run this invocation stored is ok
  3    a run this invocation stored failed (ok false: its error says why)
  4    the only failed runs are disturbed ones: on the real clock the lab
       measured a path off its configuration (the host was too busy to
       keep the emulated time), so they are stored failed, never ok
       (analysis/fidelity.disturbance)
  130  interrupted (SIGINT or SIGTERM): what was stored is kept, resume does the rest
  2    bad input or a lab that cannot run
"""

from __future__ import annotations

import json

import pandas as pd

from tortoiselab.analysis.fidelity import DISTURBED
from tortoiselab.spec import cols

EXIT_OK, EXIT_FAILED, EXIT_DISTURBED = 0, 3, 4
HEADERS = ("runs", "ok", "disturbed", "PLT p50 ms", "PLT p90 ms", "throughput Mbit/s")  # not a column: a header


def disturbed(record: dict) -> bool:
    """A run stored failed for one reason alone: on the real clock its
    path measured off its configuration (analysis/fidelity.disturbance)."""
    return not record.get(cols.OK) and str(record.get("error") or "").startswith(f"{DISTURBED}:")


def exit_code(records: list[dict]) -> int:
    """This invocation's exit code from the records it stored (module doc)."""
    failed = [r for r in records if not r.get(cols.OK)]
    if any(not disturbed(r) for r in failed):
        return EXIT_FAILED
    return EXIT_DISTURBED if failed else EXIT_OK


def disturbed_note(records: list[dict]) -> str | None:
    """The line under the table when real-clock runs were disturbed; None
    when there are none."""
    off = [r for r in records if disturbed(r)]
    if not off:
        return None
    ids = ", ".join(r[cols.RUN_ID] for r in off[:5]) + (", ..." if len(off) > 5 else "")
    return (f"{len(off)} of {len(records)} runs on the real clock measured a path off its configuration and are "
            f"stored failed ({DISTURBED}: {ids}): the host did not keep the emulated time; run them on the virtual "
            "clock (--clock virtual), or with fewer --jobs on a quieter host (move their folders aside to redo "
            "them); exit code 4")


def summary_keys(df: pd.DataFrame, swept: list[str]) -> list[str]:
    """The runs table's columns that tell the sweep points apart: the swept
    fields that vary (a topology field is a column of its own,
    topology.<param>); server.cc when nothing varies."""
    return [k for k in dict.fromkeys(swept) if k in df and df[k].nunique(dropna=False) > 1] or [cols.CC]


def cell_label(value: object) -> str:
    """A sweep point's value as the experiment file names it: a trace by
    its name, not its stored {file, name, sha256}; a whole number without
    a decimal point (a count the table keeps as a float beside a missing
    one); none as "-"."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str) and value.startswith("{"):
        try:
            named = json.loads(value)
        except ValueError:
            return value
        return str(named.get("name", value)) if isinstance(named, dict) else value
    return str(value)


def summary_rows(df: pd.DataFrame, keys: list[str]) -> list[tuple[str, ...]]:
    """One row per sweep point (summary_keys): its label, then HEADERS's
    columns; "disturbed" counts the runs stored failed because the real
    clock did not keep their path (disturbed)."""
    rows = []
    for key, g in df.groupby(keys, dropna=False, sort=True):
        values = key if isinstance(key, tuple) else (key,)
        label = " ".join(cell_label(v) for v in values)
        ok = g[g[cols.OK].astype(bool)]
        off = int(g["error"].fillna("").astype(str).str.startswith(f"{DISTURBED}:").sum()) if "error" in g else 0
        plt = pd.to_numeric(ok[cols.PLT], errors="coerce").dropna()
        thr = pd.to_numeric(ok[cols.THROUGHPUT], errors="coerce").dropna()
        rows.append((label, str(len(g)), str(len(ok)),
                     str(off), f"{plt.quantile(0.5):.1f}" if len(plt) else "-",
                     f"{plt.quantile(0.9):.1f}" if len(plt) else "-", f"{thr.median():.2f}" if len(thr) else "-"))
    return rows
