"""Result rows -> summary.json: per-setting figures, the best setting, the verdict.

The statistics themselves live in stats.py (per setting), paired.py (within
blocks) and series.py (a single run's own series); this module picks them for
a run's rows and shapes what the console, the report and `compare` read."""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

from ..results import ResultRow
from ..spec import Scalar
from ..units import label_of
from .stats import Analysis

# Written into summary.json: a summary without it, or with an older number, was
# computed by older statistics (`blocklab analyse RUN_DIR` recomputes it).
STATISTICS_VERSION = 3


def group_samples(rows: Iterable[ResultRow], metric: str, setting_labels: list[str]) -> dict[str, list[float]]:
    """metric values per setting label, in the plan's setting order (ok rows only)."""
    groups: dict[str, list[float]] = {label: [] for label in setting_labels}
    for row in rows:
        if row.ok and metric in row.metrics:
            groups.setdefault(label_of(row.settings), []).append(row.metrics[metric])
    return groups


def analyse_rows(
    rows: Iterable[ResultRow],
    metric: str,
    setting_labels: list[str],
    *,
    goal: str,
    baseline: str | None = None,
    practical: float = 0.0,
    looks: int = 1,
    seed: int = 0,
) -> Analysis | None:
    """The analysis of a run's ok rows: within blocks (paired.py) when every
    value is positive, else each setting on its own (stats.analyse; the block
    model works on logarithms). None when nothing is measured yet."""
    from .paired import BlockCell, analyse_blocks
    from .stats import analyse

    cells = [
        BlockCell(r.block, label_of(r.settings), float(r.metrics[metric]))
        for r in rows
        if r.ok and metric in r.metrics and math.isfinite(r.metrics[metric])
    ]
    if not cells:
        return None
    order = list(dict.fromkeys([*setting_labels, *(c.key for c in cells)]))
    measured = {c.key for c in cells}
    base = baseline if baseline in measured else next(k for k in order if k in measured)
    if all(c.value > 0 for c in cells):
        return analyse_blocks(cells, order=order, goal=goal, baseline=base, practical=practical, looks=looks, seed=seed, metric=metric)
    groups: dict[Hashable, list[float]] = {k: [c.value for c in cells if c.key == k] for k in order if k in measured}
    return analyse(groups, goal=goal, baseline=base, practical=practical, seed=seed, metric=metric)


def _pair_spreads(analysis: Analysis, rows: list[ResultRow], metric: str) -> dict[Hashable, tuple[float, int]]:
    """Each setting's per-block log-ratio spread against the best and the blocks holding
    both (paired runs; a budget may end a run inside a block): what the blocks-to-settle
    estimate rests on, the same for the verdict and the budget's note."""
    from .settle import pair_spread

    if analysis.method != "paired" or analysis.best is None:
        return {}
    best = str(analysis.best)
    return {key: pair_spread(rows, metric, str(key), best)
            for key, s in analysis.settings.items() if s.n and key != analysis.best}


def summarise(
    rows: list[ResultRow],
    *,
    metric: str,
    goal: str,
    setting_labels: list[str],
    settings_by_label: Mapping[str, Mapping[str, Scalar]],
    baseline: str | None = None,
    practical: float = 0.0,
    seed: int = 0,
    describe_setting: Callable[[str], str] = lambda s: s,
    knob_label: str = "setting",
    unit: str = "",
    looks: int = 1,
    cells_planned: int | None = None,
    load_axes: list[str] | tuple[str, ...] = (),
) -> dict[str, Any]:
    """The analysis of a (possibly partial) run, as a JSON-able dict. `looks`:
    how many times a sequential run may look at its data (search.sequential_looks).
    `cells_planned`: the plan's cells; a run that has fewer names no best until
    every setting has enough blocks (partial_status), and says it is partial.
    `load_axes`: knobs that are the workload's load (analysis/load.py): the real
    knobs are ranked within each load level, never the load itself."""
    from .verdict import compose, explain_lines, standings, verdict_options

    groups = group_samples(rows, metric, setting_labels)
    failed = [r.cell_id for r in rows if not r.ok]
    summary: dict[str, Any] = {
        "metric": metric,
        "goal": goal,
        "statistics_version": STATISTICS_VERSION,
        "cells_ok": sum(1 for r in rows if r.ok),
        "cells_failed": len(failed),
        "failed_cells": failed,
        "settings": {},
        "medians": {},
        "best": None,
        "verdict": "no measurement yet",
    }
    analysis = analyse_rows(rows, metric, setting_labels, goal=goal, baseline=baseline, practical=practical, looks=looks, seed=seed)
    if analysis is None:
        return summary
    analysis, series_intervals = _with_series_intervals(analysis, rows, metric)
    summary["analysis"] = analysis.to_dict()
    for label, values in groups.items():
        stats = analysis.settings.get(label)
        entry: dict[str, Any] = {"settings": settings_by_label.get(label, {}), "n": len(values)}
        if stats is not None and stats.n > 0:
            entry.update(stats.to_dict())
            entry["mean"] = statistics.fmean(values)
            if label in series_intervals:
                entry["series_interval"] = series_intervals[label]
            summary["medians"][label] = stats.median
        summary["settings"][label] = entry
    best = str(analysis.best)
    summary["best"] = settings_by_label.get(best, {})
    summary["best_label"] = best
    summary["baseline"] = analysis.baseline
    summary["indistinguishable"] = list(analysis.indistinguishable)
    spreads = _pair_spreads(analysis, rows, metric)
    for st in standings(analysis, spreads):  # slower / as good / undecided, what the table's note and the plot's rings say
        entry = summary["settings"].get(str(st.key))
        if entry is not None:
            entry["standing"] = st.kind
            entry["blocks_needed"] = st.blocks_needed
    summary["as_good"] = [label for label, e in summary["settings"].items() if e.get("standing") == "as_good"]
    summary["undecided"] = [label for label, e in summary["settings"].items() if e.get("standing") == "undecided"]
    describe = lambda k: describe_setting(str(k))  # noqa: E731
    options = verdict_options(analysis, knob_label=knob_label, describe=describe, unit=unit, spreads=spreads)
    summary["verdict_options"] = options  # the disk's line is added after them (efficiency.add_to_summary)
    summary["verdict"] = compose(options)
    summary["explain"] = explain_lines(analysis, describe=describe, metric=metric)
    if load_axes:
        from .load import apply_load

        def level(own: list[ResultRow], labels: list[str]) -> dict[str, Any]:
            return summarise(own, metric=metric, goal=goal, setting_labels=labels, settings_by_label=settings_by_label,
                             practical=practical, seed=seed, describe_setting=describe_setting, knob_label=knob_label,
                             unit=unit, looks=looks)

        apply_load(summary, rows, axes=list(load_axes), settings_by_label=settings_by_label, describe=describe_setting,
                   analyse_level=level, unit=unit)
    if cells_planned is not None:
        _mark_partial(summary, rows, groups, cells_planned)
    return summary


