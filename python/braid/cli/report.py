"""``braid report`` and ``braid export``: a results folder as an HTML page, or in other formats."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click


@click.command()
@click.argument("folder", metavar="FOLDER")
@click.option("-o", "--out", "out_file", metavar="FILE", help="Write the HTML page here (default: FOLDER/report.html; then a run's PNG plots and report.md are written beside it too).")
@click.option("--metric", "metrics", multiple=True, metavar="NAME", help="For a sweep: the metrics to plot against the swept keys (default: goodput, FCT, Jain, drops, PFC pauses where present). Repeatable.")
def report(folder: str, out_file: Optional[str], metrics: tuple) -> None:
    """One self-contained HTML page for a results folder, a sweep folder or a demo folder:
    headline, plots, tables, the scenario and its overrides (docs/report.md)."""
    from ..report import make_report

    made = make_report(Path(folder), Path(out_file) if out_file else None, metrics=metrics)
    for p in made:
        click.echo(str(p))


@click.command()
@click.argument("folder", metavar="RESULTS_DIR")
@click.option("--format", "fmt", type=click.Choice(["hpcc", "csv"]), required=True, help="hpcc: fct.txt, pfc.txt (and qlen.txt) as HPCC ns-3 writes them; csv: every table as CSV.")
@click.option("-o", "--out", "out_dir", metavar="DIR", help="Where to write (default: RESULTS_DIR itself).")
def export(folder: str, fmt: str, out_dir: Optional[str]) -> None:
    """Write a results folder in HPCC ns-3's text formats or as CSV (docs/scenario.md)."""
    from ..export import export as do_export

    for p in do_export(Path(folder), fmt, out_dir):
        click.echo(str(p))


COMMANDS = (report, export)
