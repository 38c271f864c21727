"""Figures for reports and comparisons (matplotlib, Agg). Each function returns a Figure (or None
when there is nothing to draw); :func:`png` turns one into PNG bytes, :func:`save` into a file.

Conventions every figure follows:

* time axes in the unit that fits the data's range (ns, µs, ms or s; :func:`time_unit`);
* titles name the ``--set`` overrides that made the run (:func:`title_of`);
* more than :data:`MAX_FLOW_LINES` flows are drawn as percentile bands (p10-p90, p50, mean)
  across flows per interval, so no flow is dropped from the picture;
* queue plots mark PFC pause intervals (``pfc.parquet``): a strip below the queues with one row
  per paused port, and a shaded span on the queue of a port that was itself paused;
* ready for a paper: axis labels in words with their units (:func:`axis_label`), a series' colour,
  marker and line style distinct from every other series' (:func:`styles`), sweeps' error bars
  the 95% confidence interval of the mean over seeds (Student's t; :func:`ci95`), and every
  figure as PNG, SVG or PDF (:func:`render_figure`).
"""

from __future__ import annotations

import io
import textwrap
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import polars as pl

from ..scenario import BraidError

__all__ = [
    "MAX_FLOW_LINES",
    "time_unit",
    "title_of",
    "throughput_figure",
    "fct_figure",
    "queues_figure",
    "pause_intervals",
    "overlay_fct_figure",
    "overlay_throughput_figure",
    "sweep_metric_figure",
    "latency_cdf_figure",
    "latency_time_figure",
    "slowdown_buckets_figure",
    "axis_label",
    "styles",
    "ci95",
    "FORMATS",
    "render_figure",
    "png",
    "save",
]

#: Beyond this many flows (or ports), lines give way to percentile bands (or the busiest ports).
MAX_FLOW_LINES = 16
#: Rows of the PFC strip under a queue plot (the ports paused longest).
MAX_PFC_ROWS = 12

_UNITS = (("s", 1e12), ("ms", 1e9), ("µs", 1e6), ("ns", 1e3))


_FONTS_SET = False

#: Formats a figure can be written in.
FORMATS = ("png", "svg", "pdf")

#: Two-sided 95% quantiles of Student's t for 1..30 degrees of freedom (any statistics table,
#: e.g. NIST/SEMATECH e-Handbook of Statistical Methods, 1.3.6.7.2); 1.96 (the normal's) beyond.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def ci95(std: float, n: int) -> float:
    """Half-width of the 95% confidence interval of a mean of ``n`` samples with sample standard
    deviation ``std``: t(0.975, n-1) · std / √n; 0 for fewer than two samples (no interval)."""
    if n is None or n < 2 or std is None or not np.isfinite(std):
        return 0.0
    t = _T975[n - 2] if n - 1 <= len(_T975) else 1.96
    return float(t * std / np.sqrt(n))


_WORDS = {"fct": "flow completion time", "lat": "latency", "msg": "message", "rate": "rate", "goodput": "goodput", "slowdown": "FCT slowdown",
          "aggregate": "aggregate", "app": "application", "flow": "flow", "sum": "sum", "mean": "mean", "jain": "Jain's fairness index",
          "drops": "packets dropped", "pfc": "PFC", "pauses": "pauses", "ecn": "ECN", "marks": "marks", "retransmissions": "retransmitted packets",
          "timeouts": "retransmission timeouts", "flows": "flows", "completed": "completed"}
_UNIT_WORDS = {"us": "µs", "ms": "ms", "ns": "ns", "gbps": "Gbit/s", "mps": "million messages/s", "mb": "MB", "kb": "KB"}


def axis_label(metric: str) -> str:
    """A metric's name as an axis label in words with its unit: ``fct_p99_us`` -> "flow
    completion time, 99th percentile (µs)", ``apps[1].lat_p999_us`` -> "apps[1]: latency, 99.9th
    percentile (µs)", ``slowdown_p50_0-10KB`` -> "FCT slowdown, median, flows 0-10KB (× ideal FCT)"."""
    owner, _, name = metric.rpartition(".") if "]." in metric else ("", "", metric)
    parts = name.split("_")
    unit = ""
    bucket = ""
    if parts and parts[-1].lower() in _UNIT_WORDS:
        unit = _UNIT_WORDS[parts.pop().lower()]
    if parts and parts[0] == "slowdown":
        unit = "× ideal FCT"
        if len(parts) > 2:
            bucket = "_".join(parts[2:])
            parts = parts[:2]
    words, pct = [], ""
    for w in parts:
        if w.startswith("p") and w[1:].isdigit():
            q = w[1:]
            pct = "median" if q == "50" else f"{q[:2]}.{q[2:]}th percentile" if len(q) > 2 else f"{q}th percentile"
        else:
            words.append(_WORDS.get(w, w))
    text = " ".join(words) + (f", {pct}" if pct else "") + (f", flows {bucket}" if bucket else "")
    text = (f"{owner}: " if owner else "") + (text[:1].upper() + text[1:] if not owner else text)
    return f"{text} ({unit})" if unit else text


