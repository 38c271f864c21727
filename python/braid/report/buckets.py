"""FCT slowdown by flow-size bucket (issue 28 §3), the standard figure of HPCC's and every
load-balancing paper's evaluation: for each bucket of flow sizes, the median and 99th-percentile
slowdown (FCT over the ideal FCT on the idle fabric; ``flows.parquet``'s ``slowdown``) of the
completed traffic flows in it. Buckets are given by their edges in bytes (default: decades,
10 KB to 10 MB, 1 KB = 1000 bytes, as ``braid compare-hpcc``); ``braid plot --buckets`` takes
others.

The headline carries ``slowdown_p50_<bucket>`` and ``slowdown_p99_<bucket>`` for every bucket that
holds a flow (``<bucket>`` as ``0-10KB``, ``10KB-100KB``, ``10MB+``), so ``braid compare`` and
sweeps see them. A sweep's report draws them as a grouped bar chart, one bar per grid point in
each bucket (:func:`sweep_by_size`: the mean over seeds with its 95% confidence interval)."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import polars as pl

__all__ = ["DEFAULT_EDGES", "bucket_names", "slowdown_by_size", "headline_keys", "parse_edges", "sweep_by_size"]

#: Upper edges of the buckets but the last, bytes.
DEFAULT_EDGES = (10_000, 100_000, 1_000_000, 10_000_000)


def _size(n: int) -> str:
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return f"{n}B"


def bucket_names(edges: Sequence[int] = DEFAULT_EDGES) -> List[str]:
    """``["0-10KB", "10KB-100KB", ..., "10MB+"]``: each bucket holds sizes in [low, high)."""
    lows = [0, *edges]
    names = [f"{_size(lo) if lo else '0'}-{_size(hi)}" for lo, hi in zip(lows, edges)]
    return names + [f"{_size(edges[-1])}+" if edges else "all"]


def parse_edges(text: str) -> List[int]:
    """``"10KB,100KB,1MB"`` -> ``[10000, 100000, 1000000]`` (increasing, positive); a bad value
    is a BraidError naming ``--buckets``."""
    from ..scenario import BraidError
    from .._core import parse_bytes

    try:
        edges = [parse_bytes(x.strip()) for x in text.split(",") if x.strip()]
    except Exception:  # noqa: BLE001 - any unparsable size is the same user error
        raise BraidError("--buckets", f"expected increasing sizes separated by commas, like \"10KB,100KB,1MB\", got {text!r}") from None
    if not edges or any(e <= 0 for e in edges) or any(b <= a for a, b in zip(edges, edges[1:])):
        raise BraidError("--buckets", f"expected increasing sizes separated by commas, like \"10KB,100KB,1MB\", got {text!r}")
    return edges


def slowdown_by_size(flows: Optional[pl.DataFrame], edges: Sequence[int] = DEFAULT_EDGES) -> pl.DataFrame:
    """One row per bucket that holds a completed traffic flow: ``bucket``, ``low``, ``high``
    (bytes; null for the last), ``flows``, ``slowdown_p50``, ``slowdown_p99`` (linear
    interpolation between order statistics)."""
    schema = {"bucket": pl.String, "low": pl.Int64, "high": pl.Int64, "flows": pl.UInt32, "slowdown_p50": pl.Float64, "slowdown_p99": pl.Float64}
    if flows is None or flows.is_empty() or "slowdown" not in flows.columns:
        return pl.DataFrame(schema=schema)
    f = flows.filter(pl.col("slowdown").is_not_null() & pl.col("slowdown").is_finite()).select(pl.col("size").cast(pl.Int64), "slowdown")
    names = bucket_names(edges)
    lows = [0, *edges]
    highs: List[Optional[int]] = [*edges, None]
    rows = []
    for name, lo, hi in zip(names, lows, highs):
        b = f.filter((pl.col("size") >= lo) & (pl.col("size") < hi) if hi is not None else pl.col("size") >= lo)["slowdown"]
        if b.len() == 0:
            continue
        rows.append({"bucket": name, "low": lo, "high": hi, "flows": b.len(), "slowdown_p50": b.quantile(0.5, "linear"), "slowdown_p99": b.quantile(0.99, "linear")})
    return pl.DataFrame(rows, schema=schema)


def headline_keys(tables: Dict[str, pl.DataFrame]) -> Dict[str, float]:
    """``{"slowdown_p50_0-10KB": ..., "slowdown_p99_0-10KB": ..., ...}`` (default buckets)."""
    out: Dict[str, float] = {}
    for row in slowdown_by_size(tables.get("flows")).iter_rows(named=True):
        out[f"slowdown_p50_{row['bucket']}"] = float(row["slowdown_p50"])
        out[f"slowdown_p99_{row['bucket']}"] = float(row["slowdown_p99"])
    return out


_P50, _P99 = "slowdown_p50_", "slowdown_p99_"


def _bucket_low(name: str) -> float:
    """A bucket's lower edge in bytes from its name (``10KB-100KB`` -> 10000, ``10MB+`` ->
    10^7), for ordering buckets whose edges were not the default."""
    head = name.split("-")[0].rstrip("+")
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3), ("B", 1)):
        if head.endswith(unit) and head[: -len(unit)].isdigit():
            return float(int(head[: -len(unit)]) * scale)
    return 0.0 if head == "0" else float("inf")


def sweep_by_size(ok: pl.DataFrame, keys: Sequence[str]) -> Dict[str, pl.DataFrame]:
    """FCT slowdown by flow-size bucket for each grid point of a sweep (``ok``: one row per
    (point, seed) that ran, with the headline's ``slowdown_p50_<bucket>`` and
    ``slowdown_p99_<bucket>`` columns): ``{point label: table}``, the label ``key=value, ...``
    (``all`` without swept keys), the table one row per bucket that held a completed flow at
    some seed of the point: ``bucket``, ``seeds`` (how many seeds had a flow in it),
    ``slowdown_p50`` and ``slowdown_p99`` (means over those seeds) and ``slowdown_p50_ci95``,
    ``slowdown_p99_ci95`` (half-widths of the means' 95% confidence intervals). Buckets in
    increasing size. Empty when the sweep has no bucket columns."""
    from .plots import ci95

    names = [c[len(_P50):] for c in ok.columns if c.startswith(_P50) and _P99 + c[len(_P50):] in ok.columns]
    names.sort(key=_bucket_low)
    if not names or ok.height == 0:
        return {}
    keys = [k for k in keys if k in ok.columns]
    if keys:
        label = pl.concat_str([pl.lit(f"{k}=") + pl.col(k).cast(pl.String) for k in keys], separator=", ")
    else:
        label = pl.lit("all")
    d = ok.with_columns(label.alias("__point"))
    out: Dict[str, pl.DataFrame] = {}
    for point in d["__point"].unique(maintain_order=True).to_list():
        rows = []
        sub = d.filter(pl.col("__point") == point)
        for b in names:
            p50 = sub[_P50 + b].cast(pl.Float64).drop_nulls().drop_nans()
            p99 = sub[_P99 + b].cast(pl.Float64).drop_nulls().drop_nans()
            if p50.len() == 0:
                continue
            rows.append({
                "bucket": b,
                "seeds": p50.len(),
                "slowdown_p50": p50.mean(),
                "slowdown_p99": p99.mean() if p99.len() else None,
                "slowdown_p50_ci95": ci95(p50.std(), p50.len()),
                "slowdown_p99_ci95": ci95(p99.std(), p99.len()) if p99.len() else 0.0,
            })
        if rows:
            out[str(point)] = pl.DataFrame(rows, schema={"bucket": pl.String, "seeds": pl.UInt32, "slowdown_p50": pl.Float64, "slowdown_p99": pl.Float64, "slowdown_p50_ci95": pl.Float64, "slowdown_p99_ci95": pl.Float64})
    return out
