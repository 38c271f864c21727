"""Sweeps: one scenario run at every point of a grid of overrides x seeds, each point summarized
into one row, all rows in one Parquet dataset (docs/sweep.md).

>>> from braid.sweep import sweep
>>> df = sweep("two-tor.toml", grid={"transport.kind": ["dcqcn", "none"]}, seeds=3, out_dir="sw")

The engine (:func:`run_sweep`) is the same for every executor (local processes or Dask): the
driver plans the points, validates one before anything runs, submits the points not yet done,
and writes each result as its own file as it arrives (:mod:`.store`).
"""

from __future__ import annotations

import itertools
import queue
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..scenario import BraidError, Scenario, load_scenario
from .executors import DaskExecutor, LocalExecutor, make_executor
from .plan import Plan, Point, make_plan, toml_text
from .store import DATASET, SweepDir, _cell

__all__ = ["sweep", "run_sweep", "collect", "Plan", "Point", "SweepDir", "LocalExecutor", "DaskExecutor", "make_executor", "make_plan"]

#: Counters worth a column of their own (the headline carries goodput, FCTs, completions).
COUNTERS = ("drops", "pfc_pauses", "ecn_marks", "retransmissions", "timeouts")


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    msg = text[0] if text else ""
    return msg if isinstance(e, BraidError) else f"{type(e).__name__}: {msg}".rstrip(": ")


def run_point(scenario: Scenario, point: Point) -> Dict[str, Any]:
    """Worker: one run, summarized where it ran; returns {"row": ...} or {"error": one line}.

    Failures of the run are returned, not raised, so one bad point does not stop the sweep."""
    from ..api import run

    t0 = time.perf_counter()
    try:
        res = run(scenario, seed=point.seed, overrides=point.overrides)
    except Exception as e:  # noqa: BLE001 - any failure of a point is that point's result
        return {"error": _one_line(e)}
    row: Dict[str, Any] = {"point": point.id}
    row.update({k: _cell(v) for k, v in point.grid})
    row["seed"] = res.seed
    for k, v in res.headline.items():
        row[k] = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
    for k in COUNTERS:
        if k in res.counters:
            row[k] = int(res.counters[k])
    row["finished"] = bool(res.finished)
    row["unfinished"] = int(res.unfinished)
    row["events"] = float(res.stats.get("events", 0.0))
    row["sim_wall_s"] = float(res.wall_s)
    row["wall_s"] = time.perf_counter() - t0
    return {"row": row}


@dataclass
class Outcome:
    total: int
    skipped: int
    ran: int = 0
    failed: List[Tuple[Point, str]] = field(default_factory=list)
    #: Points submitted again because their worker died under them.
    retried: int = 0
    dataset: Optional[Path] = None
    rows: int = 0


Progress = Callable[[int, int, int], None]


def validate_first(scenario: Scenario, plan: Plan, first: Point) -> None:
    """Builds one point (without running it): a grid key that is not a scenario key, or a value
    of the wrong kind, is one error naming --grid before any work."""
    from ..api import build

    try:
        build(scenario, first.seed, first.overrides)
    except BraidError as e:
        path = getattr(e, "path", "") or ""
        for k, v in first.grid:
            # Errors applying the override name it as --set KEY=VALUE.
            if path == f"--set {k}={toml_text(v)}":
                raise BraidError(f"--grid {k}", f"{e.message} (checking the first point, {k}={toml_text(v)})") from None
            if path == k or path.startswith(k + ".") or path.startswith(k + "["):
                raise BraidError(f"--grid {k}", f"{getattr(e, 'message', str(e))} (checking the first point, {k}={toml_text(v)})") from None
        for spec in plan.fixed:
            if path and spec.split("=", 1)[0].strip() == path:
                raise BraidError(f"--set {spec}", getattr(e, "message", str(e))) from None
        raise


