"""The report of a real experiment: run a small sweep in the lab, write the
HTML report, render it in headless Chromium and look at the screenshot."""

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import TORTOISE, experiment_yaml, write_yaml
from tortoiselab import report
from tortoiselab.report.context import comparisons, runs_summary

pytestmark = pytest.mark.lab

EXP = experiment_yaml("two-arms", {"name": "report-smoke",
                                   "description": "tiny page over 100 ms RTT, 1 % loss; cubic vs hybla"},
                      comment="two arms x two repetitions of the tiny page on a long, lossy path")

CHROMIUM = "/usr/bin/chromium"
BLUE = np.array([1, 115, 178])  # seaborn "colorblind" first colour: the cubic arm in the figures


def _chromium() -> str:
    """Debian's Chromium, which `make setup` installs (scripts/setup-system.sh); the test installs nothing."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make setup` installs it (scripts/setup-system.sh; make test runs it)")
    return CHROMIUM


def _screenshot(report: Path, png: Path) -> str:
    """Render the page; return Chromium's log (console messages included)."""
    with tempfile.TemporaryDirectory(prefix="tortoise-chromium-") as profile:
        p = subprocess.run(
            [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", f"--screenshot={png}",
             "--window-size=1280,2000", report.as_uri()],
            capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout + p.stderr


def test_report_of_a_real_experiment(tmp_path, lab_kernel):
    from PIL import Image

    f = write_yaml(tmp_path, EXP, "report-smoke.yaml")
    results = tmp_path / "results"
    run = subprocess.run([*TORTOISE, "run", str(f), "--results", str(results), "--backend", "uml",
                          "--clock", "virtual"], capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    exp_dir = results / "report-smoke"

    # what the report is made of
    ctx = report.load_context(exp_dir)
    assert len(ctx.df) == 4 and ctx.df["ok"].all() and ctx.df["plt_ms"].notna().all()
    # every run carries its floor, and the runs on the lab kernel the server's cwnd
    assert ctx.df["floor_ms"].notna().all() and (ctx.df["plt_ms"] >= ctx.df["floor_ms"]).all()
    assert all((exp_dir / r / "cwnd.json").exists() for r in ctx.df["run_id"])
    assert len(report.floor_table(ctx)) == 2  # one object-size class (tiny), two arms
    assert ctx.main_axis == "server.cc" and ctx.control == "cubic" and ctx.paired_key is None
    summary = runs_summary(ctx, n_resamples=2000)
    assert list(summary["server.cc"]) == ["cubic", "hybla"]
    assert list(summary["runs"]) == [2, 2] and list(summary["ok"]) == [2, 2]
    assert (summary["p90_low"] <= summary["p90"]).all() and (summary["p90"] <= summary["p90_high"]).all()
    comp = comparisons(ctx, n_resamples=2000)
    assert len(comp) == 1  # plt_ms only: the loader gives no throughput
    row = comp.iloc[0]
    assert row["arm"] == "hybla" and not row["paired"] and row["test"] == "mann-whitney"
    assert row["min_p"] == pytest.approx(1 / 3) and not row["significant"] and "too few runs" in row["note"]

    out = report.write_report(exp_dir)
    assert out == exp_dir / "report.html"
    page = out.read_text()
    assert "<script" not in page.lower()  # nothing to run, so nothing to fail
    refs = re.findall(r"""(?:src|href)\s*=\s*['"]([^'"]*)""", page)
    assert refs and all(r.startswith("data:") for r in refs), [r[:60] for r in refs if not r.startswith("data:")]
    assert "http://" not in page and "https://" not in page
    assert page.count("data:image/png;base64,") >= 2  # PLT CDF and p90 bars
    for fig in ("plt_cdf", "p90_bars", "plt_vs_floor", "cwnd_1", "cwnd_2", "flights"):
        assert f"<figure id='{fig}'>" in page, fig
    assert "description: tiny page over 100 ms RTT, 1 % loss; cubic vs hybla" in page  # the file, verbatim
    assert "# two arms x two repetitions of the tiny page on a long, lossy path" in page
    for text in ("Runs per sweep point", "Comparison", "Unpaired", "mann-whitney", "Fidelity", "Metadata",
                 "Measured PLT against the floor", "tiny (objects &lt; 1 KB)",
                 "tortoiselab git revision", "virtual", "uml"):
        assert text in page, text

    png = tmp_path / "report.png"
    log = _screenshot(out, png)
    console = [line for line in log.splitlines() if ":CONSOLE" in line or "Uncaught" in line or "net::ERR" in line]
    assert not console, console
    assert png.exists() and png.stat().st_size > 50_000
    with Image.open(png) as im:
        assert im.size == (1280, 2000)
        px = np.asarray(im.convert("RGB")).astype(int)
    gray = px.mean(axis=2)
    assert gray.std() > 10  # not a blank page
    assert (gray < 200).mean() > 0.02  # text, tables and figures
    # the embedded figures were decoded and drawn: the cubic arm's colour is on the page
    assert (np.abs(px - BLUE).sum(axis=2) < 30).sum() > 500
    shutil.copy(png, exp_dir / "report.png")  # kept next to the report for a person to look at
