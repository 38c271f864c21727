"""``braid report FOLDER [-o FILE]``: one self-contained HTML page for a run, a sweep or a demo
folder (docs/report.md), plus, for a run written in place, its PNG plots and a markdown report."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, List, Optional, Sequence

import polars as pl

from . import buckets, latency, plots
from ..folders import RUN, SWEEP, Run, Sweep, kind_of, load_run, load_sweep, table_files
from .html import Page, Section, fmt, render, toml_dump
from ..results import check_out_file, layer_table_names, read_json_file, write_text_atomic
from ..scenario import BraidError
from ..show import COUNTER_ORDER, HEADLINE_LABELS, HEADLINE_ORDER, fmt_ps

__all__ = ["make_report", "plot_run", "run_page", "sweep_page", "run_figures", "run_images", "MAX_FLOW_LINES"]

MAX_FLOW_LINES = plots.MAX_FLOW_LINES
#: Rows of a table shown in a page (the data files hold them all).
MAX_ROWS = 200
#: Metrics a sweep's page plots when present (the dataset holds the others).
SWEEP_METRICS = (
    "aggregate_goodput_gbps",
    "app_goodput_sum_gbps",
    "fct_mean_us",
    "fct_p99_us",
    "slowdown_p99",
    "flow_goodput_jain",
    "drops",
    "pfc_pauses",
)


# --- one run ---------------------------------------------------------------------------------


def run_figures(run: Run, edges: Sequence[int] = buckets.DEFAULT_EDGES, window_ps: Optional[float] = None) -> List[tuple]:
    """[(file stem, alt text, Figure)] for a run: goodput per flow, FCT CDFs, FCT slowdown by
    flow size (``edges``), each tenant's latency CDF and latency over time (``window_ps``), queues
    (with PFC), the congestion controllers' state (``measure.cc``)."""
    name, ov = run.scenario_name, run.overrides
    out = []
    tm = lambda: latency.tenant_messages(run.table("messages"), run.table("tenants"))  # noqa: E731
    for stem, what, fig in (
        ("throughput", "goodput per flow", lambda t: plots.throughput_figure(run.table("throughput"), run.table("flows"), t)),
        ("fct_cdf", "flow completion", lambda t: plots.fct_figure(run.table("flows"), t)),
        ("slowdown_by_size", "FCT slowdown by flow size", lambda t: plots.slowdown_buckets_figure({"": buckets.slowdown_by_size(run.table("flows"), edges)}, t)),
        ("latency_cdf", "latency per tenant", lambda t: plots.latency_cdf_figure(tm(), t)),
        ("latency_time", "latency over time per tenant", lambda t: plots.latency_time_figure(tm(), t, window_ps)),
        ("queues", "queue length", lambda t: plots.queues_figure(run.table("queues"), t, run.table("pfc"), run.end_ps)),
        ("cc", "congestion control", lambda t: plots.cc_figure(run.table("cc"), t)),
    ):
        f = fig(plots.title_of(name, what, ov))
        if f is not None:
            out.append((stem, what, f))
    return out


def _headline_rows(h: dict) -> List[tuple]:
    keys = [k for k in HEADLINE_ORDER if k in h] + sorted(k for k in h if k not in HEADLINE_ORDER)
    rows = []
    for k in keys:
        if k in ("flows_completed", "apps_completed"):
            continue
        if k == "flows" and "flows_completed" in h:
            if h["flows"] or not h.get("apps"):
                rows.append(("flows completed", f"{fmt(h['flows_completed'])} / {fmt(h['flows'])}"))
            continue
        if k == "apps" and "apps_completed" in h:
            rows.append(("apps completed", f"{fmt(h['apps_completed'])} / {fmt(h['apps'])}"))
            continue
        rows.append((HEADLINE_LABELS.get(k, k), h[k]))
    return rows


def _counter_rows(c: dict) -> List[tuple]:
    keys = [k for k in COUNTER_ORDER if k in c] + sorted(k for k in c if k not in COUNTER_ORDER)
    return [(k, c[k]) for k in keys]


