"""Effects that use the randomised-block design: settings compared within blocks.

A run measures every setting once per block, in a fresh random order, so that
whatever drifts during the run (the VM's neighbours, the disk's cache, the
time of day) hits all settings of a block alike. This module uses that.

The ratio of two settings is computed from the blocks that hold both: in each
such block the ratio of their two values (the block's drift cancels in it),
and over the blocks the geometric mean of those per-block ratios with a
Student t interval on the log scale (a paired t interval). A block that lost
a cell (failed or invalid) still gives every other pair it holds.

Why each pair's own spread counts: measured on this kind of VM
(benchmarks/aa.py), cells stall now and then (a 30 ms scan took 720 ms while a
neighbour wrote), the stalls hit some settings more than others, and a
variance pooled over all settings lends one setting's calm to another's
stalls; in the real A/A runs a pooled interval alone called a setting
'faster' than itself on a single stall. The paired t interval is exact for
log-normal noise and errs on the wide side for heavier tails. Why not a
bootstrap over blocks: with the 3-5 blocks of a usual run a percentile
bootstrap of a median covers far less than 95% (the bootstrap of the median
of 3 blocks is about [min, max], a 75% interval); benchmarks/aa.py measures
that too.

A least-squares fit of log(value) = level(setting) + drift(block) + noise
(missing cells allowed) gives what needs all settings at once: the best (the
highest drift-adjusted level), each block's drift (the report's drift plot),
the pooled noise and residuals to flag odd cells.

The ratios to the best are judged as one family (compare_with_best; the
arithmetic is in family.py): the best is picked from the same data, and with
several settings near the top, per-comparison 95% intervals call one of them
"slower" in about half of all runs (eight equal settings, benchmarks/aa.py).
Each gap to the best is divided by the larger of two standard errors: the
pooled one of the block model (many degrees of freedom, so a run of 3-5
blocks keeps its power: with a pair's own 2-4 degrees of freedom the
multiplicity-adjusted critical value for eight settings is 3.6 times
Student's t at 3 blocks, 2.3 times at 5) and the
pair's own (so a pair that stalled more than the rest is not judged by the
others' calm). The gap is compared with the studentized range of the
settings still in play, step-down. The interval shown is never narrower than
the pair's own t interval, and it excludes 1 exactly when the verdict calls
the setting slower. With two settings nothing changes: the range of two is
Student's t and the pooled error is the pair's own. The intervals to the
baseline are per-comparison (the baseline is fixed before the data, and the
verdict makes no claim about them).

Sequential stopping (measure.target_ci) looks at the data after every block.
Each look is a chance of a false "faster", so the 5% is split evenly over the
looks the run may take (Bonferroni over looks, fixed before the run from
repeats and max_repeats): every interval of a sequential run is a 1 - 0.05/L
interval, and the chance that any look shows a false separation stays under
5% whatever the data do. Conservative (looks are correlated), but it needs no
assumption about how the run stops.

Pairs that share no block (refine adds bisection values in blocks of their
own) fall back to Welch's t on the log values of the two settings: unpaired,
so the drift stays in their variance.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..lazy import scipy_stats as _scipy_stats
from .family import Contrast, Judged, step_down
from .stats import (
    CONFIDENCE,
    DEFAULT_RESAMPLES,
    Analysis,
    SettingStats,
    bootstrap_medians,
    check_goal,
    check_resamples,
    coefficient_of_variation,
    percentile_interval,
)

# A cell is flagged when its residual is this many robust standard deviations
# out (the 3.5 of stats.flag_outliers' modified z-score).
_OUTLIER_SD = 3.5


@dataclass(frozen=True)
class BlockCell:
    """One measured cell: its block, its setting's key, the metric's value."""

    block: int
    key: Hashable
    value: float


@dataclass(frozen=True)
class Effect:
    """log(a) - log(b) with its standard error and degrees of freedom.

    `paired` is False for pairs that share no block (Welch's t, unpaired);
    `blocks` counts the blocks holding both."""

    estimate: float
    se: float
    df: float
    paired: bool
    blocks: int

    def interval(self, alpha: float) -> tuple[float, float, float]:
        """(ratio, low, high) on the ratio scale; NaN bounds when there is no variance estimate."""
        ratio = math.exp(self.estimate)
        if not (self.df > 0 and math.isfinite(self.se)):
            return ratio, math.nan, math.nan
        t = float(_scipy_stats.t.ppf(1.0 - alpha / 2.0, self.df))
        return ratio, math.exp(self.estimate - t * self.se), math.exp(self.estimate + t * self.se)


@dataclass(frozen=True)
class BlockModel:
    """The fitted randomised-block model of one run (log scale)."""

    keys: tuple  # settings with at least one cell, in the given order
    levels: Mapping[Hashable, float]  # log level of each setting, adjusted to its component's average block
    block_effects: Mapping[int, float]  # log drift of each block, relative to the mean block
    residual_sd: float  # of the least-squares fit, log scale (the drift plot); NaN when df == 0
    df: int  # residual degrees of freedom
    residuals: Mapping[Hashable, tuple[float, ...]]  # per setting, in the order its cells were given
    _logs: Mapping[Hashable, np.ndarray] = field(repr=False, compare=False)
    _by_block: Mapping[Hashable, Mapping[int, float]] = field(repr=False, compare=False)  # mean log per block
    level_se: Mapping[Hashable, float] = field(default_factory=dict)  # standard error of each level (log scale)

    @property
    def blocks(self) -> tuple[int, ...]:
        return tuple(self.block_effects)

    def effect(self, a: Hashable, b: Hashable) -> Effect:
        """log(a / b) over the blocks holding both (paired t: the mean of the
        per-block log ratios and its standard error); Welch's t on all their
        cells when they share no block. One shared block: an estimate, no interval."""
        in_a, in_b = self._by_block[a], self._by_block[b]
        shared = sorted(set(in_a) & set(in_b))
        if not shared:
            return _welch(self._logs[a], self._logs[b], 0)
        d = np.array([in_a[blk] - in_b[blk] for blk in shared])
        if d.size < 2:
            return Effect(float(d[0]), math.nan, 0.0, True, 1)
        return Effect(float(d.mean()), float(d.std(ddof=1)) / math.sqrt(d.size), float(d.size - 1), True, d.size)


def fit_blocks(cells: Iterable[BlockCell], order: Sequence[Hashable] = ()) -> BlockModel:
    """Least-squares fit of log(value) = level(setting) + drift(block) + noise.

    Missing cells are simply absent rows of the design: every block still
    informs every pair of settings it holds. Values must be positive."""
    cells = list(cells)
    if not cells:
        raise ValueError("no cells to fit")
    bad = [c for c in cells if not (c.value > 0 and math.isfinite(c.value))]
    if bad:
        raise ValueError(f"the block model needs positive, finite values; got {bad[0].value!r} for {bad[0].key!r}")
    keys = [k for k in order if any(c.key == k for c in cells)]
    keys += [k for k in dict.fromkeys(c.key for c in cells) if k not in keys]
    blocks = sorted({c.block for c in cells})
    k, nb, n = len(keys), len(blocks), len(cells)
    col = {key: i for i, key in enumerate(keys)}
    bcol = {b: k + i for i, b in enumerate(blocks)}
    x = np.zeros((n, k + nb))
    y = np.empty(n)
    for r, c in enumerate(cells):
        x[r, col[c.key]] = 1.0
        x[r, bcol[c.block]] = 1.0
        y[r] = math.log(c.value)
    # The design is rank-deficient by one per connected component (a constant can
    # move between levels and drifts); the pseudo-inverse gives the minimum-norm
    # solution, and every contrast within a component is the same for all solutions.
    xtx_pinv = np.linalg.pinv(x.T @ x)
    theta = xtx_pinv @ x.T @ y
    rank = int(np.linalg.matrix_rank(x))
    fitted = x @ theta
    resid = y - fitted
    df = n - rank
    sd = math.sqrt(float(resid @ resid) / df) if df > 0 else math.nan

    component = _components(cells)
    # Levels comparable across components: each component's drifts are centred on
    # their mean, which moves into its settings' levels (contrasts do not change).
    comp_blocks: dict[int, list[float]] = {}
    for b in blocks:
        comp_blocks.setdefault(component[("block", b)], []).append(float(theta[bcol[b]]))
    shift = {cid: float(np.mean(v)) for cid, v in comp_blocks.items()}
    levels = {key: float(theta[col[key]]) + shift[component[("setting", key)]] for key in keys}
    drift = {b: float(theta[bcol[b]]) - shift[component[("block", b)]] for b in blocks}
    level_se = _level_errors(keys, blocks, col, bcol, component, xtx_pinv, sd)

    residuals: dict[Hashable, list[float]] = {key: [] for key in keys}
    logs: dict[Hashable, list[float]] = {key: [] for key in keys}
    per_block: dict[Hashable, dict[int, list[float]]] = {key: {} for key in keys}
    for r, c in enumerate(cells):
        residuals[c.key].append(float(resid[r]))
        logs[c.key].append(float(y[r]))
        per_block[c.key].setdefault(c.block, []).append(float(y[r]))  # an imported run may repeat a cell
    return BlockModel(
        keys=tuple(keys),
        levels=levels,
        block_effects=drift,
        residual_sd=sd,
        df=df,
        residuals={key: tuple(v) for key, v in residuals.items()},
        level_se=level_se,
        _logs={key: np.asarray(v) for key, v in logs.items()},
        _by_block={key: {b: float(np.mean(v)) for b, v in mine.items()} for key, mine in per_block.items()},
    )


def _level_errors(keys: list, blocks: list[int], col: dict, bcol: dict, component: dict, xtx_pinv: np.ndarray,
                  sd: float) -> dict[Hashable, float]:
    """The standard error of each setting's level (log scale): the level is its
    coefficient plus the mean of its component's block effects, an estimable
    function of the design, so its variance is sd^2 * c' (X'X)^+ c."""
    out: dict[Hashable, float] = {}
    for key in keys:
        c = np.zeros(xtx_pinv.shape[0])
        c[col[key]] = 1.0
        mine = [b for b in blocks if component[("block", b)] == component[("setting", key)]]
        for b in mine:
            c[bcol[b]] += 1.0 / len(mine)
        var = float(c @ xtx_pinv @ c)
        out[key] = sd * math.sqrt(var) if math.isfinite(sd) and var > 0 else math.nan
    return out


def _components(cells: list[BlockCell]) -> dict[tuple[str, Hashable], int]:
    """Connected components of the graph settings -- blocks (a cell is an edge):
    the fitted levels of two settings are comparable only inside one component."""
    parent: dict[tuple[str, Hashable], tuple[str, Hashable]] = {}

    def find(node: tuple[str, Hashable]) -> tuple[str, Hashable]:
        parent.setdefault(node, node)
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for c in cells:
        a, b = find(("setting", c.key)), find(("block", c.block))
        if a != b:
            parent[a] = b
    roots: dict[tuple[str, Hashable], int] = {}
    return {node: roots.setdefault(find(node), len(roots)) for node in list(parent)}


def _welch(a: np.ndarray, b: np.ndarray, shared: int) -> Effect:
    est = float(a.mean() - b.mean())
    if a.size < 2 or b.size < 2:
        return Effect(est, math.nan, 0.0, False, shared)
    va, vb = float(a.var(ddof=1)) / a.size, float(b.var(ddof=1)) / b.size
    se = math.sqrt(va + vb)
    if se == 0:
        return Effect(est, 0.0, float(a.size + b.size - 2), False, shared)
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    return Effect(est, se, df, False, shared)


def compare_with_best(model: BlockModel, best: Hashable, keys: Sequence[Hashable], alpha: float) -> dict[Hashable, Judged]:
    """Every setting of `keys` (the measured ones; the best among them) against
    the best, judged as one family whose chance of any false call is `alpha`
    (family.step_down). A pair's standard error is the larger of the block
    model's pooled one and the pair's own; its interval is never narrower than
    the pair's own t interval (the floor). Pairs that share no block with the
    best keep their unpaired (Welch) error, whose drift no pooling can remove.
    Settings without an interval (no variance anywhere yet) are left out."""
    contrasts = []
    pooled_ok = model.df > 0 and math.isfinite(model.residual_sd)
    for key in keys:
        if key == best:
            continue
        own = model.effect(key, best)
        own_ok = own.df > 0 and math.isfinite(own.se)
        floor = float(_scipy_stats.t.ppf(1.0 - alpha / 2.0, own.df)) * own.se if own_ok else 0.0
        if own.paired and pooled_ok:
            pooled = model.residual_sd * math.sqrt(2.0 / own.blocks)  # a per-block ratio has two cells' noise
            se = max(pooled, own.se) if own_ok else pooled
            contrasts.append(Contrast(key, own.estimate, se, float(model.df), floor))
        elif own_ok:
            contrasts.append(Contrast(key, own.estimate, own.se, own.df, floor))
    return step_down(contrasts, len(keys), alpha)


def per_look_alpha(looks: int, alpha: float = 1.0 - CONFIDENCE) -> float:
    """The error rate each look may spend so that all `looks` together spend at most `alpha`."""
    if looks < 1:
        raise ValueError(f"looks must be at least 1, not {looks!r}")
    return alpha / looks


# --------------------------------------------------------------------------
# the analysis of a sweep, paired


def analyse_blocks(
    cells: Sequence[BlockCell],
    *,
    order: Sequence[Hashable] = (),
    goal: str = "max",
    baseline: Hashable | None = None,
    practical: float = 0.0,
    looks: int = 1,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    metric: str = "",
) -> Analysis:
    """Per-setting medians (each on its own, as measured) and ratios to the best
    and to the baseline from the per-block ratios of each pair (BlockModel.effect),
    with 95% intervals split over `looks` looks: the ratios to the best as one
    family (compare_with_best), those to the baseline each on its own.

    The best is the setting with the best fitted level (its drift-adjusted
    geometric mean). A setting is indistinguishable from it when the interval
    of its ratio to the best contains 1, or the ratio is within `practical`."""
    goal = check_goal(goal)
    resamples = check_resamples(resamples)
    if not (practical >= 0 and math.isfinite(practical)):
        raise ValueError(f"practical must be a non-negative fraction, not {practical!r}")
    alpha = per_look_alpha(looks)
    keys = list(dict.fromkeys([*order, *(c.key for c in cells)]))
    if not keys:
        raise ValueError("no settings to analyse")
    values: dict[Hashable, list[float]] = {k: [] for k in keys}
    for c in cells:
        values[c.key].append(float(c.value))
    measured = [k for k in keys if values[k]]
    if baseline is not None and baseline not in values:
        raise ValueError(f"baseline {baseline!r} is not one of the settings: {keys!r}")
    if baseline is not None and not values[baseline]:
        raise ValueError(f"baseline {baseline!r} has no samples")
    if baseline is None and measured:
        baseline = measured[0]

    model = fit_blocks(cells, keys) if cells else None
    best: Hashable | None = None
    if model is not None:
        sign = 1.0 if goal == "max" else -1.0
        best = max(measured, key=lambda k: sign * model.levels[k])

    judged = compare_with_best(model, best, measured, alpha) if model is not None else {}
    outliers = _residual_outliers(cells, model) if model is not None else {}
    children = np.random.SeedSequence(seed).spawn(len(keys))
    settings: dict[Hashable, SettingStats] = {}
    indistinguishable: list[Hashable] = []
    for key, child in zip(keys, children):
        x = np.asarray(values[key])
        if x.size == 0:
            nan = math.nan
            settings[key] = SettingStats(key, 0, nan, nan, nan, nan, nan, nan, (), nan, nan, nan, nan, nan, nan, ())
            continue
        assert model is not None and best is not None and baseline is not None
        med = float(np.median(x))
        if x.size >= 2:
            lo, hi = percentile_interval(bootstrap_medians(x, np.random.default_rng(child), resamples))
        else:
            lo = hi = med
        to_base = (1.0, 1.0, 1.0) if key == baseline else model.effect(key, baseline).interval(alpha)
        if key == best:
            to_best = (1.0, 1.0, 1.0)
        elif key in judged:
            to_best = (judged[key].ratio, judged[key].low, judged[key].high)
        else:  # no variance estimate for this pair yet: a point, no interval
            to_best = (math.exp(model.effect(key, best).estimate), math.nan, math.nan)
        idx = outliers.get(key, ())
        level = _level_interval(model, key, alpha)
        settings[key] = SettingStats(
            key=key,
            n=int(x.size),
            median=med,
            ci_low=lo,
            ci_high=hi,
            cv=coefficient_of_variation(x),
            minimum=float(x.min()),
            maximum=float(x.max()),
            outliers=tuple(float(x[i]) for i in idx),
            ratio_to_baseline=to_base[0],
            ratio_ci_low=to_base[1],
            ratio_ci_high=to_base[2],
            ratio_to_best=to_best[0],
            ratio_to_best_ci_low=to_best[1],
            ratio_to_best_ci_high=to_best[2],
            outlier_indices=idx,
            level=level[0],
            level_ci_low=level[1],
            level_ci_high=level[2],
        )
        if key != best:
            r, rlo, rhi = to_best
            contains_one = rlo <= 1.0 <= rhi  # False for NaN: without an interval it is judged by the point (the verdict says why)
            if contains_one or abs(r - 1.0) <= practical:
                indistinguishable.append(key)

    return Analysis(
        metric=metric,
        goal=goal,
        baseline=baseline,
        best=best,
        indistinguishable=tuple(indistinguishable),
        settings=settings,
        resamples=resamples,
        seed=seed,
        practical=float(practical),
        method="paired",
        family="step-down range" if judged else "",
        looks=looks,
        blocks=len(model.blocks) if model is not None else 0,
        residual_sd=model.residual_sd if model is not None else math.nan,
        df=model.df if model is not None else 0,
        drift=dict(sorted(model.block_effects.items())) if model is not None else {},
        unpaired=tuple(k for k in measured if k != best and model is not None and best is not None and not model.effect(k, best).paired),
    )


def _level_interval(model: BlockModel, key: Hashable, alpha: float) -> tuple[float, float, float]:
    """A setting's block-adjusted level (the geometric mean with the blocks' drift
    taken out, at the run's average block) with its t interval from the block
    model's pooled noise; NaN bounds when the model has no residual degrees of freedom."""
    level = math.exp(model.levels[key])
    se = model.level_se.get(key, math.nan)
    if not (model.df > 0 and math.isfinite(se)):
        return level, math.nan, math.nan
    t = float(_scipy_stats.t.ppf(1.0 - alpha / 2.0, model.df))
    return level, math.exp(model.levels[key] - t * se), math.exp(model.levels[key] + t * se)


