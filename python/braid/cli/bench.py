"""``braid bench``: braid's speed and memory on fixed scenarios (docs/performance.md)."""

from __future__ import annotations

from typing import Optional

import click


@click.command()
@click.option("--only", multiple=True, metavar="NAME", help="Run only these benchmarks (repeatable).")
@click.option("--quick", is_flag=True, help="Skip the long scenarios: the HPCC fat-tree headline, the scale series, ft-k34, ft-k48 and the QP series.")
@click.option(
    "--scale",
    is_flag=True,
    help="Run only the scale series: fat-trees of k = 8, 16, 24 (128, 1,024, 3,456 hosts) and k = 16 "
    "with 2x and 4x the flows; prints memory per host and per flow fitted by least squares, with R².",
)
@click.option("--repeat", default=1, show_default=True, metavar="N", type=int, help="Run each scenario N times; report median times and memory.")
@click.option("--anchors", metavar="DIR", help="HPCC anchor folder (default: ../shared/anchors/hpcc or /work/shared/anchors/hpcc).")
@click.option("--json", "json_out", metavar="FILE", help="Also write the figures as JSON.")
@click.option(
    "--hpcc-ns3",
    "hpcc_ns3",
    metavar="PATH",
    help="Also run your HPCC ns-3 build on the HPCC anchors' inputs, right after braid, and print both CPU times and "
    "their ratio. PATH is an executable called as `PATH CONFIG` (CONFIG: a config.txt): the built "
    "simulation/build/scratch/third, or a script such as `cd .../simulation && exec ./waf --run \"scratch/third $1\"`.",
)
def bench(only: tuple, quick: bool, scale: bool, repeat: int, anchors: Optional[str], json_out: Optional[str], hpcc_ns3: Optional[str]) -> None:
    """Run fixed scenarios, each in its own process; print events/s, simulated time per
    wall-second, CPU time and peak memory.

    \b
    Scenarios (names for --only):
      two-tor, incast-8to1   the demo's two scenarios
      hpcc-incast            HPCC anchor 1: 2:1 incast on a star of 65, DCQCN
      hpcc-fattree           HPCC anchor 2 (headline): 320-host fat-tree, 3,100 web-search flows
      ft-k8, ft-k16, ft-k24  scale: 3-tier fat-tree (100G hosts, 400G fabric, 1 us, DCQCN),
                             Poisson web-search at 0.3 load for 200 us, stop 100 us later
      ft-k16-2x, ft-k16-4x   scale: k = 16 with 400 / 800 us of arrivals (2x / 4x the flows)
      ft-k34, ft-k48         large: k = 34 / 48 (9,826 / 27,648 hosts), 1 ms of arrivals,
                             stopped at 1 ms; build seconds (linear in the nodes), events/s,
                             memory
      a2a-100, a2a-300,      QPs per host: all-to-all 1 KB flows among 100 / 300 / 1,000
      a2a-1000               hosts on one switch (99 / 299 / 999 QPs active per host), repeated
                             to ~1 M flows each; events/s should not depend on QPs per host

    The HPCC scenarios need the anchor folder (--anchors). braid's figures are its own; with
    --hpcc-ns3 PATH, HPCC ns-3 runs on the same anchor inputs in the same sitting and both CPU
    times are printed side by side (docs/performance.md). The default run is all of them
    (~10 minutes of CPU; ft-k48 alone ~4). "built MB" is the RSS once a run is built, before any event; "peak
    MB" the peak RSS (ru_maxrss of the child process).
    """
    from ..bench import run_bench

    run_bench(only=only, quick=quick, anchors=anchors, json_out=json_out, scale=scale, repeat=repeat, hpcc_ns3=hpcc_ns3)


COMMANDS = (bench,)