FLOW_COLUMNS = ("flow", "kind", "src", "dst", "size", "start_ps", "fct_ps", "slowdown", "goodput_gbps", "paths", "path_set")


TENANT_COLUMNS = ("host", "tenant", "label", "stack", "cpu_ns", "posts", "polls", "lat_p50_us", "lat_p99_us", "goodput_gbps", "msg_rate_mps")


def _flows_table(sec: Section, flows: pl.DataFrame) -> None:
    if flows.height == 0:
        return
    cols = [c for c in FLOW_COLUMNS if c in flows.columns]
    rows = []
    for r in flows.head(MAX_ROWS).select(cols).iter_rows(named=True):
        rows.append([fmt_ps(r[c]) if c.endswith("_ps") and r[c] is not None else r[c] for c in cols])
    cap = f"the first {MAX_ROWS} of {flows.height:,} (all in flows.parquet)" if flows.height > MAX_ROWS else None
    sec.table([c.replace("_ps", "") for c in cols], rows, caption=cap)


def _pfc_table(sec: Section, run: Run) -> None:
    pauses = plots.pause_intervals(run.table("pfc"), run.end_ps)
    if pauses.height == 0:
        return
    t = (
        pauses.with_columns((pl.col("end_ps") - pl.col("start_ps")).alias("d"))
        .group_by(["node_name", "port", "priority"])
        .agg(pl.len().alias("n"), pl.col("d").sum().alias("paused"))
        .sort(["paused", "node_name", "port"], descending=[True, False, False])
    )
    rows = [(f"{r['node_name']}:{r['port']}", r["priority"], r["n"], fmt_ps(r["paused"])) for r in t.head(MAX_ROWS).iter_rows(named=True)]
    sec.table(["port", "priority", "pauses", "time paused"], rows, caption="pause intervals a port received (pause to resume)")


def _layer_table(sec: Section, run: Run, name: str) -> None:
    """A table a middleware layer handed over (e.g. ``drum_rounds``): its last row per host and
    tenant (cumulative counters there are the run's), all rows in ``<name>.parquet``."""
    t = run.table(name)
    if not t.height:
        sec.text(f"{name}.parquet: no rows.")
        return
    keys = [k for k in ("host", "tenant") if k in t.columns]
    last = t.group_by(keys, maintain_order=True).last().sort(keys) if keys else t.tail(1)
    cols = [c for c in last.columns if last[c].dtype != pl.Utf8][:14]
    sec.table(cols, last.head(MAX_ROWS).select(cols).rows(), caption=f"the last of {t.height:,} rows of each host and tenant (all in {name}.parquet)")


def run_images(run: Run) -> List[tuple]:
    """[(file stem, alt text, PNG bytes)] of :func:`run_figures`."""
    return [(stem, what, plots.png(f, dpi=110)) for stem, what, f in run_figures(run)]


