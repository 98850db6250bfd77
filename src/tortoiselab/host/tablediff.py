"""Where a runs table (runs.parquet) disagrees with the table its run
records give (host/store.table_of): every cell compared, NaN and None alike
missing. Pure: two DataFrames in, a list of differences out. runs.parquet
is a cache of the records (host/store.read_table, host/verify.py)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from tortoiselab.spec import cols


def _same(a: Any, b: Any) -> bool:
    """Two table cells are equal: both missing (None, NaN), or equal values."""
    na_a, na_b = a is None or (isinstance(a, float) and a != a), b is None or (isinstance(b, float) and b != b)
    if na_a or na_b:
        return na_a and na_b
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    return bool(a == b)


def table_differences(table: pd.DataFrame, records: pd.DataFrame) -> list[tuple[str, str, Any, Any]]:
    """Where a runs table disagrees with the table computed from the records
    (table_of), as (run id, column, the table's value, the records'), NaN
    and None alike missing: a row without a record has column "(row)" and
    record value None, a record without a row table value None; "" and
    "(columns)" when the columns differ. Pure; empty when they agree."""
    if list(table.columns) != list(records.columns):
        return [("", "(columns)", list(table.columns), list(records.columns))]
    dup = table[cols.RUN_ID].duplicated()
    out: list[tuple[str, str, Any, Any]] = [(str(r), "(row)", "a second row", None) for r in table[cols.RUN_ID][dup]]
    mine, theirs = table[~dup].set_index(cols.RUN_ID, drop=False), records.set_index(cols.RUN_ID, drop=False)
    for rid in sorted(set(mine.index) | set(theirs.index), key=str):
        if rid not in theirs.index or rid not in mine.index:
            out.append((str(rid), "(row)", rid if rid in mine.index else None, rid if rid in theirs.index else None))
            continue
        a, b = mine.loc[rid].to_dict(), theirs.loc[rid].to_dict()
        out += [(str(rid), c, _cell(a[c]), _cell(b[c])) for c in records.columns if not _same(_cell(a[c]), _cell(b[c]))]
    return out


def _cell(v: Any) -> Any:
    """A cell as a plain Python value (numpy scalars as Python's)."""
    return v.item() if hasattr(v, "item") and not isinstance(v, (str, bytes)) else v
