"""The registry of the runs table's column names (spec/cols.py): every name
in it is a column of the table the store writes (host/columns.py), and no
module spells one of its names as a bare string (issue 40: one registry,
used by the store, the report, the studies and the figures)."""

from __future__ import annotations

import io
import tokenize

import pandas as pd
import pytest

from tortoiselab.host.columns import COLUMNS, SUMMARY_METRICS
from tortoiselab.project import PKG_DIR
from tortoiselab.spec import cols

NAMES = {k: v for k, v in vars(cols).items() if k.isupper() and isinstance(v, str)}


def test_every_registered_name_is_a_column_of_the_table():
    assert len(NAMES) >= 20
    missing = {k: v for k, v in NAMES.items() if v not in COLUMNS}
    assert not missing, f"spec/cols.py names columns the runs table does not have: {missing}"
    assert set(cols.METRICS) <= set(COLUMNS) and SUMMARY_METRICS == {n: m.meaning for n, m in cols.METRICS.items()}
    assert cols.reported_metrics() == (("plt_ms", "PLT (ms)"), ("throughput_mbit", "throughput (Mbit/s)"))


def test_a_name_outside_the_registry_is_refused():
    with pytest.raises(KeyError, match="no such metric"):
        cols.metric("plt_msec")
    with pytest.raises(KeyError, match="no such section"):
        cols.setting("servr", "cc")
    df = pd.DataFrame(columns=["path.region", "client.page"])
    assert cols.kwarg_column("path__region", df.columns) == "path.region"
    with pytest.raises(KeyError, match="path__regoin: the runs table has no column 'path.regoin'"):
        cols.kwarg_column("path__regoin", df.columns)


def _bare(path) -> list[str]:
    """The registered names a module spells as a string literal of its own."""
    values = set(NAMES.values())
    out = []
    for t in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if t.type == tokenize.STRING and not t.string.startswith(('"""', "'''")) and t.string[0] in "\"'" \
                and t.string[1:-1] in values:
            out.append(f"{path.relative_to(PKG_DIR)}:{t.start[0]}: {t.string}")
    return out


def test_no_module_spells_a_registered_column_itself():
    """An f-string or a docstring may mention a column; a literal used as
    one goes through spec/cols.py. Modules that run outside the project's
    layers (the guest's loaders, tools, client) write their own summary keys:
    those are the names the registry takes over, so they are not scanned."""
    own = ("spec/cols.py",)
    outside = ("client/", "browser/", "tools/", "guest/", "web/")
    hits = [h for p in sorted(PKG_DIR.rglob("*.py")) if str(p.relative_to(PKG_DIR)) not in own
            and not str(p.relative_to(PKG_DIR)).startswith(outside) for h in _bare(p)]
    assert not hits, "spell these through spec/cols.py:\n" + "\n".join(hits)