def run_page(run: Run, page: Optional[Page] = None, level: int = 2, images: Optional[List[tuple]] = None) -> Page:
    """The page for one run (or, with ``page``, its sections appended to a larger page);
    ``images`` from :func:`run_images` (made here if None)."""
    s = run.summary
    own = page is None
    if own:
        page = Page(title=run.scenario_name, subtitle=f"braid run results: {run.path}", version=str(s.get("braid_version") or ""))
        page.meta = _run_meta(run)
    else:
        head = page.section(f"{run.name}: {run.scenario_name}", level=level)
        head.table(["", ""], _run_meta(run))
        level += 1
    ov = page.section("Overrides", level=level)
    if run.overrides:
        ov.text("The scenario file's values changed by --set for this run:")
        ov.items(run.overrides)
    else:
        ov.text("None: the scenario as written.")
    hs = page.section("Headline", level=level)
    h = run.headline
    if s.get("finished") is False:
        hs.warn(f"The run reached its duration with traffic unfinished ({fmt(s.get('unfinished'))} flows or applications): FCT figures cover the completed ones.")
    if "flows" in h:
        hs.text("FCT and slowdown figures cover completed flows only; Jain's index covers every started flow (an unfinished one with its goodput so far).")
    hs.table(["metric", "value"], _headline_rows(h))
    _latency_and_buckets(page, run, level)
    images = run_images(run) if images is None else images
    if images:
        ps = page.section("Plots", level=level)
        for _stem, what, data in images:
            ps.image(data, f"{run.scenario_name}: {what}")
    if run.counters:
        page.section("Counters", level=level).table(["counter", "value"], _counter_rows(run.counters))
    pfc = run.table("pfc")
    if pfc.height:
        _pfc_table(page.section("PFC pauses", level=level), run)
    fl = run.table("flows")
    if fl.height:
        _flows_table(page.section("Flows", level=level), fl)
    tn = run.table("tenants")
    if tn.height:
        cols = [c for c in TENANT_COLUMNS if c in tn.columns]
        cap = f"the first {MAX_ROWS} of {tn.height:,} (all in tenants.parquet)" if tn.height > MAX_ROWS else "more columns in tenants.parquet"
        page.section("Tenants", level=level).table(cols, tn.head(MAX_ROWS).select(cols).rows(), caption=cap)
    for name in layer_table_names(run.path):
        _layer_table(page.section(f"Layer table {name}", level=level), run, name)
    files = table_files(run.path)
    if files:
        page.section("Tables", level=level).table(["file", "rows", "columns", "contents"], files, caption="every table of the run (columns in docs/report.md, \"The run's tables\")")
    sc = page.section("Scenario", level=level)
    src = run.scenario.get("source")
    sc.text(f"From {src}, as run (overrides applied):" if src else "As run (overrides applied):")
    data = run.scenario.get("data")
    sc.pre(toml_dump(data) if isinstance(data, dict) else "(not recorded)")
    rs = page.section("Run", level=level)
    rs.table(
        ["", ""],
        [
            ("wall time (s)", s.get("wall_s")),
            ("CPU time (s)", s.get("cpu_s")),
            ("events", s.get("events")),
            ("events/s", s.get("events_per_s")),
            ("simulated s per wall s", s.get("sim_s_per_wall_s")),
            ("created", s.get("created")),
        ],
    )
    return page


def _latency_and_buckets(page: Page, run: Run, level: int) -> None:
    """A tenant's latency (p50/p99/p99.9 and message rate) and the FCT slowdown by flow size."""
    lat = latency.tenant_latency(run.table("messages"), run.table("tenants"))
    if lat.height:
        page.section("Latency per tenant", level=level).table(
            ["tenant", "messages", "p50 (µs)", "p99 (µs)", "p99.9 (µs)", "message rate (M/s)"],
            lat.rows(),
            caption="each message the tenant posted, from post to completion (messages.parquet with tenants.parquet)",
        )
    b = buckets.slowdown_by_size(run.table("flows"))
    if b.height:
        page.section("FCT slowdown by flow size", level=level).table(
            ["flow size", "flows", "slowdown p50", "slowdown p99"],
            b.select("bucket", "flows", "slowdown_p50", "slowdown_p99").rows(),
            caption="completed traffic flows; slowdown = FCT / ideal FCT on the idle fabric",
        )


def _run_meta(run: Run) -> List[tuple]:
    s, h = run.summary, run.headline
    meta = [
        ("scenario", run.scenario_name),
        ("seed", fmt(s.get("seed"))),
        ("braid", str(s.get("braid_version") or "-")),
        ("overrides", ", ".join(run.overrides) if run.overrides else "none"),
        ("simulated time", fmt_ps(run.end_ps)),
    ]
    if "flows" in h:
        meta.append(("flows completed", f"{fmt(h.get('flows_completed'))} / {fmt(h.get('flows'))}"))
    if s.get("finished") is not None:
        meta.append(("finished", "yes" if s.get("finished") else "no: traffic unfinished at the end"))
    return meta


