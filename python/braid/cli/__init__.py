"""The ``braid`` command line.

Every user mistake ends with one line ``error: <what>: <expected>`` on stderr and exit code 2;
Ctrl-C ends with exit code 130, SIGTERM with 143, and neither leaves a half-written results
folder.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Optional

import click

from . import signals
from .scenario import BraidError
from .signals import Terminated

EXIT_USAGE = 2


def _err(msg: str) -> None:
    click.echo(f"error: {msg}", err=True)


def _stopped(msg: str, code: int) -> None:
    """Exit after Ctrl-C or SIGTERM without running interpreter-exit hooks. The stop terminated
    the worker processes; CPython 3.11's ProcessPoolExecutor exit hook can then race its own
    management thread and print a "Bad file descriptor" traceback (fixed in 3.12). Everything a
    run keeps is written atomically before this point and the `with` blocks have closed, so
    skipping the hooks loses nothing."""
    click.echo(msg, err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class BraidGroup(click.Group):
    """A click group that turns user mistakes into one-line errors with exit code 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # noqa: D401
        from .scenario import ScenarioError

        signals.install()
        try:
            rv = super().main(args=args, prog_name=prog_name, complete_var=complete_var, standalone_mode=False, **extra)
        except click.exceptions.Exit as e:  # pragma: no cover - click returns it instead
            sys.exit(e.exit_code)
        except Terminated:
            _stopped("terminated", 143)
        except click.exceptions.Abort as e:
            # click turns KeyboardInterrupt (and so SIGTERM's Terminated) into Abort.
            if isinstance(e.__cause__ or e.__context__, Terminated):
                _stopped("terminated", 143)
            _stopped("interrupted", 130)
        except KeyboardInterrupt:
            _stopped("\ninterrupted", 130)
        except click.UsageError as e:
            cmd = e.ctx.command_path if e.ctx is not None else "braid"
            _err(f"{e.format_message()} (see '{cmd} --help')")
            sys.exit(EXIT_USAGE)
        except click.ClickException as e:
            _err(e.format_message())
            sys.exit(e.exit_code)
        except ScenarioError as e:
            path = getattr(e, "path", "") or "scenario"
            _err(f"{path}: {getattr(e, 'message', str(e))}")
            sys.exit(EXIT_USAGE)
        except BraidError as e:
            _err(str(e))
            sys.exit(EXIT_USAGE)
        except OSError as e:
            # Output that cannot be written (a full disk, a read-only or vanished folder) found
            # where no caller named it: still one line naming the file, never a traceback.
            from .results import output_error

            _err(str(output_error(e.filename or "output", e)))
            sys.exit(EXIT_USAGE)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=BraidGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="braid", message="braid %(version)s")
def main() -> None:
    """braid: multi-tenant, multi-path RDMA for datacenters, and a packet-level RoCEv2 simulator.

    Start with `braid demo`; scenarios are TOML files (see docs/scenario.md, `braid schema`)."""


def _seed(value: Optional[str]) -> Optional[int]:
    if value is None:
        return None
    try:
        s = int(value, 0)
    except ValueError:
        raise BraidError("--seed", f"expected a non-negative integer, got {value!r}") from None
    if s < 0:
        raise BraidError("--seed", f"expected a non-negative integer, got {value}")
    if not 0 <= s < 2**64:
        raise BraidError("--seed", f"expected an integer between 0 and 2^64-1, got {value}")
    return s


_set_option = click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help='Override a scenario value, e.g. --set switch.pfc.enabled=false --set \'traffic[0].size="1MB"\' '
    "(the value is read as TOML; a single bare word such as none or 1MB is taken as a string). Repeatable.",
)


def default_out_dir(scenario: str) -> Path:
    """``results/<stem>-<date-time>``; the run reserves it, taking ``-2``, ``-3``, ... when a run
    started in the same second has it already."""
    return Path("results") / f"{Path(scenario).stem}-{time.strftime('%Y%m%d-%H%M%S')}"


@main.command()
@click.argument("scenario")
@click.option("-o", "--out", "out_dir", metavar="DIR", help="Results folder (default: results/<scenario>-<time>, never an existing one).")
@click.option("--overwrite", is_flag=True, help="Replace the results already in DIR (otherwise an existing results folder is refused).")
@click.option("--seed", metavar="N", help="Seed (overrides the scenario's `seed`).")
@_set_option
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--no-write", is_flag=True, help="Do not write a results folder.")
def run(scenario: str, out_dir: Optional[str], overwrite: bool, seed: Optional[str], overrides: tuple, no_progress: bool, no_write: bool) -> None:
    """Run SCENARIO (a TOML file) and write its results folder."""
    from . import api
    from .results import ResultsDir
    from .show import console, headline_table

    s = _seed(seed)
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
        _warn(
            f"the run reached its duration ({res.stats.get('sim_time_ps', 0) / 1e9:g} ms) with {res.unfinished} of {total} "
            f"flows/applications unfinished{split}: their FCTs are missing and the headline covers what completed "
            '(summary.json: "finished": false)'
        )
    if out is not None:
        c.print(f"results: [bold]{res.out_dir}[/bold]")


