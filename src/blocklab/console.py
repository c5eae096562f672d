"""What the person at the terminal sees while a run goes: one line per cell in
the seed's spirit, a progress bar with ETA over the whole plan, the final table.

When stdout is not a terminal (logs, CI) there is no bar and no colour, only
plain lines."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from .plan import Cell
from .results import ResultRow


def make_console() -> Console:
    tty = sys.stdout.isatty()
    # logs and CI get plain text, wide enough that the result tables do not wrap
    return Console(no_color=not tty, highlight=False, force_terminal=tty or None, width=None if tty else 132, soft_wrap=not tty)


class ConsoleReporter:
    def __init__(self, console: Console, knob_describer: Any = None):
        self.console = console
        self.progress: Progress | None = None
        self.task: Any = None
        self.describe = knob_describer or (lambda cell: cell.setting.label)

    def phase(self, text: str) -> None:
        self.console.print(text)

    def plan_started(self, total: int, todo: int, estimate_s: float) -> None:
        skipped = total - todo
        extra = f" ({skipped} already done)" if skipped else ""
        self.console.print(f"running {todo} of {total} cells{extra}, roughly {estimate_s:.0f} s of measurement")
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
        if self.progress is not None:
            self.progress.advance(self.task)

    def finished(self, summary: dict[str, Any]) -> None:
        self.close()

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def settings_table(summary: dict[str, Any], unit: str, describe: Any) -> Table:
    """Per setting the figure the best is picked on (paired: the block-adjusted
    level) with its interval and the ratio to the best with its interval; the
    median of the runs as measured is a detail column."""
    paired = (summary.get("analysis") or {}).get("method") == "paired"
    figure = "block-adjusted" if paired else "median"
    table = Table(title=f"{summary['metric']} per setting ({summary['goal']} is best)")
    for col in ("setting", "n", figure, "interval", "vs best [interval]", "median", "note"):
        table.add_column(col, justify="left" if col in ("setting", "note") else "right")
    best = summary.get("best_label")
    for label, s in summary["settings"].items():
        if "median" not in s:
            table.add_row(describe(label), "0", "-", "-", "-", "-", "no measurement")
            continue
        value, lo, hi = figure_of(s)
        note = standing_note(s, label == best)
        if s.get("outliers"):
            note = (note + ", " if note else "") + f"{len(s['outliers'])} outlier(s)"
        table.add_row(
            describe(label),
            str(s["n"]),
            human(value),
            f"[{human(lo)}, {human(hi)}]" if _finite(lo) and _finite(hi) else "-",
            ratio_text(s) if best else "-",
            human(s["median"]),
            note,
        )
    return table


def explain_text(summary: dict[str, Any]) -> str:
    """`--explain`: how the verdict's figures were judged (summary.json's explain), a paragraph a line."""
    lines = [str(line) for line in summary.get("explain") or []]
    return "How to read this:\n" + "\n".join(f"- {line}" for line in lines) if lines else "How to read this: nothing to explain yet (no measurement)."


def figure_of(entry: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(value, low, high) of a summary's setting entry: its level, else (older summaries) its median."""
    if _finite(entry.get("level")):
        return entry["level"], entry.get("level_ci_low"), entry.get("level_ci_high")
    return entry.get("median"), entry.get("ci_low"), entry.get("ci_high")


def ratio_text(entry: dict[str, Any]) -> str:
    """'0.93x [0.85, 1.02]'; the point alone without an interval."""
    r, lo, hi = entry.get("ratio_to_best"), entry.get("ratio_to_best_ci_low"), entry.get("ratio_to_best_ci_high")
    if not _finite(r):
        return "-"
    if _finite(lo) and _finite(hi) and (lo != r or hi != r):
        return f"{r:.2f}x [{lo:.2f}, {hi:.2f}]"
    return f"{r:.2f}x"


def standing_note(entry: dict[str, Any], best: bool) -> str:
    """'best', 'as good', 'slower', 'undecided: ~6 blocks' (summary.json's standing)."""
    if best:
        return "best"
    standing = entry.get("standing")
    if standing == "undecided":
        needed = entry.get("blocks_needed")
        if not needed:
            return "open"
        return "open: >100 blocks" if needed > 100 else f"open: ~{needed} blocks"  # analysis/verdict.py MAX_BLOCKS_SAID
    return {"as_good": "as good", "slower": "slower"}.get(str(standing), "")


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x and abs(x) != float("inf")


def human(x: float) -> str:
    a = abs(x)
    if a >= 1e9:
        return f"{x / 1e9:.2f} G"
    if a >= 1e6:
        return f"{x / 1e6:.2f} M"
    if a >= 1e4:
        return f"{x / 1e3:.1f} k"
    if a >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"
