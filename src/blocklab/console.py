"""What the person at the terminal sees while a run goes: one line per cell in
the seed's spirit, a progress bar with ETA over the whole plan, the final table.

When stdout is not a terminal (logs, CI) there is no bar and no colour, only
plain lines."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from .plan import Cell
from .results import ResultRow
from .units import human

if TYPE_CHECKING:  # the comparison's statistics (scipy) load when a comparison is made, not with every command
    from .analysis.compare import RunComparison


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
    """Median, interval, min and max per setting, the best marked."""
    table = Table(title=f"{summary['metric']} per setting ({summary['goal']} is best)")
    for col in ("setting", "n", "median", "95% CI", "min", "max", "vs best", "note"):
        table.add_column(col, justify="left" if col in ("setting", "note") else "right")
    best = summary.get("best_label")
    close = set(summary.get("indistinguishable", []))
    for label, s in summary["settings"].items():
        if "median" not in s:
            table.add_row(describe(label), "0", "-", "-", "-", "-", "-", "no measurement")
            continue
        note = "best" if label == best else ("indistinguishable" if label in close else "")
        if s.get("outliers"):
            note = (note + ", " if note else "") + f"{len(s['outliers'])} outlier(s)"
        ratio = s.get("ratio_to_best")
        table.add_row(
            describe(label),
            str(s["n"]),
            human(s["median"]),
            f"[{human(s['ci_low'])}, {human(s['ci_high'])}]",
            human(s["minimum"]),
            human(s["maximum"]),
            f"{ratio:.2f}x" if ratio is not None else "",
            note,
        )
    return table


def print_comparison(console: Console, result: RunComparison) -> None:
    """`blocklab compare` and `blocklab fleet compare`: B against A, setting by setting."""
    console.print(f"A: {result.run_a.path}  ({result.run_a.describe()})", markup=False, highlight=False)
    console.print(f"B: {result.run_b.path}  ({result.run_b.describe()})", markup=False, highlight=False)
    if result.differences:
        console.print("compared with --force although the runs differ in:", style="yellow", markup=False)
        for difference in result.differences:
            console.print(f"  {difference.text()}", style="yellow", markup=False, highlight=False)
    for difference in result.other_differences:
        console.print(f"also different (not checked): {difference.text()}", markup=False, highlight=False)
    unit = f" ({result.unit})" if result.unit else ""
    better = "higher" if result.goal == "max" else "lower"
    knobs = {tuple(s.settings) for s in result.settings}
    one_knob = next(iter(knobs))[0] if len(knobs) == 1 and len(next(iter(knobs))) == 1 else None
    table = Table(title=f"{result.metric}{unit}: B against A per setting ({better} is better)", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    table.add_column(one_knob or "setting")
    for column in ("n A/B", "median A", "median B", "B/A", "95% CI", "p"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("B vs A", no_wrap=True)
    words = {"better": "better", "worse": "worse", "same": "no diff.", "unclear": "unclear"}
    styles = {"better": "green", "worse": "red", "same": "", "unclear": "yellow"}
    for s in result.settings:
        c = s.comparison
        table.add_row(
            s.display().split("=", 1)[1] if one_knob else s.display(), f"{c.n_a}/{c.n_b}",
            human(c.median_a), human(c.median_b),
            f"{c.ratio:.3f}" if c.ratio == c.ratio else "-",
            f"{c.ci_low:.3f}-{c.ci_high:.3f}" if c.ci_low == c.ci_low else "-",
            f"{c.p_value:.3g}", words[s.outcome], style=styles[s.outcome] or None,
        )
    console.print(table)
    for s in result.settings:
        note = "  (the engine reported different values for this setting in A and B)" if s.applied_differs else ""
        console.print(f"{s.display()}: {s.verdict}{note}", markup=False, highlight=False)
    if result.only_in_a:
        console.print(f"only in A (not compared): {'; '.join(result.only_in_a)}", markup=False, highlight=False)
    if result.only_in_b:
        console.print(f"only in B (not compared): {'; '.join(result.only_in_b)}", markup=False, highlight=False)
    console.print(result.summary_line(), markup=False, highlight=False)
