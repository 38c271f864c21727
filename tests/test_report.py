"""braid report (one self-contained HTML page), braid compare, and the plot fixes (issue 12:
"Sweeps and comparisons", "Plots", "a corrupted results folder"). The browser half is in
test_report_browser.py.

Values are checked against what we did not compute here: summary.json's own figures, numpy's
percentiles, the simulator's pfc_paused_ps counter."""

from __future__ import annotations

import base64
import csv
import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner
from conftest import SMALL_TOML

from braid.report import plots
from braid.cli import main
from braid.scenario import packaged_scenario

XSS = "<script>alert(1)</script>"
NAME_OVERRIDE = f'name="{XSS}"'


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
def runs(tmp_path_factory):
    """Two runs of one scenario in folders of the same name (a/run, b/run) and a PFC-bound incast."""
    d = tmp_path_factory.mktemp("runs")
    scen = d / "small.toml"
    scen.write_text(SMALL_TOML)
    assert invoke("run", scen, "-o", d / "a" / "run", "--set", "transport.kind=none", "--set", NAME_OVERRIDE, "--no-progress").exit_code == 0
    assert invoke("run", scen, "-o", d / "b" / "run", "--no-progress").exit_code == 0
    inc = d / "incast"
    r = invoke("run", packaged_scenario("incast"), "-o", inc, "--set", "transport.kind=none", "--no-progress")
    assert r.exit_code == 0, r.output
    return d


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweeps")
    scen = d / "small.toml"
    scen.write_text(SMALL_TOML)
    for name, extra in (("dcqcn", []), ("plain", ["--set", "transport.kind=none"])):
        r = invoke("sweep", scen, "--grid", "topology.paths=1,2", "--seeds", "2", "-j", "2", "-o", d / name, "--no-progress", *extra)
        assert r.exit_code == 0, r.output
    return d


def _html(p: Path) -> str:
    return p.read_text(encoding="utf-8")


def _pngs(html: str) -> list:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)]


# --- braid report: one self-contained page ------------------------------------------------------


def test_run_report_is_one_self_contained_page(runs):
    folder = runs / "b" / "run"
    r = invoke("report", folder)
    assert r.exit_code == 0, r.output
    html = _html(folder / "report.html")
    s = json.loads((folder / "summary.json").read_text())
    # Headline figures as summary.json has them, the seed, the version, the scenario as TOML.
    assert f"{int(s['headline']['delivered_bytes']):,}" in html
    assert f"<th>seed</th><td>{s['seed']}</td>" in html
    assert f"<th>braid</th><td>{s['braid_version']}</td>" in html
    assert "[topology]" in html and 'kind = &#34;two-tor&#34;' in html
    # Plots embedded as PNG; nothing fetched from anywhere; no script at all.
    pngs = _pngs(html)
    # throughput, FCT CDFs, slowdown by flow size, latency CDF and latency over time per tenant, queues.
    assert len(pngs) == 6 and all(p.startswith(b"\x89PNG\r\n\x1a\n") for p in pngs)
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert "<script" not in html.lower()
    assert "default-src &#39;none&#39;" in html or "default-src 'none'" in html
    # Written in place: the PNGs and report.md as before.
    for f in ("throughput.png", "fct_cdf.png", "queues.png", "report.md"):
        assert (folder / f).exists()


def test_report_escapes_everything_from_the_scenario(runs, tmp_path):
    out = tmp_path / "page.html"
    r = invoke("report", runs / "a" / "run", "-o", out)
    assert r.exit_code == 0, r.output
    html = _html(out)
    assert XSS not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<title>&lt;script&gt;alert(1)&lt;/script&gt;</title>" in html
    # The override that named it is listed (escaped), as is the other one.
    assert "name=&#34;&lt;script&gt;alert(1)&lt;/script&gt;&#34;" in html
    assert "transport.kind=none" in html


def test_report_with_o_writes_only_that_file(runs, tmp_path):
    folder = runs / "a" / "run"
    before = sorted(p.name for p in folder.iterdir())
    out = tmp_path / "sub" / "x.html"
    assert invoke("report", folder, "-o", out).exit_code == 0
    assert out.exists() and sorted(p.name for p in folder.iterdir()) == before


def test_report_is_deterministic(runs):
    from braid.folders import load_run
    from braid.report.html import render
    from braid.report import run_page

    pages = []
    for _ in range(2):
        p = run_page(load_run(runs / "incast"))
        p.created = "fixed"
        pages.append(render(p))
    assert pages[0] == pages[1]


