"""Measurements the reproductions share, computed from a run's tables and counters.

Goodput comes from the sampled throughput series (``throughput``: one row per flow and sampling
interval, the bytes delivered in the interval ending at ``time_ps``), so a window ``(t0, t1]``
counts exactly the intervals that end inside it.
"""

from __future__ import annotations

import math
import statistics
from typing import Dict, Iterable, List, Sequence

MS = 1_000_000_000  # picoseconds per millisecond


def flow_goodput_gbps(res, t0_ms: float, t1_ms: float) -> List[float]:
    """Goodput of every flow in Gbit/s over ``(t0, t1]`` (flows in id order, 0 for a flow that
    delivered nothing in the window)."""
    import polars as pl

    t0, t1 = int(t0_ms * MS), int(t1_ms * MS)
    th = res.throughput
    nflows = res.flows.height
    out = [0.0] * nflows
    if th.height == 0:
        return out
    w = th.filter((pl.col("time_ps") > t0) & (pl.col("time_ps") <= t1)).group_by("flow").agg(pl.col("bytes").sum())
    secs = (t1 - t0) / 1e12
    for flow, b in zip(w["flow"].to_list(), w["bytes"].to_list()):
        if flow < nflows:
            out[flow] = b * 8 / secs / 1e9
    return out


def total_goodput_gbps(res, t0_ms: float, t1_ms: float) -> float:
    return sum(flow_goodput_gbps(res, t0_ms, t1_ms))


def port_counters(res, name: str, node: str) -> Dict[int, float]:
    """Per-port counters ``<name>:<node>:<port>`` of one switch, by port number."""
    prefix = f"{name}:{node}:"
    return {int(k[len(prefix):]): v for k, v in res.counters.items() if k.startswith(prefix)}


def jain(x: Sequence[float]) -> float:
    s, s2 = sum(x), sum(v * v for v in x)
    return s * s / (len(x) * s2) if x and s2 > 0 else math.nan


def mean(x: Iterable[float]) -> float:
    v = list(x)
    return statistics.fmean(v) if v else math.nan


def spread(x: Sequence[float]) -> str:
    """"mean (min–max)" of several seeds."""
    if not x:
        return "-"
    if len(x) == 1:
        return f"{x[0]:.1f}"
    return f"{mean(x):.1f} ({min(x):.1f}–{max(x):.1f})"