def _md_table(rows: Iterable[tuple], head=("metric", "value")) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append("| " + " | ".join(fmt(x).replace("|", "\\|") for x in r) + " |")
    return "\n".join(lines)


def plot_run(folder: Path, run: Optional[Run] = None, images: Optional[List[tuple]] = None) -> List[Path]:
    """Plots one results folder into PNGs and writes its report.md; returns the files written."""
    folder = Path(folder)
    run = run or load_run(folder)
    s = run.summary
    images = run_images(run) if images is None else images
    made = [plots.save(data, folder / f"{stem}.png") for stem, _w, data in images]
    md = [f"# {run.scenario_name}", ""]
    src = run.scenario.get("source")
    md.append(f"Scenario `{src or run.scenario_name}`, seed {s.get('seed')}, braid {s.get('braid_version')}.")
    if run.overrides:
        md.append("Overrides: " + ", ".join(f"`{o}`" for o in run.overrides) + ".")
    md += ["", "## Headline", ""]
    h = run.headline
    if "flows" in h:
        md.append(
            f"{fmt(h.get('flows_completed'))} of {fmt(h.get('flows'))} flows completed. FCT and slowdown "
            "figures cover completed flows only; Jain's index covers every started flow (an unfinished one "
            "with its goodput so far)."
        )
        md.append("")
    if s.get("finished") is False:
        md += ["**The run reached its duration with traffic unfinished.**", ""]
    md += [_md_table(sorted(h.items())), "", "## Counters", "", _md_table(sorted(run.counters.items())), "", "## Run", ""]
    if (folder / "trace.pcap").exists():
        n = (s.get("stats") or {}).get("pcap_packets")
        md += [f"Packet trace: `trace.pcap` ({fmt(n)} frames; open it in Wireshark or `tshark -r`).", ""]
    md.append(_md_table([("wall time (s)", s.get("wall_s")), ("CPU time (s)", s.get("cpu_s")), ("events", s.get("events")), ("events/s", s.get("events_per_s")), ("simulated s per wall s", s.get("sim_s_per_wall_s"))]))
    md.append("")
    if made:
        md += ["## Plots", ""]
        for p in made:
            md += [f"![{p.stem}]({p.name})", ""]
    rep = folder / "report.md"
    write_text_atomic(rep, "\n".join(md))
    return made + [rep]


# --- a sweep ---------------------------------------------------------------------------------


def sweep_stats(sw: Sweep, metric: str, keys: Sequence[str]) -> pl.DataFrame:
    """Per point of the grid (over seeds): mean, min, max of ``metric``, how many seeds, and
    ``ci95``, the half-width of the mean's 95% confidence interval (Student's t; 0 with one seed)."""
    d = sw.ok.filter(pl.col(metric).is_not_null())
    d = d.filter(pl.col(metric).cast(pl.Float64).is_not_nan())
    if not keys:
        d = d.with_columns(pl.lit("all").alias("point"))
        keys = ["point"]
    m = pl.col(metric).cast(pl.Float64)
    st = d.group_by(list(keys), maintain_order=True).agg(m.mean().alias("mean"), m.min().alias("min"), m.max().alias("max"), pl.len().alias("seeds"), m.std().alias("std"))
    ci = [plots.ci95(sd, n) for sd, n in zip(st["std"].to_list(), st["seeds"].to_list())]
    return st.with_columns(pl.Series("ci95", ci, dtype=pl.Float64)).drop("std")


