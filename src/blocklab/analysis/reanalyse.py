"""A run's summary.json recomputed from its results.jsonl with today's statistics.

    result = reanalyse("results/mbrc-20261122-230000")
    result.summary["verdict"], result.previous_verdict

For runs analysed by an older blocklab (unpaired medians), imported runs, and
runs whose rows were repaired by hand: the rows are the measurement, the
summary is derived from them, so it can always be derived again. What the run
was asked (metric, goal, practical, target_ci, the looks a sequential run could
take, the seed) comes from its spec.json and plan.json; settings are described
as the engine reported them (`16 (128 kB)`).

No printing here: `blocklab analyse` prints what this returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..results import PLAN_FILE, RESULTS_FILE, SUMMARY_FILE, ResultsError, RunDir

if TYPE_CHECKING:
    from ..report.data import RunData


class AnalyseError(ValueError):
    """RUN_DIR cannot be analysed; the message names the directory and what is wrong with it."""


@dataclass(frozen=True)
class Reanalysis:
    path: Path
    summary: dict[str, Any]
    previous_verdict: str | None  # None when there was no summary.json
    previous_version: int | None  # statistics_version of the old summary (None: before versions)
    written: bool


def recompute_summary(data: RunData) -> dict[str, Any]:
    """The summary of a loaded run, as the runner would write it today."""
    from ..search import sequential_looks
    from .load import load_axes_of
    from .summary import summarise

    old = data.summary
    measure = data.spec.get("measure") or {}
    baseline = old.get("baseline") if old.get("baseline") in data.labels else None
    summary = summarise(
        data.rows,
        metric=data.metric,
        goal=data.goal,
        setting_labels=data.labels,
        settings_by_label=data.settings_by_label,
        baseline=baseline,
        practical=float(measure.get("practical") or 0.0),
        seed=int(data.seed or 0),
        describe_setting=data.describe_label,
        knob_label=", ".join(data.knobs) or "setting",
        unit=data.unit,
        looks=sequential_looks(measure),
        cells_planned=data.cells_planned,
        load_axes=load_axes_of(str((data.spec.get("workload") or {}).get("kind") or ""), data.knobs),
    )
    for key in ("experiment", "cells_planned", "seed", "settle"):  # settle: when the run stopped, and why
        if key in old:
            summary[key] = old[key]
    if old.get("words_from") == "import":  # an importer's own headline and verdict (device limits, system statistics,
        for key in ("headline", "verdict", "limits", "words_from"):  # SLOB series): the rows do not change on import
            if key in old:
                summary[key] = old[key]
        if old.get("unranked"):  # values that are each a limit or a statistic by itself: no 'best' among them
            from ..importers.rundir import unranked

            unranked(summary)
    summary.setdefault("experiment", data.name)
    summary.setdefault("cells_planned", data.cells_planned)
    summary.setdefault("seed", data.seed)
    from .efficiency import add_to_summary

    add_to_summary(summary, data.path, data.describe_label)  # the disk's line and the bottleneck's reasoning, as the runner adds them
    return summary


def reanalyse(path: Path | str, *, write: bool = True) -> Reanalysis:
    """Recompute (and by default rewrite) RUN_DIR/summary.json. Raises
    AnalyseError when `path` is not a results directory with measured rows."""
    from ..report.data import load_run

    path = Path(path)
    accepted = f"a results directory written by `blocklab run` (it holds {PLAN_FILE} and {RESULTS_FILE})"
    if not path.is_dir():
        what = "is not a directory" if path.exists() else "does not exist"
        raise AnalyseError(f"RUN_DIR {path} {what}; give {accepted}")
    run_dir = RunDir(path)
    if not run_dir.file(PLAN_FILE).exists():
        if run_dir.file("sysstats.json").exists():
            raise AnalyseError(f"RUN_DIR {path} holds system statistics (sysstats.json), not an experiment run; give {accepted}")
        raise AnalyseError(f"RUN_DIR {path} is not a blocklab results directory (no {PLAN_FILE}); give {accepted}")
    if not run_dir.file(RESULTS_FILE).exists():
        raise AnalyseError(f"RUN_DIR {path} has no {RESULTS_FILE}: no cell has been measured, nothing to analyse")
    old_summary = _old_summary(run_dir)
    try:
        data = load_run(path)
    except (ResultsError, KeyError, TypeError, ValueError) as err:
        raise AnalyseError(f"RUN_DIR {path}: cannot be read: {_what(err)}") from None
    if not data.ok_rows:
        raise AnalyseError(f"RUN_DIR {path}: no successful row in {RESULTS_FILE} ({len(data.rows)} failed): nothing to analyse")
    if not any(data.metric in r.metrics for r in data.ok_rows):
        present = ", ".join(data.metrics_present()) or "(none)"
        raise AnalyseError(f"RUN_DIR {path}: no row measures {data.metric!r}, the metric of this run; the rows hold: {present}")
    summary = recompute_summary(data)
    if write:
        run_dir.write_json(SUMMARY_FILE, summary)
    return Reanalysis(
        path=path,
        summary=summary,
        previous_verdict=old_summary.get("verdict") if old_summary else None,
        previous_version=old_summary.get("statistics_version", 1) if old_summary else None,
        written=write,
    )


def _old_summary(run_dir: RunDir) -> dict[str, Any]:
    if not run_dir.file(SUMMARY_FILE).exists():
        return {}
    try:
        data = run_dir.read_json(SUMMARY_FILE)
    except ResultsError:
        return {}  # an unreadable summary is what `analyse` is for
    return data if isinstance(data, dict) else {}


def _what(err: Exception) -> str:
    if isinstance(err, KeyError):
        return f"a row lacks the field {err}"
    return str(err)
