"""Where points run: local worker processes, or a Dask cluster. The same interface, so the sweep
has one code path: ``submit(fn, *args) -> future`` and ``close(cancel)``; a future has
``result()`` (raising what the function raised) and ``add_done_callback(fn)``."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Callable, Optional

from ..scenario import BraidError
from .slurm import SlurmOptions

DASK_FORM = "expected local (a LocalCluster on this machine), slurm (jobs submitted through dask-jobqueue) or a scheduler address such as tcp://host:8786"


def check_dask_spec(spec: str) -> str:
    """``local``, ``slurm`` or an address; one line naming --dask otherwise."""
    if spec.lower() in ("local", "localcluster", "slurm") or "://" in spec:
        return spec
    raise BraidError("--dask", f"{DASK_FORM}, got {spec!r}")


MAIN_GUARD = (
    "is called from the top level of the script {file} without an `if __name__ == \"__main__\":` guard: "
    "the sweep's worker processes are spawned and each would run the script again. "
    "Put the call under the guard (docs/sweep.md, \"From Python\")"
)


def unguarded_main_call() -> Optional[str]:
    """The main script's file name when the call in progress comes from its top level outside
    an ``if __name__ == "__main__":`` block, else None.

    Spawned workers import the main script again (as ``__mp_main__``) to recreate its state; a
    sweep started at the script's top level would start again in every worker, each worker
    would die, and every point would fail. Jupyter, ``python -c`` and ``python -m`` (no script
    file to re-run) are not affected."""
    import ast
    import sys

    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not path or getattr(main, "__spec__", None) is not None:
        return None
    frame = sys._getframe(1)
    line = None
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") == "__main__":
            line = frame.f_lineno
            break
        frame = frame.f_back
    if line is None:
        return None
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None
    for node in tree.body:
        if isinstance(node, ast.If) and _is_main_test(node.test) and node.lineno <= line <= (node.end_lineno or line):
            return None
    return str(path)


def _is_main_test(test: Any) -> bool:
    import ast

    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    consts = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return len(names) == 1 and len(consts) == 1


def _watch_parent(parent: int) -> None:
    """Worker initializer: the worker ends when the process that started it is gone.

    A SIGKILL of the sweep's driver runs no clean-up, and its workers, children of a dead
    process, would otherwise wait forever for work (each holding a simulator's memory). A
    daemon thread compares the worker's parent with the driver every half second; the run in
    progress releases the GIL, so the thread runs during a simulation too."""
    import threading
    import time

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(1)
            time.sleep(0.5)

    if os.getppid() != parent:
        os._exit(1)
    threading.Thread(target=watch, name="braid-parent-watch", daemon=True).start()


class LocalExecutor:
    """``jobs`` worker processes (default one per core), spawned, not forked: a fork of a process
    whose polars / rayon threads are running can deadlock in the child. Each worker ends when
    the driver process is gone (:func:`_watch_parent`)."""

    name = "local"

    def __init__(self, jobs: Optional[int] = None):
        script = unguarded_main_call()
        if script is not None:
            raise BraidError("braid.sweep.sweep()", MAIN_GUARD.format(file=script))
        self.jobs = max(1, jobs or os.cpu_count() or 1)
        self.where = f"{self.jobs} local worker{'s' if self.jobs > 1 else ''}"
        #: Points submitted ahead of completions (see the engine).
        self.window = 2 * self.jobs
        self.pool = self._new_pool()

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            max_workers=self.jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_watch_parent, initargs=(os.getpid(),)
        )

    def submit(self, fn: Callable, *args: Any):
        try:
            return self.pool.submit(fn, *args)
        except BrokenProcessPool:
            # A worker died (killed, out of memory): the pool fails every run it held; a new
            # pool takes the points submitted again.
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = self._new_pool()
            return self.pool.submit(fn, *args)

    def close(self, cancel: bool = False) -> None:
        if cancel:
            # The runs in progress are not waited for: their processes are stopped.
            for p in list(getattr(self.pool, "_processes", {}).values()):
                with contextlib.suppress(Exception):
                    p.terminate()
        self.pool.shutdown(wait=not cancel, cancel_futures=True)


def sweep_extra_install(checkout: Optional[Path] = None) -> str:
    """The command that installs the ``sweep`` extra into this Python. From a checkout (``make
    demo`` installs braid editable from one) it names the checkout's path: "braid" on the public
    package index is another project, so ``pip install 'braid[sweep]'`` outside this checkout
    would fetch the wrong package. Elsewhere it names the extra's packages themselves."""
    import shlex
    import sys

    root = checkout if checkout is not None else Path(__file__).resolve().parents[3]
    pip = f"{shlex.quote(sys.executable)} -m pip install"
    if (root / "pyproject.toml").is_file() and (root / "python" / "braid").is_dir():
        return f"{pip} -e {shlex.quote(str(root) + '[sweep]')}"
    return f"{pip} 'dask[distributed]>=2023.1' 'dask-jobqueue>=0.8.2'"


class DaskExecutor:
    """A Dask cluster: ``local`` starts a ``distributed.LocalCluster`` (``jobs`` single-threaded
    worker processes), ``slurm`` a dask-jobqueue ``SLURMCluster`` (``slurm`` options, at most
    enough jobs for ``n_tasks``; logs and the job script in ``log_dir``), anything else is a
    scheduler address. The workers need braid installed and any file the scenario refers to at
    the same path."""

    name = "dask"

    def __init__(self, spec: str, jobs: Optional[int] = None, slurm: Optional[SlurmOptions] = None, n_tasks: int = 0, log_dir: Optional[Path] = None):
        try:
            import distributed
        except ImportError:
            raise BraidError("--dask", f"needs Dask (braid's sweep extra): {sweep_extra_install()}") from None
        import dask

        # The workers' statistical profiler holds references to the frames of running tasks from
        # its own thread; when it holds the last one, a finished run's simulation (a Rust object
        # bound to the thread that made it) would be freed on the wrong thread: an error and a
        # leak. Off for the workers we start (a remote cluster: start its workers with
        # DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False).
        dask.config.set({"distributed.worker.profile.enabled": False})
        self.cluster = None
        #: What the cluster is, for the user (SLURM: jobs, workers, memory, walltime).
        self.where = f"dask ({spec})"
        if spec.lower() == "slurm":
            from .slurm import start_cluster

            self.cluster, r = start_cluster(slurm or SlurmOptions(), n_tasks, log_dir)
            self.where = r.describe()
            self.client = distributed.Client(self.cluster)
        elif spec.lower() in ("local", "localcluster"):
            n = max(1, jobs or os.cpu_count() or 1)
            self.cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None)
            self.client = distributed.Client(self.cluster)
        elif "://" in spec:
            try:
                self.client = distributed.Client(spec, timeout="10s")
            except (OSError, TimeoutError) as e:
                raise BraidError("--dask", f"cannot reach the scheduler {spec}: {e}") from None
        else:
            raise BraidError("--dask", f"{DASK_FORM}, got {spec!r}")

    def share(self, obj: Any):
        """``obj`` sent once; tasks given the returned future get ``obj``. A task, not a
        scatter: a scatter needs workers now, and SLURM jobs may still be queued."""
        return self.client.submit(_same, obj, pure=False)

    def submit(self, fn: Callable, *args: Any):
        # pure=False: each point is its own task even if two had the same arguments.
        return self.client.submit(fn, *args, pure=False)

    def close(self, cancel: bool = False) -> None:
        with contextlib.suppress(Exception):
            self.client.close()
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                self.cluster.close()


def _same(obj: Any) -> Any:
    return obj


def make_executor(dask: Optional[str], jobs: Optional[int], slurm: Optional[SlurmOptions] = None, n_tasks: int = 0, log_dir: Optional[Path] = None):
    """Local worker processes, or Dask when ``dask`` names a cluster (see DaskExecutor)."""
    if jobs is not None and jobs < 1:
        raise BraidError("--jobs", f"expected a positive integer, got {jobs}")
    return DaskExecutor(dask, jobs, slurm, n_tasks, log_dir) if dask else LocalExecutor(jobs)
