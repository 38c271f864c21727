"""Slowdown by flow size, braid beside HPCC (``braid compare-hpcc RESULTS_DIR [--hpcc FCT.txt]``).

HPCC ns-3's ``fct.txt`` (one line per flow: ``sip dip sport dport size start_ns fct_ns
standalone_fct_ns``) and a braid results folder (``flows.parquet``) both give, per flow, a size
and a slowdown (FCT over the FCT alone on an empty network, each simulator by its own accounting).
This module buckets the slowdowns by flow size in decades (< 10 KB, 10–100 KB, 0.1–1 MB, 1–10 MB,
> 10 MB; 1 KB = 1000 bytes) and prints count, median, 99th percentile and mean per bucket, the way
the HPCC fidelity table of docs/topologies.md is written. Percentiles interpolate linearly between
order statistics (numpy's default, and braid's ``summary.json``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

__all__ = ["BUCKETS", "bucket_table", "read_hpcc_fct", "read_braid", "format_table"]

#: (label, smallest size, first size of the next bucket), bytes.
BUCKETS: List[Tuple[str, int, Optional[int]]] = [
    ("< 10 KB", 0, 10_000),
    ("10–100 KB", 10_000, 100_000),
    ("0.1–1 MB", 100_000, 1_000_000),
    ("1–10 MB", 1_000_000, 10_000_000),
    ("> 10 MB", 10_000_000, None),
]


def quantile(sorted_x: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default)."""
    if not sorted_x:
        return math.nan
    pos = q * (len(sorted_x) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_x[lo] + (sorted_x[hi] - sorted_x[lo]) * (pos - lo)


def _stats(label: str, xs: List[float]) -> Dict[str, object]:
    xs = sorted(xs)
    return {
        "bucket": label,
        "flows": len(xs),
        "p50": quantile(xs, 0.5),
        "p99": quantile(xs, 0.99),
        "mean": sum(xs) / len(xs) if xs else math.nan,
    }


def bucket_table(sizes: Sequence[int], slowdowns: Sequence[float]) -> List[Dict[str, object]]:
    """One row per size bucket, then an ``all`` row: flows, p50, p99, mean of the slowdown."""
    if len(sizes) != len(slowdowns):
        raise ValueError("sizes and slowdowns differ in length")
    per: List[List[float]] = [[] for _ in BUCKETS]
    for s, x in zip(sizes, slowdowns):
        for i, (_, lo, hi) in enumerate(BUCKETS):
            if s >= lo and (hi is None or s < hi):
                per[i].append(float(x))
                break
    rows = [_stats(label, xs) for (label, _, _), xs in zip(BUCKETS, per)]
    rows.append(_stats("all", [float(x) for x in slowdowns]))
    return rows


def read_hpcc_fct(path: Path) -> Tuple[List[int], List[float]]:
    """Sizes and slowdowns (fct / standalone_fct) of an HPCC ns-3 ``fct.txt``."""
    from ..scenario import BraidError

    try:
        from ..inputs import read_input_text

        text = read_input_text(Path(path))
    except OSError as e:
        raise BraidError(str(path), f"cannot read: {e.strerror or e}") from None
    sizes, sd = [], []
    for no, line in enumerate(text.splitlines(), 1):
        f = line.split()
        if not f:
            continue
        if len(f) != 8 or not all(x.isdigit() for x in f[2:]):
            raise BraidError(f"{path}:{no}", f"expected `sip dip sport dport size start_ns fct_ns standalone_fct_ns`, got {line.strip()!r}")
        size, fct, alone = int(f[4]), int(f[6]), int(f[7])
        if alone == 0:
            raise BraidError(f"{path}:{no}", "standalone FCT is 0")
        sizes.append(size)
        sd.append(fct / alone)
    if not sizes:
        raise BraidError(str(path), "no flows")
    return sizes, sd


def read_braid(results) -> Tuple[List[int], List[float]]:
    """Sizes and slowdowns of the completed flows of a braid run (a results folder or a
    ``braid.run`` result)."""
    from ..scenario import BraidError

    if isinstance(results, (str, Path)):
        from ..results import read_results

        p = Path(results)
        if not (p / "flows.parquet").is_file():
            raise BraidError(str(p), "expected a braid results folder (with flows.parquet)")
        flows = read_results(p)["flows"]
    else:
        flows = results.flows
    import polars as pl

    # HPCC's slowdown divides by the flow's FCT alone on its own route (third.cc qp_finish: base
    # RTT + bytes at the route's bottleneck), a single-path notion: braid's path_ideal_fct_ps.
    # braid's own `slowdown` divides by the fabric-wide ideal (the best any scheme could do
    # between the hosts, docs/scenario.md), which on a multi-path fabric is lower.
    if "path_ideal_fct_ps" in flows.columns:
        done = flows.filter(pl.col("fct_ps").is_not_null() & (pl.col("fct_ps") >= 0) & (pl.col("path_ideal_fct_ps") > 0))
        sd = (done["fct_ps"].cast(pl.Float64) / done["path_ideal_fct_ps"].cast(pl.Float64)).to_list()
        return done["size"].to_list(), sd
    done = flows.filter(pl.col("fct_ps").is_not_null() & (pl.col("fct_ps") >= 0) & pl.col("slowdown").is_not_null())
    return done["size"].to_list(), done["slowdown"].to_list()


def format_table(rows: List[Dict[str, object]], ref: Optional[List[Dict[str, object]]] = None, names=("braid", "HPCC")) -> str:
    """A Markdown table; with ``ref``, the reference's columns first, then ours and the ratios."""

    def f(x) -> str:
        return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"

    if ref is None:
        out = ["| size | flows | p50 | p99 | mean |", "|---|---|---|---|---|"]
        for r in rows:
            out.append(f"| {r['bucket']} | {r['flows']:,} | {f(r['p50'])} | {f(r['p99'])} | {f(r['mean'])} |")
        return "\n".join(out)
    a, b = names
    out = [
        f"| size | flows | {b} p50 | {b} p99 | {b} mean | {a} p50 | {a} p99 | {a} mean | p50 ratio | p99 ratio |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r, t in zip(rows, ref):
        r50 = r["p50"] / t["p50"] if t["p50"] else math.nan
        r99 = r["p99"] / t["p99"] if t["p99"] else math.nan
        out.append(
            f"| {r['bucket']} | {t['flows']:,} | {f(t['p50'])} | {f(t['p99'])} | {f(t['mean'])} | "
            f"{f(r['p50'])} | {f(r['p99'])} | {f(r['mean'])} | {f(r50)} | {f(r99)} |"
        )
    return "\n".join(out)
