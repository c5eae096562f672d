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

from ..jsonvalue import str_or_none
from ..results import PLAN_FILE, RESULTS_FILE, SUMMARY_FILE, ResultsError, RunDir
from .data import load_run, recompute_summary


class AnalyseError(ValueError):
    """RUN_DIR cannot be analysed; the message names the directory and what is wrong with it."""


@dataclass(frozen=True)
class Reanalysis:
    path: Path
    summary: dict[str, object]
    previous_verdict: str | None  # None when there was no summary.json
    previous_version: int | None  # statistics_version of the old summary (None: before versions)
    written: bool


def reanalyse(path: Path | str, *, write: bool = True) -> Reanalysis:
    """Recompute (and by default rewrite) RUN_DIR/summary.json. Raises
    AnalyseError when `path` is not a results directory with measured rows."""
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
        previous_verdict=str_or_none(old_summary.get("verdict")) if old_summary else None,
        previous_version=_version(old_summary.get("statistics_version", 1)) if old_summary else None,
        written=write,
    )


def _version(value: object) -> int | None:
    """summary.json's statistics_version (an int; anything else: unknown)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _old_summary(run_dir: RunDir) -> dict[str, object]:
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
