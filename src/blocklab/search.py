"""Growing a plan while it runs: refine search and adaptive repeats.

Refine (measure.search = "refine"): the first cells are a coarse sweep of one
numeric knob (powers of two across its range). After each round, one of:

* confirm: while the best value is not yet separated from a tested neighbour
  (the interval of the neighbour's ratio to the best still contains 1), one
  more randomised block of the best and those neighbours, until each has
  CONFIRM_FACTOR x repeats runs. On a noisy machine a median of `repeats`
  runs is often a lucky one, and bisecting around a lucky value walks away
  from the real optimum; the extra runs go only where the decision is made.
* bisect: the midpoints between the best and its tested neighbours, `repeats`
  runs each, until the neighbours are adjacent values.

Everything refine runs, the coarse sweep included, stays within
REFINE_SCAN_SHARE of the scans the full grid over the range would cost;
confirmation runs only with what the rest of the bisection is expected to need
left over, so noise cannot stop the search half-way.

Adaptive repeats (measure.target_ci): after every block, the run stops when
each setting is settled against the best: its ratio's interval excludes 1
(separated), lies within `practical` of 1, or is no wider than +-target_ci;
otherwise another randomised block of every setting is added, up to
measure.max_repeats blocks. The ratios are within-block (analysis/paired.py),
judged as one family against the best (analysis/family.py: the best's lucky
pick and the number of settings accounted for), and their intervals split
the 5% error over every look the run may take (sequential_looks): each look's
family may err with 5%/L, so looking after each block does not inflate false
"faster" verdicts. Being precise to +-target_ci is asked of those family
intervals, the ones the verdict shows.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from .analysis.settle import margin_of, undecided, undecided_lines, unsettled_settings
from .analysis.stats import Analysis, analyse
from .analysis.summary import analyse_rows, group_samples
from .plan import Cell, Plan, Setting, make_plan
from .results import ResultRow
from .spec import MeasureSpec, Scalar, SpecError

if TYPE_CHECKING:
    from .budget import Budget
    from .experiment import Experiment

# Refine spends at most this share of the scans of the full grid over its range.
REFINE_SCAN_SHARE = 0.25
# A value is confirmed up to this many times `repeats` runs (and never beyond max_repeats).
CONFIRM_FACTOR = 4


def coarse_values(values: list[int]) -> list[int]:
    """Powers of two across [min, max] of the given values, both ends included."""
    lo, hi = min(values), max(values)
    out = {lo, hi}
    power = 1
    while power <= hi:
        if power >= lo:
            out.add(power)
        power *= 2
    return sorted(out)


def check_refinable(knobs: Mapping[str, Sequence[object]], kinds: dict[str, str], source: str) -> str:
    if len(knobs) != 1:
        raise SpecError(f"{source}: measure.search = 'refine' sweeps exactly one knob; this experiment sweeps {len(knobs)}")
    name = next(iter(knobs))
    if kinds[name] not in ("integer", "size"):
        raise SpecError(f"{source}: measure.search = 'refine' needs a numeric knob; {name!r} is {kinds[name]}")
    if len(knobs[name]) < 2:
        raise SpecError(f"{source}: measure.search = 'refine' needs the range of {name!r}: give at least its lowest and highest value")
    return name


# ---------------------------------------------------------------- refine, pure
def refine_budget(lo: int, hi: int, repeats: int) -> int:
    """Scans refine may spend: a share of the full grid lo..hi, never less than
    the coarse sweep it starts with."""
    full_grid = (hi - lo + 1) * repeats
    return max(int(REFINE_SCAN_SHARE * full_grid), len(coarse_values([lo, hi])) * repeats)


def neighbours_of(best: int, values: Sequence[int]) -> list[int]:
    """The tested values just below and just above `best` (one at an end of the range)."""
    ordered = sorted(values)
    i = ordered.index(best)
    return [v for v in (ordered[i - 1] if i > 0 else None, ordered[i + 1] if i + 1 < len(ordered) else None) if v is not None]


def midpoint(best: int, neighbour: int) -> int:
    """The integer halfway between, rounded towards the best."""
    return (best + neighbour) // 2 if neighbour > best else (best + neighbour + 1) // 2


def refine_candidates(medians: Mapping[int, float], goal: str, planned: Sequence[int] = ()) -> list[int]:
    """Midpoints between the best value and its tested neighbours, not yet planned."""
    best = (max if goal == "max" else min)(medians, key=lambda v: medians[v])
    taken = set(medians) | set(planned)
    mids = {midpoint(best, n) for n in neighbours_of(best, list(medians))}
    return sorted(m for m in mids if m not in taken)


def bisection_cost(best: int, neighbours: Sequence[int], repeats: int) -> int:
    """Scans the bisection still needs if the best stays where it is: halving
    each gap to the best down to adjacent values."""
    steps = sum(math.ceil(math.log2(abs(best - n))) for n in neighbours if abs(best - n) > 1)
    return steps * repeats


def unseparated_neighbours(analysis: Analysis, best: int, neighbours: Sequence[int]) -> list[int]:
    """Neighbours the data cannot yet tell from the best: their ratio interval
    contains 1, or one of the two has a single run (no interval at all)."""
    single = analysis.settings[best].n < 2
    return [n for n in neighbours if single or analysis.settings[n].n < 2 or n in analysis.indistinguishable]


@dataclass(frozen=True)
class RefineStep:
    """What refine does next: `blocks` randomised blocks of `values` ([] = stop), and why."""

    values: list[int]
    blocks: int
    why: str


def refine_step(
    samples: Mapping[int, Sequence[float]],
    *,
    goal: str,
    repeats: int,
    max_repeats: int,
    budget: int,
    spent: int,
    seed: int,
    knob: str = "value",
) -> RefineStep:
    """The next refine round from the samples so far (value -> metric values;
    values planned but without a successful run have empty lists).

    Separation is purely statistical (no `practical` margin): a neighbour
    within a practical margin of the best would otherwise be confirmed at
    every round however clearly it is measured."""
    measured = {v: list(x) for v, x in samples.items() if x}
    if not measured:
        return RefineStep([], 0, f"refine: no successful run of {knob} to refine around")
    analysis = analyse(cast(Mapping[Hashable, Sequence[float]], measured), goal=goal, seed=seed)
    best = cast(int, analysis.best)  # one of measured's keys: not None, since measured is not empty
    neighbours = neighbours_of(best, list(measured))
    cap = min(max_repeats, CONFIRM_FACTOR * repeats)
    unseparated = unseparated_neighbours(analysis, best, neighbours)
    to_confirm = [v for v in [best, *unseparated] if len(measured[v]) < cap] if unseparated else []
    if to_confirm:
        reserve = bisection_cost(best, neighbours, repeats)
        if spent + len(to_confirm) + reserve <= budget:
            counts = ", ".join(f"{v} ({len(measured[v])} runs)" for v in to_confirm)
            return RefineStep(to_confirm, 1, f"refine: best {knob} = {best} not yet separated from its neighbours; one more block of {counts}")
    mids = refine_candidates({v: analysis.settings[v].median for v in measured}, goal, list(samples))
    if not mids:
        return RefineStep([], 0, "")
    if spent + len(mids) * repeats > budget:
        return RefineStep([], 0, f"refine: scan budget spent ({spent} of {budget}); {knob} = {', '.join(map(str, mids))} left untested")
    return RefineStep(mids, repeats, f"refine: adding {knob} = {', '.join(map(str, mids))}")


# ---------------------------------------------------------------- looks
def sequential_looks(measure: Any) -> int:
    """How many times a run may look at its data before its last block: every
    block after the first `repeats` follows a look. The verdict's intervals
    split their 5% over these looks; fixed before the run, so the split cannot
    depend on what the data show. `measure` is a MeasureSpec or its dict."""
    get = measure.get if isinstance(measure, Mapping) else (lambda name, default=None: getattr(measure, name, default))
    repeats = int(get("repeats", 3) or 3)
    max_repeats = max(int(get("max_repeats", 20) or 20), repeats)
    looks = 1
    if get("search", "grid") == "refine":
        looks += max(0, min(max_repeats, CONFIRM_FACTOR * repeats) - repeats)
    if get("target_ci", None) or get("budget", None):
        looks += max_repeats - repeats
    return looks


# ---------------------------------------------------------------- the plan grows
def next_cells(exp: Experiment, plan: Plan, rows: list[ResultRow]) -> tuple[list[Cell], list[Setting], str]:
    """More cells to run, the settings they add, and a line saying why ('' when done)."""
    measure = exp.spec.measure
    samples = group_samples(rows, exp.metric, [s.label for s in plan.settings])
    if measure.search == "refine":
        step = _refine_round(exp, plan, samples)
        if step.values:
            extra = _blocks_of(exp, plan, step.values, step.blocks)
            return extra.cells, extra.settings, step.why
        if step.why:
            return [], [], step.why
    if measure.target_ci or measure.budget:
        return _adaptive_repeats(exp, plan, rows, samples)
    return [], [], ""


def _refine_round(exp: Experiment, plan: Plan, samples: dict[str, list[float]]) -> RefineStep:
    measure = exp.spec.measure
    knob = next(iter(exp.knobs))
    by_value = {s.as_dict()[knob]: samples.get(s.label, []) for s in plan.settings}
    lo, hi = min(exp.knobs[knob]), max(exp.knobs[knob])
    return refine_step(
        by_value,
        goal=exp.goal,
        repeats=measure.repeats,
        max_repeats=measure.max_repeats,
        budget=refine_budget(lo, hi, measure.repeats),
        spent=len(plan.cells),
        seed=exp.seed,
        knob=knob,
    )


def _blocks_of(exp: Experiment, plan: Plan, values: list[int], blocks: int) -> Plan:
    """`blocks` randomised blocks of these values of the refined knob, numbered after the plan's cells."""
    knob = next(iter(exp.knobs))
    return make_plan({knob: values}, blocks, exp.seed, {knob: exp.knob_infos[knob].apply},
                     first_block=_next_block(plan), first_index=len(plan.cells))


