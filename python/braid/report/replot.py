"""``braid plot FOLDER...``: redraws figures from results, without re-running (issue 28 §3).

* One run folder: every figure of its report, or those named by ``--figure``
  (:data:`RUN_FIGURES`); ``--buckets`` sets the flow-size bucket edges of ``slowdown_by_size``,
  ``--window`` the window of ``latency_time``.
* Several run folders: the comparison's figures, overlaid (``slowdown_by_size``,
  ``latency_cdf``, ``fct_cdf``, ``throughput``).
* A sweep folder (or several): each ``--metric`` against the first swept key, the mean over
  seeds with its 95% confidence interval; ``--group KEY`` draws one line per value of that swept
  key. Without ``--metric``, also ``slowdown_by_size``: FCT slowdown by flow-size bucket, a bar
  per grid point in each bucket.

Figures are written as ``<figure>.<format>`` (``png``, ``svg`` or ``pdf``) into ``-o DIR``
(default: the first folder), each whole or absent."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Sequence

import polars as pl

from ..folders import RUN, SWEEP, kind_of, load_run, load_sweep, unique_names
from ..scenario import BraidError
from . import buckets, latency, plots

__all__ = ["RUN_FIGURES", "replot"]

#: The figures of one run, by name.
RUN_FIGURES = ("throughput", "fct_cdf", "slowdown_by_size", "latency_cdf", "latency_time", "queues", "cc")


def _window(text: Optional[str]) -> Optional[float]:
    if text is None:
        return None
    from .._core import parse_duration_ps

    try:
        w = parse_duration_ps(text)
    except ValueError:
        w = 0
    if w <= 0:
        raise BraidError("--window", f"expected a positive duration like \"10us\", got {text!r}")
    return float(w)


def _run_figures(folders: Sequence[Path], figures: Sequence[str], edges: Sequence[int], window: Optional[float]) -> List[tuple]:
    from .pages import run_figures

    if len(folders) == 1:
        got = run_figures(load_run(folders[0]), edges, window)
        return [(stem, f) for stem, _w, f in got if not figures or stem in figures]
    runs = [load_run(f) for f in folders]
    names = unique_names([r.path for r in runs])
    for r, n in zip(runs, names):
        r.name = n
    out = []
    makers = {
        "slowdown_by_size": lambda: plots.slowdown_buckets_figure({r.name: buckets.slowdown_by_size(r.table("flows"), edges) for r in runs}, "FCT slowdown by flow size"),
        "latency_cdf": lambda: plots.latency_cdf_figure(
            pl.concat([latency.tenant_messages(r.table("messages"), r.table("tenants")).with_columns((pl.lit(f"{r.name}: ") + pl.col("tenant")).alias("tenant")) for r in runs]),
            "latency per tenant",
        ),
        "fct_cdf": lambda: plots.overlay_fct_figure({r.name: r.table("flows") for r in runs}, "FCT and slowdown"),
        "throughput": lambda: plots.overlay_throughput_figure({r.name: r.table("throughput") for r in runs}, "total goodput over time"),
    }
    for stem, make in makers.items():
        if figures and stem not in figures:
            continue
        f = make()
        if f is not None:
            out.append((stem, f))
    return out


def _sweep_figures(folders: Sequence[Path], metrics: Sequence[str], group: Optional[str]) -> List[tuple]:
    from .pages import default_sweep_metrics, sweep_figures

    sweeps = [load_sweep(f) for f in folders]
    names = unique_names([s.path for s in sweeps])
    for s, n in zip(sweeps, names):
        s.name = n
    keys = list(sweeps[0].keys)
    if group is not None:
        if group not in keys:
            raise BraidError("--group", f"{group!r} is not a swept key of {sweeps[0].path}; expected one of {', '.join(keys) or '(none)'}")
        keys = [k for k in keys if k != group] + [group]
    have = sorted({m for s in sweeps for m in s.metrics()})
    for m in metrics:
        if m not in have:
            raise BraidError("--metric", f"{m!r} is not a metric of these sweeps; expected one of {', '.join(have)}")
    chosen = list(metrics) or default_sweep_metrics(sweeps[0])
    out = list(sweep_figures({s.name: s for s in sweeps}, keys, chosen, title=sweeps[0].name))
    if not metrics:
        from .pages import sweep_buckets_figure

        series = {s.name: s for s in sweeps} if len(sweeps) > 1 else {"": sweeps[0]}
        fig = sweep_buckets_figure(series, title=sweeps[0].name)
        if fig is not None:
            out.append(("slowdown_by_size", fig))
    return out


def replot(
    folders: Sequence[str],
    figures: Sequence[str] = (),
    metrics: Sequence[str] = (),
    group: Optional[str] = None,
    bucket_edges: Optional[str] = None,
    window: Optional[str] = None,
    fmt: str = "png",
    out_dir: Optional[str] = None,
) -> List[Path]:
    """Redraws the figures and writes them; returns the files written."""
    if not folders:
        raise BraidError("plot", "expected at least one results or sweep folder")
    if fmt not in plots.FORMATS:
        raise BraidError("--format", f"expected one of {', '.join(plots.FORMATS)}, got {fmt!r}")
    paths = [Path(f) for f in folders]
    kinds = {kind_of(p) for p in paths}
    if len(kinds) != 1 or not kinds <= {RUN, SWEEP}:
        raise BraidError(str(paths[0]), "expected results folders (braid run -o) or sweep folders, all of one kind")
    edges = buckets.parse_edges(bucket_edges) if bucket_edges else buckets.DEFAULT_EDGES
    if kinds == {RUN}:
        bad = [f for f in figures if f not in RUN_FIGURES]
        if bad:
            raise BraidError("--figure", f"{bad[0]!r} is not a figure of a run; expected one of {', '.join(RUN_FIGURES)}")
        if metrics or group:
            raise BraidError("--metric" if metrics else "--group", "applies to sweep folders; a run's figures are chosen with --figure")
        made = _run_figures(paths, figures, edges, _window(window))
    else:
        made = _sweep_figures(paths, metrics, group)
    out = Path(out_dir) if out_dir else paths[0]
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, fig in made:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in stem)
        written.append(plots.save(plots.render_figure(fig, fmt, dpi=150), out / f"{safe}.{fmt}"))
    return written
