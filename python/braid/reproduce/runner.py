"""Running the sweeps: every run of the chosen experiments, on the sweep engine.

Runs are independent simulations, so they go to the same executors as ``braid sweep``'s points
(spawned local processes, ``jobs`` workers, default one per core; or Dask, including SLURM);
each worker runs its scenario and measures the result where it ran, so only a small dict comes
back, and the driver keeps it (:mod:`.store`: resumable). Results are gathered in the order the
experiments listed their runs, whatever order the workers finish in: the same experiments and
seeds give the same report.
"""

from __future__ import annotations

import contextlib
import copy
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from ..scenario import BraidError
from ..sweep.engine import drive, one_line, open_executor
from ..sweep.executors import make_executor
from .registry import Experiment, Row, Run
from .store import RunStore, describe, run_id


def experiments_dir() -> Path:
    """The folder of experiment scenario files shipped with braid (``braid/experiments``; in a
    source checkout the top-level ``experiments`` folder links to it)."""
    pkg = Path(__file__).resolve().parent.parent / "experiments"
    if pkg.is_dir():
        return pkg
    checkout = Path(__file__).resolve().parents[3] / "experiments"
    if checkout.is_dir():
        return checkout
    raise BraidError("reproduce", f"the experiments folder is missing (looked in {pkg} and {checkout})")


def _run_one(run: Run, folder: str) -> dict:
    """Worker: one simulation (or computation), measured where it ran."""
    if run.scenario is None:
        t = time.perf_counter()
        m = dict(run.measure(run.seed, *run.args))
        m["_wall_s"] = time.perf_counter() - t
        m["_seed"] = run.seed
        return m
    from ..api import run as simulate

    res = simulate(Path(folder) / run.scenario, seed=run.seed, overrides=list(run.overrides))
    m = dict(run.measure(res))
    m["_wall_s"] = res.wall_s
    m["_finished"] = res.finished
    m["_seed"] = run.seed
    return m


@dataclass
class Outcome:
    experiment: Experiment
    rows: List[Row]
    runs: int
    wall_s: float
    measures: Dict[str, List[dict]]


@dataclass(frozen=True)
class Task:
    """One run to do: its id (its file in the store), the experiment that listed it first."""

    id: str
    experiment: str
    run: Run


def _run_task(folder: str, task: Task) -> dict:
    """Worker: one run; its failure is its result (one line), not an exception."""
    try:
        return {"measures": _run_one(task.run, folder)}
    except Exception as e:  # noqa: BLE001 - any failure of a run is that run's result
        return {"error": one_line(e)}


def execute(
    experiments: Sequence[Experiment],
    full: bool = False,
    jobs: Optional[int] = None,
    folder: Optional[Path] = None,
    on_progress: Optional[Callable[[int, int], None]] = None,
    out: Optional[Path] = None,
    dask: Optional[str] = None,
    slurm: Any = None,
    on_start: Optional[Callable[[int, int], None]] = None,
    executor: Any = None,
) -> List[Outcome]:
    """Runs every run of ``experiments`` and summarises each experiment.

    The runs go through the sweep engine (:func:`braid.sweep.engine.drive`): ``jobs`` local
    worker processes (default one per core), or Dask (``dask``: local, slurm with ``slurm``
    options, or a scheduler address), or ``executor`` (an executor or a factory ``f(n)``).
    With ``out``, each finished run is kept in ``out/runs`` (:mod:`.store`) and a later call with
    the same ``out`` runs only what is missing; without it they are kept in a temporary folder.
    ``on_start(to_run, already_done)`` and ``on_progress(done, to_run)`` report progress."""
    folder = folder or experiments_dir()
    plan = [(e, e.runs(full)) for e in experiments]
    for e, runs in plan:
        for r in runs:
            if r.scenario is not None and not (folder / r.scenario).is_file():
                raise BraidError(f"reproduce {e.id}", f"scenario file {folder / r.scenario} is missing")
    ids = [[run_id(r, folder) for r in runs] for _, runs in plan]
    first: Dict[str, Task] = {}
    for (e, runs), rids in zip(plan, ids):
        for r, rid in zip(runs, rids):
            first.setdefault(rid, Task(rid, e.id, r))
    with contextlib.ExitStack() as stack:
        if out is None:
            out = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="braid-reproduce-")))
        store = RunStore(out)
        store.prepare()
        stack.callback(store.unlock)
        done = store.done()
        todo = [t for rid, t in first.items() if rid not in done]
        if on_start:
            on_start(len(todo), len(first) - len(todo))
        results: Dict[str, dict] = {}
        if todo:
            log_dir = out / "slurm-logs" if slurm is not None else None
            ex = open_executor(executor or (lambda n: make_executor(dask, jobs, slurm, n, log_dir)), len(todo))

            def on_result(t: Task, r: dict) -> None:
                if "error" in r:
                    raise BraidError(f"reproduce {t.experiment} [{t.run.label}, seed {t.run.seed}]", r["error"])
                results[t.id] = store.record(t.id, describe(t.experiment, t.run, t.id), r["measures"])
                if on_progress:
                    on_progress(len(results), len(todo))

            try:
                drive(ex, _run_task, str(folder), todo, on_result)
            except BaseException:
                ex.close(cancel=True)
                raise
            ex.close()
        for rid in first:
            if rid not in results:
                results[rid] = store.load(rid)
    outcomes = []
    for (e, runs), rids in zip(plan, ids):
        by_label: Dict[str, List[dict]] = {}
        for r, rid in zip(runs, rids):
            # A copy each: two runs of one id (or two experiments) never share a mutable dict.
            by_label.setdefault(r.label, []).append(copy.deepcopy(results[rid]))
        rows = e.summarize(by_label)
        wall = sum(m["_wall_s"] for ms in by_label.values() for m in ms)
        outcomes.append(Outcome(e, rows, len(runs), wall, by_label))
    return outcomes
