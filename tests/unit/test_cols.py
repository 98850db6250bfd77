"""The registry of the runs table's column names (spec/cols.py): every name
in it is a column of the table the store writes (host/columns.py), and no
module or notebook spells one of its names as a bare string (issue 40: one
registry, used by the store, the report, the studies, the figures and the
notebooks)."""

from __future__ import annotations

import io
import json
import re
import tokenize
import typing

import pandas as pd
import pytest

from tortoiselab.host.columns import COLUMNS, SUMMARY_METRICS, topology_cells
from tortoiselab.project import PKG_DIR, REPO_DIR
from tortoiselab.spec import cols
from tortoiselab.studies.measure import ok_rows

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
    with pytest.raises(KeyError, match="a topology parameter is one name"):
        cols.topology("dumbbell.clients")
    df = pd.DataFrame(columns=["path.region", "client.page"])
    assert cols.where_column(cols.REGION, df.columns) == "path.region"
    with pytest.raises(KeyError, match="where: 'path.regoin' is no column of the runs table"):
        cols.where_column("path.regoin", df.columns)
    with pytest.raises(KeyError, match="spelled with dots: 'path.region'"):
        cols.where_column("path" + "__region", df.columns)


def test_a_claims_filter_refuses_a_key_that_is_no_column():
    """studies/measure.py's where: keyed by the table's column names; a key
    the table lacks (a misspelling, the old keyword spelling) is a KeyError
    naming it, never an empty selection."""
    df = pd.DataFrame({"ok": [True, True], cols.REGION: ["a", "b"], cols.PLT: [1.0, 2.0]})
    assert list(ok_rows(df, cols.PLT, {cols.REGION: "b"})[cols.PLT]) == [2.0]
    assert len(ok_rows(df, cols.PLT, {cols.REGION: ["a", "b"]})) == 2
    with pytest.raises(KeyError, match="'path.regoin' is no column"):
        ok_rows(df, cols.PLT, {"path.regoin": "a"})


def test_the_registry_lists_every_topology_parameter():
    """TOPOLOGY_PARAMS against the lab's topologies (spec/topologies/: their
    Params but mn --custom's only fields), numbers where the field is a number: a new
    parameter of a topology fails here until it has its column."""
    from tortoiselab.spec.topologies import load, names  # noqa: PLC0415 - the registry, beside the pure cols

    params: dict[str, bool] = {}
    for name in names():
        for key, field in load(name).params.model_fields.items():
            if not (isinstance(field.json_schema_extra, dict) and "mn_only" in field.json_schema_extra):
                params.setdefault(key, set(typing.get_args(field.annotation) or (field.annotation,))
                                  <= {int, float, type(None)})
    assert params == cols.TOPOLOGY_PARAMS
    assert {cols.topology(k) for k in params} | {cols.TOPOLOGY_NAME} <= set(COLUMNS)
    assert topology_cells(None)[cols.TOPOLOGY_NAME] == "wan"
    cells = topology_cells({"name": "dumbbell", "cdn_rtt_ms": 27, "clients": 2})
    assert (cells[cols.CDN_RTT], cells[cols.CLIENTS], cells[cols.BULK_FLOWS]) == (27, 2, None)


NOT_A_COLUMN = "# not a column"  # marks a line whose literal is another thing of that name (a check's "ok")


def _bare_in(source: str, where: str) -> list[str]:
    """The registered names a piece of Python source spells as a string
    literal of its own, each as "<where>:<line>: <literal>"; not on a line
    marked NOT_A_COLUMN (a fidelity check's or the guest's "ok", a header)."""
    values = set(NAMES.values())
    lines = source.splitlines()
    out = []
    for t in tokenize.generate_tokens(io.StringIO(source).readline):
        if t.type == tokenize.STRING and not t.string.startswith(('"""', "'''")) and t.string[0] in "\"'" \
                and t.string[1:-1] in values and NOT_A_COLUMN not in lines[t.start[0] - 1]:
            out.append(f"{where}:{t.start[0]}: {t.string}")
    return out


