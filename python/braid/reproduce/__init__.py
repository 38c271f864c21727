"""Paper reproductions: the experiments of DESIGN.md's fidelity table, run and compared.

``braid reproduce`` (CLI) and :func:`reproduce` (API) run the chosen experiments' sweeps on the
built-in simulator and print, per quantity, the paper's figure beside braid's and whether the
paper's shape is reproduced. The scenario files live in ``braid/experiments`` (the top-level
``experiments`` folder of a checkout); each experiment's module here says how its sweep is run
and measured.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Sequence

from .registry import Experiment, Row, Run, experiment, registry, select
from .runner import Outcome, execute, experiments_dir

__all__ = ["Experiment", "Outcome", "Row", "Run", "experiment", "experiments_dir", "registry", "reproduce", "select"]


def reproduce(
    ids: Sequence[str] = (),
    full: bool = False,
    include_slow: bool = False,
    jobs: Optional[int] = None,
    folder: Optional[Path] = None,
    out: Optional[Path] = None,
    dask: Optional[str] = None,
) -> List[Outcome]:
    """Runs the named experiments (ids or prefixes; default: every quick one) and returns their
    paper-vs-braid rows. ``full`` runs the paper-like sweep (more seeds); ``jobs`` worker
    processes (default: one per core); ``dask`` as ``braid sweep --dask`` (local or an address);
    ``out`` keeps every finished run in ``out/runs`` so that the same call resumes."""
    if dask is not None:
        from ..sweep.executors import check_dask_spec

        check_dask_spec(dask)
    return execute(select(ids, include_slow), full=full, jobs=jobs, folder=folder, out=Path(out) if out is not None else None, dask=dask)