def sweep_figures(series: dict, keys: Sequence[str], metrics: Sequence[str], title_fixed: Sequence[str] = (), title: str = "", subtitle: str = "") -> List[tuple]:
    """[(metric, Figure)]: each metric against the first swept key, a line per value of the
    second (further keys are folded into the second's label)."""
    out = []
    keys = list(keys)
    for metric in metrics:
        frames = {}
        x = keys[0] if keys else "point"
        group = None
        for name, sw in series.items():
            st = sweep_stats(sw, metric, keys)
            if len(keys) > 1:
                rest = keys[1:]
                st = st.with_columns(pl.concat_str([pl.lit(f"{k}=") + pl.col(k).cast(pl.String) for k in rest], separator=", ").alias("lines"))
                group = "lines"
            frames[name] = st
        if all(f.height == 0 for f in frames.values()):
            continue
        t = plots.title_of(title or "sweep", f"{metric} against {x}", title_fixed) + (f"\n{subtitle}" if subtitle else "")
        fig = plots.sweep_metric_figure(frames, x, metric, t, group=group)
        out.append((metric, fig))
    return out


def sweep_buckets_figure(series: dict, title: str = "", fixed: Sequence[str] = ()):
    """The grouped bar chart of FCT slowdown by flow-size bucket across a sweep's grid points
    (``buckets.sweep_by_size``; several sweeps: their points side by side, labelled with the
    sweep's name), or None when no point has a bucket column."""
    tables = {}
    for name, sw in series.items():
        for point, t in buckets.sweep_by_size(sw.ok, sw.keys).items():
            tables[f"{name}: {point}" if name else point] = t
    if not tables:
        return None
    return plots.slowdown_buckets_figure(tables, plots.title_of(title or "sweep", "FCT slowdown by flow size, mean over seeds with 95% confidence interval", fixed))


def default_sweep_metrics(sw: Sweep) -> List[str]:
    have = sw.metrics()
    return [m for m in SWEEP_METRICS if m in have] or have[:4]


def sweep_page(sw: Sweep, metrics: Optional[Sequence[str]] = None) -> Page:
    meta = sw.meta
    page = Page(title=f"sweep {sw.name}", subtitle=f"braid sweep results: {sw.path}")
    versions = sorted({str(v) for v in sw.data["braid_version"].drop_nulls().to_list()}) if "braid_version" in sw.data.columns else []
    seeds = sorted({int(v) for v in sw.data["seed"].drop_nulls().to_list()}) if "seed" in sw.data.columns and sw.data.height else []
    page.meta = [
        ("scenario", str(meta.get("scenario", "-"))),
        ("swept keys", ", ".join(sw.keys) or "none"),
        ("fixed overrides", ", ".join(sw.fixed) or "none"),
        ("seeds", ", ".join(map(str, seeds)) or "-"),
        ("points", f"{sw.ok.height} ran, {sw.failed.height} failed"),
    ]
    if versions:
        page.meta.append(("braid", ", ".join(versions)))
    ov = page.section("Overrides")
    ov.text("Every point runs the scenario with these fixed overrides" + (":" if sw.fixed else ": none."))
    if sw.fixed:
        ov.items(sw.fixed)
    ov.text("and one value of each swept key: " + (", ".join(sw.keys) or "none") + ".")
    metrics = list(metrics) if metrics else default_sweep_metrics(sw)
    figs = sweep_figures({"": sw}, sw.keys, metrics, sw.fixed, title=sw.name)
    if figs:
        ps = page.section("Metrics against the swept keys")
        ps.text("Each point: the mean over seeds, whiskers from the smallest to the largest seed's value.")
        for metric, f in figs:
            ps.image(plots.png(f), f"{metric} against {', '.join(sw.keys)}")
    fig = sweep_buckets_figure({"": sw}, title=sw.name, fixed=sw.fixed)
    if fig is not None:
        bs = page.section("FCT slowdown by flow size")
        bs.text("Per grid point, one bar per flow-size bucket: the median slowdown (FCT / ideal FCT on the idle fabric) of the point's completed traffic flows, the mean over seeds, with its 95% confidence interval; the marker above is the 99th percentile, likewise.")
        bs.image(plots.png(fig), f"FCT slowdown by flow size for each point of {', '.join(sw.keys) or 'the sweep'}")
    if sw.failed.height:
        fs = page.section("Failed points")
        fs.warn(f"{sw.failed.height} points failed; run the same sweep again to retry them.")
        cols = [c for c in sw.keys + ["seed", "error"] if c in sw.failed.columns]
        fs.table(cols, sw.failed.select(cols).head(MAX_ROWS).rows())
    ts = page.section("Points")
    cols = [c for c in sw.keys + ["seed"] + metrics + ["finished"] if c in sw.ok.columns]
    cap = f"the first {MAX_ROWS} of {sw.ok.height:,} (all in sweep.parquet)" if sw.ok.height > MAX_ROWS else "all columns are in sweep.parquet"
    ts.table(cols, sw.ok.select(cols).head(MAX_ROWS).rows(), caption=cap)
    sc = page.section("Scenario")
    src = Path(str(meta.get("scenario", "")))
    text = None
    if src.is_file():
        from ..sweep.store import file_sha256

        if file_sha256(src) == meta.get("scenario_sha256"):
            try:
                text = src.read_text()
            except (OSError, UnicodeDecodeError):
                text = None
    if text is not None:
        sc.text(f"{src} (unchanged since the sweep ran; overrides not applied):")
        sc.pre(text)
    else:
        sc.text(f"{src}: not shown (the file is gone or has changed since the sweep ran).")
    return page