def _residual_outliers(cells: Sequence[BlockCell], model: BlockModel) -> dict[Hashable, tuple[int, ...]]:
    """Cells whose residual (after block drift and setting level) is more than
    3.5 robust standard deviations out; indices into each setting's cells in
    the order given. Never dropped, only named.

    Flagging a setting's raw values would call a whole slow block 'outliers';
    the residual is what is odd about a cell. The residual comes from a median
    polish, not from the least-squares fit, where one odd cell pulls its
    setting's level and makes that setting's other cells look odd too. The
    scale is the least-squares residuals' median absolute size (x1.4826, and
    scaled for the fitted parameters): the polish's own residuals are mostly
    near zero by construction, and their MAD would flag ordinary noise."""
    every = np.concatenate([np.asarray(r) for r in model.residuals.values()])
    if every.size < 5 or model.df < 2:
        return {}
    scale = 1.4826 * float(np.median(np.abs(every))) * math.sqrt(every.size / model.df)
    if scale == 0:
        return {}
    resid = _median_polish(cells)
    out: dict[Hashable, list[int]] = {}
    seen: dict[Hashable, int] = {}
    for c, r in zip(cells, resid):
        position = seen.get(c.key, 0)
        seen[c.key] = position + 1
        if abs(r) > _OUTLIER_SD * scale:
            out.setdefault(c.key, []).append(position)
    return {k: tuple(v) for k, v in out.items()}


