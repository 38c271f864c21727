"""A sweep's FCT slowdown by flow-size bucket as a grouped bar chart across its grid points
(issue 28 §3): in each bucket one bar per point, the mean over seeds of the point's median
slowdown, with the 95% confidence interval of that mean, and the 99th percentile as a marker.

The means are checked against numpy on the dataset, the intervals against Student's t from a
statistics table (4.303 for 2 degrees of freedom, 12.706 for 1), the chart against the figure's
own bars. Fails before the change: no ``sweep_by_size``, no such section or figure."""

from __future__ import annotations

import base64
import math
import re
from pathlib import Path

import numpy as np
import polars as pl
from click.testing import CliRunner
from conftest import SMALL_TOML

from braid.cli import main
from braid.folders import Sweep, load_sweep
from braid.report import plots
from braid.report.buckets import sweep_by_size
from braid.report.pages import sweep_buckets_figure, sweep_page

SMALL, LARGE = "0-10KB", "10KB-100KB"


def _data() -> pl.DataFrame:
    # Columns deliberately in the wrong size order; point x=2's seed 3 had no small flow.
    return pl.DataFrame({
        "point": [0, 0, 0, 1, 1, 1],
        "x": [1, 1, 1, 2, 2, 2],
        "seed": [1, 2, 3] * 2,
        f"slowdown_p50_{LARGE}": [4.0, 5.0, 9.0, 2.0, 2.5, 3.0],
        f"slowdown_p99_{LARGE}": [10.0, 12.0, 20.0, 6.0, 7.0, 8.0],
        f"slowdown_p50_{SMALL}": [1.5, 1.7, 1.6, 1.1, 1.3, None],
        f"slowdown_p99_{SMALL}": [3.0, 3.5, 4.0, 2.0, 2.2, None],
        "fct_p99_us": [1.0] * 6,
    })


def test_sweep_by_size_means_over_seeds_with_student_t_intervals(tmp_path):
    data = _data()
    got = sweep_by_size(data, ["x"])
    assert list(got) == ["x=1", "x=2"]
    for label, x in (("x=1", 1), ("x=2", 2)):
        t = got[label]
        assert t["bucket"].to_list() == [SMALL, LARGE]  # by size, not by column order
        for row in t.iter_rows(named=True):
            for q in ("p50", "p99"):
                vals = [v for v in data.filter(pl.col("x") == x)[f"slowdown_{q}_{row['bucket']}"].to_list() if v is not None]
                assert row["seeds"] == len(vals)
                assert math.isclose(row[f"slowdown_{q}"], np.mean(vals), rel_tol=1e-12)
                t975 = {3: 4.303, 2: 12.706}[len(vals)]
                want = t975 * np.std(vals, ddof=1) / math.sqrt(len(vals))
                assert math.isclose(row[f"slowdown_{q}_ci95"], want, rel_tol=1e-9)
    # No swept key: one point, "all"; no bucket columns: nothing.
    assert list(sweep_by_size(data, [])) == ["all"]
    assert sweep_by_size(data.select("point", "x", "seed", "fct_p99_us"), ["x"]) == {}


def test_sweep_bucket_chart_groups_the_points_bars_in_each_bucket(tmp_path):
    sw = Sweep(path=tmp_path, meta={}, data=_data(), keys=["x"], name="s")
    fig = sweep_buckets_figure({"": sw}, title="s")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == [SMALL, LARGE]
    assert ax.get_ylabel() == "FCT slowdown (× ideal FCT)"
    assert "95% confidence interval" in ax.get_title()
    bars = ax.patches
    assert len(bars) == 4  # 2 points × 2 buckets
    tables = sweep_by_size(sw.ok, sw.keys)
    # Bars are drawn point by point: x=1's two buckets, then x=2's.
    heights = [b.get_height() for b in bars]
    want = tables["x=1"]["slowdown_p50"].to_list() + tables["x=2"]["slowdown_p50"].to_list()
    assert np.allclose(heights, want)
    centres = [b.get_x() + b.get_width() / 2 for b in bars]
    for bucket in range(2):
        # Within each bucket the points sit side by side, x=1 left of x=2, around the tick.
        a, b = centres[bucket], centres[2 + bucket]
        assert a < bucket < b and math.isclose((a + b) / 2, bucket, abs_tol=1e-9)
    assert bars[0].get_facecolor() != bars[2].get_facecolor()
    labels = ax.get_legend_handles_labels()[1]
    assert "x=1: median" in labels and "x=2: 99th percentile" in labels
    # The first whisker (x=1, smallest bucket, median) spans mean ± ci95.
    segs = [c for c in ax.collections if hasattr(c, "get_segments")][0].get_segments()
    lo, hi = segs[0][0][1], segs[0][1][1]
    assert math.isclose(hi - lo, 2 * tables["x=1"]["slowdown_p50_ci95"][0], rel_tol=1e-9)
    plots.plt().close(fig)


def test_sweep_page_has_the_chart_only_with_bucket_columns(tmp_path):
    sw = Sweep(path=tmp_path, meta={}, data=_data(), keys=["x"], name="s")
    titles = [s.title for s in sweep_page(sw).sections]
    assert "FCT slowdown by flow size" in titles
    plain = Sweep(path=tmp_path, meta={}, data=_data().select("point", "x", "seed", "fct_p99_us"), keys=["x"], name="s")
    assert "FCT slowdown by flow size" not in [s.title for s in sweep_page(plain).sections]


def test_a_real_sweep_report_and_plot_draw_the_bucket_chart(tmp_path):
    scen = tmp_path / "small.toml"
    scen.write_text(SMALL_TOML)
    folder = tmp_path / "sw"
    r = CliRunner().invoke(main, ["sweep", str(scen), "--grid", "topology.paths=1,2", "--seeds", "2", "-j", "1", "-o", str(folder), "--no-progress"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    sw = load_sweep(folder)
    tables = sweep_by_size(sw.ok, sw.keys)
    assert list(tables) == ["topology.paths=1", "topology.paths=2"]
    # Each point's bar is the mean of its seeds' headline medians, as sweep.parquet has them.
    for label, t in tables.items():
        paths = int(label.split("=")[1])
        for row in t.iter_rows(named=True):
            col = sw.ok.filter(pl.col("topology.paths") == paths)[f"slowdown_p50_{row['bucket']}"].drop_nulls()
            assert math.isclose(row["slowdown_p50"], float(np.mean(col.to_numpy())), rel_tol=1e-12)
    out = tmp_path / "sw.html"
    r = CliRunner().invoke(main, ["report", str(folder), "-o", str(out)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    html = out.read_text(encoding="utf-8")
    assert "FCT slowdown by flow size" in html
    assert "FCT slowdown by flow size for each point of topology.paths" in html
    pngs = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert any(base64.b64decode(p).startswith(b"\x89PNG") for p in pngs)
    r = CliRunner().invoke(main, ["plot", str(folder), "-o", str(tmp_path / "figs")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert (Path(tmp_path / "figs") / "slowdown_by_size.png").read_bytes().startswith(b"\x89PNG")