# --- entry point -----------------------------------------------------------------------------


def demo_page(folder: Path, meta: dict, write_parts: bool = False, shown: Optional[Path] = None) -> tuple:
    """(the page with every part of a demo, the files written): with ``write_parts``, each part's
    PNGs and report.md as well."""
    page = Page(title="braid demo", subtitle=f"braid demo results: {shown or folder}")
    runs = [p for p in meta.get("runs", []) if isinstance(p, str)]
    page.meta = [("parts", ", ".join(runs) or "-")]
    made: List[Path] = []
    for part in runs:
        run = load_run(folder / part)
        images = run_images(run)
        run_page(run, page, level=2, images=images)
        if write_parts:
            made += plot_run(folder / part, run, images)
    return page, made


def make_report(folder: Path, out: Optional[Path] = None, metrics: Optional[Sequence[str]] = None) -> List[Path]:
    """``braid report FOLDER [-o FILE]``: the HTML page (default FOLDER/report.html); for a run
    or a demo written in place, also the PNG plots and report.md beside it. Returns the files
    written. A damaged folder is a BraidError naming the file."""
    folder = Path(folder)
    kind = kind_of(folder)
    if metrics and kind != SWEEP:
        raise BraidError("--metric", f"applies to a sweep folder; {folder} is a {kind} folder")
    if out is not None:
        target = check_out_file(out, "-o")
    else:
        target = folder / "report.html"
        try:
            check_out_file(target, "-o")
        except BraidError:
            raise BraidError(str(folder), "cannot write report.html in it (read-only?); write the page elsewhere with -o FILE") from None
    made: List[Path] = []
    if kind == RUN:
        run = load_run(folder)
        images = run_images(run)
        page = run_page(run, images=images)
        if out is None:
            made += plot_run(folder, run, images)
    elif kind == SWEEP:
        sw = load_sweep(folder)
        if metrics:
            bad = [m for m in metrics if m not in sw.metrics()]
            if bad:
                raise BraidError("--metric", f"{bad[0]!r} is not a numeric column of {folder / 'sweep.parquet'}; expected one of {', '.join(sw.metrics())}")
        page = sweep_page(sw, metrics)
    else:
        from ..demo import write_demo_report

        meta = read_json_file(folder / "demo.json")
        page, made = demo_page(folder, meta, write_parts=out is None)
        if out is None:
            made += write_demo_report(folder, meta)
    html = render(page)
    try:
        write_text_atomic(target, html)
    except OSError as e:
        raise BraidError(str(target), f"cannot write the report: {e.strerror or e} (choose another place with -o FILE)") from None
    return made + [target]