def _median_polish(cells: Sequence[BlockCell], sweeps: int = 10) -> np.ndarray:
    """Tukey's median polish of log(value) over blocks x settings (missing cells
    allowed): the residual of each cell, in the order given."""
    y = np.log(np.array([c.value for c in cells], dtype=np.float64))
    blocks: list[Hashable] = [c.block for c in cells]
    keys: list[Hashable] = [c.key for c in cells]
    resid = y - np.median(y)
    if np.all(np.isfinite(resid)):
        return _median_polish_finite(resid, (blocks, keys), sweeps)
    for _ in range(sweeps):
        for groups in (blocks, keys):
            centre: dict[Hashable, list[float]] = {}
            for g, r in zip(groups, resid):
                centre.setdefault(g, []).append(float(r))
            med = {g: float(np.median(v)) for g, v in centre.items()}
            resid = resid - np.array([med[g] for g in groups])
    return resid


def _median_polish_finite(resid: np.ndarray, groupings: tuple[list[Hashable], ...], sweeps: int) -> np.ndarray:
    """The same sweeps on finite residuals, on Python floats: statistics.median of a
    group is np.median's value to the bit (the middle one, or the two middle ones'
    sum halved), and a run's groups are small, where np.median's per-call overhead
    was most of the time (analyse_blocks runs after every cell and at every look)."""
    values = resid.tolist()
    members: list[list[list[int]]] = []
    for groups in groupings:
        by_group: dict[Hashable, list[int]] = {}
        for i, g in enumerate(groups):
            by_group.setdefault(g, []).append(i)
        members.append(list(by_group.values()))
    median = statistics.median
    for _ in range(sweeps):
        for grouping in members:
            centres = [median([values[i] for i in idx]) for idx in grouping]
            for idx, centre in zip(grouping, centres):
                for i in idx:
                    values[i] -= centre
    return np.array(values, dtype=np.float64)


