"""``braid sweep``: a scenario at every point of a grid x seeds, resumable, locally or on Dask."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import click

from ._dask import dask_options
from ..scenario import BraidError


@click.command()
@click.argument("source", metavar="SCENARIO|SWEEP.toml", required=False)
@click.option("--grid", "grids", multiple=True, metavar="KEY=V1,V2,...", help="A swept key and its values (TOML; bare words are strings), e.g. --grid transport.kind=dcqcn,none. Repeatable: the points are the product.")
@click.option("--seeds", metavar="N|A,B,...", help="Run every point with seeds 1..N (or the seeds listed); default: the scenario's seed.")
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="A fixed override for every point (as for braid run --set). Repeatable.",
)
@click.option("-o", "--out", "out_dir", metavar="DIR", help="The sweep folder (default: results/<SCENARIO or SWEEP file name>-sweep). A folder holding the same sweep is resumed.")
@click.option("-j", "--jobs", type=int, metavar="N", help="Worker processes (default: one per core); with --dask local, its workers.")
@dask_options
@click.option("--collect", "collect_dir", metavar="DIR", help="Only rebuild DIR/sweep.parquet from the points in DIR.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def sweep(source: Optional[str], grids: tuple, seeds: Optional[str], overrides: tuple, out_dir: Optional[str], jobs: Optional[int], dask: Optional[str], collect_dir: Optional[str], no_progress: bool, **slurm_args) -> None:
    """Run SCENARIO at every point of the grid (x seeds), one row per point in DIR/sweep.parquet.

    SWEEP.toml instead of a scenario holds the sweep: scenario = "x.toml" (relative to it),
    seeds = N or [..], a [grid] table of key = [values], an optional [set] table of fixed
    values; --grid/--seeds/--set add to it. Each finished point is kept as its own file: run the
    same command again to resume (finished points are skipped, failed ones retried). Exit status
    1 if points failed (their errors are in DIR/errors/ and the dataset's error column).

    --dask slurm submits SLURM jobs whose Dask workers run the points (a [dask.slurm] table in
    the sweep file holds the same options); docs/sweep.md."""
    from ._dask import check_forms, choose, pop_slurm
    from ..show import console
    from ..signals import workers_stop_with_us
    from ..sweep import SweepDir, collect, make_executor, make_plan, run_sweep
    from ..sweep.progress import TaskBar

    err = console(stderr=True)
    slurm = pop_slurm(slurm_args)
    if collect_dir is not None:
        if source or grids or seeds or overrides or out_dir or dask or slurm.given():
            raise BraidError("--collect", "expected only --collect DIR (it rebuilds that sweep's dataset)")
        df = collect(collect_dir)
        click.echo(f"{df.height} points -> {Path(collect_dir) / 'sweep.parquet'}")
        return
    if not source:
        raise BraidError("sweep", "expected a scenario or a sweep file: braid sweep SCENARIO --grid key=v1,v2 (or braid sweep --collect DIR)")
    check_forms(dask, jobs, slurm)  # the command line's own options, before the sweep file is read
    plan = make_plan(source, grids, seeds, overrides)
    dask, slurm_opts = choose(dask, jobs, slurm, plan.dask, plan.slurm)
    out = SweepDir(Path(out_dir) if out_dir else Path("results") / f"{Path(source).stem}-sweep")
    bar = TaskBar("sweep", err, not no_progress and err.is_terminal)

    def executor(n: int):
        ex = make_executor(dask, jobs, slurm_opts, n, out.root / "slurm-logs" if slurm_opts else None)
        err.print(f"running on {ex.where}")
        bar.start(n)
        return ex

    def on_start(todo: int, skipped: int) -> None:
        err.print(f"{todo + skipped} points, {skipped} already done, {todo} to run")

    def on_progress(n: int, total: int, failed: int) -> None:
        bar.update(n, failed)

    try:
        with workers_stop_with_us():
            oc = run_sweep(plan, out, executor, on_progress=on_progress, on_start=on_start)
    except KeyboardInterrupt:
        bar.stop()
        if out.is_sweep():
            click.echo(f"stopped: {len(out.done())} finished points are kept in {out.root}; run the same command to resume", err=True)
        raise
    finally:
        bar.stop()
    if oc.retried:
        click.echo(f"warning: workers died (killed or crashed) under {oc.retried} runs of points; those points were run again", err=True)
    click.echo(f"{oc.total} points: {oc.ran} run, {oc.skipped} already done, {len(oc.failed)} failed; {oc.dataset} ({oc.rows} rows)")
    if oc.failed:
        for p, e in oc.failed[:10]:
            click.echo(f"failed: {p.describe()}: {e}", err=True)
        if len(oc.failed) > 10:
            click.echo(f"... and {len(oc.failed) - 10} more (see {out.errors})", err=True)
        click.echo(f"error: {len(oc.failed)} of {oc.total} points failed; run the same command to retry them", err=True)
        sys.exit(1)


COMMANDS = (sweep,)
