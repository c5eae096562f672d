"""The report's 'when the run stopped' section (issue 26): the budgeted stopping
rule, what the run spent of its budget, and, when the budget ended before the
verdict settled, each undecided pair with the blocks estimated to settle it
(summary.json's "settle", written by run_summary.settle_section)."""

from __future__ import annotations

from ..analysis.settle import undecided_lines
from .data import RunData


def settle_context(data: RunData) -> dict[str, object] | None:
    """None for a run without a budget (its plan was fixed)."""
    settle = data.summary.get("settle")
    if not isinstance(settle, dict):
        return None
    pairs = list(settle.get("undecided") or [])
    return {
        "status": str(settle.get("status") or ""),
        "rule": str(settle.get("rule") or ""),
        "spent": str(settle.get("spent") or ""),
        "blocks": settle.get("blocks"),
        "estimate": str(settle.get("estimate") or ""),
        "pairs": [line.strip() for line in undecided_lines(pairs, data.describe_label)],
    }
