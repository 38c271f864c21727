"""Terminal presentation helpers (rich)."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.table import Table

_consoles: dict = {}


def console(stderr: bool = False) -> Console:
    if stderr not in _consoles:
        _consoles[stderr] = Console(stderr=stderr, highlight=False)
    return _consoles[stderr]


def fmt(v: Any, digits: int = 4) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        if abs(v) >= 1e15 or (v != 0 and abs(v) < 1e-3):
            return f"{v:.3e}"
        if abs(v) >= 1000 or v == int(v):
            return f"{v:,.0f}"
        return f"{v:.{digits}g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def fmt_ps(ps: Any) -> str:
    if ps is None or (isinstance(ps, float) and math.isnan(ps)) or ps < 0:
        return "-"
    for unit, scale in (("s", 1e12), ("ms", 1e9), ("us", 1e6), ("ns", 1e3)):
        if ps >= scale:
            return f"{ps / scale:.4g} {unit}"
    return f"{ps:.0f} ps"


HEADLINE_ORDER = [
    "flows",
    "flows_completed",
    "apps",
    "apps_completed",
    "aggregate_goodput_gbps",
    "flow_goodput_jain",
    "app_goodput_sum_gbps",
    "app_goodput_jain",
    "fct_mean_us",
    "fct_p50_us",
    "fct_p99_us",
    "slowdown_mean",
    "slowdown_p50",
    "slowdown_p99",
    "delivered_bytes",
    "sim_time_ms",
]
#: Labels that say what a figure covers.
HEADLINE_LABELS = {
    "fct_mean_us": "fct_mean_us (completed flows)",
    "fct_p50_us": "fct_p50_us (completed flows)",
    "fct_p99_us": "fct_p99_us (completed flows)",
    "slowdown_mean": "slowdown_mean (completed flows)",
    "slowdown_p50": "slowdown_p50 (completed flows)",
    "slowdown_p99": "slowdown_p99 (completed flows)",
    "flow_goodput_jain": "flow_goodput_jain (all flows)",
    "aggregate_goodput_gbps": "aggregate_goodput_gbps (while traffic ran)",
    "app_goodput_jain": "app_goodput_jain (apps of one kind)",
}
COUNTER_ORDER = ["drops", "pfc_pauses", "ecn_marks", "cnps", "retransmissions", "timeouts", "naks"]


def headline_table(res) -> Table:
    t = Table(title=f"{res.scenario.name} (seed {res.seed})", show_header=True, header_style="bold")
    t.add_column("metric")
    t.add_column("value", justify="right")
    h = res.headline
    keys = [k for k in HEADLINE_ORDER if k in h] + sorted(k for k in h if k not in HEADLINE_ORDER)
    for k in keys:
        if k in ("flows_completed", "apps_completed"):
            continue
        if k == "flows" and "flows_completed" in h:
            # Completed of total, so an unfinished flow cannot hide behind the figures below;
            # an apps-only run says how many apps completed instead of "0 / 0" flows.
            if h["flows"] or not h.get("apps"):
                t.add_row("flows completed", f"{fmt(h['flows_completed'])} / {fmt(h['flows'])}")
            continue
        if k == "apps" and "apps_completed" in h:
            t.add_row("apps completed", f"{fmt(h['apps_completed'])} / {fmt(h['apps'])}")
            continue
        t.add_row(HEADLINE_LABELS.get(k, k), fmt(h[k]))
    for k in [k for k in COUNTER_ORDER if k in res.counters]:
        t.add_row(k, fmt(res.counters[k]))
    ev = res.stats.get("events")
    if ev is not None:
        t.add_row("events", fmt(ev))
    if res.wall_s > 0:
        t.add_row("wall time", f"{res.wall_s:.2f} s")
        if ev:
            t.add_row("events/s", fmt(ev / res.wall_s))
    t.add_row("cpu time", f"{res.cpu_s:.2f} s")
    if not res.finished:
        n = getattr(res, "unfinished", 0)
        late = getattr(res, "not_started", 0)
        split = f": {n - late} in flight, {late} not yet started" if late else ""
        t.caption = f"[yellow]the run stopped before its traffic finished ({n} unfinished{split})[/yellow]"
    return t
