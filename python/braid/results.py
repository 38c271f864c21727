"""Results folders: ``summary.json`` plus one Parquet file per table, written atomically.

Nothing is lost, and nothing is half-written:

* the output folder is checked and reserved before any work (:class:`ResultsDir`): a folder that
  cannot be created or written, a file, a folder that holds something other than braid results,
  the current folder (or one holding it), or an existing results folder without ``overwrite``
  is one clear error up front, not a traceback after the run;
* a folder that does not exist yet is created empty at once, so two runs started together
  cannot both pick it (with ``unique``, the second takes ``NAME-2``, ``NAME-3``, ...);
* the reservation is exclusive: a run holds a lock (``.NAME.lock`` beside the target, an
  ``flock`` the kernel drops when the process dies) from the check to the final rename, so a
  second run into the same folder while the first is running is refused with one line; at the
  final rename the target is checked again (still ours and empty, or results we may replace),
  and if something else filled it meanwhile the finished results are kept under a new name;
* ``-o`` through a symlink writes where the link points (the temporary folder is made on the
  target's file system from the start, so the final rename cannot cross file systems);
* everything is written into a temporary folder beside the target (``.NAME.tmp-PID-*``) and
  renamed into place at the end; on any failure (an error, a full disk, Ctrl-C, SIGTERM) the
  temporary folder, and the empty reserved target, are removed, and an output error is one
  line (:class:`BraidError`), never a traceback. Temporary folders left by a killed run (their
  process is gone) are removed by the next run into the same place.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Iterator, Union

import polars as pl

from .scenario import BraidError, _json_default
from .tables import TABLES

__all__ = ["write_results", "atomic_dir", "read_results", "ResultsDir", "FolderLock", "TABLES", "layer_table_names", "output_error"]

#: ``TABLES``: the run's own tables, from the core's registry (``braid.tables``).
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


def output_error(where: Union[str, Path], e: BaseException) -> BraidError:
    """An error met while writing output (an OSError, or polars' wrapper of one) as one line
    naming the file or folder; a full disk says so."""
    text = (e.strerror if isinstance(e, OSError) and e.strerror else str(e)).strip().splitlines()
    msg = text[0] if text else type(e).__name__
    if getattr(e, "errno", None) in (errno.ENOSPC, errno.EDQUOT) or "No space left" in str(e) or "Disk quota" in str(e):
        msg = "no space left on the device (nothing was half-written; free some space and run again)"
    return BraidError(str(where), f"cannot write: {msg}")


def is_output_error(e: BaseException) -> bool:
    """True for an OSError, or a polars error that wraps one (polars reports a failed write as
    a ComputeError carrying the OS's message)."""
    if isinstance(e, OSError):
        return True
    return type(e).__module__.startswith("polars") and ("os error" in str(e) or "No space left" in str(e))


class FolderLock:
    """An exclusive lock on a name in a folder: ``DIR/.NAME.lock``, held with ``flock`` (the kernel
    drops it when the process dies, so a killed run never leaves a stale lock). ``acquire``
    returns False when another process holds it; the lock file says which (its pid).

    The file is removed on release; a process that opened it just before the removal would lock
    a file no longer in the folder, so ``acquire`` checks that the path still names the locked
    file and tries again otherwise."""

    def __init__(self, folder: Path, name: str):
        self.path = Path(folder) / f".{name}.lock"
        self.fd: "int | None" = None

    def acquire(self) -> bool:
        import fcntl

        for _ in range(100):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    return False
                raise
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                self.fd = fd
                return True
            os.close(fd)
        return False

    def holder(self) -> str:
        """The pid written by the process holding the lock, as text ("" if unknown)."""
        try:
            return self.path.read_text().strip()
        except OSError:
            return ""

    def release(self) -> None:
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        with contextlib.suppress(OSError):
            os.close(self.fd)
        self.fd = None


def _busy(target: Path, lock: FolderLock) -> BraidError:
    pid = lock.holder()
    who = f" (pid {pid})" if pid.isdigit() else ""
    return BraidError(str(target), f"is being written by another braid run{who}; wait for it to finish or choose another folder")


class ResultsDir:
    """An output folder checked and reserved up front; see the module's docstring.

    ``tmp`` is where to write; :meth:`commit` moves it into place, :meth:`abort` undoes
    everything. ``target`` is the final folder (with ``unique``, possibly a suffixed name)."""

    def __init__(self, target: Union[str, Path], overwrite: bool = False, unique: bool = False):
        if str(target).strip() == "":
            raise BraidError("-o", "expected a folder name, got an empty string")
        target = Path(target)
        if target.is_symlink():
            # Where the link points: the final rename replaces a folder, never a link.
            target = Path(os.path.realpath(target))
        self.overwrite = overwrite
        self.lock: "FolderLock | None" = None
        base, n = target, 1
        while unique and (target.exists() or target.is_symlink()):
            n += 1
            target = base.with_name(f"{base.name}-{n}")
        parent = target.absolute().parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BraidError(str(target), f"cannot create the output folder: {e.strerror or e}") from None
        while True:
            lock = FolderLock(parent, target.name)
            try:
                got = lock.acquire()
            except OSError as e:
                raise BraidError(str(target), f"cannot create the output folder: {e.strerror or e}") from None
            if got:
                break
            if not unique:
                raise _busy(target, lock)
            n += 1
            target = base.with_name(f"{base.name}-{n}")
        self.lock = lock
        try:
            check_target(target, overwrite)
        except BaseException:
            lock.release()
            raise
        clean_stale(parent, target.name)
        self.reserved = False
        while not target.exists():
            try:
                os.mkdir(target)
                self.reserved = True
            except FileExistsError:
                # Made by something that does not take the lock (an older braid, a user): check it.
                try:
                    check_target(target, overwrite)
                except BaseException:
                    lock.release()
                    raise
            except OSError as e:
                lock.release()
                raise BraidError(str(target), f"cannot create the output folder: {e.strerror or e}") from None
        self.target = target
        self.parent = parent
        self._expected = _content_state(target)
        try:
            self.tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-{os.getpid()}-", dir=parent))
            # A probe: some places accept a folder but no data (a full disk, odd file systems).
            (self.tmp / ".probe").write_bytes(b"braid")
            (self.tmp / ".probe").unlink()
        except OSError as e:
            self._unreserve()
            if hasattr(self, "tmp"):
                shutil.rmtree(self.tmp, ignore_errors=True)
            self._unlock()
            raise BraidError(str(target), f"cannot write in the output folder's parent {parent}: {e.strerror or e}") from None

    def check_space(self, needed: float) -> None:
        """Refuses (one line, before anything runs) when the output file system has less free
        space than ``needed`` bytes: what the core's estimate says the results folder takes."""
        try:
            free = shutil.disk_usage(self.tmp).free
        except OSError:
            return
        if free < needed:
            raise BraidError(
                str(self.target),
                f"no space left on the device for the results: they need ~{_fmt_bytes(needed)}, its file system has {_fmt_bytes(free)} free (checked before the run; free some space or write elsewhere)",
            )

    def _unreserve(self) -> None:
        if self.reserved:
            with contextlib.suppress(OSError):
                os.rmdir(self.target)
            self.reserved = False

    def _unlock(self) -> None:
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def _keep_aside(self, why: str) -> BraidError:
        """The target changed under us: the finished results go to a new name beside it."""
        for n in range(2, 1000):
            alt = self.target.with_name(f"{self.target.name}-{n}")
            if alt.exists() or alt.is_symlink():
                continue
            try:
                os.rename(self.tmp, alt)
            except OSError:
                continue
            self.reserved = False
            return BraidError(str(self.target), f"{why}; the finished results are kept in {alt} instead")
        return BraidError(str(self.target), f"{why}; the finished results are kept in {self.tmp}")

    def commit(self) -> Path:
        try:
            return self._commit()
        finally:
            self._unlock()

    def _commit(self) -> Path:
        os.chmod(self.tmp, 0o755)
        target = self.target
        # Checked again at the final rename: the folder must still be the one reserved (or
        # results we may replace), not something another process put there meanwhile.
        now = _content_state(target)
        if now != self._expected and not (now == "results" and self.overwrite):
            raise self._keep_aside("was changed by another process while this run was writing (it now " + (
                "holds results" if now == "results" else "is missing" if now == "missing" else "holds other files") + ")")
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
        if hasattr(self, "tmp"):
            shutil.rmtree(self.tmp, ignore_errors=True)
        self._unreserve()
        self._unlock()


def _fmt_bytes(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def _content_state(target: Path) -> str:
    """"missing", "empty", "results" or "other": what a folder holds, for the check at the
    final rename."""
    try:
        if not target.is_dir():
            return "missing" if not target.exists() else "other"
        if is_results_folder(target):
            return "results"
        return "empty" if not any(target.iterdir()) else "other"
    except OSError:
        return "other"


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


def write_file_atomic(path: Path, write) -> Path:
    """``write(tmp)`` into ``.NAME.tmp-PID`` beside ``path``, then a rename: the file is whole
    or absent. On failure the temporary file is removed, and an output error (a full disk, a
    read-only folder) is one BraidError naming ``path``."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if not isinstance(e, BraidError) and isinstance(e, Exception) and is_output_error(e):
            raise output_error(path, e) from None
        raise
    return path


def write_text_atomic(path: Path, text: str) -> None:
    write_file_atomic(path, lambda t: t.write_text(text))


def write_json(path: Path, obj) -> None:
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, default=_json_default, allow_nan=False)
        f.write("\n")


def write_into(res, folder: Path) -> None:
    """Writes a run's files into an existing folder (no atomicity of its own)."""
    tables = getattr(res, "tables", {})
    for name in TABLES:
        df: pl.DataFrame = tables.get(name, pl.DataFrame())
        df.write_parquet(folder / f"{name}.parquet")
    for name, df in sorted((k, v) for k, v in tables.items() if k not in TABLES):
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
    except BaseException as e:
        d.abort()
        if not isinstance(e, BraidError) and isinstance(e, Exception) and is_output_error(e):
            raise output_error(d.target, e) from None
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