def styles(n: int) -> List[dict]:
    """``n`` series styles, each distinct: 10 colours (matplotlib's tab10) × 4 markers × 3 line
    styles; past 10 series the marker and the line style change with the colour cycle."""
    import matplotlib

    colours = matplotlib.colormaps["tab10"].colors
    markers, dashes = ("o", "s", "^", "D"), ("-", "--", ":")
    return [{"color": colours[i % 10], "marker": markers[(i // 10) % 4], "linestyle": dashes[(i // 40) % 3]} for i in range(n)]


def plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as p

    global _FONTS_SET
    if not _FONTS_SET:
        _FONTS_SET = True
        _font_fallback(matplotlib)
    return p


def _font_fallback(matplotlib) -> None:
    """Scenario names in any script: after DejaVu Sans, the installed fonts that cover CJK and
    emoji (Noto, WenQuanYi, Droid), so their glyphs are drawn where the machine has them.
    Where it has none, a missing glyph is drawn as a box and not warned about once per glyph
    (docs/report.md, "Names in other scripts")."""
    import warnings

    from matplotlib import font_manager

    warnings.filterwarnings("ignore", message=r"Glyph .* missing from (current )?font", category=UserWarning)
    names = {f.name for f in font_manager.fontManager.ttflist}
    extra = [n for n in sorted(names) if any(k in n for k in ("CJK", "WenQuanYi", "Droid Sans Fallback", "Noto Color Emoji", "Noto Emoji"))]
    if extra:
        matplotlib.rcParams["font.family"] = ["sans-serif"]
        matplotlib.rcParams["font.sans-serif"] = ["DejaVu Sans", *extra, *matplotlib.rcParams["font.sans-serif"]]


def time_unit(max_ps: float) -> Tuple[str, float]:
    """The unit (and picoseconds per unit) for a time axis reaching ``max_ps``: the largest of
    s, ms, µs, ns in which the axis reaches at least 1."""
    m = float(max_ps) if max_ps is not None and np.isfinite(max_ps) else 0.0
    for name, scale in _UNITS:
        if abs(m) >= scale:
            return name, scale
    return "ns", 1e3


def title_of(name: str, what: str, overrides: Sequence[str] = (), width: int = 100) -> str:
    """``"<name>: <what>"``, then the overrides that made the run (wrapped, at most 3 lines)."""
    head = f"{name}: {what}" if what else str(name)
    ov = [str(o) for o in overrides or ()]
    if not ov:
        return head
    lines = textwrap.wrap("--set " + ", --set ".join(ov), width=width, break_long_words=True)
    if len(lines) > 3:
        lines = lines[:3]
        lines[-1] = lines[-1][: max(0, width - 12)] + " … (more)"
    # Matplotlib reads $...$ as mathtext: keep the user's dollars literal.
    return "\n".join([head] + lines).replace("$", r"\$")


def _need(df: pl.DataFrame, cols: Sequence[str], table: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise BraidError(f"{table}.parquet", f"lacks the column(s) {', '.join(missing)} (damaged, or not written by this braid); re-run to write it again")


# --- one run ---------------------------------------------------------------------------------


def _flow_labels(flows: pl.DataFrame) -> Dict[int, str]:
    labels: Dict[int, str] = {}
    if flows.height and all(c in flows.columns for c in ("flow", "src", "dst")):
        for f, s, d in flows.select("flow", "src", "dst").iter_rows():
            labels[f] = f"flow {f}: h{s}→h{d}"
    return labels


def flow_bands(tp: pl.DataFrame) -> pl.DataFrame:
    """Per interval, across the flows with a sample in it: p10, p50, p90 and mean goodput (Gbps),
    and how many flows. Linear interpolation between order statistics (numpy's default)."""
    g = pl.col("gbps").cast(pl.Float64)
    return (
        tp.group_by("time_ps")
        .agg(
            g.quantile(0.1, interpolation="linear").alias("p10"),
            g.quantile(0.5, interpolation="linear").alias("p50"),
            g.quantile(0.9, interpolation="linear").alias("p90"),
            g.mean().alias("mean"),
            pl.len().alias("flows"),
        )
        .sort("time_ps")
    )


def throughput_figure(tp: pl.DataFrame, flows: pl.DataFrame, title: str):
    """Goodput per flow over time: one line per flow up to MAX_FLOW_LINES flows, percentile
    bands across flows beyond that."""
    if tp.height == 0:
        return None
    _need(tp, ("time_ps", "flow", "gbps"), "throughput")
    p = plt()
    fig, ax = p.subplots(figsize=(8, 4.2))
    tp = tp.sort("time_ps")
    unit, scale = time_unit(tp["time_ps"].max())
    ids = tp.get_column("flow").unique().sort().to_list()
    if len(ids) > MAX_FLOW_LINES:
        b = flow_bands(tp)
        t = b["time_ps"].to_numpy() / scale
        ax.fill_between(t, b["p10"].to_numpy(), b["p90"].to_numpy(), step="pre", alpha=0.25, color="tab:blue", lw=0, label="p10–p90 across flows")
        ax.step(t, b["p50"].to_numpy(), where="pre", color="tab:blue", lw=1.4, label="p50 (median flow)")
        ax.step(t, b["mean"].to_numpy(), where="pre", color="black", lw=1.0, ls="--", label="mean")
        ax.set_title(title + f"\n{len(ids)} flows: percentiles across the flows sampled in each interval", fontsize=9)
    else:
        labels = _flow_labels(flows)
        for f in ids:
            d = tp.filter(pl.col("flow") == f)
            ax.step(d["time_ps"].to_numpy() / scale, d["gbps"].to_numpy(), where="pre", lw=1.0, label=labels.get(f, f"flow {f}"))
        ax.set_title(title, fontsize=9)
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel("goodput (Gbps)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2 if len(ax.get_legend_handles_labels()[1]) > 6 else 1, loc="best")
    return fig


def _cdf(ax, values: np.ndarray, label: str, logx: bool = True) -> bool:
    v = np.sort(values[np.isfinite(values)])
    if v.size == 0:
        return False
    y = np.arange(1, v.size + 1) / v.size
    # From 0 at the smallest value, so a handful of flows still reads as a CDF.
    ax.step(np.concatenate([v[:1], v]), np.concatenate([[0.0], y]), where="post", label=label)
    ax.set_ylabel("CDF")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    if logx and v.min() > 0 and v.max() / v.min() > 50:
        ax.set_xscale("log")
    else:
        ax.locator_params(axis="x", nbins=6)
    return True


def _completed(flows: pl.DataFrame) -> pl.DataFrame:
    if flows.height == 0:
        return pl.DataFrame()
    # A flows table without its FCT column is damaged: said, not a figure silently dropped.
    _need(flows, ["fct_ps"], "flows")
    done = flows.filter(pl.col("fct_ps").is_not_null() & (pl.col("fct_ps") >= 0))
    if "kind" in done.columns:
        done = done.filter(pl.col("kind") == "flow")
    return done


def fct_figure(flows: pl.DataFrame, title: str):
    return overlay_fct_figure({"": flows}, title)


def overlay_fct_figure(runs: Mapping[str, pl.DataFrame], title: str):
    """FCT and slowdown CDFs (completed flows), one curve per run; None if no run has any."""
    done = {k: _completed(v) for k, v in runs.items()}
    done = {k: v for k, v in done.items() if v.height}
    if not done:
        return None
    top = max(float(v["fct_ps"].max()) for v in done.values())
    unit, scale = time_unit(top)
    p = plt()
    fig, (a1, a2) = p.subplots(1, 2, figsize=(9.5, 3.9))
    any_sd = False
    for name, d in done.items():
        _cdf(a1, d["fct_ps"].to_numpy().astype(float) / scale, name or "FCT")
        if "slowdown" in d.columns:
            any_sd |= _cdf(a2, d["slowdown"].to_numpy().astype(float), name or "slowdown")
    a1.set_xlabel(f"flow completion time ({unit})")
    a2.set_xlabel("slowdown (FCT / ideal FCT)")
    if not any_sd:
        a2.set_visible(False)
    if len(done) > 1:
        a1.legend(fontsize=7, loc="lower right")
    fig.suptitle(title + "\n(completed flows)", fontsize=9)
    fig.tight_layout()
    return fig


def pause_intervals(pfc: pl.DataFrame, end_ps: Optional[float] = None) -> pl.DataFrame:
    """The intervals during which a port could not send on a priority: each ``received`` pause
    to the next ``received`` resume of the same (node, port, priority); a pause still in force
    at the end runs to ``end_ps`` (or its own time if None). A pause that repeats while paused
    extends the same interval. Columns: node, node_name, port, priority, start_ps, end_ps."""
    cols = ["node", "node_name", "port", "priority", "start_ps", "end_ps"]
    empty = pl.DataFrame(schema={"node": pl.Int64, "node_name": pl.String, "port": pl.Int64, "priority": pl.Int64, "start_ps": pl.Int64, "end_ps": pl.Int64})
    if pfc.height == 0:
        return empty
    _need(pfc, ("time_ps", "node", "port", "priority", "type", "direction"), "pfc")
    rx = pfc.filter(pl.col("direction") == "received").sort("time_ps", maintain_order=True)
    names = "node_name" in rx.columns
    rows: List[tuple] = []
    open_: Dict[tuple, tuple] = {}
    for r in rx.iter_rows(named=True):
        k = (r["node"], r["port"], r["priority"])
        if r["type"] == "pause":
            if k not in open_:
                open_[k] = (r["time_ps"], r["node_name"] if names else str(r["node"]))
        elif r["type"] == "resume" and k in open_:
            t0, nm = open_.pop(k)
            rows.append((k[0], nm, k[1], k[2], int(t0), int(r["time_ps"])))
    for k, (t0, nm) in open_.items():
        rows.append((k[0], nm, k[1], k[2], int(t0), int(end_ps if end_ps is not None else t0)))
    if not rows:
        return empty
    return pl.DataFrame(rows, schema=cols, orient="row").with_columns(pl.col(c).cast(pl.Int64) for c in ("node", "port", "priority", "start_ps", "end_ps"))


def _port_label(node_name: str, port: int) -> str:
    return f"{node_name}:{port}"


def queues_figure(q: pl.DataFrame, title: str, pfc: Optional[pl.DataFrame] = None, end_ps: Optional[float] = None):
    """Queue length per sampled port over time; with PFC pauses, a strip below (one row per
    paused port, the longest-paused first) and shaded spans on a plotted port's own pauses."""
    if q.height == 0:
        return None
    _need(q, ("time_ps", "port", "bytes"), "queues")
    pauses = pause_intervals(pfc, end_ps) if pfc is not None else pause_intervals(pl.DataFrame())
    p = plt()
    tmax = max(float(q["time_ps"].max()), float(pauses["end_ps"].max()) if pauses.height else 0.0)
    unit, scale = time_unit(tmax)
    if pauses.height:
        fig, (ax, sx) = p.subplots(2, 1, figsize=(8, 5.6), sharex=True, gridspec_kw={"height_ratios": [3, 1.3]})
    else:
        fig, ax = p.subplots(figsize=(8, 4.2))
        sx = None
    ports = q.get_column("port").unique().sort().to_list()
    if len(ports) > MAX_FLOW_LINES:
        top = q.group_by("port").agg(pl.col("bytes").max()).sort(["bytes", "port"], descending=[True, False]).head(MAX_FLOW_LINES)
        ports = sorted(top.get_column("port").to_list())
        title += f"\nthe {MAX_FLOW_LINES} ports of {q['port'].n_unique()} with the longest queues"
    by_label = {}
    if pauses.height:
        for (node_name, port), g in pauses.group_by(["node_name", "port"], maintain_order=True):
            by_label[_port_label(node_name, port)] = g
    for port in ports:
        d = q.filter(pl.col("port") == port).sort("time_ps")
        (line,) = ax.plot(d["time_ps"].to_numpy() / scale, d["bytes"].to_numpy() / 1e3, lw=1.0, label=str(port))
        g = by_label.get(str(port))
        if g is not None:
            for s, e in g.select("start_ps", "end_ps").iter_rows():
                ax.axvspan(s / scale, e / scale, color=line.get_color(), alpha=0.15, lw=0)
    ax.set_ylabel("queue (KB)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    if sx is not None:
        tot = pauses.with_columns((pl.col("end_ps") - pl.col("start_ps")).alias("d")).group_by(["node_name", "port"]).agg(pl.col("d").sum()).sort(["d", "node_name", "port"], descending=[True, False, False])
        rows = tot.head(MAX_PFC_ROWS).select("node_name", "port").rows()
        for i, (nm, port) in enumerate(rows):
            g = pauses.filter((pl.col("node_name") == nm) & (pl.col("port") == port))
            segs = [(s / scale, (e - s) / scale) for s, e in g.select("start_ps", "end_ps").iter_rows()]
            sx.broken_barh(segs, (i - 0.4, 0.8), color="tab:red", alpha=0.7, lw=0, label=_port_label(nm, port))
        sx.set_yticks(range(len(rows)))
        sx.set_yticklabels([_port_label(nm, port) for nm, port in rows], fontsize=6)
        sx.set_ylim(len(rows) - 0.5, -0.5)
        more = f" ({len(rows)} of {tot.height} ports)" if tot.height > len(rows) else ""
        sx.set_title(f"PFC pause: when each port could not send{more}", fontsize=8)
        sx.grid(alpha=0.3, axis="x")
        sx.set_xlabel(f"time ({unit})")
    else:
        ax.set_xlabel(f"time ({unit})")
    fig.tight_layout()
    return fig


# --- comparisons -----------------------------------------------------------------------------


def cc_figure(cc: pl.DataFrame, title: str):
    """The congestion controllers' state (``measure.cc``): DCQCN rate Rc and α, MP-RDMA window,
    one line per QP (the first MAX_FLOW_LINES), one panel per field that has values."""
    if cc.height == 0:
        return None
    _need(cc, ("time_ps", "host", "qpn"), "cc")
    panels = [(c, lab) for c, lab in (("rate_bps", "rate Rc (Gbps)"), ("alpha", "DCQCN α"), ("cwnd", "cwnd (packets)"))
              if c in cc.columns and cc[c].null_count() < cc.height]
    if not panels:
        return None
    p = plt()
    fig, axes = p.subplots(len(panels), 1, figsize=(8, 2.6 * len(panels)), sharex=True, squeeze=False)
    unit, scale = time_unit(cc["time_ps"].max())
    cols = ["host", "qpn"] + (["flow"] if "flow" in cc.columns else [])
    keys = cc.select(cols).unique().sort("host", "qpn").head(MAX_FLOW_LINES).to_dicts()
    for ax, (col, label) in zip(axes[:, 0], panels):
        div = 1e9 if col == "rate_bps" else 1
        for k in keys:
            d = cc.filter((pl.col("host") == k["host"]) & (pl.col("qpn") == k["qpn"])).sort("time_ps")
            if d[col].null_count() == d.height:
                continue
            name = f"flow {k['flow']}" if k.get("flow") is not None else f"h{k['host']} qp{k['qpn']}"
            ax.step(d["time_ps"].to_numpy() / scale, d[col].to_numpy() / div, where="post", lw=1.0, label=name)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    n = cc.select(cols[:2]).unique().height
    more = f"\nthe first {MAX_FLOW_LINES} of {n} QPs" if n > MAX_FLOW_LINES else ""
    axes[0, 0].set_title(title + more, fontsize=9)
    axes[0, 0].legend(fontsize=7, loc="best", ncol=2 if len(keys) > 6 else 1)
    axes[-1, 0].set_xlabel(f"time ({unit})")
    return fig


def overlay_throughput_figure(runs: Mapping[str, pl.DataFrame], title: str):
    """Each run's total goodput (sum over its flows) per sampling interval, overlaid."""
    runs = {k: v for k, v in runs.items() if v.height}
    if not runs:
        return None
    for v in runs.values():
        _need(v, ("time_ps", "gbps"), "throughput")
    unit, scale = time_unit(max(float(v["time_ps"].max()) for v in runs.values()))
    p = plt()
    fig, ax = p.subplots(figsize=(8, 4.2))
    for name, tp in runs.items():
        agg = tp.group_by("time_ps").agg(pl.col("gbps").sum()).sort("time_ps")
        ax.step(agg["time_ps"].to_numpy() / scale, agg["gbps"].to_numpy(), where="pre", lw=1.2, label=name)
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel("goodput, all flows (Gbps)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return fig


def sweep_metric_figure(series: Mapping[str, pl.DataFrame], x: str, metric: str, title: str, group: Optional[str] = None):
    """``metric`` against the swept key ``x``: the mean over seeds with its 95% confidence
    interval (``ci95``, the half-width; none with one seed); one line per (sweep, value of
    ``group``, a column whose values label the lines), each in a style of its own. Each frame has
    columns x, [group], mean, ci95. A key with text values is drawn as categories, in order of
    appearance; a key with a few numeric values has a tick at each."""
    p = plt()
    fig, ax = p.subplots(figsize=(7.5, 4.0))
    numeric = all(v[x].dtype.is_numeric() for v in series.values() if v.height)
    cats: List[str] = []
    if not numeric:
        for v in series.values():
            for c in v[x].cast(pl.String).to_list():
                if c not in cats:
                    cats.append(c)
    drawn = 0
    all_parts = []
    for name, df in series.items():
        if df.height == 0:
            continue
        for part in df.partition_by(group, maintain_order=True, as_dict=False) if group else [df]:
            all_parts.append((name, part))
    for (name, part), st in zip(all_parts, styles(len(all_parts))):
        part = part.sort(x) if numeric else part
        xs = part[x].to_numpy().astype(float) if numeric else np.array([cats.index(c) for c in part[x].cast(pl.String).to_list()], dtype=float)
        m = part["mean"].to_numpy().astype(float)
        err = part["ci95"].fill_null(0.0).to_numpy().astype(float)
        label = name
        if group:
            label = f"{name}: {part[group][0]}" if name else str(part[group][0])
        ax.errorbar(xs, m, yerr=err, ms=4, capsize=3, lw=1.2, label=label or None, **st)
        drawn += 1
    if numeric:
        xs_all = sorted({float(v) for f in series.values() if f.height for v in f[x].to_list() if v is not None})
        if 0 < len(xs_all) <= 12:
            ax.set_xticks(xs_all)
            ax.set_xticklabels([f"{v:g}" for v in xs_all], fontsize=8)
    else:
        ax.set_xticks(range(len(cats)))
        ax.set_xticklabels(cats, fontsize=8, rotation=20 if len(cats) > 4 else 0)
    ax.set_xlabel(axis_label(x) if x != "point" else "grid point")
    ax.set_ylabel(axis_label(metric))
    ax.set_title(title + "\n(mean over seeds, 95% confidence interval)", fontsize=9)
    ax.grid(alpha=0.3)
    if drawn > 1 or group:
        ax.legend(fontsize=7, loc="best")
    return fig


# --- a tenant's latency, FCT slowdown by flow size ----------------------------------------------


def latency_cdf_figure(tm: pl.DataFrame, title: str):
    """The CDF of each tenant's message latency (``latency.tenant_messages``), one line each."""
    if tm is None or tm.height == 0:
        return None
    p = plt()
    fig, ax = p.subplots(figsize=(7.5, 4.0))
    names = tm["tenant"].unique(maintain_order=True).to_list()
    for name, st in zip(names, styles(len(names))):
        v = np.sort(tm.filter(pl.col("tenant") == name)["latency_us"].to_numpy())
        ax.step(v, np.arange(1, len(v) + 1) / len(v), where="post", color=st["color"], linestyle=st["linestyle"], lw=1.4, label=f"{name} ({len(v):,} messages)")
    v = tm["latency_us"].to_numpy()
    if v.min() > 0 and v.max() / v.min() > 50:
        ax.set_xscale("log")
    ax.set_xlabel("Message latency, post to completion (µs)")
    ax.set_ylabel("Fraction of messages")
    ax.set_ylim(0, 1.02)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    return fig


def latency_time_figure(tm: pl.DataFrame, title: str, window_ps: Optional[float] = None):
    """Each tenant's latency over time: the median and 99th percentile of the messages completed
    in each window (``window_ps``; default 1/50 of the span), against the window's end."""
    if tm is None or tm.height == 0:
        return None
    t0, t1 = float(tm["complete_ps"].min()), float(tm["complete_ps"].max())
    w = float(window_ps) if window_ps else max((t1 - t0) / 50.0, 1.0)
    unit, scale = time_unit(t1)
    p = plt()
    fig, ax = p.subplots(figsize=(7.5, 4.0))
    names = tm["tenant"].unique(maintain_order=True).to_list()
    for name, st in zip(names, styles(len(names))):
        b = (
            tm.filter(pl.col("tenant") == name)
            .with_columns(((pl.col("complete_ps").cast(pl.Float64) / w).floor() * w + w).alias("end"))
            .group_by("end")
            .agg(pl.col("latency_us").quantile(0.5, "linear").alias("p50"), pl.col("latency_us").quantile(0.99, "linear").alias("p99"))
            .sort("end")
        )
        t = b["end"].to_numpy() / scale
        ax.plot(t, b["p50"].to_numpy(), color=st["color"], marker=st["marker"], ms=3, lw=1.3, label=f"{name}: median")
        ax.plot(t, b["p99"].to_numpy(), color=st["color"], marker=st["marker"], ms=3, lw=1.0, ls="--", label=f"{name}: 99th percentile")
    ax.set_xlabel(f"Simulated time ({unit})")
    ax.set_ylabel("Message latency, post to completion (µs)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return fig


def slowdown_buckets_figure(tables: Mapping[str, pl.DataFrame], title: str):
    """FCT slowdown by flow-size bucket (``buckets.slowdown_by_size`` per run, or
    ``buckets.sweep_by_size`` per grid point of a sweep): the median as bars and the 99th
    percentile as a marker above each, one colour per run or point, buckets side by side. Tables
    with ``slowdown_p50_ci95`` / ``slowdown_p99_ci95`` (a sweep's means over seeds) get their
    95% confidence intervals as whiskers."""
    tables = {k: v for k, v in tables.items() if v is not None and v.height}
    if not tables:
        return None
    buckets: List[str] = []
    for v in tables.values():
        for b in v["bucket"].to_list():
            if b not in buckets:
                buckets.append(b)
    p = plt()
    fig, ax = p.subplots(figsize=(7.5, 4.0))
    n = len(tables)
    width = 0.8 / n
    for i, ((name, v), st) in enumerate(zip(tables.items(), styles(n))):
        xs = np.array([buckets.index(b) for b in v["bucket"].to_list()], dtype=float) - 0.4 + width * (i + 0.5)
        ax.bar(xs, v["slowdown_p50"].to_numpy(), width=width, color=st["color"], alpha=0.75, label=f"{name}: median" if name else "median")
        ax.plot(xs, v["slowdown_p99"].to_numpy(), ls="none", color=st["color"], marker="v", ms=6, label=f"{name}: 99th percentile" if name else "99th percentile")
        if "slowdown_p50_ci95" in v.columns:
            for col, ci in (("slowdown_p50", "slowdown_p50_ci95"), ("slowdown_p99", "slowdown_p99_ci95")):
                ax.errorbar(xs, v[col].to_numpy(), yerr=v[ci].fill_null(0.0).to_numpy(), ls="none", ecolor="black", elinewidth=0.8, capsize=2)
    ax.set_xticks(range(len(buckets)))
    ax.set_xticklabels(buckets, fontsize=8)
    ax.set_yscale("log")
    ax.set_xlabel("Flow size (bytes; 1 KB = 1000 bytes)")
    ax.set_ylabel("FCT slowdown (× ideal FCT)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7, loc="best")
    return fig


# --- output ----------------------------------------------------------------------------------


def png(fig, dpi: int = 100) -> bytes:
    """The figure as PNG bytes (and closes it)."""
    return render_figure(fig, "png", dpi)


def render_figure(fig, fmt: str = "png", dpi: int = 100) -> bytes:
    """The figure as ``fmt`` bytes (``png``, ``svg`` or ``pdf``; vector formats for papers), and
    closes it. No creation date or software in the file: the same figure, the same bytes."""
    if fmt not in FORMATS:
        raise BraidError("--format", f"expected one of {', '.join(FORMATS)}, got {fmt!r}")
    meta = {"png": {"Software": None}, "svg": {"Date": None, "Creator": None}, "pdf": {"CreationDate": None, "Creator": None, "Producer": None}}[fmt]
    buf = io.BytesIO()
    fig.savefig(buf, dpi=dpi, bbox_inches="tight", format=fmt, metadata=meta)
    plt().close(fig)
    return buf.getvalue()


def save(data: bytes, path: Path) -> Path:
    """Whole or absent: a full disk leaves no ``.NAME.tmp-*`` and is one BraidError."""
    from ..results import write_file_atomic

    return write_file_atomic(path, lambda t: t.write_bytes(data))
