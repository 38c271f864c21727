"""A sweep's folder: one small file per finished point, written atomically, and the dataset.

::

    DIR/sweep.json                what the sweep is (scenario, its SHA-256, grid keys, fixed overrides)
    DIR/points/<id>.json          a point's overrides and seed (written first)
    DIR/points/<id>.parquet       its one-row result: written last, by rename, so it exists whole or not at all
    DIR/errors/<id>.json          a point that failed: its overrides, seed and the error (one line)
    DIR/sweep.parquet             every point, one row each (rebuilt at the end and by --collect)

A point is done exactly when its ``.parquet`` exists. Only the process driving the sweep writes
these files (workers send their row back), one file per point id: a re-run skips done points, a
killed sweep loses only the points in progress, and no point can be counted twice. Failed points
are run again by the next run of the sweep.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Dict, List, Set

import polars as pl

from ..scenario import BraidError, _fmt_path, _json_default, parse_override
from .plan import Plan, Point, toml_text

MARKER = "sweep.json"
DATASET = "sweep.parquet"


def _write_atomic(path: Path, write) -> None:
    """``write(tmp_path)`` then rename: readers (and a resumed sweep) never see a partial file;
    a full disk is one BraidError naming the file."""
    from ..results import write_file_atomic

    write_file_atomic(path, write)


def _write_json(path: Path, obj: Any) -> None:
    _write_atomic(path, lambda t: t.write_text(json.dumps(obj, indent=1, default=_json_default, allow_nan=False) + "\n"))


def file_sha256(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


class SweepDir:
    """An output folder for a sweep: checked before anything runs; reused (resumed) only for the
    same sweep."""

    def __init__(self, target: Path, option: str = "-o"):
        self.root = Path(target)
        if self.root.is_symlink():
            self.root = Path(os.path.realpath(self.root))
        here = Path.cwd().resolve()
        full = self.root.resolve()
        if full == here or full in here.parents:
            raise BraidError(option, f"{target} is the current folder (or holds it); a sweep needs a folder of its own")
        if self.root.exists() and not self.root.is_dir():
            raise BraidError(option, f"{target} is a file; expected a new folder or a sweep folder to resume")
        self.points = self.root / "points"
        self.errors = self.root / "errors"

    def lock(self, option: str = "-o") -> None:
        """Takes the folder for this process: a second sweep (or run) into the same folder while
        this one runs is refused with one line, instead of both running every point. Released
        by :meth:`unlock`, or by the kernel when the process dies."""
        from ..results import FolderLock, _busy

        parent = self.root.absolute().parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            lock = FolderLock(parent, self.root.name)
            got = lock.acquire()
        except OSError as e:
            raise BraidError(option, f"cannot write the sweep folder {self.root}: {e.strerror or e}") from None
        if not got:
            msg = _busy(self.root, lock).message.replace("another braid run", "another braid sweep or run")
            raise BraidError(option, f"{self.root} {msg}")
        self._lock = lock

    def unlock(self) -> None:
        lock = getattr(self, "_lock", None)
        if lock is not None:
            lock.release()
            self._lock = None

    def is_sweep(self) -> bool:
        return (self.root / MARKER).is_file()

    def prepare(self, plan: Plan, option: str = "-o") -> None:
        """Creates the folder or checks that it holds this same sweep (same scenario file
        content, same grid keys and fixed overrides; more values or seeds are fine)."""
        meta = {
            "scenario": str(plan.scenario),
            "scenario_sha256": file_sha256(plan.scenario),
            "grid_keys": sorted(plan.grid),
            # Canonical (key path, value) pairs: `k=none` and `k="none"` are the same override.
            "set": [[_fmt_path(parts), v] for parts, v in map(parse_override, plan.fixed)],
        }
        meta = json.loads(json.dumps(meta, default=_json_default))
        if self.root.is_dir() and any(self.root.iterdir()):
            if not self.is_sweep():
                raise BraidError(option, f"{self.root} is a folder that is not a braid sweep; choose a new folder (or a sweep's, to resume it)")
            old = self.meta()
            for k, what in (("scenario_sha256", "scenario (its file changed)"), ("grid_keys", "grid keys"), ("set", "--set overrides")):
                if old.get(k) != meta[k]:
                    raise BraidError(option, f"{self.root} holds a sweep with other {what}; choose another folder")
        try:
            self.points.mkdir(parents=True, exist_ok=True)
            self.errors.mkdir(exist_ok=True)
            if not self.is_sweep():
                _write_json(self.root / MARKER, meta)
        except OSError as e:
            raise BraidError(option, f"cannot write the sweep folder {self.root}: {e.strerror or e}") from None
        self.clean_partial()

    def meta(self) -> dict:
        from ..results import read_json_file

        return read_json_file(self.root / MARKER)

    def clean_partial(self) -> None:
        """Removes temporary files a killed sweep left (``.NAME.tmp-PID``, PID gone)."""
        from ..results import _pid_alive

        for d in (self.points, self.errors, self.root):
            for p in d.glob(".*.tmp-*"):
                try:
                    pid = int(p.name.rsplit("-", 1)[1])
                except ValueError:
                    continue
                if pid != os.getpid() and not _pid_alive(pid):
                    with contextlib.suppress(OSError):
                        p.unlink()

    def done(self) -> Set[str]:
        return {p.stem for p in self.points.glob("*.parquet") if not p.name.startswith(".")}

    def failed(self) -> Set[str]:
        return {p.stem for p in self.errors.glob("*.json") if not p.name.startswith(".")}

    def record(self, point: Point, row: Dict[str, Any]) -> None:
        """A finished point: its description, then its row (the row's arrival makes it done)."""
        _write_json(self.points / f"{point.id}.json", describe(point))
        df = pl.DataFrame([row], infer_schema_length=None)
        _write_atomic(self.points / f"{point.id}.parquet", lambda t: df.write_parquet(t))
        with contextlib.suppress(FileNotFoundError):
            (self.errors / f"{point.id}.json").unlink()

    def record_error(self, point: Point, error: str) -> None:
        _write_json(self.errors / f"{point.id}.json", dict(describe(point), error=error))

    def collect(self) -> pl.DataFrame:
        """Every point in the folder as one table (finished points, then failed ones with their
        error), sorted by the swept keys and the seed; written to ``sweep.parquet`` atomically."""
        if not self.is_sweep():
            raise BraidError(str(self.root), f"not a braid sweep folder (expected {MARKER} in it)")
        keys = self.meta().get("grid_keys", [])
        frames: List[pl.DataFrame] = []
        done = sorted(self.done())
        from ..results import _read_table

        for pid in done:
            frames.append(_read_table(self.points / f"{pid}.parquet"))
        err_rows = []
        for pid in sorted(self.failed() - set(done)):
            from ..results import read_json_file

            d = read_json_file(self.errors / f"{pid}.json")
            err_rows.append({"point": pid, **{k: _cell(v) for k, v in d.get("grid", {}).items()}, "seed": d.get("seed"), "error": d.get("error")})
        if err_rows:
            frames.append(pl.DataFrame(err_rows, infer_schema_length=None))
        df = _concat(frames, keys)
        if "error" not in df.columns:
            df = df.with_columns(pl.lit(None, dtype=pl.String).alias("error"))
        if df.height:
            df = df.sort([k for k in keys if k in df.columns] + ["seed"], nulls_last=True)
        _write_atomic(self.root / DATASET, lambda t: df.write_parquet(t))
        return df


def _cell(v: Any) -> Any:
    """A swept value as a column cell: scalars as they are, lists and tables as TOML text."""
    return v if isinstance(v, (bool, int, float, str)) else toml_text(v)


def describe(point: Point) -> dict:
    return {"point": point.id, "grid": dict(point.grid), "seed": point.seed, "overrides": point.overrides}


def _concat(frames: List[pl.DataFrame], keys: List[str]) -> pl.DataFrame:
    if not frames:
        return pl.DataFrame({"point": [], "seed": []}, schema={"point": pl.String, "seed": pl.Int64})
    try:
        return pl.concat(frames, how="diagonal_relaxed")
    except Exception:
        # A swept key whose values have no common type (1 and "1MB"): the key's column as text.
        fixed = [f.with_columns([pl.col(k).cast(pl.String) for k in keys if k in f.columns]) for f in frames]
        return pl.concat(fixed, how="diagonal_relaxed")
