"""The run's output tables, as the core's registry declares them (``braid._core.table_specs``,
``crates/braid-sim/src/tables/``): each table's name, one-line doc and columns (name, type,
nullability, doc). Everything in Python that lists, writes or reads tables takes the names
from here, so a new table in the core needs no Python change.

A table comes from the core as a dict of columns; a column with nulls as ``(values, valid)``
(numpy arrays; ``valid`` false where the value is null), a text column with nulls as a list
holding None. :func:`frame` makes the polars DataFrame, nulls as nulls.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import polars as pl

from . import _core

__all__ = ["SPECS", "TABLES", "spec", "frame", "is_own"]

#: One dict per table, in the registry's order: name, doc, columns, extra.
SPECS: tuple = tuple(_core.table_specs())
#: The names of the run's own tables (``<name>.parquet``), in order.
TABLES: tuple = tuple(s["name"] for s in SPECS)


def spec(name: str) -> Optional[dict]:
    """The registry's entry for table ``name`` (None for a middleware layer's table)."""
    for s in SPECS:
        if s["name"] == name:
            return s
    return None


def is_own(name: str) -> bool:
    """True for one of the run's own tables, False for a middleware layer's."""
    return name in TABLES


def _series(name: str, v: Any) -> pl.Series:
    if isinstance(v, tuple):
        values, valid = v
        both = pl.DataFrame({"v": pl.Series(values), "ok": pl.Series(valid)})
        return both.select(pl.when(pl.col("ok")).then(pl.col("v")).otherwise(None).alias(name)).to_series()
    if isinstance(v, list):
        return pl.Series(name, v, dtype=pl.String)
    return pl.Series(name, v)


def frame(cols: Mapping[str, Any]) -> pl.DataFrame:
    """A table from the core as a DataFrame (an empty DataFrame for a table without columns)."""
    if not cols:
        return pl.DataFrame()
    return pl.DataFrame([_series(k, v) for k, v in cols.items()])
