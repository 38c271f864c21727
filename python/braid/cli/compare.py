"""``braid compare``: runs or sweeps side by side (docs/report.md)."""

from __future__ import annotations

from typing import Optional

import click


@click.command()
@click.argument("folders", nargs=-1, metavar="RUN_OR_SWEEP...")
@click.option("--metric", "metrics", multiple=True, metavar="NAME", help="Only these metrics (headline keys or counters for runs; dataset columns for sweeps). Repeatable.")
@click.option("-o", "--out", "out_dir", metavar="DIR", help="Write compare.csv, compare.parquet and the plots (PNG) into DIR.")
@click.option("--html", "html", metavar="FILE", help="Write the comparison as one self-contained HTML page.")
def compare(folders: tuple, metrics: tuple, out_dir: Optional[str], html: Optional[str]) -> None:
    """Compare results folders (runs) or sweep folders: headline metrics side by side, overlaid
    FCT/slowdown CDFs and goodput over time for runs; for sweeps, each metric against the swept
    key(s), one line per sweep. Names are the folder names (made unique)."""
    from ..report.compare import compare as do_compare
    from ..show import console

    _cmp, _table, tables, written = do_compare(folders, metrics, out_dir, html)
    c = console()
    for t in tables:
        c.print(t)
    for p in written:
        click.echo(str(p))


COMMANDS = (compare,)
