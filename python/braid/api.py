"""The Python API: the same as ``braid run``, returning DataFrames.

>>> import braid
>>> r = braid.run("scenario.toml", seed=3, overrides=["transport.kind=none"])
>>> r.flows.select("flow", "goodput_gbps")
"""

from __future__ import annotations

import math
import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Union

import polars as pl

from . import _core
from .scenario import BraidError, Scenario, load_scenario
from .tables import TABLES, frame

__all__ = ["RunResult", "run", "build", "validate", "estimate", "ScenarioError"]

ScenarioError = _core.ScenarioError

#: A progress callback gets (now_ps, end_ps).
Progress = Callable[[int, int], None]


@dataclass
class RunResult:
    """One run's results: the tables as polars DataFrames, totals and figures as dicts.

    ``tables`` holds every table by name: the run's own, as the core's registry declares them
    (``braid.tables.SPECS``: ``messages``, ``flows``, ``throughput``, ``queues``, ``transport``,
    ``tenants``, ``ports``, ``pfc``, ``cc``; columns in docs/report.md), then the ones the
    middleware layers handed over (``layer_tables``, e.g. ``drum_rounds``). Each is also an
    attribute (``r.flows``). A missing value is a null: an unfinished flow's ``finish_ps``, a
    field a congestion controller lacks, a transport counter a QP's transport does not keep."""

    scenario: Scenario
    seed: int
    counters: dict
    headline: dict
    stats: dict
    wall_s: float
    cpu_s: float
    finished: bool
    out_dir: Optional[Path] = None
    summary: dict = field(default_factory=dict)
    #: Every table by name, in order: the registry's, then the middleware layers'.
    tables: dict = field(default_factory=dict)
    #: The packet capture of ``measure.pcap`` (a whole pcap file), or None.
    pcap: Optional[bytes] = None
    #: Flows and applications that had not completed when the run ended: the sum of
    #: ``not_started`` (their start time lay after the run's end) and ``in_flight``.
    unfinished: int = 0
    not_started: int = 0
    in_flight: int = 0

    def __getattr__(self, name: str) -> Any:
        # Only called for names that are not fields: a table by name (one of the run's own is
        # an empty DataFrame when absent, as in a folder written before it existed).
        tables = self.__dict__.get("tables")
        if tables is not None:
            if name in tables:
                return tables[name]
            if name in TABLES:
                return pl.DataFrame()
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def layer_tables(self) -> dict:
        """The tables the middleware layers handed over, by name, each with ``host`` and
        ``tenant`` first (e.g. ``drum_rounds``: the DRUM online solver's rounds,
        docs/drum-agent.md); written as ``<name>.parquet`` beside the others. Empty when no
        layer produced one."""
        return {k: v for k, v in self.tables.items() if k not in TABLES}

    def __repr__(self) -> str:
        return (
            f"RunResult({self.scenario.name!r}, seed={self.seed}, flows={self.flows.height}, "
            f"messages={self.messages.height}, sim_time={self.stats.get('sim_time_ps', 0) / 1e9:g} ms, "
            f"wall={self.wall_s:.2f} s)"
        )


def _check_seed(seed: Any) -> Optional[int]:
    """An integer seed: Python's or numpy's (any ``numbers.Integral``), never a bool or float."""
    import numbers

    if seed is None:
        return None
    if isinstance(seed, (bool,)) or type(seed).__name__ == "bool_" or not isinstance(seed, numbers.Integral):
        raise BraidError("seed", f"expected an integer between 0 and 2^64-1, got {seed!r}")
    seed = int(seed)
    if not 0 <= seed < 2**64:
        raise BraidError("seed", f"expected an integer between 0 and 2^64-1, got {seed}")
    return seed


