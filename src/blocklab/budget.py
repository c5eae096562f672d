"""A run's budget (`--budget`, `[measure] budget`): how much a run that stops by
the rule may spend before it stops anyway.

    parse_budget("90s") -> Budget(seconds=90)      a duration: 90s, 5m, 1.5h
    parse_budget("200cells") -> Budget(cells=200)  a cell count: 200cells or 200

A duration counts the wall time of the measuring: each row records the time
since the row before it (its cell: applying the setting, emptying the caches,
building the data set the first time, the workload; the device twin's replay
beside it; and the summary and report written after the row before), read
back from the result rows, so a resumed run counts what it measured before. A cell count counts the distinct
cells measured (a cell measured again after a failed claim is one cell).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from .results import ResultRow

ACCEPTED = "a duration like 90s, 5m or 1h, or a cell count like 200cells or 200"
_UNITS = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|cells?|)\s*$", re.IGNORECASE)
OFF = "off"  # no budget: exactly the `repeats` blocks (the fixed plan); any case, "OFF" too
ENV_VAR = "BLOCKLAB_BUDGET"  # the default of --budget (the test suite sets off: fixed plans)
CELL_SECONDS_NOTE = "cell_s"  # a row's notes: the wall time since the row before it (runner.py)


class BudgetError(ValueError):
    """A budget that is neither a duration nor a cell count."""


@dataclass(frozen=True)
class Budget:
    """Exactly one of `seconds` and `cells`."""

    seconds: float | None = None
    cells: int | None = None

    def text(self) -> str:
        if self.cells is not None:
            return f"{self.cells} cells"
        assert self.seconds is not None
        s = self.seconds
        if s >= 3600 and s % 3600 == 0:
            return f"{s / 3600:g} h"
        if s >= 60 and s % 60 == 0:
            return f"{s / 60:g} min"
        return f"{s:g} s"

    def spent(self, rows: Iterable[ResultRow]) -> float:
        """What the rows have spent of it: cells, or seconds."""
        rows = list(rows)
        if self.cells is not None:
            return float(len({r.cell_id for r in rows}))
        return sum(cell_seconds(r) for r in rows)

    def used_up(self, rows: Iterable[ResultRow]) -> bool:
        assert self.cells is not None or self.seconds is not None
        limit = self.cells if self.cells is not None else self.seconds
        return self.spent(rows) >= float(limit or 0)

    def spent_text(self, rows: Iterable[ResultRow]) -> str:
        spent = self.spent(rows)
        return f"{spent:.0f} of {self.text()}" if self.cells is not None else f"{spent:.0f} s of {self.text()}"

    def max_blocks(self, settings: int) -> int | None:
        """The most blocks a cell count allows (None for a duration: any number may fit)."""
        if self.cells is None or settings < 1:
            return None
        return max(1, math.ceil(self.cells / settings))


def is_off(text: object) -> bool:
    """`--budget off` (any case): no budget, the fixed plan of `repeats` blocks."""
    return isinstance(text, str) and text.strip().lower() == OFF


def parse_budget(text: object, where: str = "--budget") -> Budget:
    """'90s', '5m', '1h', '200cells', '200' -> a Budget; BudgetError naming `where` otherwise."""
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        raise BudgetError(f"{where} {text!r} is not accepted; accepted: {ACCEPTED}")
    match = _PATTERN.match(str(text))
    if not match:
        raise BudgetError(f"{where} {str(text)!r} is not accepted; accepted: {ACCEPTED}")
    number, unit = float(match.group(1)), match.group(2).lower()
    if unit in ("", "cell", "cells"):
        if number != int(number) or number < 1:
            raise BudgetError(f"{where} {str(text)!r}: a cell count must be a whole number of at least 1; accepted: {ACCEPTED}")
        return Budget(cells=int(number))
    seconds = number * _UNITS[unit]
    if seconds < 1:
        raise BudgetError(f"{where} {str(text)!r}: a duration must be at least 1 s; accepted: {ACCEPTED}")
    return Budget(seconds=seconds)


def cell_seconds(row: ResultRow) -> float:
    """A row's wall time: recorded since budgets exist; for an older row, its
    workload's time and the setting's apply time (the rest was not recorded)."""
    if CELL_SECONDS_NOTE in row.notes:
        return float(row.notes[CELL_SECONDS_NOTE])
    return float(row.metrics.get("elapsed_s", 0.0) or 0.0) + float(row.notes.get("apply_s", 0.0) or 0.0)


__all__ = ["ENV_VAR", "ACCEPTED", "OFF", "is_off", "Budget", "BudgetError", "cell_seconds", "parse_budget"]
