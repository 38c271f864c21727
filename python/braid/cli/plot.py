"""``braid plot``: redraw figures from results folders without re-running (docs/report.md)."""

from __future__ import annotations

from typing import Optional

import click


@click.command()
@click.argument("folders", nargs=-1, metavar="RUN_OR_SWEEP...")
@click.option("--figure", "figures", multiple=True, metavar="NAME", help="Only these figures of a run (throughput, fct_cdf, slowdown_by_size, latency_cdf, latency_time, queues, cc). Repeatable.")
@click.option("--metric", "metrics", multiple=True, metavar="NAME", help="For sweeps: the metrics to draw against the swept key (dataset columns). Repeatable.")
@click.option("--group", metavar="KEY", help="For sweeps: one line per value of this swept key.")
@click.option("--buckets", "bucket_edges", metavar="SIZES", help='Flow-size bucket edges for slowdown_by_size, e.g. "10KB,100KB,1MB".')
@click.option("--window", metavar="DURATION", help='Window of latency_time, e.g. "10us" (default: 1/50 of the run).')
@click.option("--format", "fmt", type=click.Choice(["png", "svg", "pdf"]), default="png", show_default=True, help="File format (SVG and PDF are vector, for papers).")
@click.option("-o", "--out", "out_dir", metavar="DIR", help="Where to write the figures (default: the first folder).")
def plot(folders: tuple, figures: tuple, metrics: tuple, group: Optional[str], bucket_edges: Optional[str], window: Optional[str], fmt: str, out_dir: Optional[str]) -> None:
    """Redraw figures from results (one run, several runs overlaid, or sweeps) with other
    options, without re-running: one file per figure, FIGURE.FORMAT."""
    from ..report.replot import replot

    for p in replot(folders, figures, metrics, group, bucket_edges, window, fmt, out_dir):
        click.echo(str(p))


COMMANDS = (plot,)
