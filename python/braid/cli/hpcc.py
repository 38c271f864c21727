"""``braid import-hpcc`` and ``braid compare-hpcc``: HPCC ns-3's inputs as a braid scenario, and a
run's slowdowns beside HPCC's (``braid.hpcc``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import click


@click.command("import-hpcc")
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("-o", "--output", metavar="FILE", help="Write the scenario here (default: standard output).")
@click.option("--topology", metavar="FILE", help="The topology file, instead of the config's TOPOLOGY_FILE.")
@click.option("--flows", metavar="FILE", help="The flow file, instead of the config's FLOW_FILE.")
@click.option(
    "--cc-fallback",
    type=click.Choice(["dcqcn", "none"]),
    help="Import a CC_MODE other than 1 (DCQCN) with this transport instead of failing.",
)
@click.option("--lenient", is_flag=True, help="Approximate HAS_WIN 1, RATE_BOUND 0 and L2_BACK_TO_ZERO 1 instead of failing.")
def import_hpcc(config: str, output: Optional[str], topology: Optional[str], flows: Optional[str], cc_fallback: Optional[str], lenient: bool) -> None:
    """Turn an HPCC ns-3 CONFIG (config.txt) into a braid scenario.

    Maps the DCQCN, ECN, PFC, buffer, payload, ACK, link-loss and link-failure keys, and lists the
    keys it ignores and why (on standard error). Exit code 2 on an unknown key or a bad value."""
    from ..hpcc import HpccImportError, convert

    out_dir = Path(output).resolve().parent if output else None
    imp = convert(config, topology=topology, flows=flows, cc_fallback=cc_fallback, lenient=lenient, out_dir=out_dir)
    if output:
        tmp = Path(output + ".tmp")
        try:
            tmp.write_text(imp.toml)
            os.replace(tmp, output)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise HpccImportError(f"{output}: cannot write: {e.strerror or e}") from None
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(imp.toml, nl=False)
    if imp.ignored:
        click.echo("ignored HPCC keys:", err=True)
        w = max(len(k) for k, _ in imp.ignored)
        for k, r in imp.ignored:
            click.echo(f"  {k:<{w}}  {r}", err=True)
    if imp.notes:
        click.echo("notes:", err=True)
        for n in imp.notes:
            click.echo(f"  {n}", err=True)


@click.command("compare-hpcc")
@click.argument("folder", metavar="RESULTS_DIR")
@click.option("--hpcc", "fct", metavar="FCT_TXT", help="HPCC ns-3's fct.txt for the same inputs: its columns are printed beside braid's.")
def compare_hpcc(folder: str, fct: Optional[str]) -> None:
    """Slowdown by flow size (p50, p99, mean per decade of size) of a braid run, beside HPCC
    ns-3's fct.txt for the same inputs (docs/topologies.md, "HPCC fidelity")."""
    from ..hpcc.compare import bucket_table, format_table, read_braid, read_hpcc_fct

    sizes, sd = read_braid(folder)
    rows = bucket_table(sizes, sd)
    ref = None
    if fct is not None:
        ref = bucket_table(*read_hpcc_fct(Path(fct)))
    click.echo(format_table(rows, ref))


COMMANDS = (import_hpcc, compare_hpcc)
