"""Results folders: ``summary.json`` plus one Parquet file per table, written atomically.

Nothing is lost, and nothing is half-written:

* the output folder is checked and reserved before any work (:class:`ResultsDir`): a folder that
  cannot be created or written, a file, a folder that holds something other than braid results,
  the current folder (or one holding it), or an existing results folder without ``overwrite``
  is one clear error up front, not a traceback after the run;
* a folder that does not exist yet is created empty at once, so two runs started together
  cannot both pick it (with ``unique``, the second takes ``NAME-2``, ``NAME-3``, ...);
* everything is written into a temporary folder beside the target (``.NAME.tmp-PID-*``) and
  renamed into place at the end; on any failure (an error, Ctrl-C, SIGTERM) the temporary
  folder, and the empty reserved target, are removed. Temporary folders left by a killed run
  (their process is gone) are removed by the next run into the same place.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Iterator, Union

import polars as pl

from .scenario import BraidError, _json_default

__all__ = ["write_results", "atomic_dir", "read_results", "ResultsDir", "TABLES", "layer_table_names"]

TABLES = ("messages", "flows", "throughput", "queues", "transport", "tenants", "ports", "pfc", "cc")
#: A middleware layer's table name (``RunResult.layer_tables``): it becomes ``<name>.parquet``.
LAYER_TABLE_NAME = re.compile(r"^[a-z0-9_]{1,64}$")


def layer_table_names(folder: Path) -> list:
    """The layer tables a results folder holds: its ``*.parquet`` files other than
    :data:`TABLES`, by name, sorted."""
    names = []
    for p in sorted(Path(folder).glob("*.parquet")):
        if p.stem not in TABLES and LAYER_TABLE_NAME.match(p.stem):
            names.append(p.stem)
    return names
#: The packet capture (``measure.pcap``), beside the tables when the run captured anything.
PCAP_FILE = "trace.pcap"
MARKERS = ("summary.json", "demo.json")


def is_results_folder(target: Path) -> bool:
    return target.is_dir() and any((target / m).exists() for m in MARKERS)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale(parent: Path, name: str) -> None:
    """Removes ``.NAME.tmp-PID-*`` / ``.NAME.old-PID-*`` folders whose process is gone."""
    rx = re.compile(rf"^\.{re.escape(name)}\.(?:tmp|old)-(\d+)-")
    try:
        entries = list(parent.iterdir())
    except OSError:
        return
    for p in entries:
        m = rx.match(p.name)
        if m and int(m.group(1)) != os.getpid() and not _pid_alive(int(m.group(1))) and p.is_dir():
            shutil.rmtree(p, ignore_errors=True)


def check_target(target: Path, overwrite: bool = False) -> None:
    """Raises BraidError if ``target`` cannot become a results folder."""
    here = Path.cwd().resolve()
    full = target.resolve()
    if full == here or full in here.parents:
        raise BraidError(str(target), "is the current folder (or holds it); results need a folder of their own, e.g. results/run1")
    if target.exists() or target.is_symlink():
        if not target.is_dir():
            raise BraidError(str(target), "is a file; choose a new or empty output folder")
        if is_results_folder(target):
            if not overwrite:
                raise BraidError(str(target), "already holds results; use --overwrite to replace them, or choose another folder")
        elif any(target.iterdir()):
            raise BraidError(str(target), "is a folder that is not a braid results folder; choose a new or empty output folder")


class ResultsDir:
    """An output folder checked and reserved up front; see the module's docstring.

    ``tmp`` is where to write; :meth:`commit` moves it into place, :meth:`abort` undoes
    everything. ``target`` is the final folder (with ``unique``, possibly a suffixed name)."""

    def __init__(self, target: Union[str, Path], overwrite: bool = False, unique: bool = False):
        target = Path(target)
        base, n = target, 1
        while unique and (target.exists() or target.is_symlink()):
            n += 1
            target = base.with_name(f"{base.name}-{n}")
        check_target(target, overwrite)
        parent = target.absolute().parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BraidError(str(target), f"cannot create the output folder: {e.strerror or e}") from None
        clean_stale(parent, target.name)
        self.reserved = False
        while not target.exists():
            try:
                os.mkdir(target)
                self.reserved = True
            except FileExistsError:
                if not unique:
                    raise BraidError(str(target), "was just created by another run; choose another folder") from None
                n += 1
                target = base.with_name(f"{base.name}-{n}")
            except OSError as e:
                raise BraidError(str(target), f"cannot create the output folder: {e.strerror or e}") from None
        self.target = target
        self.parent = parent
        try:
            self.tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-{os.getpid()}-", dir=parent))
            # A probe: some places accept a folder but no data (a full disk, odd file systems).
            (self.tmp / ".probe").write_bytes(b"braid")
            (self.tmp / ".probe").unlink()
        except OSError as e:
            self._unreserve()
            if hasattr(self, "tmp"):
                shutil.rmtree(self.tmp, ignore_errors=True)
            raise BraidError(str(target), f"cannot write in the output folder's parent {parent}: {e.strerror or e}") from None

    def _unreserve(self) -> None:
        if self.reserved:
            with contextlib.suppress(OSError):
                os.rmdir(self.target)
            self.reserved = False

    def commit(self) -> Path:
        os.chmod(self.tmp, 0o755)
        target = self.target
        if target.exists() and any(target.iterdir()):
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-{os.getpid()}-", dir=self.parent))
            os.rmdir(old)
            os.rename(target, old)
            try:
                os.rename(self.tmp, target)
            except BaseException:
                os.rename(old, target)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            # An empty folder (ours, reserved, or the user's) is replaced in one rename.
            os.rename(self.tmp, target)
        self.reserved = False
        return target

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)
        self._unreserve()


@contextlib.contextmanager
def atomic_dir(target: Union[str, Path], overwrite: bool = False, unique: bool = False) -> Iterator[Path]:
    """Yields a fresh temporary folder; on normal exit it becomes ``target``, on any exception it
    is deleted and ``target`` is left as it was. The target is checked (and reserved) on entry."""
    d = ResultsDir(target, overwrite=overwrite, unique=unique)
    try:
        yield d.tmp
        d.commit()
    except BaseException:
        d.abort()
        raise


def check_out_file(path: Union[str, Path], option: str) -> Path:
    """Checks, before any work, that a single output file can be written at ``path`` (its
    folder created and written to); raises BraidError naming ``option`` otherwise."""
    p = Path(path)
    if p.is_dir():
        raise BraidError(option, f"{path} is a folder; expected a file name")
    try:
        p.absolute().parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=f".{p.name}.probe-", dir=p.absolute().parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise BraidError(option, f"cannot write {path}: {e.strerror or e}") from None
    if p.exists() and not os.access(p, os.W_OK):
        raise BraidError(option, f"cannot write {path}: permission denied")
    return p


def write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
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
    for name, df in sorted(getattr(res, "layer_tables", {}).items()):
        # The core refuses other names; a front end's own must not overwrite a table either.
        if name in TABLES or not LAYER_TABLE_NAME.match(name):
            raise BraidError(f"layer_tables.{name}", "expected a name of lowercase letters, digits and _ that is not one of the run's own tables")
        df.write_parquet(folder / f"{name}.parquet")
    pcap = getattr(res, "pcap", None)
    if pcap:
        (folder / PCAP_FILE).write_bytes(pcap)
    write_json(folder / "summary.json", res.summary)


def write_results(res, out_dir: Union[str, Path], overwrite: bool = False) -> Path:
    """Writes ``res`` (a RunResult) as a results folder at ``out_dir``, atomically. An existing
    results folder there is replaced only with ``overwrite``."""
    d = out_dir if isinstance(out_dir, ResultsDir) else ResultsDir(out_dir, overwrite=overwrite)
    try:
        write_into(res, d.tmp)
        out = d.commit()
    except BaseException:
        d.abort()
        raise
    res.out_dir = out
    return out


def _read_table(p: Path) -> pl.DataFrame:
    try:
        return pl.read_parquet(p)
    except Exception as e:  # polars raises several kinds for a damaged file
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise BraidError(str(p), f"cannot be read as Parquet (truncated or damaged: {first}); re-run to write it again") from None


def read_json_file(p: Path) -> dict:
    try:
        doc = json.loads(p.read_text())
    except UnicodeDecodeError:
        raise BraidError(str(p), "is not UTF-8 text (damaged); re-run to write it again") from None
    except json.JSONDecodeError as e:
        raise BraidError(str(p), f"is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg}); the file is damaged, re-run to write it again") from None
    except OSError as e:
        raise BraidError(str(p), f"cannot read: {e.strerror or e}") from None
    if not isinstance(doc, dict):
        raise BraidError(str(p), "expected a JSON object (the file is damaged)")
    return doc


def read_results(folder: Union[str, Path]) -> dict:
    """Reads a results folder back: {"summary": dict, "<table>": DataFrame, ...}, the layer
    tables (e.g. ``drum_rounds``) among the tables by their names. A damaged file (truncated
    Parquet, bad JSON) is a BraidError naming it."""
    folder = Path(folder)
    s = folder / "summary.json"
    if not s.exists():
        raise BraidError(str(folder), "not a braid results folder (expected summary.json in it)")
    out: dict = {"summary": read_json_file(s)}
    for name in TABLES:
        p = folder / f"{name}.parquet"
        out[name] = _read_table(p) if p.exists() else pl.DataFrame()
    for name in layer_table_names(folder):
        out[name] = _read_table(folder / f"{name}.parquet")
    return out
