"""Outputs researchers of isolation and load balancing use (issue 28 §3): a tenant's latency
first-class (headline, ``compare --metric``, the report's CDF and latency over time), FCT slowdown
by flow-size bucket (report, compare, sweeps), figures for a paper (axis labels in words with
units, 95% confidence intervals over seeds, distinct styles, SVG/PDF) and ``braid plot``.

Values are checked against numpy on the run's own tables (what the simulator wrote), and the
interval against Student's t from a statistics table. Each test fails on the code before the
change (no such headline keys, sections, figures, formats or command)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

import braid
from braid.cli import main
from braid.report import plots
from braid.report.buckets import bucket_names, slowdown_by_size

LINK = '{ rate = "100Gbps", delay = "1us" }'

TWO_TENANTS = f"""\
name = "latency beside bandwidth"
seed = 2
duration = "3ms"
[topology]
kind = "dumbbell"
left = 2
right = 2
host_link = {LINK}
bottleneck = {LINK}
[[apps]]
kind = "write_lat"
src = 0
dst = 2
size = "64B"
iterations = 200
[[apps]]
kind = "write_bw"
src = 1
dst = 3
size = "64KB"
qps = 2
[[traffic]]
pattern = "poisson"
load = 0.3
cdf = "google-rpc"
duration = "200us"
"""


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def one_line_error(r, key: str, *fragments: str) -> str:
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"error: {key}"), lines[0]
    for f in fragments:
        assert f in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    """Two runs of the scenario (two seeds), written with braid run -o."""
    d = tmp_path_factory.mktemp("lat")
    s = d / "two.toml"
    s.write_text(TWO_TENANTS)
    for seed in (2, 3):
        r = invoke("run", s, "-o", d / f"s{seed}", "--seed", seed, "--no-progress")
        assert r.exit_code == 0, r.output
    return d


def _client_latencies_us(folder: Path, app: int) -> np.ndarray:
    """The write_lat client's message latencies, by hand: its host and tenant slot from
    tenants.parquet, its messages from messages.parquet."""
    tn = pl.read_parquet(folder / "tenants.parquet").filter(pl.col("label") == f"apps[{app}].client")
    host, slot = tn["host"][0], tn["tenant"][0]
    m = pl.read_parquet(folder / "messages.parquet").filter((pl.col("host") == host) & (pl.col("tenant") == slot))
    return m["latency_ps"].to_numpy() / 1e6


def test_a_tenants_latency_is_in_the_headline(two):
    folder = two / "s2"
    h = json.loads((folder / "summary.json").read_text())["headline"]
    lat = _client_latencies_us(folder, 0)
    assert len(lat) >= 200
    for key, q in (("lat_p50_us", 50), ("lat_p99_us", 99), ("lat_p999_us", 99.9)):
        assert math.isclose(h[f"apps[0].{key}"], float(np.percentile(lat, q)), rel_tol=1e-9), key
    assert h["apps[0].lat_p50_us"] <= h["apps[0].lat_p99_us"] <= h["apps[0].lat_p999_us"]
    # The message rate: messages over first post to last completion.
    m = pl.read_parquet(folder / "messages.parquet")
    assert h["apps[0].msg_rate_mps"] > 0 and h["apps[1].msg_rate_mps"] > h["apps[0].msg_rate_mps"]
    # The bandwidth tenant's 64 KB messages take longer than the 64 B pings.
    assert h["apps[1].lat_p50_us"] > h["apps[0].lat_p50_us"]
    assert "tenant" in m.columns
    # braid.run's RunResult and the folder read back agree.
    assert braid.read_results(folder).headline["apps[0].lat_p99_us"] == h["apps[0].lat_p99_us"]


def test_compare_metric_takes_a_tenants_latency(two):
    r = invoke("compare", two / "s2", two / "s3", "--metric", "apps[0].lat_p99_us", "--metric", "apps[0].lat_p999_us")
    assert r.exit_code == 0, r.output
    assert "apps[0].lat_p99_us" in r.output and "apps[0].lat_p999_us" in r.output


def test_slowdown_by_flow_size_bucket(two):
    folder = two / "s2"
    fl = pl.read_parquet(folder / "flows.parquet").filter(pl.col("slowdown").is_not_null())
    h = json.loads((folder / "summary.json").read_text())["headline"]
    b = slowdown_by_size(fl)
    assert b.height >= 2
    sizes, sd = fl["size"].to_numpy(), fl["slowdown"].to_numpy()
    edges = [0, 10_000, 100_000, 1_000_000, 10_000_000, None]
    names = bucket_names()
    for i, name in enumerate(names):
        lo, hi = edges[i], edges[i + 1]
        sel = sd[(sizes >= lo) & ((sizes < hi) if hi is not None else True)]
        if len(sel) == 0:
            assert f"slowdown_p50_{name}" not in h
            continue
        assert math.isclose(h[f"slowdown_p50_{name}"], float(np.percentile(sel, 50)), rel_tol=1e-9)
        assert math.isclose(h[f"slowdown_p99_{name}"], float(np.percentile(sel, 99)), rel_tol=1e-9)
    assert names == ["0-10KB", "10KB-100KB", "100KB-1MB", "1MB-10MB", "10MB+"]


def test_report_has_latency_and_slowdown_sections_and_figures(two, tmp_path):
    out = tmp_path / "r.html"
    r = invoke("report", two / "s2", "-o", out)
    assert r.exit_code == 0, r.output
    html = out.read_text(encoding="utf-8")
    for s in ("Latency per tenant", "FCT slowdown by flow size", "latency per tenant", "latency over time per tenant"):
        assert s in html, s
    from braid.folders import load_run
    from braid.report.pages import run_figures

    stems = [s for s, _w, _f in run_figures(load_run(two / "s2"))]
    assert {"slowdown_by_size", "latency_cdf", "latency_time"} <= set(stems)


def test_compare_draws_slowdown_by_size_and_latency_cdfs(two, tmp_path):
    r = invoke("compare", two / "s2", two / "s3", "-o", tmp_path / "cmp")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "cmp" / "slowdown_by_size.png").is_file()
    assert (tmp_path / "cmp" / "latency_cdf.png").is_file()


def test_braid_plot_redraws_with_options_and_vector_formats(two, tmp_path):
    r = invoke("plot", two / "s2", "--figure", "slowdown_by_size", "--figure", "latency_time", "--buckets", "5KB,50KB,500KB", "--window", "20us", "--format", "svg", "-o", tmp_path / "f")
    assert r.exit_code == 0, r.output
    svg = (tmp_path / "f" / "slowdown_by_size.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    # The buckets asked for, not the default decades.
    assert "5KB-50KB" in svg and "10KB-100KB" not in svg
    assert (tmp_path / "f" / "latency_time.svg").is_file()
    r = invoke("plot", two / "s2", two / "s3", "--figure", "latency_cdf", "--format", "pdf", "-o", tmp_path / "g")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "g" / "latency_cdf.pdf").read_bytes().startswith(b"%PDF")
    # Same results, same bytes (no dates in the files).
    r2 = invoke("plot", two / "s2", two / "s3", "--figure", "latency_cdf", "--format", "pdf", "-o", tmp_path / "h")
    assert (tmp_path / "h" / "latency_cdf.pdf").read_bytes() == (tmp_path / "g" / "latency_cdf.pdf").read_bytes(), r2.output
    one_line_error(invoke("plot", two / "s2", "--buckets", "1MB,10KB"), "--buckets", "increasing")
    one_line_error(invoke("plot", two / "s2", "--window", "soon"), "--window", "positive duration")
    one_line_error(invoke("plot", two / "s2", "--figure", "nope"), "--figure", "'nope'", "slowdown_by_size")
    one_line_error(invoke("plot", two / "s2", "--metric", "fct_p99_us"), "--metric", "sweep")


def test_sweep_figures_show_95_percent_confidence_intervals(tmp_path):
    # Student's t for 2 degrees of freedom: 4.303 (any statistics table).
    assert math.isclose(plots.ci95(1.0, 3), 4.303 / math.sqrt(3), rel_tol=1e-9)
    assert plots.ci95(2.0, 1) == 0.0
    assert math.isclose(plots.ci95(1.0, 100), 1.96 / 10, rel_tol=1e-9)
    from braid.folders import Sweep
    from braid.report.pages import sweep_stats

    data = pl.DataFrame({"point": [0, 0, 0, 1, 1, 1], "x": [1, 1, 1, 2, 2, 2], "seed": [1, 2, 3] * 2, "m": [1.0, 2.0, 3.0, 5.0, 5.0, 8.0]})
    st = sweep_stats(Sweep(path=tmp_path, meta={}, data=data, keys=["x"]), "m", ["x"])
    for row, vals in zip(st.iter_rows(named=True), ([1.0, 2.0, 3.0], [5.0, 5.0, 8.0])):
        assert math.isclose(row["ci95"], 4.303 * np.std(vals, ddof=1) / math.sqrt(3), rel_tol=1e-9)
    fig = plots.sweep_metric_figure({"s": st}, "x", "fct_p99_us", "t")
    ax = fig.axes[0]
    assert ax.get_ylabel() == "Flow completion time, 99th percentile (µs)"
    assert "95% confidence interval" in ax.get_title()
    # The error bar of the first point spans mean ± ci95, not min..max.
    segs = [c for c in ax.collections if hasattr(c, "get_segments")][0].get_segments()
    lo, hi = segs[0][0][1], segs[0][1][1]
    assert math.isclose(hi - lo, 2 * st["ci95"][0], rel_tol=1e-9)


def test_axis_labels_are_words_with_units_and_styles_distinct():
    assert plots.axis_label("fct_p99_us") == "Flow completion time, 99th percentile (µs)"
    assert plots.axis_label("apps[1].lat_p999_us") == "apps[1]: latency, 99.9th percentile (µs)"
    assert plots.axis_label("aggregate_goodput_gbps") == "Aggregate goodput (Gbit/s)"
    assert plots.axis_label("slowdown_p50_0-10KB") == "FCT slowdown, median, flows 0-10KB (× ideal FCT)"
    st = plots.styles(45)
    assert len({(s["color"], s["marker"], s["linestyle"]) for s in st}) == 45


def test_api_page_builds_from_the_docstrings(tmp_path):
    """docs: `make api-docs` (pdoc, in the test extra so CI has it) builds the API page."""
    out = tmp_path / "api"
    r = subprocess.run([sys.executable, "-m", "pdoc", "braid", "braid.sweep", "braid.report", "-o", str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    page = (out / "braid.html").read_text(encoding="utf-8")
    for name in ("run", "read_results", "RunResult", "estimate"):
        assert f'id="{name}"' in page, name
    assert "Reads a results folder" in page
    assert (out / "braid" / "sweep.html").is_file() and (out / "braid" / "report.html").is_file()