def build(scenario: Union[str, Path, Mapping, Scenario], seed: Optional[int] = None, overrides: Iterable[str] = (), progress: Any = False) -> tuple:
    """Parses the scenario and builds (but does not run) the simulation.
    ``progress``: True shows the build's progress on the terminal when the topology is large
    (``braid.buildprogress``); a callable gets every ``(stage, done, total)`` the core reports.
    Returns (Scenario, _core.Simulation, effective seed)."""
    from .buildprogress import reporter

    seed = _check_seed(seed)
    sc = load_scenario(scenario, overrides)
    # Refused here, before anything is built or drawn, when it would not fit in memory.
    _capacity(sc, check=True)
    cb, close = reporter(sc, progress)
    try:
        sim = _core.Simulation(sc.to_json(), str(sc.base_dir), seed, cb)
    finally:
        close()
    eff = seed if seed is not None else int(sc.data.get("seed", 1))
    return sc, sim, eff


def _capacity(sc: Scenario, check: bool) -> dict:
    # The core's errors come in the user's terms: the key path and the expected form
    # (crates/braid-sim/src/scenario/wording.rs).
    return _core.capacity(sc.to_json(), str(sc.base_dir), check)


def estimate(scenario: Union[str, Path, Mapping, Scenario], overrides: Iterable[str] = (), check: bool = False) -> dict:
    """What a scenario will cost, estimated by the core from its parameters before anything is
    built or drawn (a Poisson table's flows from its load, the host rate, its duration and its
    size distribution): a dict of ``hosts``, ``switches``, ``qps``, ``flows``, ``samples``,
    ``memory`` (bytes), ``by_key`` (bytes by the key that causes them), ``line`` (what ``braid
    validate`` prints) and ``warnings``. With ``check``, raises ScenarioError naming the costliest
    key when the memory exceeds ``BRAID_MEMORY_LIMIT`` (e.g. ``"8GB"``), else the memory
    available now."""
    return _capacity(load_scenario(scenario, overrides), check)


def validate(scenario: Union[str, Path, Mapping, Scenario], overrides: Iterable[str] = (), progress: Any = False) -> Scenario:
    """Checks a scenario completely (schema, ranges, referenced files, topology) without running
    it (``progress`` as for ``build``). Raises BraidError or ScenarioError."""
    sc, _sim, _seed = build(scenario, None, overrides, progress)
    return sc


def bar_state(now: int, end: int, last_arrival: Optional[int], elapsed_s: float) -> tuple:
    """The progress bar's (fraction done, text) at simulated time ``now`` after ``elapsed_s`` of
    wall time. A run whose flows are all known ends soon after its last flow arrives, not at
    ``end`` (the duration): the bar then measures against that arrival and estimates the time
    left at the pace so far; past it, the flows in flight drain (no estimate: how long depends on
    the congestion). Without a known last arrival it measures against ``end``, with an estimate."""
    if last_arrival is not None and 0 < last_arrival < end:
        if now >= last_arrival:
            return 1.0, f"sim {_fmt_ps(now)}: last flow arrived at {_fmt_ps(last_arrival)}, draining"
        target, what = last_arrival, "last arrival"
    else:
        target, what = end, "end"
    if not target:
        return 1.0, f"sim {_fmt_ps(now)}"
    frac = min(1.0, now / target)
    eta = f", ETA {_fmt_s(elapsed_s * (target - now) / now)}" if now > 0 and elapsed_s > 0 and now < target else ""
    return frac, f"sim {_fmt_ps(now)} / {_fmt_ps(target)} ({what}){eta}"


def _fmt_s(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def _rich_progress(label: str, last_arrival: Optional[int] = None) -> tuple:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from .show import console

    prog = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[sim]}"),
        TimeElapsedColumn(),
        console=console(stderr=True),
        transient=False,
    )
    task = prog.add_task(label, total=1.0, sim="")
    t0 = time.perf_counter()

    def update(now: int, end: int) -> None:
        frac, text = bar_state(now, end, last_arrival, time.perf_counter() - t0)
        prog.update(task, completed=frac, sim=text)

    return prog, update


