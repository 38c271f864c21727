"""Progress of a run's build (topology, links, nodes, routes, traffic, tenants), as the core
reports it: ``(stage, done, total)`` at the start and end of each stage and every 1/32 of it.

The front shows it as a rich bar on the terminal, for large topologies only (at least
``LARGE_NODES`` nodes by the scenario's estimate): a small one builds in well under a second and
stays silent. ``braid run`` and ``braid validate`` show it unless ``--no-progress``.
"""

from __future__ import annotations

from typing import Callable

from .scenario import Scenario

__all__ = ["LARGE_NODES", "STAGES", "is_large", "reporter"]

#: Topologies of at least this many nodes (hosts and switches) show the build's progress.
LARGE_NODES = 8_000

#: The build's stages, in the order the core reports them.
STAGES = ("topology", "links", "nodes", "routes", "traffic", "tenants")

#: The core's callback: (stage, done, total).
BuildProgress = Callable[[str, int, int], None]


def is_large(sc: Scenario) -> bool:
    """Whether the scenario's topology has at least ``LARGE_NODES`` nodes (by its estimate)."""
    from . import _core

    try:
        e = _core.capacity(sc.to_json(), str(sc.base_dir), False)
    except _core.ScenarioError:
        return False  # the build reports it
    return e["hosts"] + e["switches"] >= LARGE_NODES


class _Bar:
    """A rich bar over the build's stages; the overall fraction weighs each stage equally."""

    def __init__(self, label: str) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        from .show import console

        self.prog = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[stage]}"),
            TimeElapsedColumn(),
            console=console(stderr=True),
            transient=True,
        )
        self.task = self.prog.add_task(f"building {label}", total=1.0, stage="")
        self.started = False

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.started:
            self.prog.start()
            self.started = True
        i = STAGES.index(stage) if stage in STAGES else len(STAGES) - 1
        frac = (i + (done / total if total else 1.0)) / len(STAGES)
        self.prog.update(self.task, completed=frac, stage=f"{stage} {done:,}/{total:,}")

    def close(self) -> None:
        if self.started:
            self.prog.stop()


def reporter(sc: Scenario, progress) -> tuple:
    """(callback for the core or None, close()). ``progress``: False/None = silent; True = a bar
    on the terminal when the topology is large; a callable gets every report, whatever the
    size."""
    if callable(progress):
        return progress, lambda: None
    if progress is True and is_large(sc):
        bar = _Bar(sc.name)
        return bar, bar.close
    return None, lambda: None
