"""A traced function per setting (measure.trace_function, probes/trace_function.py):
the seed's statistics of qsort at 2 kB, 8 kB and 32 kB, for any function and knob.
Computes, never draws: per setting, its cells' calls and elapsed (mean per cell),
time per call, calls per unit of the workload's work, and the histograms of time
per call (and of the traced argument) added up over the setting's cells."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import NotRequired, TypedDict

from ..probes.trace_function import FunctionTrace
from ..results import ResultRow


class TraceEntry(TypedDict):
    """summary.json's trace entry of one setting: figures per cell (means over its cells)."""

    cells: int
    calls: float
    total_ns: float
    ns_per_call: float
    calls_per_unit: float | None
    hist_ns: dict[str, int]
    arg: NotRequired[int]
    arg_sum: NotRequired[float]
    arg_per_call: NotRequired[float]
    hist_arg: NotRequired[dict[str, int]]


def per_setting(rows: Sequence[ResultRow], label: Callable[[Mapping[str, object]], str], work_metric: str) -> dict[str, TraceEntry]:
    """label -> {cells, calls, total_ns (means per cell), ns_per_call, calls_per_unit, hist_ns, [arg...]}."""
    grouped: dict[str, list[tuple[ResultRow, FunctionTrace]]] = {}
    for r in rows:
        if r.ok and isinstance(r.notes.get("trace"), dict):
            grouped.setdefault(label(r.settings), []).append((r, FunctionTrace.from_dict(r.notes["trace"])))
    out: dict[str, TraceEntry] = {}
    for key, cells in grouped.items():
        merged = FunctionTrace(cells[0][1].function, cells[0][1].arg)
        for _, t in cells:
            merged.merge(t)
        n = len(cells)
        work = [r.metrics.get(work_metric, 0.0) for r, _ in cells]
        entry: TraceEntry = {
            "cells": n, "calls": merged.calls / n, "total_ns": merged.total_ns / n,
            "ns_per_call": merged.total_ns / merged.calls if merged.calls else 0.0,
            "calls_per_unit": statistics.fmean(t.calls / w for (_, t), w in zip(cells, work, strict=True) if w > 0) if any(work) else None,
            "hist_ns": {str(k): v for k, v in sorted(merged.hist_ns.items())},
        }
        if merged.arg is not None:
            entry["arg"] = merged.arg
            entry["arg_sum"] = merged.arg_sum / n
            entry["arg_per_call"] = merged.arg_sum / merged.calls if merged.calls else 0.0
            entry["hist_arg"] = {str(k): v for k, v in sorted(merged.hist_arg.items())}
        out[key] = entry
    return out


def add_to_summary(summary: dict[str, object], rows: Sequence[ResultRow], label: Callable[[Mapping[str, object]], str],
                   function: str, arg: int | None, work: tuple[str, str]) -> None:
    settings = per_setting(rows, label, work[0])
    if settings:
        summary["trace"] = {"function": function, "arg": arg, "unit": work[1], "settings": settings}
