"""What a paper reproduction is: a sweep of simulations and a table of paper vs braid.

An :class:`Experiment` names its source (paper, section, figure), lists the runs of its sweep
(:class:`Run`: a scenario file from the experiments folder, overrides, a seed, and the function
that measures one result) and turns the measurements into :class:`Row` values, each quantity with
the paper's figure, braid's, and whether braid reproduces the paper's *shape* (the ratio, the
ordering, the trend the paper claims) — not its exact microseconds: our testbed is not theirs.

Experiments register themselves with :func:`experiment` when their module is imported; the
modules are listed in :data:`MODULES`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

# The modules that define experiments (imported on first use of the registry).
MODULES = (
    "braid.reproduce.mp_rdma",
    "braid.reproduce.mp_rdma_scale",
    "braid.reproduce.drum",
    "braid.reproduce.drum_agent",
    "braid.reproduce.drum_workloads",
    "braid.reproduce.perf",
    "braid.reproduce.perf_matrix",
    "braid.reproduce.partition",
    "braid.reproduce.virtuoso",
    "braid.reproduce.multipath_compare",
)


@dataclass(frozen=True)
class Run:
    """One run of an experiment's sweep: a simulation, or a computation that is not one.

    A simulation names a scenario file of the experiments folder, its overrides and seed, and
    ``measure``, which takes the :class:`braid.api.RunResult` and returns a dict of plain numbers
    or lists of numbers. A computation (``scenario=None``, e.g. a solver run) calls
    ``measure(seed, *args)`` instead. Either way ``measure`` must be a module-level function:
    runs execute in worker processes, and the function travels there by name."""

    label: str
    scenario: Optional[str]
    seed: int
    measure: Callable[..., dict]
    overrides: Tuple[str, ...] = ()
    args: Tuple = ()


@dataclass
class Row:
    """One quantity: the paper's value, braid's, and whether braid reproduces the paper's shape
    (``True``), does not (``False``), or the row is for information (``None``)."""

    quantity: str
    paper: str
    braid: str
    ok: Optional[bool] = None
    note: str = ""


@dataclass(frozen=True)
class Experiment:
    id: str
    source: str
    title: str
    runs: Callable[[bool], List[Run]]
    summarize: Callable[[Dict[str, List[dict]]], List[Row]]
    # "quick" experiments run by default; "slow" ones (large fabrics) only when named or --all.
    cost: str = "quick"
    # Where the comparison is discussed (why braid differs, what was tried).
    doc: str = ""
    scenarios: Tuple[str, ...] = field(default=())


_REGISTRY: Dict[str, Experiment] = {}
_loaded = False


def experiment(
    id: str,
    source: str,
    title: str,
    runs: Callable[[bool], List[Run]],
    cost: str = "quick",
    doc: str = "",
    scenarios: Sequence[str] = (),
):
    """Registers the decorated summary function as experiment ``id``.

    ``runs(full)`` lists the sweep (``full`` = the paper-like number of seeds and lengths, else a
    quick version of the same sweep)."""

    if cost not in ("quick", "slow"):
        raise ValueError(f"experiment {id}: cost must be 'quick' or 'slow', got {cost!r}")

    def wrap(summarize: Callable[[Dict[str, List[dict]]], List[Row]]):
        if id in _REGISTRY:
            raise ValueError(f"experiment {id} registered twice")
        _REGISTRY[id] = Experiment(id, source, title, runs, summarize, cost, doc, tuple(scenarios))
        return summarize

    return wrap


def registry() -> Dict[str, Experiment]:
    """Every registered experiment by id, in registration order."""
    global _loaded
    if not _loaded:
        import importlib

        for m in MODULES:
            importlib.import_module(m)
        _loaded = True
    return dict(_REGISTRY)


def select(ids: Sequence[str], include_slow: bool) -> List[Experiment]:
    """The experiments to run: those named (an id, or a prefix of ids such as ``mp-rdma``), else every
    quick one (and the slow ones with ``include_slow``). Unknown names are an error."""
    from ..scenario import BraidError

    reg = registry()
    if not ids:
        return [e for e in reg.values() if include_slow or e.cost == "quick"]
    chosen: List[Experiment] = []
    for name in ids:
        hits = [e for e in reg.values() if e.id.startswith(name)]
        if not hits:
            known = ", ".join(reg)
            raise BraidError("reproduce", f"no experiment {name!r}; known: {known}")
        for e in hits:
            if e not in chosen:
                chosen.append(e)
    return chosen
