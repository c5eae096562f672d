"""Result rows -> summary.json: per-setting figures, the best setting, the verdict.

The statistics themselves live in stats.py; this module groups rows by setting
and shapes what the console, the report and `compare` read."""

from __future__ import annotations

import statistics
from typing import Any, Callable, Iterable

from ..results import ResultRow


def group_samples(rows: Iterable[ResultRow], metric: str, setting_labels: list[str]) -> dict[str, list[float]]:
    """metric values per setting label, in the plan's setting order (ok rows only)."""
    groups: dict[str, list[float]] = {label: [] for label in setting_labels}
    for row in rows:
        if row.ok and metric in row.metrics:
            groups.setdefault(label_of(row.settings), []).append(row.metrics[metric])
    return groups


def label_of(settings: dict[str, Any]) -> str:
    from ..plan import _fmt

    return ", ".join(f"{k}={_fmt(v)}" for k, v in settings.items()) or "(defaults)"


def summarise(
    rows: list[ResultRow],
    *,
    metric: str,
    goal: str,
    setting_labels: list[str],
    settings_by_label: dict[str, dict[str, Any]],
    baseline: str | None = None,
    practical: float = 0.0,
    seed: int = 0,
    describe_setting: Callable[[str], str] = lambda s: s,
    knob_label: str = "setting",
    unit: str = "",
) -> dict[str, Any]:
    """The analysis of a (possibly partial) run, as a JSON-able dict."""
    from .stats import analyse
    from .verdict import verdict_text

    groups = group_samples(rows, metric, setting_labels)
    measured = {k: v for k, v in groups.items() if v}
    failed = [r.cell_id for r in rows if not r.ok]
    summary: dict[str, Any] = {
        "metric": metric,
        "goal": goal,
        "cells_ok": sum(1 for r in rows if r.ok),
        "cells_failed": len(failed),
        "failed_cells": failed,
        "settings": {},
        "medians": {},
        "best": None,
        "verdict": "no measurement yet",
    }
    if not measured:
        return summary
    base = baseline if baseline in measured else next(iter(measured))
    analysis = analyse(measured, goal=goal, baseline=base, practical=practical, seed=seed)
    summary["analysis"] = analysis.to_dict()
    for label, values in groups.items():
        stats = analysis.settings.get(label)
        entry: dict[str, Any] = {"settings": settings_by_label.get(label, {}), "n": len(values)}
        if stats is not None:
            entry.update(stats.to_dict())
            entry["mean"] = statistics.fmean(values)
            summary["medians"][label] = stats.median
        summary["settings"][label] = entry
    summary["best"] = settings_by_label.get(analysis.best, {})
    summary["best_label"] = analysis.best
    summary["baseline"] = base
    summary["indistinguishable"] = list(analysis.indistinguishable)
    summary["verdict"] = verdict_text(
        analysis, knob_label=knob_label, describe=describe_setting, metric=metric, unit=unit
    )
    return summary