def _next_block(plan: Plan) -> int:
    return max((c.block for c in plan.cells), default=-1) + 1


def _adaptive_repeats(
    exp: Experiment, plan: Plan, rows: list[ResultRow], samples: dict[str, list[float]]
) -> tuple[list[Cell], list[Setting], str]:
    """One more randomised block while a setting is unsettled (see the module's
    docstring), until max_repeats blocks or the budget is spent; what was
    decided, and with a budget spent first, the undecided pairs and the blocks
    estimated to settle each (analysis/settle.py)."""
    measure = exp.spec.measure
    measured = {k: v for k, v in samples.items() if v}
    labels = [s.label for s in plan.settings]
    analysis = analyse_rows(rows, exp.metric, labels, goal=exp.goal, practical=measure.practical,
                            looks=sequential_looks(measure), seed=exp.seed)
    if analysis is None:
        return [], [], ""
    budget = measure.parsed_budget()
    margin = margin_of(measure.practical) if budget is not None else 0.0
    rule = _rule_name(measure)
    noisy = unsettled_settings(analysis, rows, labels, measure.target_ci, margin)  # never measured: not settled
    blocks_per_setting = min((len(v) for v in measured.values()), default=0)
    if noisy and budget is not None and budget.used_up(rows):
        return [], [], _budget_spent(exp, analysis, rows, budget, margin, labels)
    if noisy and blocks_per_setting < measure.max_repeats:
        next_block, next_index = _next_block(plan), len(plan.cells)
        settings_now = {s.label: s for s in plan.settings}
        grid_knobs = _knobs_of(list(settings_now.values()))
        extra = make_plan(grid_knobs, 1, exp.seed, {k: exp.knob_infos[k].apply for k in grid_knobs},
                          first_block=next_block, first_index=next_index)
        keep = [c for c in extra.cells if c.setting.label in settings_now]
        cells = [Cell(next_index + i, c.block, c.setting) for i, c in enumerate(keep)]
        return cells, [], f"{rule}: adding block {next_block + 1}; not yet settled against the best: {', '.join(noisy)}"
    if noisy:
        if budget is not None:
            return [], [], _budget_spent(exp, analysis, rows, budget, margin, labels, f"max_repeats ({measure.max_repeats} blocks)")
        return [], [], f"stayed unsettled after {blocks_per_setting} repeats (max_repeats): {', '.join(noisy)}"
    return [], [], f"{rule}: settled after {blocks_per_setting} blocks ({_settled_how(analysis, measure.target_ci, margin)})"


