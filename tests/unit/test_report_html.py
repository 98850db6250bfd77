"""The HTML report of a canned results folder (tests/data/runs/coalescing@ci,
two runs as the runner wrote them, with their captures and cwnd samples) plus
a failed run whose error carries markup: the page's tables say what the
context computed, every value is escaped, the figures are embedded and the
page loads and runs nothing (no lab)."""

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tortoiselab import report
from tortoiselab.report import context as rc
from tortoiselab.report import html as rh

CANNED = Path(__file__).resolve().parents[1] / "data" / "runs" / "coalescing@ci"
ERROR = "lab: <script>alert('x')</script> & boom"
COMMENT = "# the <b>canned</b> folder & a comment\n"
RESAMPLES = 200


class Tables(HTMLParser):
    """The page's tables as lists of rows of cell texts, keyed by the
    heading (h2 or h3) above them, in order."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[list[list[str]]]] = {}
        self.heading, self.in_heading, self.cell = "", False, None

    def handle_starttag(self, tag, attrs):
        if tag in ("h2", "h3"):
            self.heading, self.in_heading = "", True
        elif tag == "table":
            self.tables.setdefault(self.heading, []).append([])
        elif tag == "tr":
            self.tables[self.heading][-1].append([])
        elif tag in ("td", "th"):
            self.cell = ""
        elif tag == "br" and self.cell is not None:
            self.cell += " "

    def handle_endtag(self, tag):
        if tag in ("h2", "h3"):
            self.in_heading = False
        elif tag in ("td", "th"):
            self.tables[self.heading][-1][-1].append(re.sub(r"\s+", " ", self.cell).strip())
            self.cell = None

    def handle_data(self, data):
        if self.in_heading:
            self.heading += data
        if self.cell is not None:
            self.cell += data


def _tables(page: str) -> dict:
    p = Tables()
    p.feed(page)
    return p.tables


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    d = tmp_path_factory.mktemp("report") / "coalescing@ci"
    shutil.copytree(CANNED, d)
    (d / "experiment.yaml").write_text(COMMENT + (d / "experiment.yaml").read_text())
    good = json.loads((d / "902b168b050c" / "run.json").read_text())
    bad = {k: good[k] for k in ("experiment", "repetition", "seed", "point", "config", "path")}
    bad.update(run_id="f00000000000", ok=False, error=ERROR, summary={},
               meta={"started": "2026-01-01T00:00:00+00:00", "ended": "2026-01-01T00:00:05+00:00"})
    (d / "f00000000000").mkdir()
    (d / "f00000000000" / "run.json").write_text(json.dumps(bad))
    out = report.write_report(d, n_resamples=RESAMPLES)
    return rc.load_context(d), out.read_text(encoding="utf-8"), out


def test_written_beside_the_runs_and_self_contained(rendered):
    ctx, page, out = rendered
    assert out == ctx.exp_dir / "report.html"
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</body></html>\n")
    assert "<script" not in page.lower()
    refs = re.findall(r"""(?:src|href)\s*=\s*['"]([^'"]*)""", page)
    assert refs and all(r.startswith("data:") for r in refs)
    for fig in ("plt_cdf", "p90_bars", "plt_vs_floor", "cwnd_1", "cwnd_2", "flights"):
        assert f"<figure id='{fig}'>" in page, fig
    assert ".note{background:#fff8e5" in page  # the stylesheet, inlined


def test_every_value_is_escaped(rendered):
    ctx, page, _ = rendered
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; boom" in page
    assert ERROR not in page
    # the experiment file, verbatim but escaped
    assert "<pre># the &lt;b&gt;canned&lt;/b&gt; folder &amp; a comment\n# Seed 001 (LinkedIn" in page
    assert ctx.yaml_text.startswith(COMMENT) and "<b>canned" not in page


def test_runs_per_sweep_point(rendered):
    ctx, page, _ = rendered
    (t,) = _tables(page)["Runs per sweep point"]
    assert t[0] == [*ctx.axes, "runs", "ok", "PLT p50 ms [95 % CI]", "PLT p90 ms [95 % CI]", "PLT mean ms [95 % CI]",
                    "fidelity failed"]
    summary = rc.runs_summary(ctx, n_resamples=RESAMPLES)
    assert len(t) == 1 + len(summary) == 3
    n = len(ctx.axes)
    cells = {tuple(r[:n]): r[n:] for r in t[1:]}
    assert ctx.axes == ["client.coalescing", "path.region", "client.cache_hit_ratio"]  # the file's order
    on, off = cells[("True", "us-desktop-2017", "0.0")], cells[("False", "us-desktop-2017", "0.0")]
    # coalescing on: one ok run; off: one ok run and the failed one
    assert on[:2] == ["1", "1"] and off[:2] == ["2", "1"]
    assert on[2] == "615 [615, 615]" and off[2] == "714 [714, 714]"  # one run each: zero-width
    assert on[-1] == off[-1] == "0"