def test_the_run_columns_are_registered_and_the_marker_is_narrow():
    """ok, run_id and fidelity_ok are columns of the table (issue 53: they were
    spelled out some 70 times); a bare "ok" is found unless its own line says
    it is not the column."""
    assert {cols.OK, cols.RUN_ID, cols.FIDELITY_OK} <= set(COLUMNS)
    src = 'df = df[df["ok"]]\nfid.get("ok")  # not a column\nrows["run_id"]\n'
    assert _bare_in(src, "m.py") == ['m.py:1: "ok"', 'm.py:3: "run_id"']


def _bare(path) -> list[str]:
    """The registered names a module spells as a string literal of its own."""
    return _bare_in(path.read_text(), str(path.relative_to(PKG_DIR)))


def _bare_in_notebook(path, root=REPO_DIR) -> list[str]:
    """The registered names a notebook's code cells spell as string
    literals (markdown cells are prose, as docstrings are)."""
    cells = json.loads(path.read_text())["cells"]
    return [h for i, c in enumerate(cells) if c["cell_type"] == "code"
            for h in _bare_in("".join(c["source"]), f"{path.relative_to(root)} cell {i}")]


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


def test_no_notebook_spells_a_registered_column_itself():
    """The notebooks (notebooks/*.ipynb) read columns as the modules do,
    `from tortoiselab.spec import cols` then cols.CC, cols.PLT,
    cols.metric("plt_over_floor"): the rule above over their code cells."""
    notebooks = sorted((REPO_DIR / "notebooks").glob("*.ipynb"))
    assert len(notebooks) >= 5
    hits = [h for p in notebooks for h in _bare_in_notebook(p)]
    assert not hits, "spell these through spec/cols.py (from tortoiselab.spec import cols):\n" + "\n".join(hits)


def test_the_notebook_check_can_fail(tmp_path):
    """A bare name in a code cell is found with its cell and line; the same
    name in a markdown cell is not."""
    nb = {"cells": [{"cell_type": "markdown", "source": ["runs of `\"server.cc\"`\n"]},
                    {"cell_type": "code", "source": ["x = 1\n", "ok.groupby([\"path.region\", cols.CC])\n"]},
                    {"cell_type": "code", "source": ["print(len(ok))\n", "y = 'plt_ms'\n"]}]}
    bad = tmp_path / "n.ipynb"
    bad.write_text(json.dumps(nb))
    assert _bare_in_notebook(bad, tmp_path) == ['n.ipynb cell 1:2: "path.region"', "n.ipynb cell 2:2: 'plt_ms'"]


# a column in the keyword spelling (path__region=..., or "server__cc" as a key): sections of the table's columns
KEYWORD_SPELLING = re.compile(r"^(path|server|client|topology|population)__[a-z]\w*$")


def _keyword_spelt(path, root=PKG_DIR) -> list[str]:
    """Names and string literals of a module that spell a column section__field."""
    out = []
    for t in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        text = t.string[1:-1] if t.type == tokenize.STRING and t.string[0] in "\"'" else t.string
        if t.type in (tokenize.NAME, tokenize.STRING) and KEYWORD_SPELLING.match(text):
            out.append(f"{path.relative_to(root)}:{t.start[0]}: {t.string}")
    return out


def test_no_module_spells_a_column_as_a_keyword():
    """A claim filters by the registry's names ({cols.REGION: ...}), not by
    keyword arguments that spell path.region as path__region (issue 40:
    one spelling of a column)."""
    hits = [h for p in sorted(PKG_DIR.rglob("*.py")) for h in _keyword_spelt(p)]
    assert not hits, "spell these as spec/cols.py's names, in a where mapping:\n" + "\n".join(hits)


def test_the_keyword_spelling_check_can_fail(tmp_path):
    bad = tmp_path / "claim.py"
    bad.write_text('ok_rows(df, "plt_ms", server__cc="cubic")\nbase = {"path__region": "x"}\n')
    assert [h.split(": ", 1)[1] for h in _keyword_spelt(bad, tmp_path)] == ["server__cc", '"path__region"']
