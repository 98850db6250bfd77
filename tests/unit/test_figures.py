"""Every figure renders from small synthetic data to a real PNG and SVG."""

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from tortoiselab.analysis import figures


def _check(paths, min_png=8_000):
    png, svg = paths
    assert png.suffix == ".png" and svg.suffix == ".svg" and png.with_suffix("") == svg.with_suffix("")
    assert png.stat().st_size > min_png
    with Image.open(png) as im:
        im.load()
        assert im.width > 300 and im.height > 200
        px = np.asarray(im.convert("L"))
        assert px.std() > 5  # not a blank canvas
        assert (px < 128).mean() > 0.002  # there are dark marks: axes, text, lines
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text and text.rstrip().endswith("</svg>")
    assert svg.stat().st_size > 5_000


@pytest.fixture
def runs():
    rng = np.random.default_rng(0)
    rows = []
    for region in ("india-mobile", "us-fixed"):
        for cc, scale in (("cubic", 1.0), ("hybla", 0.8)):
            for rep in range(8):
                rows.append({"server.cc": cc, "path.region": region, "repetition": rep,
                             "plt_ms": scale * rng.lognormal(np.log(3000), 0.3), "floor_ms": scale * 2500})
    return pd.DataFrame(rows)


def test_plt_cdf(runs, tmp_path):
    _check(figures.plt_cdf(runs, tmp_path / "cdf"))
    _check(figures.plt_cdf(runs, tmp_path / "sub" / "cdf_region.png", facet_col="path.region", title="by region"))
    assert (tmp_path / "sub" / "cdf_region.svg").exists()


def test_plt_cdf_without_values_says_so(runs, tmp_path):
    runs["plt_ms"] = np.nan
    # the axes and the "no data" note are still drawn: a valid, non-blank figure
    _check(figures.plt_cdf(runs, tmp_path / "none"), min_png=5_000)
    _check(figures.p90_bars(runs, tmp_path / "none_bars"), min_png=5_000)


def test_p90_bars(runs, tmp_path):
    _check(figures.p90_bars(runs, tmp_path / "p90", n_resamples=500))
    _check(figures.p90_bars(runs, tmp_path / "p90_region", hue_col="path.region", quantile="p50",
                            n_resamples=500))


def test_throughput_vs_loss_and_delay(tmp_path):
    rng = np.random.default_rng(1)
    rows = []
    for size in (10_000, 1_000_000):
        for cc, k in (("cubic", 1.0), ("hybla", 1.6)):
            for loss in (0, 1, 2, 5):
                for rtt in (50, 200):
                    for rep in range(3):
                        rows.append({"server.cc": cc, "path.loss_pct": loss, "path.rtt_ms": rtt,
                                     "size_class": figures.size_class(size),
                                     "throughput_mbit": k * 10 / (1 + loss) * 100 / rtt * rng.uniform(0.9, 1.1)})
    df = pd.DataFrame(rows)
    _check(figures.throughput_vs_loss(df, tmp_path / "thr_loss"))
    _check(figures.throughput_vs_delay(df, tmp_path / "thr_rtt"))
    _check(figures.throughput_vs_loss(df.drop(columns="size_class"), tmp_path / "thr_one"))
    assert figures.size_class(5_000) == "<= 10 KB" and figures.size_class(2e7) == "> 10 MB"
    assert figures.size_class(None) is None


def test_plt_vs_floor(runs, tmp_path):
    _check(figures.plt_vs_floor(runs, tmp_path / "floor"))


def _probe_samples():
    """Slow start to 80 segments, a loss (ssthresh 56 = 0.7 * 80), linear regrowth."""
    out, t, cwnd, ss = [], 0.0, 10, figures.INFINITE_SSTHRESH
    for i in range(200):
        t += 0.02
        if i == 60:
            ss = 56
            cwnd = 56
        elif cwnd < 80 and ss == figures.INFINITE_SSTHRESH:
            cwnd += 2
        elif i > 60 and i % 5 == 0:
            cwnd += 1
        out.append([t, cwnd, ss, 100_000, i * 1000, i * 1000 + cwnd * 1448])
    return out


def test_cwnd_over_time(tmp_path):
    s = _probe_samples()
    assert figures.loss_times(s) == [pytest.approx(61 * 0.02)]
    _check(figures.cwnd_over_time(s, tmp_path / "cwnd"))
    _check(figures.cwnd_over_time(s, tmp_path / "cwnd_marks", losses=[1.0, 2.5], title="given losses"))


def test_flights_bars(tmp_path):
    flights = [{"round": r + 1, "segments": 10 * 2 ** r, "bytes": 14_480 * 2 ** r} for r in range(4)]
    _check(figures.flights_bars(flights, tmp_path / "flights"))
    series = [{**f, "label": f"initcwnd {iw}", "segments": f["segments"] * iw // 10}
              for iw in (3, 10, 30) for f in flights]
    _check(figures.flights_bars(series, tmp_path / "flights_iw"))


def test_same_data_same_svg(runs, tmp_path):
    a = figures.plt_cdf(runs, tmp_path / "a")[1].read_bytes()
    b = figures.plt_cdf(runs, tmp_path / "b")[1].read_bytes()
    assert a == b
