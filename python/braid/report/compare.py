"""``braid compare RUN_OR_SWEEP ...``: runs (or sweeps) side by side (docs/report.md).

Runs: their headline metrics and counters side by side (a rich table; ``compare.csv`` and
``compare.parquet`` with one row per run), overlaid FCT/slowdown CDFs and total goodput over time.
Sweeps: each metric (mean over seeds) against the swept key(s), one line per sweep, and the
aggregated table. Names come from the folder names, made unique. Inputs must all be runs or all
sweeps (sweeps with the same swept keys); anything else is one BraidError.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence

import polars as pl

from . import buckets, latency, plots
from ..folders import DEMO, RUN, SWEEP, Run, Sweep, headline_value, kind_of, load_run, load_sweep, table_files, unique_names
from .html import Page, fmt, render, toml_dump
from ..results import check_out_file, write_text_atomic
from ..scenario import BraidError
from ..show import COUNTER_ORDER, HEADLINE_LABELS, HEADLINE_ORDER

__all__ = ["Comparison", "load_inputs", "compare"]


@dataclass
class Comparison:
    kind: str
    runs: List[Run] = field(default_factory=list)
    sweeps: List[Sweep] = field(default_factory=list)
    metrics: List[str] = field(default_factory=list)

    @property
    def names(self) -> List[str]:
        return [x.name for x in (self.runs or self.sweeps)]


def load_inputs(paths: Sequence[str]) -> Comparison:
    if len(paths) < 2:
        raise BraidError("compare", "expected at least two runs or two sweeps (results folders or sweep folders)")
    folders = [Path(p) for p in paths]
    kinds = [kind_of(f) for f in folders]
    for f, k in zip(folders, kinds):
        if k == DEMO:
            raise BraidError(str(f), "is a demo folder; compare its runs instead (the folders inside it: " + ", ".join(str(f / d.name) for d in sorted(f.iterdir()) if (d / "summary.json").exists()) + ")")
    if len(set(kinds)) > 1:
        run = next(f for f, k in zip(folders, kinds) if k == RUN)
        sw = next(f for f, k in zip(folders, kinds) if k == SWEEP)
        raise BraidError("compare", f"expected only runs or only sweeps, got a run ({run}) and a sweep ({sw})")
    names = unique_names(folders)
    if kinds[0] == RUN:
        runs = [load_run(f) for f in folders]
        for r, n in zip(runs, names):
            r.name = n
        return Comparison(RUN, runs=runs)
    sweeps = [load_sweep(f) for f in folders]
    for s, n in zip(sweeps, names):
        s.name = n
    keys = sweeps[0].keys
    for s in sweeps[1:]:
        if sorted(s.keys) != sorted(keys):
            raise BraidError("compare", f"sweeps over different keys cannot share an axis: {sweeps[0].path} sweeps {', '.join(keys) or 'nothing'}, {s.path} sweeps {', '.join(s.keys) or 'nothing'}")
    return Comparison(SWEEP, sweeps=sweeps)


# --- runs ------------------------------------------------------------------------------------


def run_metric_names(runs: Sequence[Run]) -> List[str]:
    """Headline keys then counters, in braid's usual order, that any run has as a number."""
    h = {k for r in runs for k, v in r.headline.items() if headline_value(v) is not None}
    c = {k for r in runs for k, v in r.counters.items() if headline_value(v) is not None} - h
    return [k for k in HEADLINE_ORDER if k in h] + sorted(h - set(HEADLINE_ORDER)) + [k for k in COUNTER_ORDER if k in c] + sorted(c - set(COUNTER_ORDER))


def _run_value(r: Run, m: str) -> Optional[float]:
    if m in r.headline:
        return headline_value(r.headline[m])
    return headline_value(r.counters.get(m))


def runs_table(cmp: Comparison) -> pl.DataFrame:
    """One row per run: name, folder, scenario, seed, overrides, then each metric."""
    rows = []
    for r in cmp.runs:
        row = {"run": r.name, "folder": str(r.path), "scenario": r.scenario_name, "seed": r.summary.get("seed"), "overrides": " ".join(r.overrides)}
        for m in cmp.metrics:
            row[m] = _run_value(r, m)
        rows.append(row)
    schema = {"run": pl.String, "folder": pl.String, "scenario": pl.String, "seed": pl.UInt64, "overrides": pl.String} | {m: pl.Float64 for m in cmp.metrics}
    return pl.DataFrame(rows, schema=schema)


def _label(m: str) -> str:
    return HEADLINE_LABELS.get(m, m)


# --- sweeps ----------------------------------------------------------------------------------


