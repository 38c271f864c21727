"""Where ``braid sweep`` and ``braid reproduce`` run their tasks: ``--dask`` and the ``--slurm-*``
options, shared by both commands and checked before anything is written (docs/sweep.md)."""

from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

import click

from ..scenario import BraidError

SLURM_KEYS = ("partition", "account", "cores", "memory", "walltime", "jobs", "extra", "prologue", "interface")


def dask_options(f: Callable) -> Callable:
    """Adds --dask and the --slurm-* options (as ``dask`` and ``slurm_<key>`` arguments)."""
    opts = [
        click.option("--dask", metavar="local|slurm|tcp://HOST:PORT", help="Run on Dask: a LocalCluster (-j workers), SLURM jobs through dask-jobqueue (--slurm-* options), or the scheduler at that address (needs the sweep extra: pip install -e '.[sweep]' in this checkout)."),
        click.option("--slurm-partition", "--slurm-queue", "slurm_partition", metavar="NAME", help="SLURM partition (#SBATCH -p). Default: your dask-jobqueue config's, else the cluster's default."),
        click.option("--slurm-account", "slurm_account", metavar="NAME", help="SLURM account (#SBATCH -A)."),
        click.option("--slurm-cores", "slurm_cores", type=int, metavar="N", help="Cores per job = single-threaded Dask workers per job (default 1)."),
        click.option("--slurm-memory", "slurm_memory", metavar="SIZE", help="Memory per job, e.g. 8GB (default 2 GiB per core)."),
        click.option("--slurm-walltime", "slurm_walltime", metavar="TIME", help="Time limit per job, SLURM's form (HH:MM:SS, D-HH:MM:SS, minutes; default 00:30:00)."),
        click.option("--slurm-jobs", "slurm_jobs", type=int, metavar="N", help="Jobs to submit (default 10; never more than the tasks can keep busy)."),
        click.option("--slurm-extra", "slurm_extra", multiple=True, metavar="OPTION", help="An extra #SBATCH line, e.g. --slurm-extra=--qos=long. Repeatable."),
        click.option("--slurm-prologue", "slurm_prologue", multiple=True, metavar="LINE", help="A shell line run before the worker starts, e.g. 'source ~/venv/bin/activate'. Repeatable."),
        click.option("--slurm-interface", "slurm_interface", metavar="NAME", help="Network interface of the scheduler and workers, e.g. ib0."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def pop_slurm(kwargs: dict):
    """Takes the ``slurm_*`` arguments out of a command's kwargs as SlurmOptions."""
    from ..sweep.slurm import SlurmOptions

    vals = {k: kwargs.pop(f"slurm_{k}") for k in SLURM_KEYS}
    for k in ("extra", "prologue"):
        vals[k] = list(vals[k] or ())
    return SlurmOptions(**vals)


def check_forms(dask: Optional[str], jobs: Optional[int], slurm: Any) -> None:
    """Each option's own form (before a sweep file is read)."""
    from ..sweep.executors import check_dask_spec

    if jobs is not None and jobs < 1:
        raise BraidError("--jobs", f"expected a positive integer, got {jobs}")
    if dask is not None:
        check_dask_spec(dask)
    slurm.check()


def choose(dask: Optional[str], jobs: Optional[int], slurm: Any, file_dask: Optional[str] = None, file_slurm: Any = None) -> Tuple[Optional[str], Any]:
    """The cluster to use and its SLURM options (a sweep file's, with the command line's on top),
    checked: one BraidError naming the option otherwise."""
    from ..sweep.slurm import SlurmOptions, check_available

    check_forms(dask, jobs, slurm)
    spec = dask or file_dask
    opts = (file_slurm or SlurmOptions()).merged(slurm)
    if spec is None or spec.lower() != "slurm":
        if slurm.given():
            first = next(k for k in SLURM_KEYS if getattr(slurm, k) not in (None, []))
            raise BraidError(f"--slurm-{first}", "only with --dask slurm")
        return spec, None
    if jobs is not None:
        raise BraidError("--jobs", "not with --dask slurm: give --slurm-jobs (jobs) and --slurm-cores (workers per job)")
    check_available()
    return spec, opts
