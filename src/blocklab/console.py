"""What the person at the terminal sees: while a run goes, one line per cell in
the seed's spirit and a progress bar with ETA over the whole plan; after it,
the tables (per setting, the checksum overhead, the engine against its device
twin, a comparison of two runs or hosts). analysis/ computes these figures;
this module only lays them out.

When stdout is not a terminal (logs, CI) there is no bar and no colour, only
plain lines."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable
from typing import Any

from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from .analysis.compare import RunComparison
from .analysis.efficiency import SettingEfficiency
from .analysis.overhead import (
    BLOCK_KNOB,
    Normalised,
    context_label,
    is_checksum_sweep,
    normalised,
    overheads,
    reference_label,
    setting_text,
    settings_key,
)
from .plan import Cell
from .results import ResultRow
from .units import human


def make_console() -> Console:
    tty = sys.stdout.isatty()
    # logs and CI get plain text, wide enough that the result tables do not wrap
    return Console(no_color=not tty, highlight=False, force_terminal=tty or None, width=None if tty else 132, soft_wrap=not tty)


class ConsoleReporter:
    def __init__(self, console: Console, knob_describer: Callable[[Cell], str] | None = None):
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


def settings_table(summary: dict[str, Any], unit: str, describe: Callable[[str], str]) -> Table:
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


# ---------------------------------------------------------------------- the checksum overhead
def _fmt_seconds(x: float) -> str:
    if not math.isfinite(x):
        return "-"
    return f"{x:.3f}" if x < 100 else f"{x:,.1f}"


def overhead_tables(rows: Iterable[ResultRow], metric: str = "elapsed_s", *, seed: int = 0) -> list[Table]:
    """The checksum overhead (analysis/overhead.py): the seed-004 overhead per level, then the
    seed-001 normalised elapsed (block sizes as columns). [] when the rows are not a checksum sweep."""
    rows = list(rows)
    if not is_checksum_sweep(rows):
        return []
    tables = []
    ref = reference_label(rows)
    items = overheads(rows, metric, seed=seed)
    if items:
        t = Table(title=f"Checksum overhead: median {metric} against {ref} (95% bootstrap interval)")
        has_context = any(o.context for o in items)
        if has_context:
            t.add_column("setting")
        t.add_column("level")
        t.add_column("n", justify="right")
        t.add_column(f"median {metric}", justify="right")
        t.add_column(f"vs {ref}")
        t.add_column("vs the level above")
        t.add_column("failed", justify="right")
        for o in items:
            change = o.text
            if o.measurable:
                change = f"[bold]{change}[/bold]"
            failed = f"{o.failed}: {o.error[:60]}" if o.failed else ""
            cells = [o.level_label, str(o.n), _fmt_seconds(o.median), change, o.step_text, failed]
            t.add_row(*([o.context_label] if has_context else []), *cells)
        tables.append(t)
    norm = normalised(rows, metric, seed=seed)
    if norm:
        blocks = sorted({n.block_size for n in norm}, key=lambda b: (b is None, b if b is not None else 0))
        t = Table(title=f"{metric} normalised to the {ref} run of the same block size (95% interval)")
        has_context = any(n.context for n in norm)
        if has_context:
            t.add_column("setting")
        t.add_column("level")
        for b in blocks:
            t.add_column("normalised" if b is None else f"block {setting_text(BLOCK_KNOB, b)}", justify="right")
        grouped: dict[tuple, dict[Any, Normalised]] = {}
        for n in norm:
            grouped.setdefault((settings_key(n.context), settings_key(n.level)), {})[n.block_size] = n
        for (_, _), by_block in grouped.items():
            first = next(iter(by_block.values()))
            cells = []
            for b in blocks:
                found = by_block.get(b)
                if found is None or not math.isfinite(found.value):
                    cells.append("-")
                elif found.n < 2 or (found.ci_low == found.ci_high == found.value):
                    cells.append(f"{found.value:.3f}")
                else:
                    cells.append(f"{found.value:.3f} [{found.ci_low:.3f}, {found.ci_high:.3f}]")
            t.add_row(*([context_label(first.context)] if has_context else []), first.level_label, *cells)
        tables.append(t)
    return tables


# ---------------------------------------------------------------------- the device twin
def efficiency_table(effs: list[SettingEfficiency], describe: Callable[[str], str] = str) -> Table:
    """The engine against its device twin (analysis/efficiency.py): per setting the I/O
    replayed, engine and device rates, efficiency, bottleneck."""
    table = Table(box=box.SIMPLE_HEAD, title="The engine against its device twin (fio replaying the same I/O)",
                  title_justify="left", pad_edge=False)
    # narrow headings: the caption says what they are
    for name in ("setting / I/O replayed by fio", "engine", "disk", "of disk", "busy", "CPU", "bottleneck"):
        table.add_column(name, justify="left" if name[0] in "sb" else "right", no_wrap=name[0] != "s", overflow="fold")
    table.caption = ("of disk: the engine's rate over fio's for the same I/O, median [95% CI]; busy: the disk's utilisation; "
                     "CPU: cores the engine's processes used of those they could use")
    table.caption_justify = "left"
    for e in effs:
        cpu, busy = _cores(e.server_cores, e.cores_available), _pct(e.util_pct)
        what = e.pattern.compact() if e.has and e.pattern is not None else e.why_none
        setting = f"{_short_label(describe(e.label))}\n  {what}"
        if e.has:
            table.add_row(setting, _rate(e.engine_rate, e.unit), _rate(e.device_rate, e.unit), e.percent(), busy, cpu, e.bottleneck or "")
        else:
            engine = _rate(e.engine_rate, e.unit) if math.isfinite(e.engine_rate) else "–"
            table.add_row(setting, engine, "–", "–", busy, cpu, e.bottleneck or "")
    return table


def _short_label(text: str) -> str:
    """'workload.sessions=4, workload.update_pct=0' -> 'sessions=4, update_pct=0': a narrow column."""
    return text.replace("workload.", "")


def _rate(x: float, unit: str) -> str:
    return f"{x:,.0f} {unit}" if math.isfinite(x) else "–"


def _pct(x: float) -> str:
    return f"{x:.0f}%" if math.isfinite(x) else "–"


def _cores(used: float, available: float) -> str:
    if not math.isfinite(used):
        return "–"
    return f"{used:.2f}/{available:.0f}" if math.isfinite(available) else f"{used:.2f}"
