"""``braid reproduce``: run the papers' experiments and print paper vs braid."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Optional

import click

from ._dask import dask_options
from ..scenario import BraidError

MARK = {True: "[green]yes[/green]", False: "[red]no[/red]", None: "[dim]·[/dim]"}


@click.command()
@click.argument("ids", nargs=-1, metavar="[EXPERIMENT]...")
@click.option("--list", "list_only", is_flag=True, help="List the experiments and exit.")
@click.option("--full", is_flag=True, help="The paper-like sweep (more seeds); default: a quick version of it.")
@click.option("--all", "include_slow", is_flag=True, help="Also the slow experiments (large fabrics) when none is named.")
@click.option("-j", "--jobs", type=int, metavar="N", help="Worker processes (default: one per core).")
@click.option("--json", "json_out", metavar="FILE", help="Also write every row and raw measurement as JSON.")
@click.option("--check", is_flag=True, help="Exit with status 1 if any quantity misses the paper's direction, or its number by more than ±25% (unless the row is a documented difference).")
@click.option("--experiments", "folder", metavar="DIR", help="Folder of experiment scenarios (default: the one shipped with braid).")
@click.option("-o", "--out", "out_dir", metavar="DIR", help="Keep every finished run in DIR/runs (run the same command again to resume: finished runs are skipped) and write the experiments' plots there (default: runs are not kept; plots go to ./braid-reproduce).")
@dask_options
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def reproduce(ids: tuple, list_only: bool, full: bool, include_slow: bool, jobs: Optional[int], json_out: Optional[str], check: bool, folder: Optional[str], out_dir: Optional[str], dask: Optional[str], no_progress: bool, **slurm_args) -> None:
    """Run the papers' experiments on the built-in simulator and print, for each quantity, the
    paper's figure, braid's, and two verdicts: direction (the sign, ordering or trend the paper
    claims) and, where the paper gives a number, magnitude (braid within ±25% of it; "doc" marks
    a miss whose measured cause is written up where the row points).

    EXPERIMENT is an id from --list or a prefix of ids (`mp-rdma`); none = every quick one.
    Differences are discussed where each experiment's `doc` points. The runs go to local worker
    processes, or to Dask with --dask (as for braid sweep, SLURM included)."""
    from rich import box
    from rich.table import Table

    from ..reproduce import execute, registry, select
    from ..show import console
    from ..signals import workers_stop_with_us
    from ..sweep.executors import make_executor
    from ..sweep.progress import TaskBar

    c = console()
    if list_only:
        t = Table(title="experiments", title_justify="left")
        t.add_column("id", no_wrap=True)
        for col in ("source", "what", "cost"):
            t.add_column(col)
        for e in registry().values():
            t.add_row(e.id, e.source, e.title, e.cost)
        c.print(t)
        return
    from ._dask import choose, pop_slurm

    dask, slurm = choose(dask, jobs, pop_slurm(slurm_args))
    if out_dir is not None:
        od = Path(out_dir)
        if od.exists() and not od.is_dir():
            raise BraidError("--out", f"expected a folder, got the file {out_dir!r}")
        # Plots are written where the summaries run (this process), which reads it from here.
        os.environ["BRAID_REPRODUCE_OUT"] = str(od)
    if json_out:
        from ..results import check_out_file

        # Checked before the experiments run, not after minutes of work.
        check_out_file(json_out, "--json")
    chosen = select(ids, include_slow)
    skipped = [e.id for e in registry().values() if e not in chosen and e.cost == "slow" and not ids]
    path = Path(folder) if folder else None
    if path is not None and not path.is_dir():
        raise BraidError("--experiments", f"expected a folder, got {folder!r}")
    err = console(stderr=True)
    bar = TaskBar("reproduce", err, not no_progress and err.is_terminal)

    def on_start(todo: int, skipped: int) -> None:
        err.print(f"{todo + skipped} runs, {skipped} already done, {todo} to run")

    def executor(n: int):
        ex = make_executor(dask, jobs, slurm, n, Path(out_dir) / "slurm-logs" if slurm is not None and out_dir else None)
        err.print(f"running on {ex.where}")
        bar.start(n)
        return ex

    try:
        with workers_stop_with_us():
            outcomes = execute(chosen, full=full, folder=path, on_progress=lambda n, _t: bar.update(n), out=Path(out_dir) if out_dir else None, on_start=on_start, executor=executor)
    except KeyboardInterrupt:
        bar.stop()
        if out_dir:
            from ..reproduce.store import RunStore

            kept = len(RunStore(Path(out_dir)).done()) if (Path(out_dir) / "runs").is_dir() else 0
            click.echo(f"stopped: {kept} finished runs are kept in {Path(out_dir) / 'runs'}; run the same command to resume", err=True)
        else:
            click.echo("stopped: finished runs were not kept (give -o DIR to keep them and resume)", err=True)
        raise
    finally:
        bar.stop()
    from ..reproduce.registry import Verdicts

    verdicts = Verdicts()
    for o in outcomes:
        e = o.experiment
        t = Table(title=f"[bold]{e.id}[/bold]: {e.title} ({e.source})", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        t.add_column("quantity")
        t.add_column("paper", justify="right")
        t.add_column("braid", justify="right")
        t.add_column("direction", justify="center")
        t.add_column("magnitude", justify="center")
        notes = []
        for r in o.rows:
            mark = MARK[r.ok]
            if r.note:
                if r.note not in notes:
                    notes.append(r.note)
                mark += f" [dim]({notes.index(r.note) + 1})[/dim]"
            mag = MARK[r.magnitude]
            if r.magnitude is False and r.documented:
                mag = "[yellow]doc[/yellow]"
                text = f"documented difference: {r.documented}"
                if text not in notes:
                    notes.append(text)
                mag += f" [dim]({notes.index(text) + 1})[/dim]"
            t.add_row(r.quantity, r.paper, r.braid, mark, mag)
            verdicts.add(r)
        c.print(t)
        for k, n in enumerate(notes, 1):
            c.print(f"  [dim]({k}) {n}[/dim]")
        where = f"; discussed in {e.doc}" if e.doc else ""
        c.print(f"  [dim]{o.runs} runs, {o.wall_s:.1f} s of compute{where}[/dim]\n")
    c.print(verdicts.line())
    if skipped:
        c.print(f"[dim]not run (slow; name them or use --all): {', '.join(skipped)}[/dim]")
    if json_out:
        doc = {
            "full": full,
            "experiments": [
                {
                    "id": o.experiment.id,
                    "source": o.experiment.source,
                    "title": o.experiment.title,
                    "rows": [r.as_dict() for r in o.rows],
                    "measures": o.measures,
                }
                for o in outcomes
            ],
        }
        from ..results import write_text_atomic

        write_text_atomic(Path(json_out), json.dumps(doc, indent=1, default=float) + "\n")
    if check and verdicts.failures:
        click.echo(f"{verdicts.failures} verdicts miss the paper (direction, or magnitude not documented as a difference)", err=True)
        sys.exit(1)


COMMANDS = (reproduce,)