def test_sweep_report_plots_metrics_against_the_swept_key(sweeps, tmp_path):
    folder = sweeps / "plain"
    out = tmp_path / "sw.html"
    r = invoke("report", folder, "-o", out, "--metric", "aggregate_goodput_gbps", "--metric", "fct_p99_us")
    assert r.exit_code == 0, r.output
    html = _html(out)
    # The two metrics asked for, and the FCT slowdown by flow-size bucket across the points.
    assert len(_pngs(html)) == 3
    assert "topology.paths" in html and "transport.kind=&#34;none&#34;" in html
    # Every point of the dataset is in the table.
    df = pl.read_parquet(folder / "sweep.parquet")
    assert df.height == 4
    for v in df["fct_p99_us"].to_list():
        assert f"{v:.4g}" in html
    one_line_error(invoke("report", folder, "--metric", "nope"), "--metric", "'nope'", "aggregate_goodput_gbps")


# --- braid compare ------------------------------------------------------------------------------


def test_compare_runs_side_by_side(runs, tmp_path):
    a, b = runs / "a" / "run", runs / "b" / "run"
    out = tmp_path / "cmp"
    r = invoke("compare", a, b, "-o", out, "--html", tmp_path / "cmp.html")
    assert r.exit_code == 0, r.output
    # Two folders named "run": told apart by their parents.
    assert "a/run" in r.stdout and "b/run" in r.stdout
    rows = list(csv.DictReader(open(out / "compare.csv")))
    assert [x["run"] for x in rows] == ["a/run", "b/run"]
    for row, folder in zip(rows, (a, b)):
        s = json.loads((folder / "summary.json").read_text())
        for k in ("fct_p99_us", "aggregate_goodput_gbps", "flow_goodput_jain"):
            assert float(row[k]) == pytest.approx(s["headline"][k], rel=1e-12)
        assert float(row["ecn_marks"]) == s["counters"]["ecn_marks"]
    pq = pl.read_parquet(out / "compare.parquet")
    assert pq.height == 2 and pq["overrides"][0] == f"transport.kind=none {NAME_OVERRIDE}"
    for f in ("fct_cdf.png", "throughput.png", "slowdown_by_size.png", "latency_cdf.png"):
        assert (out / f).read_bytes().startswith(b"\x89PNG")
    html = _html(tmp_path / "cmp.html")
    assert len(_pngs(html)) == 4 and XSS not in html and "&lt;script&gt;" in html


def test_compare_metric_option(runs):
    r = invoke("compare", runs / "a" / "run", runs / "b" / "run", "--metric", "fct_p99_us")
    assert r.exit_code == 0
    assert "fct_p99_us" in r.stdout and "fct_mean_us" not in r.stdout
    one_line_error(invoke("compare", runs / "a" / "run", runs / "b" / "run", "--metric", "fct_p99"), "--metric", "'fct_p99'", "fct_p99_us")


def test_compare_sweeps_metric_against_the_swept_key(sweeps, tmp_path):
    out = tmp_path / "cmp"
    r = invoke("compare", sweeps / "dcqcn", sweeps / "plain", "--metric", "fct_mean_us", "-o", out, "--html", tmp_path / "c.html")
    assert r.exit_code == 0, r.output
    got = pl.read_parquet(out / "compare.parquet")
    assert got.columns[:2] == ["sweep", "topology.paths"]
    for name in ("dcqcn", "plain"):
        ds = pl.read_parquet(sweeps / name / "sweep.parquet")
        for paths in (1, 2):
            want = float(np.mean(ds.filter(pl.col("topology.paths") == paths)["fct_mean_us"].to_numpy()))
            row = got.filter((pl.col("sweep") == name) & (pl.col("topology.paths") == paths))
            assert row["fct_mean_us"][0] == pytest.approx(want, rel=1e-12)
    assert (out / "fct_mean_us.png").exists()
    assert len(_pngs(_html(tmp_path / "c.html"))) == 1


def test_compare_mismatched_inputs_are_one_line(runs, sweeps, tmp_path):
    one_line_error(invoke("compare", runs / "a" / "run", sweeps / "plain"), "compare", "a run", "a sweep")
    one_line_error(invoke("compare", runs / "a" / "run", tmp_path / "nothing"), str(tmp_path / "nothing"), "no such folder")
    one_line_error(invoke("compare", runs / "a" / "run"), "compare", "at least two")
    (tmp_path / "empty").mkdir()
    one_line_error(invoke("compare", runs / "a" / "run", tmp_path / "empty"), str(tmp_path / "empty"), "not a braid results folder")


# --- damaged folders: one line, exit 2, from report and compare ------------------------------


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    for f in dst.glob("report.*"):
        f.unlink()
    return dst


