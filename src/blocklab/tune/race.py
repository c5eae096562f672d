"""The race that judges a round's configurations: blocklab's paired block statistics.

Every block of a round holds each configuration still in the race once, in a
random order (drift cancels within the block, analysis/paired.py). After each
block from the second on, the configurations are compared with the best of
them as one family (compare_with_best: the studentized-range step-down, the
winner's curse and the number of configurations accounted for), and every
configuration whose interval says it is worse than the best is dropped: it
is not measured again (F-Race's elimination, with the family-wise paired
intervals blocklab already has in place of Friedman's test). The 5% is split
over the looks a round may take (Bonferroni over looks, as sequential stopping
does), so looking after every block does not inflate false drops.

The default is measured in every block and never dropped: it is the anchor
every configuration's value is measured against (the within-block ratio to the
default is what the optimiser is told), so rounds measured an hour apart, under
other drift, still give comparable values.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from ..analysis.paired import BlockCell, BlockModel, compare_with_best, fit_blocks, per_look_alpha


@dataclass(frozen=True)
class Look:
    """What one look at a round's blocks says."""

    best: Hashable
    worse: dict[Hashable, tuple[float, float, float]]  # dropped now: ratio to the best, low, high
    intervals: dict[Hashable, tuple[float, float, float]]  # every configuration's ratio to the best


def sign(goal: str) -> float:
    return 1.0 if goal == "max" else -1.0


def look(cells: Sequence[BlockCell], alive: Sequence[Hashable], *, goal: str, looks: int, keep: Sequence[Hashable] = ()) -> Look | None:
    """Judge the configurations `alive` on their cells; None when there is no cell yet.
    Those of `keep` (the default) are never among the dropped."""
    mine = [c for c in cells if c.key in alive]
    measured = [k for k in alive if any(c.key == k for c in mine)]
    if len(measured) < 2:
        return None
    model = fit_blocks(mine, measured)
    best = max(measured, key=lambda k: sign(goal) * model.levels[k])
    judged = compare_with_best(model, best, measured, per_look_alpha(looks))
    intervals = {k: (j.ratio, j.low, j.high) for k, j in judged.items()}
    worse = {k: intervals[k] for k, j in judged.items() if j.separated and k not in keep and _worse(j.ratio, goal)}
    return Look(best, worse, intervals)


def _worse(ratio: float, goal: str) -> bool:
    return ratio < 1.0 if goal == "max" else ratio > 1.0


def log_ratio(model: BlockModel, key: Hashable, anchor: Hashable, goal: str) -> float | None:
    """The within-block log ratio of `key` to `anchor`, signed so that larger is
    better (what the optimiser maximises); None without a shared block."""
    effect = model.effect(key, anchor)
    if effect.blocks < 1 or not math.isfinite(effect.estimate):
        return None
    return sign(goal) * effect.estimate


def levels_to(cells: Sequence[BlockCell], anchor: Hashable, goal: str) -> dict[Hashable, float]:
    """Each configuration's fitted level against the anchor's (log ratio, larger is
    better), from every cell so far: the block model puts all rounds on one scale,
    since the anchor is in every block."""
    if not cells:
        return {}
    model = fit_blocks(cells)
    if anchor not in model.levels:
        return {}
    return {k: sign(goal) * (lvl - model.levels[anchor]) for k, lvl in model.levels.items()}


# The least spread of true levels the shrinkage assumes (log scale, 1%): with every
# configuration measured alike the moment estimate can come out at zero or below,
# which would pull every estimate onto the mean and leave nothing to choose by.
_MIN_SPREAD = 0.01
# How many posterior standard deviations a credible level gives up: between two
# configurations whose shrunk estimates are close, the better measured one is crowned.
# On the synthetic surface of tests/test_tune.py (100 seeded tunes, benchmarks/tune_synthetic.py)
# 0.5 found the optimum within 3% in 80, 0 in 78 (one tune at 0.875), 1.0 in 77, measured with
# the contrast's se in the weights (34ab381); with each level's own se (now), 83.
RISK = 0.5


def credible_levels(cells: Sequence[BlockCell], anchor: Hashable, goal: str, risk: float = RISK) -> dict[Hashable, float]:
    """Each configuration's level against the anchor (log ratio, larger is better),
    shrunk toward the mean of all measured by how little its cells say, less `risk`
    times what remains uncertain (RISK when crowning; 0 gives the shrunk estimate itself): empirical Bayes, with tau^2 the spread of the true
    levels (the levels' variance less their mean se^2) and se_k the standard error
    of level_k (the anchor's own error is common to all and cancels in level_k - m),
        m + (level_k - m) * tau^2 / (tau^2 + se_k^2) - RISK * sqrt(tau^2 se_k^2 / (tau^2 + se_k^2)).
    Why: the search crowns the best estimate, and among thirty configurations measured
    in one to six blocks, at a per-cell noise of 14-18% (a cold scan on a virtual
    disk), the best raw estimate is often one lucky cell (BENCHMARKS.md, tune v7: three
    winners measured in one block, 0.82 of the optimum held out). A configuration
    measured in many blocks is barely moved; at a noise of 5% one block is
    informative and is barely moved either. The anchor stays at 0. {} when the
    anchor has no cell."""
    if not cells:
        return {}
    model = fit_blocks(cells)
    if anchor not in model.levels:
        return {}
    raw = {k: sign(goal) * (lvl - model.levels[anchor]) for k, lvl in model.levels.items()}
    others = [k for k in raw if k != anchor]
    # each level's own variance: the anchor's error is common to every raw_k and cancels in raw_k - mean
    se2 = {k: model.level_se.get(k, math.nan) ** 2 for k in others}
    usable = [k for k in others if math.isfinite(se2[k])]
    if len(usable) < 3:
        return raw
    mean = sum(raw[k] for k in usable) / len(usable)
    spread = sum((raw[k] - mean) ** 2 for k in usable) / (len(usable) - 1) - sum(se2[k] for k in usable) / len(usable)
    tau2 = max(spread, _MIN_SPREAD ** 2)
    out = dict(raw)
    for k in usable:
        weight = tau2 / (tau2 + se2[k])
        out[k] = mean + (raw[k] - mean) * weight - risk * math.sqrt(se2[k] * weight)
    return out

