"""A run's summary.json: what it holds (write_summary: the verdict's analysis, the
device twin's efficiency, the stopping rule's state, CPU profiles and traced
functions) and when the runner rewrites it (summary_due: after a cell while that
costs at most a tenth of the run's time; summary_if_behind: after Ctrl-C or an
error when the last rewrite was skipped)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .analysis.cpu_profile import add_to_summary as add_cpu_profile
from .analysis.efficiency import add_to_summary as add_efficiency
from .analysis.function_trace import add_to_summary as add_trace
from .analysis.settle import margin_of, undecided
from .analysis.summary import summarise, validity_counts
from .experiment import Experiment
from .plan import Plan
from .results import SUMMARY_FILE, ResultRow, RunDir
from .search import sequential_looks
from .units import label_of, unit_of

_SUMMARY_SHARE = 0.1  # of a run's time, what rewriting the summary after its cells may take
_summary_last: dict[str, tuple[float, float]] = {}  # run directory -> (when its last summary ended, what it cost)
_summary_behind: set[str] = set()  # run directories with rows their summary.json does not count yet


def summary_due(run_dir: RunDir, write: Callable[[], object], clock: Callable[[], float] = time.perf_counter) -> bool:
    """Call `write` (the summary's rewrite) unless the last one ended less than 9x its
    cost ago; True when it was called. A few settings cost milliseconds and are
    summarised after every cell; the analysis of a sweep of 108 settings costs more
    than its cells, and is then rewritten every few seconds instead."""
    key = str(run_dir.path.resolve())
    now = clock()
    last = _summary_last.get(key)
    if last is not None and now - last[0] < last[1] * (1 - _SUMMARY_SHARE) / _SUMMARY_SHARE:
        _summary_behind.add(key)
        return False
    try:
        write()
        _summary_behind.discard(key)
    finally:
        end = clock()
        _summary_last[key] = (end, end - now)
    return True


def summary_if_behind(exp: Experiment, run_dir: RunDir, plan: Plan) -> None:
    """After Ctrl-C or an error: the summary of every row saved, when the last rewrite was
    skipped (a run stopped before its first cell writes none, as before). A failure here
    must not hide what stopped the run: `blocklab analyse` rewrites the summary."""
    key = str(run_dir.path.resolve())
    if key not in _summary_behind:
        return
    try:
        write_summary(exp, run_dir, plan)
        _summary_behind.discard(key)
    except Exception:  # what stopped the run is what the user must see
        pass


def write_summary(exp: Experiment, run_dir: RunDir, plan: Plan) -> dict[str, object]:
    labels = [s.label for s in plan.settings]
    summary = summarise(
        run_dir.rows(),
        metric=exp.metric,
        goal=exp.goal,
        setting_labels=labels,
        settings_by_label={s.label: s.as_dict() for s in plan.settings},
        baseline=exp.baseline_label(),
        practical=exp.spec.measure.practical,
        seed=exp.seed,
        describe_setting=exp.describe_setting,
        knob_label=exp.knob_label(),
        unit=unit_of(exp.metric),
        looks=sequential_looks(exp.spec.measure),
        cells_planned=len(plan.cells),
        load_axes=exp.load_axes(),
    )
    summary["experiment"] = exp.spec.name
    summary["cells_planned"] = len(plan.cells)
    summary.update(validity_counts(run_dir.rows()))
    summary["seed"] = exp.seed
    add_efficiency(summary, run_dir, exp.describe_setting)  # the engine against its device twin, when the rows allow
    if (settle := settle_section(exp, run_dir.rows(), summary, labels)) is not None:
        summary["settle"] = settle
    if exp.spec.measure.cpu_profile:  # where the CPU went: the functions that grow with each knob
        add_cpu_profile(summary, run_dir.rows(), run_dir.path, list(exp.knobs), exp.workload.work,
                        exp.spec.measure.cpu_profile_where)
    if exp.spec.measure.trace_function:  # the seed's second step: one function's calls, per setting
        add_trace(summary, run_dir.rows(), label_of, exp.spec.measure.trace_function, exp.spec.measure.trace_arg,
                  exp.workload.work)
    run_dir.write_json(SUMMARY_FILE, summary)
    return summary


def settle_section(exp: Experiment, rows: list[ResultRow], summary: dict[str, Any], planned: list[str]) -> dict[str, object] | None:
    """summary.json's "settle": the budgeted stopping rule, what it has spent, and the
    settings not yet decided with the blocks estimated to settle each, from the function
    the rule stops by (settle.unsettled_settings: the `planned` settings never measured
    are not settled either). None for a run without a budget."""
    measure = exp.spec.measure
    budget = measure.parsed_budget()
    if budget is None:
        return None
    margin = margin_of(measure.practical)
    pairs = undecided(summary.get("analysis"), rows, exp.metric, margin, planned, measure.target_ci)
    blocks = int((summary.get("analysis") or {}).get("blocks") or 0)
    if summary.get("analysis") and not pairs:
        status = "settled"
    elif budget.used_up(rows):
        status = "budget spent"
    elif blocks >= measure.max_repeats:
        status = "max_repeats reached"
    else:
        status = "running"
    return {
        "rule": f"Stop when every setting is separated from the best or within {margin:.0%} of it, after at least "
                f"{measure.repeats} block(s), at most {measure.max_repeats}, or when the budget is spent",
        "margin": margin,
        "budget": measure.budget,
        "budget_text": budget.text(),
        "spent": budget.spent_text(rows),
        "blocks": blocks,
        "status": status,
        "undecided": pairs,
        "estimate": "the fewest blocks n with t(n - 1) x spread / sqrt(n) no wider than the distance the interval must "
                    "clear (to leave 1.0, or to fit inside the margin), on the log scale: t at the per-look error rate split "
                    "over the comparisons with the best, the spread of the pair's per-block ratios as measured so far, the "
                    "ratio where it is now (analysis/settle.py)",
    }


__all__ = ["summary_due", "summary_if_behind", "write_summary", "settle_section"]