def partial_status(rows: list[ResultRow], groups: Mapping[str, list[float]], cells_planned: int) -> dict[str, Any] | None:
    """None for a run whose every planned cell has a row; else how far it is and
    whether a best may be named yet: every setting needs min(2, the blocks
    planned) measured blocks, so that one block's luck is never called a best."""
    recorded = len({r.cell_id for r in rows})
    if recorded >= cells_planned or not groups:
        return None
    planned_blocks = max(1, cells_planned // max(len(groups), 1))
    enough = min(2, planned_blocks)
    short = [label for label, values in groups.items() if len(values) < enough]
    return {"cells": recorded, "planned": cells_planned, "blocks_needed": enough, "settings_short": short}


def _mark_partial(summary: dict[str, Any], rows: list[ResultRow], groups: Mapping[str, list[float]], cells_planned: int) -> None:
    """A partial run says it is partial in its verdict; with a setting still short
    of blocks it names no best (summary best_label None, nothing starred)."""
    status = partial_status(rows, groups, cells_planned)
    if status is None:
        return
    summary["partial"] = status
    done = f"Partial run: {status['cells']} of {status['planned']} cells measured"
    if status["settings_short"]:
        n, total, blocks = len(status["settings_short"]), len(groups), status["blocks_needed"]
        summary["best"], summary["best_label"] = {}, None
        summary["as_good"], summary["undecided"] = [], []
        summary["verdict_options"] = [[
            f"{done}; no best yet: {n} of {total} settings {'has' if n == 1 else 'have'} fewer than "
            f"{blocks} measured block{'s' if blocks != 1 else ''}, and a best is named once every setting has {blocks}."
        ]]
    else:
        summary["verdict_options"] = [[f"{done}. " + lines[0], *lines[1:]] for lines in summary["verdict_options"]]
    from .verdict import compose

    summary["verdict"] = compose(summary["verdict_options"])


def validity_counts(rows: list[ResultRow]) -> dict[str, object]:
    """How many cells failed, were invalid (and why) or flagged: in summary.json for the console
    and the report, written by the runner and by a summary recomputed from the rows alike."""
    invalid = [r for r in rows if r.invalid]
    measured = {r.cell_id for r in rows if r.ok}
    return {
        "cells_failed": sum(1 for r in rows if r.failed),
        "failed_cells": [r.cell_id for r in rows if r.failed],
        # measurements whose claims did not hold (each kept, never counted) ...
        "cells_invalid": len(invalid),
        "invalid_cells": [{"cell_id": r.cell_id, "why": r.status.removeprefix("invalid: ")} for r in invalid],
        # ... of which the cells measured again with every claim holding, and those left without a number
        "invalid_remeasured": len({r.cell_id for r in invalid} & measured),
        "cells_without_valid": len({r.cell_id for r in rows if not r.ok} - measured),
        "cells_flagged": sum(1 for r in rows if r.ok and r.notes.get("flags")),
    }


def _with_series_intervals(analysis: Analysis, rows: list[ResultRow], metric: str) -> tuple[Analysis, dict[str, object]]:
    """A setting measured by exactly one ok row that carries a per-second series
    of the metric gets its interval from that series (batch means after the
    warm-up) instead of none. Its median stays the row's value."""
    from .series import row_series_interval

    by_label: dict[str, list[ResultRow]] = {}
    for r in rows:
        if r.ok and metric in r.metrics:
            by_label.setdefault(label_of(r.settings), []).append(r)
    settings = dict(analysis.settings)
    found: dict[str, object] = {}
    for label, own in by_label.items():
        if len(own) != 1 or label not in settings:
            continue
        interval = row_series_interval(own[0].series, metric)
        if interval is None:
            continue
        old = settings[label]
        own_level = math.isfinite(old.level_ci_low)  # a level interval from the block model is kept
        settings[label] = dataclasses.replace(
            old, ci_low=interval.ci_low, ci_high=interval.ci_high, interval_source="series",
            level_ci_low=old.level_ci_low if own_level else interval.ci_low,
            level_ci_high=old.level_ci_high if own_level else interval.ci_high,
        )
        found[label] = interval.to_dict()
    if not found:
        return analysis, {}
    return dataclasses.replace(analysis, settings=settings), found

