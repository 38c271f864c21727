"""``braid run``, ``braid validate`` and ``braid schema``: a scenario run, checked, or its format."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import click

from ._common import parse_seed, set_option, warn


def default_out_dir(scenario: str) -> Path:
    """``results/<stem>-<date-time>``; the run reserves it, taking ``-2``, ``-3``, ... when a run
    started in the same second has it already."""
    return Path("results") / f"{Path(scenario).stem}-{time.strftime('%Y%m%d-%H%M%S')}"


@click.command()
@click.argument("scenario")
@click.option("-o", "--out", "out_dir", metavar="DIR", help="Results folder (default: results/<scenario>-<time>, never an existing one).")
@click.option("--overwrite", is_flag=True, help="Replace the results already in DIR (otherwise an existing results folder is refused).")
@click.option("--seed", metavar="N", help="Seed (overrides the scenario's `seed`).")
@set_option
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--no-write", is_flag=True, help="Do not write a results folder.")
def run(scenario: str, out_dir: Optional[str], overwrite: bool, seed: Optional[str], overrides: tuple, no_progress: bool, no_write: bool) -> None:
    """Run SCENARIO (a TOML file) and write its results folder."""
    from .. import api
    from ..results import ResultsDir
    from ..show import console, headline_table

    s = parse_seed(seed)
    # The output folder is checked and reserved before anything is built or run.
    out = None
    if not no_write:
        out = ResultsDir(out_dir, overwrite=overwrite) if out_dir is not None else ResultsDir(default_out_dir(scenario), unique=True)
    show_progress = not no_progress and console(stderr=True).is_terminal
    res = api.run(scenario, seed=s, overrides=overrides, out_dir=out, progress=show_progress)
    c = console()
    c.print(headline_table(res))
    if not res.finished:
        fl = res.flows
        total = fl.height
        split = ""
        if res.not_started:
            split = f" ({res.in_flight} in flight, {res.not_started} due to start after the run's end)"
        warn(
            f"the run reached its duration ({res.stats.get('sim_time_ps', 0) / 1e9:g} ms) with {res.unfinished} of {total} "
            f"flows/applications unfinished{split}: their FCTs are missing and the headline covers what completed "
            '(summary.json: "finished": false)'
        )
    if out is not None:
        c.print(f"results: [bold]{res.out_dir}[/bold]")


@click.command()
@click.argument("scenario")
@set_option
@click.option("--no-progress", is_flag=True, help="No progress bar while a large topology is built.")
def validate(scenario: str, overrides: tuple, no_progress: bool) -> None:
    """Check SCENARIO completely (schema, values, files, topology) without running it."""
    from .. import api
    from ..show import console

    show_progress = not no_progress and console(stderr=True).is_terminal
    sc, sim, seed = api.build(scenario, None, overrides, show_progress)
    est = api.estimate(sc)
    st = sim.results().get("stats", {})
    parts = []
    for key, label in (("hosts", "hosts"), ("switches", "switches")):
        if key in st:
            parts.append(f"{int(st[key])} {label}")
    extra = f" ({', '.join(parts)})" if parts else ""
    click.echo(f"ok: {sc.name}{extra}, duration {sim.end_ps() / 1e9:g} ms, seed {seed}")
    click.echo(f"estimate: {est['line']}")
    for w in est["warnings"]:
        warn(w)


@click.command()
def schema() -> None:
    """Print the scenario format as JSON Schema (for editors)."""
    from .._core import scenario_schema

    click.echo(scenario_schema())


COMMANDS = (run, validate, schema)
