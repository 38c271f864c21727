"""A tenant's latency, first-class (issue 28 §3). A tenant here is a scenario entry: an
``[[apps]]`` entry (its client side) or a ``[[traffic]]`` table (its senders). Its latency is that
of every message it posted, from the post to its completion (``messages.parquet``, joined with
``tenants.parquet`` on host and tenant slot); its message rate is the messages completed over the
time from its first post to its last completion. Servers, sinks and host agents post replies or
nothing and are left out.

The headline carries, per tenant ``T``, ``T.lat_p50_us``, ``T.lat_p99_us``, ``T.lat_p999_us`` and
``T.msg_rate_mps`` (so ``braid compare --metric 'apps[1].lat_p99_us'`` and sweeps see them); the
report draws a latency CDF per tenant and latency over time (docs/report.md)."""

from __future__ import annotations

import re
from typing import Dict, Optional

import polars as pl

__all__ = ["tenant_name", "tenant_messages", "tenant_latency", "headline_keys", "QUANTILES"]

#: (headline suffix, quantile): the percentiles a tenant's latency is told by.
QUANTILES = (("lat_p50_us", 0.5), ("lat_p99_us", 0.99), ("lat_p999_us", 0.999))

_SIDE = re.compile(r"^((?:apps|traffic)\[\d+\])\.(client|sender)$")


def tenant_name(label: str) -> Optional[str]:
    """``apps[0].client`` -> ``apps[0]``, ``traffic[1].sender`` -> ``traffic[1]``; None for a
    server, a sink or an agent."""
    m = _SIDE.match(label or "")
    return m.group(1) if m else None


def tenant_messages(messages: Optional[pl.DataFrame], tenants: Optional[pl.DataFrame]) -> pl.DataFrame:
    """The messages each tenant posted: ``tenant`` (its name), ``post_ps``, ``complete_ps``,
    ``latency_us``; empty when the run recorded no messages (``measure.messages = false``) or has
    no tenant column (results written before it)."""
    empty = pl.DataFrame(schema={"tenant": pl.String, "post_ps": pl.UInt64, "complete_ps": pl.UInt64, "latency_us": pl.Float64})
    if messages is None or tenants is None or messages.is_empty() or tenants.is_empty() or "tenant" not in messages.columns:
        return empty
    names = (
        tenants.select("host", pl.col("tenant").alias("slot"), "label")
        .with_columns(pl.col("label").map_elements(tenant_name, return_dtype=pl.String).alias("name"))
        .filter(pl.col("name").is_not_null())
        .select("host", "slot", "name")
    )
    m = messages.select("host", pl.col("tenant").alias("slot"), "post_ps", "complete_ps", "latency_ps").filter(pl.col("slot").is_not_null())
    joined = m.join(names.with_columns(pl.col("host").cast(m.schema["host"]), pl.col("slot").cast(m.schema["slot"])), on=["host", "slot"], how="inner")
    return joined.select(
        pl.col("name").alias("tenant"),
        "post_ps",
        "complete_ps",
        (pl.col("latency_ps").cast(pl.Float64) / 1e6).alias("latency_us"),
    ).sort("tenant", "complete_ps", maintain_order=True)


def tenant_latency(messages: Optional[pl.DataFrame], tenants: Optional[pl.DataFrame]) -> pl.DataFrame:
    """One row per tenant: ``tenant``, ``messages``, ``lat_p50_us``, ``lat_p99_us``,
    ``lat_p999_us`` (linear interpolation between order statistics, numpy's default) and
    ``msg_rate_mps`` (millions of messages per second)."""
    tm = tenant_messages(messages, tenants)
    if tm.is_empty():
        return pl.DataFrame(schema={"tenant": pl.String, "messages": pl.UInt32} | {k: pl.Float64 for k, _ in QUANTILES} | {"msg_rate_mps": pl.Float64})
    span_s = (pl.col("complete_ps").max() - pl.col("post_ps").min()).cast(pl.Float64) / 1e12
    return (
        tm.group_by("tenant", maintain_order=True)
        .agg(
            pl.len().alias("messages"),
            *[pl.col("latency_us").quantile(q, interpolation="linear").alias(k) for k, q in QUANTILES],
            pl.when(span_s > 0).then(pl.len() / span_s / 1e6).otherwise(None).alias("msg_rate_mps"),
        )
        .sort("tenant")
    )


def headline_keys(tables: Dict[str, pl.DataFrame]) -> Dict[str, float]:
    """``{"apps[0].lat_p50_us": ..., "apps[0].lat_p99_us": ..., "apps[0].lat_p999_us": ...,
    "apps[0].msg_rate_mps": ...}`` for every tenant with messages."""
    out: Dict[str, float] = {}
    for row in tenant_latency(tables.get("messages"), tables.get("tenants")).iter_rows(named=True):
        for k in [k for k, _ in QUANTILES] + ["msg_rate_mps"]:
            if row[k] is not None:
                out[f"{row['tenant']}.{k}"] = float(row[k])
    return out