def _fmt_ps(ps: float) -> str:
    for unit, scale in (("s", 1e12), ("ms", 1e9), ("us", 1e6), ("ns", 1e3)):
        if ps >= scale:
            return f"{ps / scale:.3g} {unit}"
    return f"{ps:.0f} ps"


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run(
    scenario: Union[str, Path, Mapping, Scenario],
    seed: Optional[int] = None,
    overrides: Iterable[str] = (),
    out_dir: Union[str, Path, None] = None,
    progress: Union[bool, Progress] = False,
    slices: int = 200,
    overwrite: bool = False,
) -> RunResult:
    """Runs a scenario (a TOML path, a dict, or a Scenario) to the end.

    ``seed`` overrides the scenario's seed; ``overrides`` are ``key.path=value`` strings as for
    ``braid run --set``; with ``out_dir`` the results folder is written there (atomically);
    ``progress`` is True for a progress bar on the terminal or a callback ``f(now_ps, end_ps)``.
    ``out_dir`` is checked and reserved before anything runs; an existing results folder there
    is replaced only with ``overwrite``.
    Raises BraidError / ScenarioError (ScenarioError is a BraidError; both are ValueError) on
    bad input."""
    from .results import ResultsDir

    out = out_dir if isinstance(out_dir, ResultsDir) or out_dir is None else ResultsDir(out_dir, overwrite=overwrite)
    res = None
    try:
        if out is not None:
            # Before the run, not after it: a finished simulation is never lost to a full disk.
            out.check_space(estimate(scenario, overrides)["outputs"])
        res = _run(scenario, seed, overrides, progress, slices)
        if out is not None:
            from .results import write_results

            write_results(res, out)
    except BraidError as e:
        if out is not None:
            out.abort()
        if res is not None:
            # The simulation finished and only writing failed (a full disk): the result stays
            # reachable, e.g. to write it elsewhere with braid.results.write_results.
            e.result = res
        raise
    except BaseException:
        if out is not None:
            out.abort()
        raise
    return res