def _warn(msg: str) -> None:
    click.echo(f"warning: {msg}", err=True)


@main.command()
@click.argument("scenario")
@_set_option
@click.option("--no-progress", is_flag=True, help="No progress bar while a large topology is built.")
def validate(scenario: str, overrides: tuple, no_progress: bool) -> None:
    """Check SCENARIO completely (schema, values, files, topology) without running it."""
    from . import api
    from .show import console

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
        _warn(w)


@main.command()
def schema() -> None:
    """Print the scenario format as JSON Schema (for editors)."""
    from ._core import scenario_schema

    click.echo(scenario_schema())


@main.command()
@click.option("-o", "--out", "out_dir", default="braid-demo", show_default=True, metavar="DIR", help="Where results and the report go.")
@click.option("--seed", metavar="N", help="Seed for both parts.")
def demo(out_dir: str, seed: Optional[str]) -> None:
    """The tour: ECMP collisions on the MP-RDMA paper's two-ToR testbed, then incast with and
    without PFC. Prints tables, writes results and a report into DIR."""
    from .demo import run_demo

    run_demo(Path(out_dir), seed=_seed(seed))


@main.command()
@click.argument("folder", metavar="FOLDER")
@click.option("-o", "--out", "out_file", metavar="FILE", help="Write the HTML page here (default: FOLDER/report.html; then a run's PNG plots and report.md are written beside it too).")
@click.option("--metric", "metrics", multiple=True, metavar="NAME", help="For a sweep: the metrics to plot against the swept keys (default: goodput, FCT, Jain, drops, PFC pauses where present). Repeatable.")
def report(folder: str, out_file: Optional[str], metrics: tuple) -> None:
    """One self-contained HTML page for a results folder, a sweep folder or a demo folder:
    headline, plots, tables, the scenario and its overrides (docs/report.md)."""
    from .report import make_report

    made = make_report(Path(folder), Path(out_file) if out_file else None, metrics=metrics)
    for p in made:
        click.echo(str(p))


@main.command()
@click.argument("folder", metavar="RESULTS_DIR")
@click.option("--format", "fmt", type=click.Choice(["hpcc", "csv"]), required=True, help="hpcc: fct.txt, pfc.txt (and qlen.txt) as HPCC ns-3 writes them; csv: every table as CSV.")
@click.option("-o", "--out", "out_dir", metavar="DIR", help="Where to write (default: RESULTS_DIR itself).")
def export(folder: str, fmt: str, out_dir: Optional[str]) -> None:
    """Write a results folder in HPCC ns-3's text formats or as CSV (docs/scenario.md)."""
    from .export import export as do_export

    for p in do_export(Path(folder), fmt, out_dir):
        click.echo(str(p))


@main.command()
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
def bench(only: tuple, quick: bool, scale: bool, repeat: int, anchors: Optional[str], json_out: Optional[str]) -> None:
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

    The HPCC scenarios need the anchor folder (--anchors). The default run is all of them
    (~10 minutes of CPU; ft-k48 alone ~4). "built MB" is the RSS once a run is built, before any event; "peak
    MB" the peak RSS (ru_maxrss of the child process).
    """
    from .bench import run_bench

    run_bench(only=only, quick=quick, anchors=anchors, json_out=json_out, scale=scale, repeat=repeat)


from .cli_compare import compare  # noqa: E402
from .cli_drum import drum  # noqa: E402
from .cli_perftest import conformance, perftest  # noqa: E402
from .cli_reproduce import reproduce  # noqa: E402
from .cli_sweep import sweep  # noqa: E402
from .hpcc_compare import compare_hpcc  # noqa: E402
from .hpcc_import import import_hpcc  # noqa: E402

main.add_command(import_hpcc, "import-hpcc")
main.add_command(compare_hpcc, "compare-hpcc")
main.add_command(drum, "drum")
main.add_command(reproduce, "reproduce")
main.add_command(sweep, "sweep")
main.add_command(compare, "compare")
main.add_command(perftest, "perftest")
main.add_command(conformance, "conformance")


if __name__ == "__main__":  # pragma: no cover
    main()
