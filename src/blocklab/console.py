"""What the person at the terminal sees while a run goes: one line per cell in
the seed's spirit, a progress bar with ETA over the whole plan. The tables
printed after it are in report/console_tables.py.

When stdout is not a terminal (logs, CI) there is no bar and no colour, only
plain lines."""

from __future__ import annotations

import sys
from collections.abc import Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from .plan import Cell
from .results import ResultRow


def make_console() -> Console:
    tty = sys.stdout.isatty()
    # logs and CI get plain text, wide enough that the result tables do not wrap
    return Console(no_color=not tty, highlight=False, force_terminal=tty or None, width=None if tty else 132, soft_wrap=not tty)


class ConsoleReporter:
    def __init__(self, console: Console, knob_describer: Callable[[Cell], str] | None = None):
        self.console = console
        self.progress: Progress | None = None
        self.task: TaskID | None = None
        self.describe = knob_describer or (lambda cell: cell.setting.label)

    def phase(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False)  # paths and settings may hold [brackets]

    def plan_started(self, total: int, todo: int, estimate_s: float) -> None:
        skipped = total - todo
        extra = f" ({skipped} already done)" if skipped else ""
        self.console.print(f"running {todo} of {total} cells{extra}, roughly {estimate_s:.0f} s of measurement", markup=False)
        if self.console.is_terminal:
            self.progress = Progress(
                TextColumn("[bold]cells"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("elapsed"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=self.console,
                transient=True,
            )
            self.progress.start()
            self.task = self.progress.add_task("cells", total=todo)

    def cell_done(self, cell: Cell, row: ResultRow, line: str) -> None:
        text = f"[block {cell.block + 1}] {self.describe(cell)} ... {line}"
        self.console.print(text, markup=False, style=None if row.ok else "red")
        if self.progress is not None and self.task is not None:
            self.progress.advance(self.task)

    def finished(self, summary: dict[str, object]) -> None:
        self.close()

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
