"""``braid demo``: the tour."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click

from ._common import parse_seed


@click.command()
@click.option("-o", "--out", "out_dir", default="braid-demo", show_default=True, metavar="DIR", help="Where results and the report go.")
@click.option("--seed", metavar="N", help="Seed for both parts.")
def demo(out_dir: str, seed: Optional[str]) -> None:
    """The tour: ECMP collisions on the MP-RDMA paper's two-ToR testbed, then incast with and
    without PFC. Prints tables, writes results and a report into DIR."""
    from ..demo import run_demo

    run_demo(Path(out_dir), seed=parse_seed(seed))


COMMANDS = (demo,)