@pytest.mark.parametrize(
    "damage, file, fragment",
    [
        (lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]), "flows.parquet", "cannot be read as Parquet"),
        (lambda p: p.write_bytes(p.read_bytes()[:100]), "throughput.parquet", "cannot be read as Parquet"),
        (lambda p: p.write_text(p.read_text()[:50]), "summary.json", "not valid JSON"),
        (lambda p: p.write_text(json.dumps({"headline": [1, 2]})), "summary.json", "'headline' is not a JSON object"),
        (lambda p: p.write_text(json.dumps({"scenario": {"name": "x"}})), "summary.json", "no 'headline'"),
        (lambda p: p.write_text(json.dumps({"headline": {}, "scenario": {"overrides": "a=1"}})), "summary.json", "not a list of strings"),
        (lambda p: p.write_bytes(b"\xff\xfe\x00"), "summary.json", "not UTF-8"),
    ],
)
def test_damaged_run_folder(runs, tmp_path, damage, file, fragment):
    bad = _copy(runs / "b" / "run", tmp_path / "bad")
    damage(bad / file)
    one_line_error(invoke("report", bad), str(bad / file), fragment)
    one_line_error(invoke("compare", runs / "a" / "run", bad), str(bad / file), fragment)
    assert not (bad / "report.html").exists()


def test_run_folder_without_summary(runs, tmp_path):
    bad = _copy(runs / "b" / "run", tmp_path / "bad")
    (bad / "summary.json").unlink()
    one_line_error(invoke("report", bad), str(bad), "not a braid results folder")
    one_line_error(invoke("compare", bad, runs / "a" / "run"), str(bad), "not a braid results folder")


def test_table_without_its_columns(runs, tmp_path):
    bad = _copy(runs / "b" / "run", tmp_path / "bad")
    pl.DataFrame({"x": [1]}).write_parquet(bad / "queues.parquet")
    one_line_error(invoke("report", bad), "queues.parquet", "lacks the column(s) time_ps, port, bytes")


@pytest.mark.parametrize(
    "damage, file, fragment",
    [
        (lambda p: p.write_bytes(p.read_bytes()[:64]), "sweep.parquet", "cannot be read as Parquet"),
        (lambda p: p.unlink(), "sweep.parquet", "braid sweep --collect"),
        (lambda p: p.write_text("{"), "sweep.json", "not valid JSON"),
        (lambda p: p.write_text('{"grid_keys": 3}'), "sweep.json", "'grid_keys' is not a list"),
        (lambda p: p.unlink(), "sweep.json", "is missing"),
    ],
)
def test_damaged_sweep_folder(sweeps, tmp_path, damage, file, fragment):
    bad = _copy(sweeps / "plain", tmp_path / "bad")
    damage(bad / file)
    one_line_error(invoke("report", bad), str(bad / file), fragment)
    one_line_error(invoke("compare", sweeps / "dcqcn", bad), str(bad / file), fragment)


# --- plots ----------------------------------------------------------------------------------


@pytest.mark.parametrize("max_ps, unit", [(500, "ns"), (9_000, "ns"), (300e6, "µs"), (999e6, "µs"), (5e9, "ms"), (2e12, "s"), (0, "ns")])
def test_time_unit_fits_the_range(max_ps, unit):
    u, scale = plots.time_unit(max_ps)
    assert u == unit
    if max_ps >= 1e3:
        assert 1 <= max_ps / scale < 1000 or u == "s"


def test_titles_name_the_overrides_and_axes_use_the_unit_that_fits(runs):
    from braid.folders import load_run
    from braid.report import run_figures

    figs = run_figures(load_run(runs / "a" / "run"))
    assert [s for s, _w, _f in figs] == ["throughput", "fct_cdf", "slowdown_by_size", "latency_cdf", "latency_time", "queues"]
    for _s, _w, f in figs:
        title = f.axes[0].get_title() + (f._suptitle.get_text() if f._suptitle else "")
        assert "--set transport.kind=none" in title, title
    # The run lasts ~0.5 ms: time in µs, FCTs (~500 µs) in µs.
    assert figs[0][2].axes[0].get_xlabel() == "time (µs)"
    assert figs[1][2].axes[0].get_xlabel() == "flow completion time (µs)"
    inc = run_figures(load_run(runs / "incast"))
    # The incast runs 1.7 ms: milliseconds.
    assert inc[0][2].axes[0].get_xlabel() == "time (ms)"