def sweeps_table(cmp: Comparison) -> pl.DataFrame:
    """One row per (sweep, grid point): the swept keys, seeds, and each metric's mean over seeds."""
    from .pages import sweep_stats

    keys = cmp.sweeps[0].keys
    frames = []
    for sw in cmp.sweeps:
        base = None
        for m in cmp.metrics:
            if m not in sw.data.columns:
                continue
            st = sweep_stats(sw, m, keys).rename({"mean": m}).drop("min", "max", "seeds", "ci95")
            base = st if base is None else base.join(st, on=keys or ["point"], how="full", coalesce=True, nulls_equal=True)
        if base is None:
            continue
        frames.append(base.with_columns(pl.lit(sw.name).alias("sweep")))
    if not frames:
        return pl.DataFrame({"sweep": []}, schema={"sweep": pl.String})
    try:
        df = pl.concat(frames, how="diagonal_relaxed")
    except Exception:  # noqa: BLE001 - a key with numbers in one sweep and text in another
        df = pl.concat([f.with_columns(pl.col(k).cast(pl.String) for k in keys) for f in frames], how="diagonal_relaxed")
    return df.select(["sweep"] + [c for c in df.columns if c != "sweep"])


def sweep_metric_names(sweeps: Sequence[Sweep]) -> List[str]:
    from .pages import default_sweep_metrics

    out: List[str] = []
    for sw in sweeps:
        for m in default_sweep_metrics(sw):
            if m not in out:
                out.append(m)
    return out


# --- the command ------------------------------------------------------------------------------


def choose_metrics(cmp: Comparison, wanted: Sequence[str]) -> List[str]:
    if cmp.kind == RUN:
        have = run_metric_names(cmp.runs)
    else:
        have = sorted({m for sw in cmp.sweeps for m in sw.metrics()})
    if not wanted:
        if cmp.kind == RUN:
            # The headline and the main counters; the rest (per-port counters, ...) by --metric.
            return [m for m in have if any(m in r.headline for r in cmp.runs) or m in COUNTER_ORDER]
        return sweep_metric_names(cmp.sweeps)
    for m in wanted:
        if m not in have:
            raise BraidError("--metric", f"{m!r} is not a metric of these {cmp.kind}s; expected one of {', '.join(have)}")
    return list(dict.fromkeys(wanted))


def figures(cmp: Comparison) -> List[tuple]:
    """[(file stem, alt text, Figure)]."""
    out = []
    if cmp.kind == RUN:
        f = plots.overlay_fct_figure({r.name: r.table("flows") for r in cmp.runs}, "FCT and slowdown")
        if f is not None:
            out.append(("fct_cdf", "FCT and slowdown CDFs", f))
        f = plots.overlay_throughput_figure({r.name: r.table("throughput") for r in cmp.runs}, "total goodput over time")
        if f is not None:
            out.append(("throughput", "total goodput over time", f))
        f = plots.slowdown_buckets_figure({r.name: buckets.slowdown_by_size(r.table("flows")) for r in cmp.runs}, "FCT slowdown by flow size")
        if f is not None:
            out.append(("slowdown_by_size", "FCT slowdown by flow size", f))
        tm = pl.concat(
            [latency.tenant_messages(r.table("messages"), r.table("tenants")).with_columns((pl.lit(f"{r.name}: ") + pl.col("tenant")).alias("tenant")) for r in cmp.runs]
        )
        f = plots.latency_cdf_figure(tm, "latency per tenant")
        if f is not None:
            out.append(("latency_cdf", "latency CDF per tenant", f))
    else:
        from .pages import sweep_figures

        # Each sweep's own fixed overrides, named (they are what tells the sweeps apart).
        sub = "\n".join(plots.title_of(sw.name, "", sw.fixed).replace(sw.name + "\n", sw.name + ": ", 1) for sw in cmp.sweeps if sw.fixed)
        for metric, f in sweep_figures({sw.name: sw for sw in cmp.sweeps}, cmp.sweeps[0].keys, cmp.metrics, title="compare", subtitle=sub):
            out.append((metric, f"{metric} against {', '.join(cmp.sweeps[0].keys)}", f))
    return out


def terminal_tables(cmp: Comparison, table: pl.DataFrame) -> list:
    from rich.table import Table

    from ..show import fmt as sfmt

    out = []
    if cmp.kind == RUN:
        t = Table(title="compare: headline metrics", header_style="bold")
        t.add_column("metric")
        for r in cmp.runs:
            t.add_column(r.name, justify="right")
        t.add_row("scenario", *[r.scenario_name for r in cmp.runs])
        t.add_row("seed", *[sfmt(r.summary.get("seed")) for r in cmp.runs])
        t.add_row("overrides", *[" ".join(r.overrides) or "-" for r in cmp.runs], end_section=True)
        for m in cmp.metrics:
            t.add_row(m, *[sfmt(_run_value(r, m)) for r in cmp.runs])
        out.append(t)
        return out
    keys = cmp.sweeps[0].keys or ["point"]
    for m in cmp.metrics:
        if m not in table.columns:
            continue
        piv = table.select(keys + ["sweep", m])
        t = Table(title=f"compare: {m} (mean over seeds)", header_style="bold")
        for k in keys:
            t.add_column(k)
        names = [sw.name for sw in cmp.sweeps]
        for n in names:
            t.add_column(n, justify="right")
        points = piv.select(keys).unique(maintain_order=True).rows()
        for pt in points:
            vals = []
            for n in names:
                sel = piv.filter(pl.col("sweep") == n)
                for k, v in zip(keys, pt):
                    sel = sel.filter(pl.col(k).is_null() if v is None else pl.col(k) == v)
                vals.append(sfmt(sel[m][0]) if sel.height else "-")
            t.add_row(*[str(v) for v in pt], *vals)
        out.append(t)
    return out


