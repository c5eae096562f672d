"""Growing a plan while it runs: refine search and adaptive repeats.

Refine (measure.search = "refine"): the first cells are a coarse sweep of one
numeric knob (powers of two across its range); after each round the best value
and its neighbours are found and the midpoints between them are added, until
the neighbours are adjacent values.

Adaptive repeats (measure.target_ci): while some setting's interval is wider
than target_ci x its median, another randomised block of every setting is
added, up to measure.max_repeats blocks.
"""

from __future__ import annotations

from typing import Any

from .analysis.stats import analyse, noisy_settings
from .analysis.summary import group_samples
from .plan import Cell, Plan, Setting, make_plan
from .results import ResultRow
from .spec import SpecError


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


def check_refinable(knobs: dict[str, list[Any]], kinds: dict[str, str], source: str) -> str:
    if len(knobs) != 1:
        raise SpecError(f"{source}: measure.search = 'refine' sweeps exactly one knob; this experiment sweeps {len(knobs)}")
    name = next(iter(knobs))
    if kinds[name] not in ("integer", "size"):
        raise SpecError(f"{source}: measure.search = 'refine' needs a numeric knob; {name!r} is {kinds[name]}")
    if len(knobs[name]) < 2:
        raise SpecError(f"{source}: measure.search = 'refine' needs the range of {name!r}: give at least its lowest and highest value")
    return name


def refine_candidates(medians: dict[int, float], goal: str) -> list[int]:
    """Midpoints between the best value and its tested neighbours, not yet tested."""
    tested = sorted(medians)
    best = (max if goal == "max" else min)(tested, key=lambda v: medians[v])
    i = tested.index(best)
    out = []
    for neighbour in (tested[i - 1] if i > 0 else None, tested[i + 1] if i + 1 < len(tested) else None):
        if neighbour is None:
            continue
        mid = (best + neighbour) // 2 if neighbour > best else (best + neighbour + 1) // 2
        if mid not in medians and mid != best and mid != neighbour:
            out.append(mid)
    return sorted(out)


def next_cells(exp: Any, plan: Plan, rows: list[ResultRow]) -> tuple[list[Cell], list[Setting], str]:
    """More cells to run, the settings they add, and a line saying why ('' when done)."""
    measure = exp.spec.measure
    next_index = len(plan.cells)
    next_block = max((c.block for c in plan.cells), default=-1) + 1
    labels = [s.label for s in plan.settings]
    samples = group_samples(rows, exp.metric, labels)
    if measure.search == "refine":
        knob = next(iter(exp.knobs))
        by_value = {s.as_dict()[knob]: samples.get(s.label, []) for s in plan.settings}
        medians = {v: sorted(x)[len(x) // 2] for v, x in by_value.items() if x}
        new_values = refine_candidates(medians, exp.goal)
        if new_values:
            extra = make_plan({knob: new_values}, measure.repeats, exp.seed, {knob: exp.knob_infos[knob].apply},
                              first_block=next_block, first_index=next_index)
            return extra.cells, extra.settings, f"refine: adding {knob} = {', '.join(map(str, new_values))}"
    if measure.target_ci:
        measured = {k: v for k, v in samples.items() if v}
        if not measured:
            return [], [], ""
        noisy = noisy_settings(analyse(measured, goal=exp.goal, seed=exp.seed), measure.target_ci)
        blocks_per_setting = min((len(v) for v in measured.values()), default=0)
        if noisy and blocks_per_setting < measure.max_repeats:
            settings_now = {s.label: s for s in plan.settings}
            grid_knobs = _knobs_of(list(settings_now.values()))
            extra = make_plan(grid_knobs, 1, exp.seed, {k: exp.knob_infos[k].apply for k in grid_knobs},
                              first_block=next_block, first_index=next_index)
            keep = [c for c in extra.cells if c.setting.label in settings_now]
            cells = [Cell(next_index + i, c.block, c.setting) for i, c in enumerate(keep)]
            return cells, [], f"target_ci {measure.target_ci:.0%}: adding block {next_block + 1}; noisy: {', '.join(map(str, noisy))}"
        if noisy:
            return [], [], f"stayed noisy after {blocks_per_setting} repeats (max_repeats): {', '.join(map(str, noisy))}"
    return [], [], ""


def _knobs_of(settings: list[Setting]) -> dict[str, list[Any]]:
    """The knob lists that produce exactly these settings when they form a grid."""
    knobs: dict[str, list[Any]] = {}
    for setting in settings:
        for k, v in setting.values:
            if v not in knobs.setdefault(k, []):
                knobs[k].append(v)
    return knobs
