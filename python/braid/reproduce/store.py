"""Where ``braid reproduce -o DIR`` keeps each finished run, so that the same command resumes.

::

    DIR/runs/store.json          marks the folder as braid's
    DIR/runs/<id>.json           a run's description: experiment, label, scenario, overrides, seed
    DIR/runs/<id>.pkl            its measurements; written last, by rename: present = done

A run's id is a hash of what decides its result: the scenario file's content, the overrides, the
seed, the measure function, its arguments, and the code (every source file of the braid package,
the simulator core library, the measure's module). The same run in two experiments, or in the
quick and the ``--full`` sweep, is one file; a run of other code is never reused. Only the
process driving the runs writes here (workers send their measurements back), one file per id:
a killed reproduce loses only the runs in progress and can count none twice.

Measurements are pickled (they hold what ``measure`` returned: numbers, numpy scalars, dicts with
integer keys, lists) and read back with an unpickler that accepts only plain data and numpy
scalars/arrays: a folder from elsewhere cannot run code here.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import io
import json
import os
import pickle
import sys
from pathlib import Path
from typing import Any, Dict, Optional, Set

from ..scenario import BraidError
from ..sweep.store import _write_atomic, _write_json
from .registry import Run

MARKER = "store.json"
KIND = "braid reproduce runs"

# Constructors plain data and numpy values need; nothing else may be loaded.
_ALLOWED = {
    ("builtins", "complex"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("numpy", "dtype"),
    ("numpy", "ndarray"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
}


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not plain data")


def plain_loads(data: bytes) -> Any:
    return _PlainUnpickler(io.BytesIO(data)).load()


def _file_sha(path: str) -> str:
    """A file's SHA-256 (remembered while its size and modification time stay the same)."""
    st = os.stat(path)
    return _file_sha_of(path, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=4096)
def _file_sha_of(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def code_identity() -> str:
    """A hash of braid's code: its Python sources and the compiled simulator core."""
    import braid

    pkg = Path(braid.__file__).resolve().parent
    h = hashlib.sha256()
    for p in sorted(pkg.rglob("*.py")):
        h.update(str(p.relative_to(pkg)).encode())
        h.update(_file_sha(str(p)).encode())
    try:
        from braid import _core

        h.update(_file_sha(_core.__file__).encode())
    except (ImportError, AttributeError, OSError):
        h.update(b"no core")
    return h.hexdigest()


def _measure_identity(fn: Any) -> str:
    mod = sys.modules.get(getattr(fn, "__module__", ""), None)
    src = getattr(mod, "__file__", None)
    where = _file_sha(src) if src and os.path.isfile(src) else ""
    if not where:
        with contextlib.suppress(OSError, TypeError):
            where = hashlib.sha256(inspect.getsource(fn).encode()).hexdigest()
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}:{where}"


def run_id(run: Run, folder: Path) -> str:
    doc = {
        "scenario": _file_sha(str(folder / run.scenario)) if run.scenario is not None else None,
        "overrides": list(run.overrides),
        "seed": run.seed,
        "measure": _measure_identity(run.measure),
        "args": repr(run.args),
        "code": code_identity(),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:20]


class RunStore:
    """``root/runs``: checked and created before anything runs."""

    def __init__(self, root: Path, option: str = "--out"):
        self.root = Path(root)
        self.runs = self.root / "runs"
        self.option = option

    def prepare(self) -> None:
        """Checks and creates the store, and takes it for this process (:meth:`lock`)."""
        if self.root.exists() and not self.root.is_dir():
            raise BraidError(self.option, f"expected a folder, got the file {str(self.root)!r}")
        self.lock()
        if self.runs.is_dir() and any(self.runs.iterdir()) and not (self.runs / MARKER).is_file():
            raise BraidError(self.option, f"{self.runs} is a folder that braid did not make; choose another --out folder")
        if self.runs.exists() and not self.runs.is_dir():
            raise BraidError(self.option, f"{self.runs} is a file; choose another --out folder")
        try:
            self.runs.mkdir(parents=True, exist_ok=True)
            if not (self.runs / MARKER).is_file():
                _write_json(self.runs / MARKER, {"kind": KIND, "format": 1})
        except OSError as e:
            raise BraidError(self.option, f"cannot write the folder {self.root}: {e.strerror or e}") from None
        self._clean_partial()

    def lock(self) -> None:
        """Takes the store for this process until :meth:`unlock` (or its death: the kernel drops
        the ``flock``): a second ``braid reproduce`` into the same folder meanwhile is refused
        with one line, instead of both running the runs neither has finished."""
        from ..results import FolderLock, _busy

        try:
            self.root.mkdir(parents=True, exist_ok=True)
            lock = FolderLock(self.root, "runs")
            got = lock.acquire()
        except OSError as e:
            raise BraidError(self.option, f"cannot write the folder {self.root}: {e.strerror or e}") from None
        if not got:
            msg = _busy(self.runs, lock).message.replace("another braid run", "another braid reproduce")
            raise BraidError(self.option, f"{self.runs} {msg}")
        self._lock = lock

    def unlock(self) -> None:
        lock = getattr(self, "_lock", None)
        if lock is not None:
            lock.release()
            self._lock = None

    def _clean_partial(self) -> None:
        """Temporary files a killed run left (``.NAME.tmp-PID``, PID gone)."""
        from ..results import _pid_alive

        for p in self.runs.glob(".*.tmp-*"):
            try:
                pid = int(p.name.rsplit("-", 1)[1])
            except ValueError:
                continue
            if pid != os.getpid() and not _pid_alive(pid):
                with contextlib.suppress(OSError):
                    p.unlink()

    def done(self) -> Set[str]:
        return {p.stem for p in self.runs.glob("*.pkl") if not p.name.startswith(".")}

    def record(self, rid: str, describe: Dict[str, Any], measures: Dict[str, Any]) -> Dict[str, Any]:
        """Stores one run and returns its measurements as they will be read back."""
        data = pickle.dumps(measures, protocol=4)
        try:
            back = plain_loads(data)
        except pickle.UnpicklingError as e:
            raise BraidError(f"reproduce {describe.get('experiment')} [{describe.get('label')}]", f"its measure returned something other than numbers, strings, lists and dicts ({e})") from None
        _write_json(self.runs / f"{rid}.json", describe)
        _write_atomic(self.runs / f"{rid}.pkl", lambda t: t.write_bytes(data))
        return back

    def load(self, rid: str) -> Dict[str, Any]:
        p = self.runs / f"{rid}.pkl"
        try:
            return plain_loads(p.read_bytes())
        except (OSError, pickle.UnpicklingError, EOFError, ValueError) as e:
            raise BraidError(self.option, f"{p} is unreadable ({e}); delete it to run that run again") from None


def describe(experiment: str, run: Run, rid: Optional[str] = None) -> Dict[str, Any]:
    return {
        "run": rid,
        "experiment": experiment,
        "label": run.label,
        "scenario": run.scenario,
        "overrides": list(run.overrides),
        "seed": run.seed,
        "measure": f"{getattr(run.measure, '__module__', '?')}.{getattr(run.measure, '__qualname__', '?')}",
    }
