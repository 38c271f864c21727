"""Results folders: ``summary.json`` plus one Parquet file per table, written atomically.

Everything is written into a temporary folder beside the target and renamed into place at the
end; if anything fails (an error, Ctrl-C) the temporary folder is removed and the target is left
as it was. An existing target is replaced only if it is a braid results folder (it holds a
``summary.json`` or a ``demo.json``) or empty.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator, Union

import polars as pl

from .scenario import BraidError, _json_default

__all__ = ["write_results", "atomic_dir", "read_results", "TABLES"]

TABLES = ("messages", "flows", "throughput", "queues", "transport", "tenants")
MARKERS = ("summary.json", "demo.json")


def _replaceable(target: Path) -> bool:
    if not target.exists():
        return True
    if not target.is_dir():
        return False
    if any((target / m).exists() for m in MARKERS):
        return True
    return not any(target.iterdir())


@contextlib.contextmanager
def atomic_dir(target: Union[str, Path]) -> Iterator[Path]:
    """Yields a fresh temporary folder; on normal exit it becomes ``target`` (replacing an old
    results folder there), on any exception it is deleted and ``target`` is untouched."""
    target = Path(target)
    if target.exists() and not _replaceable(target):
        what = "a file" if not target.is_dir() else "a folder that is not a braid results folder"
        raise BraidError(str(target), f"is {what}; choose a new or empty output folder")
    parent = target.resolve().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BraidError(str(target), f"cannot create the output folder: {e.strerror or e}") from None
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=parent))
    try:
        yield tmp
        os.chmod(tmp, 0o755)
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=parent))
            os.rmdir(old)
            os.rename(target, old)
            try:
                os.rename(tmp, target)
            except BaseException:
                os.rename(old, target)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_json(path: Path, obj) -> None:
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, default=_json_default, allow_nan=False)
        f.write("\n")


def write_into(res, folder: Path) -> None:
    """Writes a run's files into an existing folder (no atomicity of its own)."""
    for name in TABLES:
        df: pl.DataFrame = getattr(res, name)
        df.write_parquet(folder / f"{name}.parquet")
    write_json(folder / "summary.json", res.summary)


def write_results(res, out_dir: Union[str, Path]) -> Path:
    """Writes ``res`` (a RunResult) as a results folder at ``out_dir``, atomically."""
    out = Path(out_dir)
    with atomic_dir(out) as tmp:
        write_into(res, tmp)
    res.out_dir = out
    return out


def read_results(folder: Union[str, Path]) -> dict:
    """Reads a results folder back: {"summary": dict, "<table>": DataFrame, ...}."""
    folder = Path(folder)
    s = folder / "summary.json"
    if not s.exists():
        raise BraidError(str(folder), "not a braid results folder (expected summary.json in it)")
    out: dict = {"summary": json.loads(s.read_text())}
    for name in TABLES:
        p = folder / f"{name}.parquet"
        out[name] = pl.read_parquet(p) if p.exists() else pl.DataFrame()
    return out