# --------------------------------------------------------------------------
# sequential stopping


def unsettled(analysis: Analysis, target: float | None, margin: float = 0.0) -> list[Hashable]:
    """Settings the run cannot stop on yet.

    A setting other than the best is settled when the interval of its ratio to
    the best (the family's, look-adjusted: what the verdict shows) excludes 1
    (separated), or lies within the larger of `practical` and `margin` of 1
    (as good as the best, for the user's purpose: the budgeted rule's 3%), or,
    with a `target`, is no wider than +-`target` (the ratio is known as
    precisely as asked). Settings without an interval are unsettled. With a
    single setting there is no ratio: its own median's interval must be
    within `target` (or `margin`)."""
    if target is not None and not (target > 0 and math.isfinite(target)):
        raise ValueError(f"target must be a positive fraction, not {target!r}")
    if not (margin >= 0 and math.isfinite(margin)):
        raise ValueError(f"margin must be a non-negative fraction, not {margin!r}")
    measured = {k: s for k, s in analysis.settings.items() if s.n > 0}
    if len(measured) == 1:
        (k, s), = measured.items()
        alone = target or margin
        return [] if s.n >= 2 and s.half_width <= alone * abs(s.median) else [k]
    p = max(analysis.practical, margin)
    out = []
    for k, s in measured.items():
        if k == analysis.best:
            continue
        r, lo, hi = s.ratio_to_best, s.ratio_to_best_ci_low, s.ratio_to_best_ci_high
        if not (math.isfinite(lo) and math.isfinite(hi) and r > 0):
            out.append(k)
            continue
        separated = lo > 1.0 or hi < 1.0
        within_practical = p > 0 and lo >= 1.0 - p and hi <= 1.0 + p
        precise = target is not None and (hi - lo) / (2.0 * r) <= target
        if not (separated or within_practical or precise):
            out.append(k)
    return out
