"""Sweeps: one scenario run at every point of a grid of overrides x seeds, each point summarized
into one row, all rows in one Parquet dataset (docs/sweep.md).

>>> from braid.sweep import sweep
>>> df = sweep("two-tor.toml", grid={"transport.kind": ["dcqcn", "none"]}, seeds=3, out_dir="sw")

The engine (:func:`run_sweep`, its loop in :mod:`.engine`, shared with ``braid reproduce``) is
the same for every executor (local processes, Dask, SLURM through dask-jobqueue): the driver plans
the points, validates one before anything runs, submits the points not yet done, and writes each
result as its own file as it arrives (:mod:`.store`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..scenario import BraidError, Scenario, load_scenario
from .engine import drive, one_line, open_executor
from .executors import DaskExecutor, LocalExecutor, make_executor
from .plan import Plan, Point, make_plan, toml_text
from .store import DATASET, SweepDir, _cell

__all__ = ["sweep", "run_sweep", "collect", "Plan", "Point", "SweepDir", "LocalExecutor", "DaskExecutor", "make_executor", "make_plan"]

#: Counters worth a column of their own (the headline carries goodput, FCTs, completions).
COUNTERS = ("drops", "pfc_pauses", "ecn_marks", "retransmissions", "timeouts")


def run_point(scenario: Scenario, point: Point) -> Dict[str, Any]:
    """Worker: one run, summarized where it ran; returns {"row": ...} or {"error": one line}.

    Failures of the run are returned, not raised, so one bad point does not stop the sweep."""
    from ..api import run

    t0 = time.perf_counter()
    try:
        res = run(scenario, seed=point.seed, overrides=point.overrides)
    except Exception as e:  # noqa: BLE001 - any failure of a point is that point's result
        return {"error": one_line(e)}
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
    """Runs every point of ``plan`` not yet done in ``out`` on ``executor`` (an executor, or a
    function ``f(n_points)`` making one, called only when there is work), then writes the
    dataset."""
    scenario = load_scenario(plan.scenario, plan.fixed)
    default_seed = int(scenario.data.get("seed", 1))
    scenario = load_scenario(plan.scenario)
    points = plan.points(default_seed)
    validate_first(scenario, plan, points[0])
    out.lock()
    try:
        return _run_locked(plan, out, executor, points, on_progress, on_start)
    finally:
        out.unlock()


def _run_locked(plan: Plan, out: SweepDir, executor: Any, points: List[Point], on_progress: Optional[Progress], on_start: Optional[Callable[[int, int], None]]) -> Outcome:
    scenario = load_scenario(plan.scenario)
    out.prepare(plan)
    done = out.done()
    todo = [p for p in points if p.id not in done]
    oc = Outcome(total=len(points), skipped=len(points) - len(todo))
    if on_start:
        on_start(len(todo), oc.skipped)
    if todo:
        ex = open_executor(executor, len(todo))
        try:
            oc.retried = drive(ex, run_point, scenario, todo, lambda p, r: _record(out, oc, p, r, len(todo), on_progress))
        except BaseException:
            ex.close(cancel=True)
            raise
        ex.close()
    df = out.collect()
    oc.dataset = out.root / DATASET
    oc.rows = df.height
    return oc


def _record(out: SweepDir, oc: Outcome, p: Point, r: Dict[str, Any], todo: int, on_progress: Optional[Progress]) -> None:
    if "row" in r:
        out.record(p, r["row"])
        oc.ran += 1
    else:
        out.record_error(p, r["error"])
        oc.failed.append((p, r["error"]))
    if on_progress:
        on_progress(oc.ran + len(oc.failed), todo, len(oc.failed))


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
    slurm: Optional[Mapping[str, Any]] = None,
):
    """Python API of ``braid sweep``: returns the dataset (a polars DataFrame); points that
    failed have their ``error``. ``grid`` maps key paths to lists of values (Python values, as
    TOML would read them). ``dask="slurm"`` with ``slurm`` = the keys of a sweep file's
    ``[dask.slurm]`` table (``{"partition": "short", "cores": 4, "jobs": 8}``)."""
    from .plan import canonical_key, check_seed_list, merge_grid

    g = merge_grid({canonical_key(k, k): list(v) for k, v in grid.items()}, [])
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        seeds = list(range(1, seeds + 1)) if seeds >= 1 else check_seed_list([seeds], "seeds")
    elif seeds is not None:
        seeds = check_seed_list(list(seeds), "seeds")
    plan = Plan(Path(scenario), g, seeds, list(overrides))
    from .executors import check_dask_spec
    from .slurm import from_table

    if dask is not None:
        check_dask_spec(dask)
    opts = from_table(dict(slurm), "slurm") if slurm is not None else None
    if opts is not None and (dask or "").lower() != "slurm":
        raise BraidError("slurm", 'SLURM options need dask="slurm"')
    out = SweepDir(Path(out_dir), option="out_dir")
    log_dir = out.root / "slurm-logs" if opts is not None else None
    run_sweep(plan, out, lambda n: make_executor(dask, jobs, opts, n, log_dir))
    return collect(out_dir)
