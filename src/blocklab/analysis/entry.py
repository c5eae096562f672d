"""A summary's setting entry read back (summary.json's "settings"): the figure the
best is picked on and where the setting stands against the best, as the verdict,
the console's table, the report and the load view all say them."""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..jsonvalue import number_or_none
from .settle import MAX_ESTIMATE


def figure_of(entry: Mapping[str, object]) -> tuple[float | None, float | None, float | None]:
    """(value, low, high) of a summary's setting entry, the figure the best is picked
    on: its block-adjusted level, else (an unpaired analysis, older summaries) its median."""
    if _finite(entry.get("level")):
        return number_or_none(entry["level"]), number_or_none(entry.get("level_ci_low")), number_or_none(entry.get("level_ci_high"))
    return number_or_none(entry.get("median")), number_or_none(entry.get("ci_low")), number_or_none(entry.get("ci_high"))


def standing_note(entry: Mapping[str, object], best: bool) -> str:
    """'best', 'as good', 'slower', 'open: ~6 blocks' (summary.json's standing)."""
    if best:
        return "best"
    standing = entry.get("standing")
    if standing == "undecided":
        needed = entry.get("blocks_needed")
        if not needed or not isinstance(needed, (int, float)):
            return "open"
        return f"open: >{MAX_ESTIMATE} blocks" if needed > MAX_ESTIMATE else f"open: ~{needed} blocks"
    return {"as_good": "as good", "slower": "slower"}.get(str(standing), "")


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
