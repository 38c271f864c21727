"""The one loop that runs independent tasks on an executor: used by ``braid sweep`` (a task is a
point) and ``braid reproduce`` (a task is one run of an experiment).

The driver submits tasks, takes each result as it arrives and hands it to ``on_result`` (which
stores it: only the driver writes). A task whose worker died under it (killed, out of memory, a
crash) is submitted again, up to :data:`ATTEMPTS` times; a task's own failure is the task's
result (``{"error": one line}``), never retried here.
"""

from __future__ import annotations

import itertools
import queue
from typing import Any, Callable, Dict, Sequence, TypeVar

from ..scenario import BraidError

T = TypeVar("T")

#: How many times a task is submitted when its worker dies under it before it is recorded as
#: failed. A task's own errors are never retried in a run.
ATTEMPTS = 3


def one_line(e: BaseException) -> str:
    """An exception as one line: a BraidError as its message, anything else with its type."""
    text = str(e).strip().splitlines()
    msg = text[0] if text else ""
    return msg if isinstance(e, BraidError) else f"{type(e).__name__}: {msg}".rstrip(": ")


def open_executor(executor: Any, n_tasks: int) -> Any:
    """``executor`` itself, or what it makes when it is a factory ``f(n_tasks)`` (called only
    when there is work, so a resumed, finished sweep starts no workers)."""
    return executor(n_tasks) if callable(executor) and not hasattr(executor, "submit") else executor


def drive(ex: Any, fn: Callable[[Any, T], Dict[str, Any]], shared: Any, tasks: Sequence[T], on_result: Callable[[T, Dict[str, Any]], None]) -> int:
    """Runs ``fn(shared, task)`` for every task on ``ex`` and calls ``on_result(task, result)``
    in this process as each finishes (in completion order). ``fn`` returns a dict, with an
    ``"error"`` key when the task failed. ``on_result`` may raise to stop everything (the caller
    closes the executor). Returns how many submissions were repeats after a worker died.

    Completions come through a queue fed by the futures' callbacks: O(1) per task (no scan of
    thousands of futures per completion) and open to tasks submitted again."""
    done_q: "queue.Queue" = queue.Queue()
    live: Dict[Any, Any] = {}
    tries: Dict[int, int] = {}
    retried = 0

    # Sent to the workers once where the executor can (Dask), not with each task.
    shared = ex.share(shared) if hasattr(ex, "share") else shared

    def submit(i: int) -> None:
        tries[i] = tries.get(i, 0) + 1
        f = ex.submit(fn, shared, tasks[i])
        live[f] = i
        f.add_done_callback(done_q.put)

    # Local pools get a few tasks ahead of their workers, not all of them: memory stays flat for
    # thousands of tasks, and a pool that breaks fails (and charges) only those. Dask takes
    # everything (its scheduler keeps the queue and reschedules a dead worker's tasks itself).
    window = getattr(ex, "window", None) or len(tasks)
    rest = iter(range(len(tasks)))
    for i in itertools.islice(rest, window):
        submit(i)
    while live:
        try:
            # A timeout, so that Ctrl-C / SIGTERM are handled promptly on every platform.
            f = done_q.get(timeout=0.5)
        except queue.Empty:
            continue
        i = live.pop(f, None)
        if i is None:
            continue
        try:
            r = f.result()
        except Exception as e:  # noqa: BLE001 - the worker died under the task (or was lost)
            if tries[i] < ATTEMPTS:
                retried += 1
                submit(i)
                continue
            r = {"error": f"its worker died under it ({tries[i]} tries; last: {one_line(e)})"}
        on_result(tasks[i], r)
        for j in itertools.islice(rest, 1):
            submit(j)
    return retried
