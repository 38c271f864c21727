"""Reading what braid wrote, for reports and comparisons: a run's results folder, a sweep's
folder, a demo folder. A damaged folder (truncated Parquet, bad JSON, a summary of the wrong
shape, a missing file) is one BraidError naming the file, never a traceback."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import polars as pl

from .results import TABLES, _read_table, layer_table_names, read_json_file
from .tables import spec
from .scenario import BraidError

__all__ = ["Run", "Sweep", "kind_of", "load_run", "load_sweep", "unique_names"]

RUN, SWEEP, DEMO = "run", "sweep", "demo"


def kind_of(folder: Path, option: str = "") -> str:
    """"run", "sweep" or "demo"; a BraidError naming the folder otherwise."""
    where = str(folder)
    if not folder.exists():
        raise BraidError(where, "no such folder (expected a results folder written by braid run, a sweep folder or a demo folder)")
    if not folder.is_dir():
        raise BraidError(where, "is a file (expected a results folder written by braid run, a sweep folder or a demo folder)")
    if (folder / "demo.json").exists():
        return DEMO
    if (folder / "sweep.json").exists():
        return SWEEP
    if (folder / "summary.json").exists():
        return RUN
    if (folder / "points").is_dir() or (folder / "sweep.parquet").exists():
        raise BraidError(str(folder / "sweep.json"), "is missing: the sweep folder is damaged (run the sweep again into it to rebuild it)")
    raise BraidError(where, "not a braid results folder (expected summary.json, or sweep.json for a sweep, in it)")


def _check_summary(s: dict, path: Path) -> None:
    """The parts of summary.json a report reads have the shape braid writes."""
    shapes = (("scenario", dict), ("headline", dict), ("counters", dict), ("stats", dict))
    for key, typ in shapes:
        if key in s and s[key] is not None and not isinstance(s[key], typ):
            raise BraidError(str(path), f"'{key}' is not a JSON object (the file is damaged; re-run to write it again)")
    if "headline" not in s:
        raise BraidError(str(path), "has no 'headline' (the file is damaged or not written by braid run; re-run to write it again)")
    sc = s.get("scenario") or {}
    ov = sc.get("overrides")
    if ov is not None and not (isinstance(ov, list) and all(isinstance(o, str) for o in ov)):
        raise BraidError(str(path), "'scenario.overrides' is not a list of strings (the file is damaged)")
    if "data" in sc and sc["data"] is not None and not isinstance(sc["data"], dict):
        raise BraidError(str(path), "'scenario.data' is not a JSON object (the file is damaged)")
    for key in ("headline", "counters"):
        for k, v in (s.get(key) or {}).items():
            if v is not None and not isinstance(v, (int, float, str, bool)):
                raise BraidError(str(path), f"'{key}.{k}' is not a number (the file is damaged)")


def table_files(folder: Path) -> list:
    """(file, rows, columns, contents) of every table a results folder holds: the run's own, in
    the registry's order (``braid.tables``), then the middleware layers'. Rows and columns come
    from the Parquet metadata (nothing is read)."""
    out = []
    for name in (*TABLES, *layer_table_names(folder)):
        p = Path(folder) / f"{name}.parquet"
        if not p.is_file():
            continue
        lf = pl.scan_parquet(p)
        cols = len(lf.collect_schema())
        if not cols:
            continue
        rows = int(lf.select(pl.len()).collect().item())
        s = spec(name)
        out.append((p.name, f"{rows:,}", cols, s["doc"].replace("`", "") if s else "a middleware layer's table (README.md)"))
    return out


@dataclass
class Run:
    path: Path
    summary: dict
    tables: Dict[str, pl.DataFrame]
    name: str = ""

    @property
    def scenario(self) -> dict:
        return self.summary.get("scenario") or {}

    @property
    def scenario_name(self) -> str:
        n = self.scenario.get("name")
        return str(n) if n not in (None, "") else self.path.name

    @property
    def overrides(self) -> List[str]:
        return list(self.scenario.get("overrides") or [])

    @property
    def headline(self) -> dict:
        return self.summary.get("headline") or {}

    @property
    def counters(self) -> dict:
        return self.summary.get("counters") or {}

    @property
    def end_ps(self) -> Optional[float]:
        v = (self.summary.get("stats") or {}).get("sim_time_ps")
        return float(v) if isinstance(v, (int, float)) else None

    def table(self, name: str) -> pl.DataFrame:
        """A table, read when first asked for (an absent file is an empty table)."""
        if name not in self.tables:
            p = self.path / f"{name}.parquet"
            self.tables[name] = _read_table(p) if p.exists() else pl.DataFrame()
        return self.tables[name]


def load_run(folder: Path) -> Run:
    """A run's summary, checked; its tables are checked now (their Parquet footers: a truncated
    file has none) and read when used, so a report of a run with a large messages table does
    not read it."""
    folder = Path(folder)
    s = folder / "summary.json"
    if not s.exists():
        raise BraidError(str(folder), "not a braid results folder (expected summary.json in it)")
    summary = read_json_file(s)
    _check_summary(summary, s)
    for name in (*TABLES, *layer_table_names(folder)):
        p = folder / f"{name}.parquet"
        if p.exists():
            try:
                pl.read_parquet_schema(p)
            except Exception:  # noqa: BLE001 - polars raises several kinds for a damaged file
                _read_table(p)  # raises the one-line error naming the file
    return Run(path=folder, summary=summary, tables={}, name=folder.name)


@dataclass
class Sweep:
    path: Path
    meta: dict
    data: pl.DataFrame
    name: str = ""
    keys: List[str] = field(default_factory=list)

    @property
    def ok(self) -> pl.DataFrame:
        """The points that ran (no error)."""
        if "error" in self.data.columns:
            return self.data.filter(pl.col("error").is_null())
        return self.data

    @property
    def failed(self) -> pl.DataFrame:
        if "error" in self.data.columns:
            return self.data.filter(pl.col("error").is_not_null())
        return self.data.head(0)

    @property
    def fixed(self) -> List[str]:
        out = []
        for item in self.meta.get("set") or []:
            if isinstance(item, (list, tuple)) and len(item) == 2:
                from .sweep.plan import toml_text

                try:
                    out.append(f"{item[0]}={toml_text(item[1])}")
                except Exception:  # noqa: BLE001 - display only
                    out.append(f"{item[0]}={item[1]!r}")
        return out

    def metrics(self) -> List[str]:
        """The numeric columns that are results (not the swept keys, point, seed)."""
        skip = set(self.keys) | {"point", "seed", "error", "finished"}
        return [c for c, t in self.data.schema.items() if c not in skip and t.is_numeric()]


def load_sweep(folder: Path) -> Sweep:
    folder = Path(folder)
    meta = read_json_file(folder / "sweep.json")
    keys = meta.get("grid_keys")
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise BraidError(str(folder / "sweep.json"), "'grid_keys' is not a list of key paths (the file is damaged)")
    ds = folder / "sweep.parquet"
    if not ds.exists():
        raise BraidError(str(ds), f"is missing (the sweep has not finished, or was stopped): run `braid sweep --collect {folder}` to build it from the finished points")
    data = _read_table(ds)
    missing = [k for k in keys + ["seed"] if k not in data.columns]
    if missing and data.height:
        raise BraidError(str(ds), f"lacks the column(s) {', '.join(missing)} of the sweep's keys (damaged): run `braid sweep --collect {folder}` to rebuild it")
    return Sweep(path=folder, meta=meta, data=data, name=folder.name, keys=keys)


def unique_names(paths: Sequence[Path]) -> List[str]:
    """Display names from folder names; where two are the same, more of their paths (parent/name),
    then a counter, until all differ."""
    full = [Path(p).resolve() for p in paths]
    names = [p.name or str(p) for p in full]
    depth = [1] * len(full)
    for _ in range(8):
        seen: Dict[str, List[int]] = {}
        for i, n in enumerate(names):
            seen.setdefault(n, []).append(i)
        dups = [ix for ix in seen.values() if len(ix) > 1]
        if not dups:
            return names
        for ix in dups:
            for i in ix:
                depth[i] += 1
                parts = full[i].parts[-depth[i]:]
                names[i] = "/".join(parts)
    counts: Dict[str, int] = {}
    out = []
    for n in names:
        counts[n] = counts.get(n, 0) + 1
        out.append(n if counts[n] == 1 else f"{n} ({counts[n]})")
    return out


def headline_value(v: Any) -> Optional[float]:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)
