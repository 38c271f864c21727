"""The progress bar of a batch of tasks (sweep points, reproduce runs): done / total, failures,
elapsed time and an ETA, on stderr when it is a terminal. One look for both commands."""

from __future__ import annotations

from typing import Any, Optional


class TaskBar:
    def __init__(self, label: str, console: Any, show: bool):
        self.label, self.console, self.show = label, console, show
        self.progress: Optional[Any] = None
        self.task: Any = None

    def start(self, total: int) -> None:
        if not self.show or not total:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.progress = Progress(
            TextColumn(f"[bold]{self.label}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[failed]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
        )
        self.task = self.progress.add_task(self.label, total=total, failed="")
        self.progress.start()

    def update(self, done: int, failed: int = 0) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=done, failed=f"[red]{failed} failed[/red]" if failed else "")

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
