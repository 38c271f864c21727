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
    "braid.reproduce.cc_compare",
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


#: A magnitude reproduces when braid's number is within this fraction of the paper's (issue 28:
#: "within ±25%"): |braid / paper - 1| <= 0.25.
MAGNITUDE_TOLERANCE = 0.25


@dataclass
class Row:
    """One quantity, judged twice.

    ``ok`` is the *direction* verdict: braid shows what the paper claims (the sign of a gain,
    an ordering, a trend): ``True``, ``False``, or ``None`` for a row given for information.

    The *magnitude* verdict exists where the paper gives a number: ``paper_value`` (the
    paper's number, in the unit of ``braid_value``) and ``braid_value``; it holds when braid's
    number is within :data:`MAGNITUDE_TOLERANCE` of the paper's. A magnitude that misses for a
    reason that was measured and written up is marked ``documented`` with the doc section
    (``docs/x.md#section``); ``braid reproduce --check`` fails on any other miss."""

    quantity: str
    paper: str
    braid: str
    ok: Optional[bool] = None
    note: str = ""
    paper_value: Optional[float] = None
    braid_value: Optional[float] = None
    documented: str = ""

    @property
    def direction(self) -> Optional[bool]:
        return self.ok

    @property
    def magnitude(self) -> Optional[bool]:
        return magnitude_ok(self.paper_value, self.braid_value)

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d["direction"] = self.direction
        d["magnitude"] = self.magnitude
        return d


def magnitude_ok(paper: Optional[float], braid: Optional[float]) -> Optional[bool]:
    """Whether ``braid`` is within :data:`MAGNITUDE_TOLERANCE` of ``paper`` (None when either
    is missing or not a number). A paper value of 0 needs braid's to be 0 too."""
    import math

    if paper is None or braid is None:
        return None
    p, b = float(paper), float(braid)
    if math.isnan(p) or math.isnan(b):
        return None if math.isnan(p) else False
    if p == 0:
        return b == 0
    return abs(b / p - 1) <= MAGNITUDE_TOLERANCE + 1e-12


@dataclass
class Verdicts:
    """The counts a summary states: direction and magnitude, judged and reproduced."""

    direction_judged: int = 0
    direction_ok: int = 0
    magnitude_judged: int = 0
    magnitude_ok: int = 0
    #: Magnitude misses marked as documented differences (with their measured cause).
    documented: int = 0
    #: Magnitude misses not documented, and direction misses: what --check fails on.
    failures: int = 0

    def add(self, row: Row) -> None:
        if row.ok is not None:
            self.direction_judged += 1
            self.direction_ok += row.ok is True
            self.failures += row.ok is False
        m = row.magnitude
        if m is not None:
            self.magnitude_judged += 1
            self.magnitude_ok += m
            if not m:
                if row.documented:
                    self.documented += 1
                else:
                    self.failures += 1

    def line(self) -> str:
        doc = f" ({self.documented} {'a documented difference' if self.documented == 1 else 'documented differences'})" if self.documented else ""
        return (
            f"direction {self.direction_ok} of {self.direction_judged}, "
            f"magnitude {self.magnitude_ok} of {self.magnitude_judged}{doc} "
            f"(magnitude: within ±{MAGNITUDE_TOLERANCE:.0%} of the paper's number, where it gives one)"
        )


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