def test_many_flows_are_percentile_bands_not_dropped_lines():
    rng = np.random.default_rng(7)
    n, steps = 40, 25
    times = np.repeat(np.arange(1, steps + 1) * 10_000_000, n)
    flows = np.tile(np.arange(n), steps)
    g = rng.uniform(0, 40, size=n * steps)
    tp = pl.DataFrame({"time_ps": times, "flow": flows, "bytes": (g * 1e3).astype(np.int64), "gbps": g})
    fig = plots.throughput_figure(tp, pl.DataFrame(), "many")
    ax = fig.axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert sorted(labels) == ["mean", "p10–p90 across flows", "p50 (median flow)"]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    want = np.percentile(g.reshape(steps, n), [10, 50, 90], axis=1)
    np.testing.assert_allclose(lines["p50 (median flow)"].get_ydata(), want[1])
    np.testing.assert_allclose(lines["mean"].get_ydata(), g.reshape(steps, n).mean(axis=1))
    band = [c for c in ax.collections if c.get_label() == "p10–p90 across flows"][0]
    ys = np.concatenate([p.vertices[:, 1] for p in band.get_paths()])
    assert ys.min() == pytest.approx(want[0].min()) and ys.max() == pytest.approx(want[2].max())
    assert "40 flows" in ax.get_title()
    # Few flows: one line each.
    few = plots.throughput_figure(tp.filter(pl.col("flow") < 5), pl.DataFrame(), "few")
    assert len(few.axes[0].get_lines()) == 5


def test_pfc_pause_intervals_marked_on_queue_plots(runs):
    from braid.folders import load_run
    from braid.report import run_figures

    run = load_run(runs / "incast")
    assert run.counters["pfc_pauses"] > 0
    iv = plots.pause_intervals(run.table("pfc"), run.end_ps)
    # The intervals' total is the simulator's own pause counter.
    assert int((iv["end_ps"] - iv["start_ps"]).sum()) == run.counters["pfc_paused_ps"]
    assert iv.height == run.counters["pfc_pauses"]
    fig = dict((s, f) for s, _w, f in run_figures(run))["queues"]
    assert len(fig.axes) == 2
    strip = fig.axes[1]
    assert "PFC pause" in strip.get_title()
    bars = [c for c in strip.collections]
    ports = iv.select("node_name", "port").unique().height
    assert len(bars) == min(ports, plots.MAX_PFC_ROWS)
    drawn = sum(len(c.get_paths()) for c in bars)
    assert drawn == iv.height


def test_compare_out_dir_that_holds_results_is_refused(runs):
    a, b = runs / "a" / "run", runs / "b" / "run"
    before = sorted(p.name for p in a.iterdir())
    one_line_error(invoke("compare", a, b, "-o", a), "-o", "holds braid results")
    assert sorted(p.name for p in a.iterdir()) == before


def test_sweep_page_escapes_keys_values_and_errors():
    from braid.folders import Sweep
    from braid.report.html import render
    from braid.report import sweep_page

    bad = "<img src=x onerror=alert(1)>"
    data = pl.DataFrame(
        {
            "point": ["p1", "p2"],
            "<k>": ["<b>v</b>", "w"],
            "seed": [1, 1],
            "fct_mean_us": [1.5, None],
            "error": [None, f"--grid <k>: {bad}"],
        }
    )
    sw = Sweep(path=Path("<sw>"), meta={"scenario": "</td><script>x</script>", "grid_keys": ["<k>"], "set": [["name", bad]]}, data=data, name="<sw>", keys=["<k>"])
    html = render(sweep_page(sw))
    for raw in (bad, "<b>v</b>", "<k>", "<script>", "<sw>"):
        assert raw not in html, raw
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and "&lt;b&gt;v&lt;/b&gt;" in html


def test_metric_option_is_for_sweeps(runs):
    one_line_error(invoke("report", runs / "incast", "--metric", "drops"), "--metric", "applies to a sweep folder", "is a run folder")


def test_overlaid_cdfs_are_the_runs_empirical_cdfs(runs):
    from braid.folders import load_run

    a, b = load_run(runs / "a" / "run"), load_run(runs / "b" / "run")
    fig = plots.overlay_fct_figure({"a": a.table("flows"), "b": b.table("flows")}, "t")
    lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
    for name, run in (("a", a), ("b", b)):
        fct = np.sort(run.table("flows")["fct_ps"].to_numpy().astype(float)) / 1e6  # µs: < 1 ms
        x, y = lines[name].get_xdata(), lines[name].get_ydata()
        np.testing.assert_allclose(x[1:], fct)
        np.testing.assert_allclose(y, np.arange(0, fct.size + 1) / fct.size)
    assert fig.axes[0].get_xlabel() == "flow completion time (µs)"