def run_sweep(plan: Plan, out: SweepDir, executor: Union[Callable[[], Any], Any], on_progress: Optional[Progress] = None, on_start: Optional[Callable[[int, int], None]] = None) -> Outcome:
    """Runs every point of ``plan`` not yet done in ``out`` on ``executor`` (an executor or a
    function making one, called only when there is work), then writes the dataset."""
    scenario = load_scenario(plan.scenario, plan.fixed)
    default_seed = int(scenario.data.get("seed", 1))
    scenario = load_scenario(plan.scenario)
    points = plan.points(default_seed)
    validate_first(scenario, plan, points[0])
    out.prepare(plan)
    done = out.done()
    todo = [p for p in points if p.id not in done]
    oc = Outcome(total=len(points), skipped=len(points) - len(todo))
    if on_start:
        on_start(len(todo), oc.skipped)
    if todo:
        ex = executor() if callable(executor) and not hasattr(executor, "submit") else executor
        try:
            _drive(ex, scenario, todo, out, oc, on_progress)
        except BaseException:
            ex.close(cancel=True)
            raise
        ex.close()
    df = out.collect()
    oc.dataset = out.root / DATASET
    oc.rows = df.height
    return oc


#: How many times a point is submitted when its worker dies under it (killed, out of memory, a
#: crash) before it is recorded as failed. A point's own errors are never retried in a run.
ATTEMPTS = 3


def _drive(ex: Any, scenario: Scenario, todo: List[Point], out: SweepDir, oc: Outcome, on_progress: Optional[Progress]) -> None:
    """Submits every point and records each result as it arrives. Completions come through a
    queue fed by the futures' callbacks: O(1) per point (no scan of thousands of futures per
    completion) and open to points submitted again."""
    done_q: "queue.Queue" = queue.Queue()
    live: Dict[Any, Point] = {}
    tries: Dict[str, int] = {}

    # The scenario is sent to the workers once where the executor can (Dask), not with each point.
    shared = ex.share(scenario) if hasattr(ex, "share") else scenario

    def submit(p: Point) -> None:
        tries[p.id] = tries.get(p.id, 0) + 1
        f = ex.submit(run_point, shared, p)
        live[f] = p
        f.add_done_callback(done_q.put)

    # Local pools get a few points ahead of their workers, not the whole sweep: memory stays flat
    # for thousands of points, and a pool that breaks fails (and charges) only those. Dask takes
    # everything (its scheduler keeps the queue and reschedules a dead worker's tasks itself).
    window = getattr(ex, "window", None) or len(todo)
    rest = iter(todo)
    for p in itertools.islice(rest, window):
        submit(p)
    n = 0
    while live:
        try:
            # A timeout, so that Ctrl-C / SIGTERM are handled promptly on every platform.
            f = done_q.get(timeout=0.5)
        except queue.Empty:
            continue
        p = live.pop(f, None)
        if p is None:
            continue
        try:
            r = f.result()
        except Exception as e:  # noqa: BLE001 - the worker died under the point (or was lost)
            if tries[p.id] < ATTEMPTS:
                oc.retried += 1
                submit(p)
                continue
            r = {"error": f"its worker died under it ({tries[p.id]} tries; last: {_one_line(e)})"}
        if "row" in r:
            out.record(p, r["row"])
            oc.ran += 1
        else:
            out.record_error(p, r["error"])
            oc.failed.append((p, r["error"]))
        n += 1
        if on_progress:
            on_progress(n, len(todo), len(oc.failed))
        for p in itertools.islice(rest, 1):
            submit(p)


def collect(folder: Union[str, Path]):
    """The dataset of a sweep folder (rebuilt from its point files; also written to sweep.parquet)."""
    d = SweepDir(Path(folder), option=str(folder))
    return d.collect()


def sweep(
    scenario: Union[str, Path],
    grid: Mapping[str, Sequence[Any]],
    seeds: Union[int, Sequence[int], None] = None,
    overrides: Sequence[str] = (),
    out_dir: Union[str, Path] = "sweep",
    jobs: Optional[int] = None,
    dask: Optional[str] = None,
):
    """Python API of ``braid sweep``: returns the dataset (a polars DataFrame); points that
    failed have their ``error``. ``grid`` maps key paths to lists of values (Python values, as
    TOML would read them)."""
    from .plan import canonical_key, check_seed_list, merge_grid

    g = merge_grid({canonical_key(k, k): list(v) for k, v in grid.items()}, [])
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        seeds = list(range(1, seeds + 1)) if seeds >= 1 else check_seed_list([seeds], "seeds")
    elif seeds is not None:
        seeds = check_seed_list(list(seeds), "seeds")
    plan = Plan(Path(scenario), g, seeds, list(overrides))
    run_sweep(plan, SweepDir(Path(out_dir), option="out_dir"), lambda: make_executor(dask, jobs))
    return collect(out_dir)