def rule_wants_more(exp: Experiment, plan: Plan, rows: list[ResultRow]) -> list[str]:
    """The settings a run that stops by the rule would add a block for, were its budget not
    spent: unsettled (settle.unsettled_settings, as _adaptive_repeats judges) with fewer
    than max_repeats blocks; [] for a run with a fixed plan."""
    measure = exp.spec.measure
    if not measure.stops_by_rule:
        return []
    labels = [s.label for s in plan.settings]
    analysis = analyse_rows(rows, exp.metric, labels, goal=exp.goal, practical=measure.practical,
                            looks=sequential_looks(measure), seed=exp.seed)
    if analysis is None:
        return []
    margin = margin_of(measure.practical) if measure.budget is not None else 0.0
    measured = [v for v in group_samples(rows, exp.metric, labels).values() if v]
    if min((len(v) for v in measured), default=0) >= measure.max_repeats:
        return []
    return unsettled_settings(analysis, rows, labels, measure.target_ci, margin)


def _rule_name(measure: MeasureSpec) -> str:
    if (budget := measure.parsed_budget()) is not None:
        return f"stopping rule (budget {budget.text()})"
    return f"target_ci {measure.target_ci:.0%}"


def _budget_spent(exp: Experiment, analysis: Analysis, rows: list[ResultRow], budget: Budget, margin: float, labels: list[str],
                  what: str = "") -> str:
    """The lines said when the budget (or max_repeats) ends before the verdict settles."""
    pairs = undecided(analysis.to_dict(), rows, exp.metric, margin, labels, exp.spec.measure.target_ci)
    spent = what or f"budget spent ({budget.spent_text(rows)})"
    compared = sum(1 for p in pairs if p.get("measured") is not False and not p.get("alone"))
    parts = [f"{compared} pair(s) neither separated from the best nor within {margin:.0%} of it"] if compared else []
    if any(p.get("alone") for p in pairs):
        parts.append("the only setting measured has nothing to compare it with yet")
    if unmeasured := sum(1 for p in pairs if p.get("measured") is False):
        parts.append(f"{unmeasured} setting(s) not measured yet")
    head = f"{spent} before the verdict settled: {', '.join(parts)}; blocks estimated to settle each, from the noise measured so far:"
    return "\n".join([head, *undecided_lines(pairs, exp.describe_setting)])