def test_comparisons(rendered):
    ctx, page, _ = rendered
    tables = _tables(page)
    (t,) = tables["PLT (ms)"]
    assert "throughput (Mbit/s)" not in tables  # the loader gives no throughput
    comp = rc.comparisons(ctx, n_resamples=RESAMPLES)
    assert len(t) == 1 + len(comp) == 2
    head, row = t
    assert head[:4] == ["stratum", "arm", "paired", "n ctrl / arm"]
    assert row[0] == "path.region = us-desktop-2017, client.cache_hit_ratio = 0.0"
    assert row[1:4] == ["False", "yes", "1 / 1 1 pairs"]
    assert row[4] == "615 → 714"
    assert row[5] == "16.1 [16.1, 16.1]" and row[8:11] == ["wilcoxon", "1", "1"]  # one pair: p = 1
    assert row[-1] == "1"
    assert f"<li>{comp['note'].iloc[0]}</li>" in page.replace("&#39;", "'")
    assert "<b>Paired</b>" in page and "Control: <b>True</b>" in page


def test_fidelity_and_failed_runs(rendered):
    ctx, page, _ = rendered
    counts, failed = _tables(page)["Fidelity"]
    fid = rc.fidelity_summary(ctx)
    assert counts[1:] == [
        ["runs whose measured RTT was outside the tolerance (fidelity_ok false)", str(fid["fidelity_failed"])],
        ["runs without a fidelity check (no capture)", "1"],
        ["packets dropped by tcpdump's buffer, all runs", "0"],
        ["runs with capture drops", "0"],
        ["runs that fail the physics gate: numbers no run can measure (excluded from statistics)", "0"],
        ["failed runs (excluded from statistics)", "1"]]
    assert failed == [["failed run", "error"], ["f00000000000", ERROR]]
    assert "<td><span class=bad>1</span></td></tr>\n</tbody>" in page  # the failed run, flagged


def test_floor_and_metadata(rendered):
    ctx, page, _ = rendered
    tables = _tables(page)
    (floor,) = tables["Measured PLT against the floor"]
    ft = rc.floor_table(ctx)
    assert len(floor) == 1 + len(ft) == 3
    assert [r[-3:] for r in floor[1:]] == [[rh.num(r[k], 3) for k in ("ratio_min", "ratio_median", "ratio_max")]
                                           for r in ft.to_dict("records")]
    (meta,) = tables["Metadata"]
    assert meta[0] == ["property", "value (runs with it, where runs differ)"]
    assert meta[1:] == [[k, " ".join(v.split())] for k, v in rc.metadata(ctx)]
    values = dict(map(tuple, meta[1:]))
    assert values["tortoiselab git revision"] == "4ab8bc19dc8391fadba6c40ea80649dc0b48ebbc"
    assert values["clock"] == "virtual (2 runs); (1 runs)"  # the failed run recorded none


def test_filters():
    assert rh.num(1234.5678, 2) == "1,234.57" and rh.num(float("nan")) == "–" and rh.num(None) == ""
    assert rh.ci(10.0, 9.0, 11.0) == "10 <span class=muted>[9, 11]</span>" and rh.ci(None, 1, 2) == "–"
    assert rh.p_value(0.0123) == "0.012" and rh.p_value(0.0001) == "1.0e-04" and rh.p_value(None) == "–"
    env = rh.environment()
    assert env.from_string("{{ x | num(2) }}").render(x="<b>") == "&lt;b&gt;"
    assert env.from_string("{{ x | ci(x, x) }}").render(x=float("inf")) == "–"


@pytest.mark.parametrize("folder", sorted(p.name for p in CANNED.parent.iterdir() if p.is_dir()))
def test_a_grid_folder_reports_the_grids_own_axes(tmp_path, folder):
    """A folder <name>@<grid> is reported with the grid's sweep: with the
    file's full sweep its runs had no value on any axis, and the grids with
    linked axes (cubic_plus, initcwnd, reno_beta) failed to render."""
    d = tmp_path / folder
    shutil.copytree(CANNED.parent / folder, d)
    ctx = rc.load_context(d)
    assert ctx.axes and all(ctx.df[ax].notna().all() for ax in ctx.axes), ctx.axes
    page = report.write_report(d).read_text()
    assert "<table" in page and ctx.main_axis in page
