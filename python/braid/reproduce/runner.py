"""Running the sweeps: every run of the chosen experiments, spread over local processes.

Runs are independent simulations, so they go to a pool of spawned processes (``jobs`` workers,
default one per core); each worker runs its scenario and measures the result where it ran, so only a small
dict comes back. Results are gathered in the order the experiments listed their runs, whatever
order the workers finish in: the same experiments and seeds give the same report.
"""

from __future__ import annotations

import os
import multiprocessing
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from ..scenario import BraidError
from .registry import Experiment, Row, Run


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


def execute(
    experiments: Sequence[Experiment],
    full: bool = False,
    jobs: Optional[int] = None,
    folder: Optional[Path] = None,
    on_progress: Optional[Callable[[int, int], None]] = None,
) -> List[Outcome]:
    """Runs every run of ``experiments`` and summarises each experiment."""
    folder = folder or experiments_dir()
    plan = [(e, e.runs(full)) for e in experiments]
    for e, runs in plan:
        for r in runs:
            if r.scenario is not None and not (folder / r.scenario).is_file():
                raise BraidError(f"reproduce {e.id}", f"scenario file {folder / r.scenario} is missing")
    flat = [(i, j, r) for i, (_, runs) in enumerate(plan) for j, r in enumerate(runs)]
    results: Dict[tuple, dict] = {}
    jobs = max(1, jobs or os.cpu_count() or 1)
    if jobs == 1:
        for n, (i, j, r) in enumerate(flat):
            results[(i, j)] = _checked(plan[i][0], r, folder)
            if on_progress:
                on_progress(n + 1, len(flat))
    else:
        # Spawned, not forked: a fork of a process whose polars / rayon threads are running can
        # deadlock in the child.
        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            futs = {}
            for i, j, r in flat:
                futs[pool.submit(_run_one, r, str(folder))] = (i, j, r)
            pending = set(futs)
            done_n = 0
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    i, j, r = futs[f]
                    try:
                        results[(i, j)] = f.result()
                    except BraidError as err:
                        for p in pending:
                            p.cancel()
                        raise BraidError(f"reproduce {plan[i][0].id} [{r.label}, seed {r.seed}]", str(err)) from None
                    done_n += 1
                    if on_progress:
                        on_progress(done_n, len(flat))
    out = []
    for i, (e, runs) in enumerate(plan):
        by_label: Dict[str, List[dict]] = {}
        for j, r in enumerate(runs):
            by_label.setdefault(r.label, []).append(results[(i, j)])
        rows = e.summarize(by_label)
        wall = sum(m["_wall_s"] for ms in by_label.values() for m in ms)
        out.append(Outcome(e, rows, len(runs), wall, by_label))
    return out


def _checked(e: Experiment, r: Run, folder: Path) -> dict:
    try:
        return _run_one(r, str(folder))
    except BraidError as err:
        raise BraidError(f"reproduce {e.id} [{r.label}, seed {r.seed}]", str(err)) from None