def _settled_how(analysis: Analysis, target: float | None, margin: float = 0.0) -> str:
    """How each setting settled, for the line the runner prints when it stops."""
    if sum(1 for s in analysis.settings.values() if s.n > 0) == 1:
        return f"the one setting's median known to +-{(target or margin):.0%}"
    separated = precise = close = 0
    for k, s in analysis.settings.items():
        if k == analysis.best or s.n == 0:
            continue
        lo, hi = s.ratio_to_best_ci_low, s.ratio_to_best_ci_high
        if lo > 1.0 or hi < 1.0:
            separated += 1
        elif (p := max(analysis.practical, margin)) > 0 and lo >= 1 - p and hi <= 1 + p:
            close += 1
        else:
            precise += 1
    parts = [f"{separated} separated from the best"]
    if close:
        parts.append(f"{close} within {max(analysis.practical, margin):.0%} of it")
    if precise and target:
        parts.append(f"{precise} known to +-{target:.0%}")
    return ", ".join(parts)


def _knobs_of(settings: list[Setting]) -> dict[str, list[Scalar]]:
    """The knob lists that produce exactly these settings when they form a grid."""
    knobs: dict[str, list[Scalar]] = {}
    for setting in settings:
        for k, v in setting.values:
            if v not in knobs.setdefault(k, []):
                knobs[k].append(v)
    return knobs
