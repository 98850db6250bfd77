"""What `tortoise run` says at the end: the summary table's rows from the
runs table, and the exit code from this invocation's records. Pure (no
lab, no files), tested with stored records (tests/unit/test_runsummary.py).

Exit codes of `tortoise run` (README, docs/faults.md):
  0    every run this invocation stored is ok, and faithful
  3    a run this invocation stored failed (ok false: its error says why)
  4    every run is ok, but a run on the real clock measured a path off
       its configuration (fidelity_ok false: the host was too busy to keep
       the emulated time; its figures are not the configured path's)
  130  interrupted (SIGINT or SIGTERM): what was stored is kept, resume does the rest
  2    bad input or a lab that cannot run
"""

from __future__ import annotations

import pandas as pd

EXIT_OK, EXIT_FAILED, EXIT_UNFAITHFUL = 0, 3, 4
HEADERS = ("runs", "ok", "real clock, path off", "PLT p50 ms", "PLT p90 ms", "throughput Mbit/s")


def unfaithful(record: dict) -> bool:
    """A run stored ok on the real clock whose measured path was outside
    the tolerance (its fidelity check False; None is not judged)."""
    fid = (record.get("fidelity") or [{}])[0]
    return bool(record.get("ok")) and (record.get("meta") or {}).get("clock") == "real" \
        and isinstance(fid, dict) and fid.get("ok") is False


def exit_code(records: list[dict]) -> int:
    """This invocation's exit code from the records it stored (module doc)."""
    if any(not r.get("ok") for r in records):
        return EXIT_FAILED
    return EXIT_UNFAITHFUL if any(unfaithful(r) for r in records) else EXIT_OK


def unfaithful_note(records: list[dict]) -> str | None:
    """The line under the table when real-clock runs measured a path off
    its configuration; None when there are none."""
    off = [r for r in records if unfaithful(r)]
    if not off:
        return None
    ids = ", ".join(r["run_id"] for r in off[:5]) + (", ..." if len(off) > 5 else "")
    return (f"{len(off)} of {len(records)} runs on the real clock measured a path off its configuration "
            f"(fidelity_ok false: {ids}); their figures are not the configured path's: run them on the virtual "
            "clock (--clock virtual), or with fewer --jobs on a quieter host; exit code 4")


def summary_rows(df: pd.DataFrame, keys: list[str]) -> list[tuple[str, ...]]:
    """One row per value of the swept keys: the key, then HEADERS's
    columns; "real clock, path off" counts the ok runs on the real clock
    whose fidelity_ok is False."""
    rows = []
    for key, g in df.groupby(keys, dropna=False):
        ok = g[g["ok"].astype(bool)]
        off = int(((ok["clock"] == "real") & (ok["fidelity_ok"] == False)).sum())  # noqa: E712 - None: not judged
        plt = pd.to_numeric(ok["plt_ms"], errors="coerce").dropna()
        thr = pd.to_numeric(ok["throughput_mbit"], errors="coerce").dropna()
        rows.append((" ".join(map(str, key if isinstance(key, tuple) else (key,))), str(len(g)), str(len(ok)),
                     str(off), f"{plt.quantile(0.5):.1f}" if len(plt) else "-",
                     f"{plt.quantile(0.9):.1f}" if len(plt) else "-", f"{thr.median():.2f}" if len(thr) else "-"))
    return rows