def table_rows(runs: Sequence[Run]) -> List[list]:
    """One row per table file any of the runs holds (the registry's, in order, then the
    middleware layers'): its row count in each run, "-" where a run lacks it."""
    per = [{f: n for f, n, _c, _d in table_files(r.path)} for r in runs]
    files: List[str] = []
    for p in per:
        files += [f for f in p if f not in files]
    return [[f] + [p.get(f, "-") for p in per] for f in files]


def compare_page(cmp: Comparison, table: pl.DataFrame, images: List[tuple]) -> Page:
    """The comparison's HTML page; ``images`` are (alt text, PNG bytes)."""
    page = Page(title=f"braid compare: {', '.join(cmp.names)}", subtitle=f"a comparison of {len(cmp.names)} {cmp.kind}s")
    if cmp.kind == RUN:
        page.meta = [(r.name, f"{r.path} (scenario {r.scenario_name}, seed {fmt(r.summary.get('seed'))}, braid {r.summary.get('braid_version') or '-'})") for r in cmp.runs]
        hs = page.section("Headline")
        head = ["metric"] + [r.name for r in cmp.runs]
        rows = [["overrides"] + [", ".join(r.overrides) or "none" for r in cmp.runs]]
        rows += [[_label(m)] + [_run_value(r, m) for r in cmp.runs] for m in cmp.metrics]
        hs.text("FCT and slowdown figures cover completed flows only.")
        hs.table(head, rows)
        page.section("Tables").table(["file"] + [r.name for r in cmp.runs], table_rows(cmp.runs), caption="rows of each table of the runs (- where a run has none)")
    else:
        page.meta = [(sw.name, f"{sw.path} (scenario {sw.meta.get('scenario', '-')}, fixed: {', '.join(sw.fixed) or 'none'})") for sw in cmp.sweeps]
        hs = page.section("Means over seeds")
        hs.table(table.columns, table.head(500).rows(), caption="one row per sweep and grid point")
    if images:
        ps = page.section("Plots")
        for alt, data in images:
            ps.image(data, alt)
    if cmp.kind == RUN:
        for r in cmp.runs:
            sec = page.section(f"{r.name}: scenario", level=3)
            if r.overrides:
                sec.text("Overrides:")
                sec.items(r.overrides)
            data = r.scenario.get("data")
            sec.pre(toml_dump(data) if isinstance(data, dict) else "(not recorded)", summary=f"{r.scenario_name} as run (overrides applied)")
    return page


def compare(paths: Sequence[str], metrics: Sequence[str] = (), out_dir: Optional[str] = None, html: Optional[str] = None):
    """Loads, checks, and writes what was asked; returns (Comparison, table, rich tables, files)."""
    html_path = check_out_file(html, "--html") if html else None
    out = _check_out_dir(Path(out_dir)) if out_dir else None
    cmp = load_inputs(paths)
    cmp.metrics = choose_metrics(cmp, metrics)
    table = runs_table(cmp) if cmp.kind == RUN else sweeps_table(cmp)
    # Everything is read and drawn before anything is written.
    figs = figures(cmp) if (out is not None or html_path is not None) else []
    pngs = {stem: plots.png(f) for stem, _a, f in figs}
    written: List[Path] = []
    if out is not None:
        from ..sweep.store import _write_atomic

        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BraidError("-o", f"cannot create {out}: {e.strerror or e}") from None
        _write_atomic(out / "compare.parquet", lambda t: table.write_parquet(t))
        _write_atomic(out / "compare.csv", lambda t: table.write_csv(t))
        written += [out / "compare.parquet", out / "compare.csv"]
    if out is not None:
        for stem, data in pngs.items():
            written.append(plots.save(data, out / f"{stem}.png"))
    if html_path is not None:
        page = compare_page(cmp, table, [(alt, pngs[stem]) for stem, alt, _f in figs])
        write_text_atomic(html_path, render(page))
        written.append(html_path)
    return cmp, table, terminal_tables(cmp, table), written


def _check_out_dir(out: Path) -> Path:
    if out.exists() and not out.is_dir():
        raise BraidError("-o", f"{out} is a file; expected a folder for the comparison's files")
    if (out / "summary.json").exists() or (out / "sweep.json").exists() or (out / "demo.json").exists():
        raise BraidError("-o", f"{out} holds braid results; choose another folder for the comparison's files")
    # Probed, not created: inputs that fail to load leave nothing behind.
    check_out_file(out / "compare.csv" if out.is_dir() else out, "-o")
    return out