def _run(scenario, seed, overrides, progress, slices) -> RunResult:
    # The build reports its own progress (a bar for large topologies when progress is True).
    sc, sim, eff_seed = build(scenario, seed, overrides, progress is True)
    end = sim.end_ps()
    step = max(1, -(-end // max(1, slices)))
    prog = None
    cb: Optional[Progress] = None
    if progress is True:
        prog, cb = _rich_progress(sc.name, sim.last_arrival_ps())
    elif callable(progress):
        cb = progress
    t0, c0 = time.perf_counter(), _cpu_s()
    try:
        if prog is not None:
            prog.start()
        # Slices of simulated time; the slice adapts so that each takes roughly 0.1-0.5 s of wall
        # time, which keeps the bar lively on slow runs and the overhead nil on fast ones.
        while True:
            now = sim.now_ps()
            ts = time.perf_counter()
            done = sim.advance(min(end, now + step))
            if cb is not None:
                cb(sim.now_ps(), end)
            if done:
                break
            dt = time.perf_counter() - ts
            if dt > 0.5 and step > 1:
                step = max(1, step // 2)
            elif dt < 0.05:
                step = min(step * 2, max(1, end))
    finally:
        if prog is not None:
            prog.stop()
    wall = time.perf_counter() - t0
    cpu = _cpu_s() - c0
    return collect(sc, sim, eff_seed, wall, cpu)


def collect(sc: Scenario, sim: Any, seed: int, wall: float, cpu: float) -> RunResult:
    raw = sim.results()
    stats = dict(raw["stats"])
    # Nulls come from the core (the registry's nullable columns): nothing to fix here.
    tables = {name: frame(cols) for name, cols in raw["tables"].items()}
    flows = tables.get("flows", pl.DataFrame())
    unfinished = int(flows["finish_ps"].null_count()) if "finish_ps" in flows.columns else 0
    # Of those, the ones whose start lay after the run's end never began (a Poisson arrival
    # window longer than `duration`); the rest were in flight (or stuck) when it stopped.
    not_started = 0
    if unfinished and "start_ps" in flows.columns:
        end = stats.get("sim_time_ps", 0)
        not_started = int(flows.filter(pl.col("finish_ps").is_null() & (pl.col("start_ps") > end)).height)
    from .report import buckets, latency

    headline = dict(raw["headline"])
    # A tenant's latency and the slowdown by flow size, first-class (report/latency.py, buckets.py).
    headline.update(latency.headline_keys(tables))
    headline.update(buckets.headline_keys(tables))
    res = RunResult(
        scenario=sc,
        seed=seed,
        tables=tables,
        pcap=raw.get("pcap"),
        counters=dict(raw["counters"]),
        headline=headline,
        stats=stats,
        wall_s=wall,
        cpu_s=cpu,
        # Finished = every flow and application completed, not merely that time ran out.
        finished=bool(sim.is_finished()) and unfinished == 0,
    )
    res.unfinished = unfinished
    res.not_started = not_started
    res.in_flight = unfinished - not_started
    res.summary = summary_of(res)
    return res


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def read_results(folder: Union[str, Path]) -> RunResult:
    """Reads a results folder (``braid run -o``, ``braid.run(out_dir=...)``) back as the
    ``RunResult`` ``braid.run`` returned: the same tables, totals and figures, ``summary`` the
    folder's summary.json, ``out_dir`` the folder. ``scenario`` is the scenario the run used (its
    data as recorded; ``base_dir`` the folder, as relative input files were already read).
    A missing or damaged file is a BraidError naming it. (``braid.results.read_results`` is the
    lower-level reader: a dict of the summary and the tables.)"""
    from .results import PCAP_FILE
    from .results import read_results as read_folder

    folder = Path(folder)
    raw = read_folder(folder)
    s = raw["summary"]
    sc_doc = s.get("scenario") or {}
    source = sc_doc.get("source")
    sc = Scenario(
        data=sc_doc.get("data") or {},
        base_dir=folder,
        source=Path(source) if source else None,
        overrides=list(sc_doc.get("overrides") or []),
    )
    pcap_path = folder / PCAP_FILE
    res = RunResult(
        scenario=sc,
        seed=s.get("seed"),
        counters=dict(s.get("counters") or {}),
        headline=dict(s.get("headline") or {}),
        stats=dict(s.get("stats") or {}),
        wall_s=float(s.get("wall_s") or 0.0),
        cpu_s=float(s.get("cpu_s") or 0.0),
        finished=bool(s.get("finished")),
        out_dir=folder,
        summary=s,
        pcap=pcap_path.read_bytes() if pcap_path.is_file() else None,
        tables={k: v for k, v in raw.items() if k != "summary"},
        unfinished=int(s.get("unfinished") or 0),
        not_started=int(s.get("unfinished_not_started") or 0),
        in_flight=int(s.get("unfinished_in_flight") or 0),
    )
    return res


def summary_of(res: RunResult) -> dict:
    from . import __version__

    events = res.stats.get("events", 0.0)
    sim_s = res.stats.get("sim_time_ps", 0.0) / 1e12
    return _clean(
        {
            "braid_version": __version__,
            "scenario": {
                "name": res.scenario.name,
                "source": str(res.scenario.source) if res.scenario.source else None,
                "overrides": list(res.scenario.overrides),
                "data": res.scenario.data,
            },
            "seed": res.seed,
            # false when the run reached `duration` with flows or applications unfinished.
            "finished": res.finished,
            "unfinished": res.unfinished,
            # unfinished = not_started (start after the run's end) + in_flight.
            "unfinished_not_started": res.not_started,
            "unfinished_in_flight": res.in_flight,
            # FCT and slowdown figures in the headline cover completed flows only; Jain's index
            # covers every flow that started (unfinished ones with their goodput so far).
            "fct_covers": "completed flows",
            "headline": res.headline,
            "counters": res.counters,
            "stats": res.stats,
            "wall_s": res.wall_s,
            "cpu_s": res.cpu_s,
            "events": events,
            "events_per_s": events / res.wall_s if res.wall_s > 0 else None,
            "sim_s_per_wall_s": sim_s / res.wall_s if res.wall_s > 0 else None,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "host": {"cpus": os.cpu_count()},
            # The extension's build (scripts/build-ext.sh), beside the CPU time it explains.
            "build": getattr(_core, "__build__", "unknown"),
        }
    )
