"""Plots and a short markdown report for a results folder (``braid report DIR``)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Iterable, List

import numpy as np
import polars as pl

from .results import read_results
from .scenario import BraidError

__all__ = ["make_report", "plot_run"]

MAX_FLOW_LINES = 16


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png")
    os.replace(tmp, path)
    return path


def plot_throughput(tp: pl.DataFrame, flows: pl.DataFrame, path: Path, title: str) -> Path | None:
    if tp.height == 0:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4.2))
    tp = tp.sort("time_ps")
    ids = tp.get_column("flow").unique().sort().to_list()
    labels = {}
    if flows.height and "flow" in flows.columns:
        for row in flows.select("flow", "src", "dst").iter_rows():
            labels[row[0]] = f"flow {row[0]}: h{row[1]}→h{row[2]}"
    shown = ids
    if len(ids) > MAX_FLOW_LINES:
        # Many flows: the aggregate, plus the flows that moved the most bytes.
        top = tp.group_by("flow").agg(pl.col("bytes").sum()).sort("bytes", descending=True).head(MAX_FLOW_LINES // 2)
        shown = sorted(top.get_column("flow").to_list())
        agg = tp.group_by("time_ps").agg(pl.col("gbps").sum()).sort("time_ps")
        ax.plot(agg["time_ps"].to_numpy() / 1e6, agg["gbps"].to_numpy(), color="black", lw=1.6, label="all flows")
    for f in shown:
        d = tp.filter(pl.col("flow") == f)
        ax.plot(d["time_ps"].to_numpy() / 1e6, d["gbps"].to_numpy(), lw=1.0, label=labels.get(f, f"flow {f}"))
    ax.set_xlabel("time (µs)")
    ax.set_ylabel("goodput (Gbps)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2 if len(shown) > 6 else 1, loc="best")
    p = _save(fig, path)
    plt.close(fig)
    return p


def _cdf(ax, values: np.ndarray, label: str, xlabel: str, logx: bool = False) -> None:
    v = np.sort(values[np.isfinite(values)])
    if v.size == 0:
        return
    y = np.arange(1, v.size + 1) / v.size
    ax.step(v, y, where="post", label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("CDF")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    if logx and v.min() > 0 and v.max() / v.min() > 50:
        ax.set_xscale("log")


def plot_fct(flows: pl.DataFrame, path: Path, title: str) -> Path | None:
    if flows.height == 0 or "fct_ps" not in flows.columns:
        return None
    done = flows.filter(pl.col("fct_ps") >= 0)
    if "kind" in done.columns:
        done = done.filter(pl.col("kind") == "flow")
    if done.height == 0:
        return None
    plt = _plt()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.8))
    _cdf(a1, done["fct_ps"].to_numpy().astype(float) / 1e6, "FCT", "flow completion time (µs)", logx=True)
    if "slowdown" in done.columns:
        _cdf(a2, done["slowdown"].to_numpy().astype(float), "slowdown", "slowdown (FCT / ideal FCT)", logx=True)
    fig.suptitle(title)
    p = _save(fig, path)
    plt.close(fig)
    return p


def plot_queues(q: pl.DataFrame, path: Path, title: str) -> Path | None:
    if q.height == 0:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4.2))
    ports = q.get_column("port").unique().sort().to_list()
    if len(ports) > MAX_FLOW_LINES:
        top = q.group_by("port").agg(pl.col("bytes").max()).sort("bytes", descending=True).head(MAX_FLOW_LINES)
        ports = sorted(top.get_column("port").to_list())
    for port in ports:
        d = q.filter(pl.col("port") == port).sort("time_ps")
        ax.plot(d["time_ps"].to_numpy() / 1e6, d["bytes"].to_numpy() / 1e3, lw=1.0, label=port)
    ax.set_xlabel("time (µs)")
    ax.set_ylabel("queue (KB)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    p = _save(fig, path)
    plt.close(fig)
    return p


def plot_cc(cc: pl.DataFrame, path: Path, title: str) -> Path | None:
    """The congestion controllers' state (``measure.cc``): DCQCN rate and alpha, MP-RDMA window,
    one line per QP (the first MAX_FLOW_LINES)."""
    if cc.height == 0:
        return None
    panels = [(c, lab) for c, lab in (("rate_bps", "rate Rc (Gbps)"), ("alpha", "DCQCN α"), ("cwnd", "cwnd (packets)"))
              if c in cc.columns and cc[c].null_count() < cc.height]
    if not panels:
        return None
    plt = _plt()
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 2.6 * len(panels)), sharex=True, squeeze=False)
    keys = cc.select("host", "qpn", "flow").unique().sort("host", "qpn").head(MAX_FLOW_LINES).to_dicts()
    for ax, (col, label) in zip(axes[:, 0], panels):
        scale = 1e9 if col == "rate_bps" else 1
        for k in keys:
            d = cc.filter((pl.col("host") == k["host"]) & (pl.col("qpn") == k["qpn"])).sort("time_ps")
            if d[col].null_count() == d.height:
                continue
            name = f"flow {k['flow']}" if k["flow"] is not None else f"h{k['host']} qp{k['qpn']}"
            ax.plot(d["time_ps"].to_numpy() / 1e6, d[col].to_numpy() / scale, lw=1.0, label=name)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0, 0].set_title(title)
    axes[0, 0].legend(fontsize=7, loc="best")
    axes[-1, 0].set_xlabel("time (µs)")
    p = _save(fig, path)
    plt.close(fig)
    return p


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        return f"{v:,.0f}" if v == int(v) and abs(v) < 1e12 else f"{v:.4g}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def _md_table(rows: Iterable[tuple], head=("metric", "value")) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append("| " + " | ".join(_fmt(x) for x in r) + " |")
    return "\n".join(lines)


def plot_run(folder: Path) -> List[Path]:
    """Plots one results folder and writes its report.md; returns the files written."""
    r = read_results(folder)
    s = r["summary"]
    name = s.get("scenario", {}).get("name", folder.name)
    made = []
    for p in (
        plot_throughput(r["throughput"], r["flows"], folder / "throughput.png", f"{name}: goodput per flow"),
        plot_fct(r["flows"], folder / "fct_cdf.png", f"{name}: flow completion"),
        plot_queues(r["queues"], folder / "queues.png", f"{name}: queue length"),
        plot_cc(r["cc"], folder / "cc.png", f"{name}: congestion control"),
    ):
        if p is not None:
            made.append(p)
    md = [f"# {name}", ""]
    src = s.get("scenario", {}).get("source")
    md.append(f"Scenario `{src or name}`, seed {s.get('seed')}, braid {s.get('braid_version')}.")
    ov = s.get("scenario", {}).get("overrides") or []
    if ov:
        md.append("Overrides: " + ", ".join(f"`{o}`" for o in ov) + ".")
    md.append("")
    md.append("## Headline")
    md.append("")
    h = s.get("headline") or {}
    if "flows" in h:
        md.append(
            f"{_fmt(h.get('flows_completed'))} of {_fmt(h.get('flows'))} flows completed. FCT and slowdown "
            "figures cover completed flows only; Jain's index covers every started flow (an unfinished one "
            "with its goodput so far)."
        )
        md.append("")
    if s.get("finished") is False:
        md.append("**The run reached its duration with traffic unfinished.**")
        md.append("")
    md.append(_md_table(sorted(h.items())))
    md.append("")
    md.append("## Counters")
    md.append("")
    md.append(_md_table(sorted((s.get("counters") or {}).items())))
    md.append("")
    md.append("## Run")
    md.append("")
    if (folder / "trace.pcap").exists():
        md.append(f"Packet trace: `trace.pcap` ({_fmt((s.get('stats') or {}).get('pcap_packets'))} frames; open it in Wireshark or `tshark -r`).")
        md.append("")
    md.append(_md_table([("wall time (s)", s.get("wall_s")), ("CPU time (s)", s.get("cpu_s")), ("events", s.get("events")), ("events/s", s.get("events_per_s")), ("simulated s per wall s", s.get("sim_s_per_wall_s"))]))
    md.append("")
    if made:
        md.append("## Plots")
        md.append("")
        for p in made:
            md.append(f"![{p.stem}]({p.name})")
            md.append("")
    rep = folder / "report.md"
    tmp = folder / ".report.md.tmp"
    tmp.write_text("\n".join(md))
    os.replace(tmp, rep)
    return made + [rep]


def make_report(folder: Path) -> List[Path]:
    """``braid report DIR``: a results folder, or a demo folder (its parts, then its summary)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise BraidError(str(folder), "no such folder (expected a results folder written by braid run or braid demo)")
    if (folder / "demo.json").exists():
        from .demo import write_demo_report

        from .results import read_json_file

        meta = read_json_file(folder / "demo.json")
        made: List[Path] = []
        for part in meta.get("runs", []):
            made += plot_run(folder / part)
        made += write_demo_report(folder, meta)
        return made
    if not (folder / "summary.json").exists():
        raise BraidError(str(folder), "not a braid results folder (expected summary.json in it)")
    return plot_run(folder)
