"""A/A tests of blocklab's verdicts: how often identical settings are called
different, how often a real 5% or 10% difference is found, and how many cells
target_ci = 0.03 costs, within-block (paired, today's) against each setting on
its own (unpaired, blocklab before issue 20).

    python benchmarks/aa.py simulate --from results/mbrc-LONG-RUN --runs 1000
    python benchmarks/aa.py real --runs 20 --blocks 12
    python benchmarks/aa.py stopping --runs 3
    python benchmarks/aa.py generated --cases 1000
    python benchmarks/aa.py family --from results/mbrc-LONG-RUN --runs 1000

simulate   Runs simulated with the drift and noise of a measured run (its block
           effects and residuals, resampled: blocklab.analysis.simulate): the
           mbrc sweep's eight settings at their measured levels plus the best
           one entered a second time under another label. A false verdict is
           the two labels' interval excluding 1. Fixed repeats and sequential
           stopping (target_ci, repeats 3, max_repeats 15); power with the
           second label truly 5% or 10% faster; blocks used by target_ci.
           Then everything `family` does.
family     The verdict's claims against the best as one family: every rule
           (per comparison as before, Holm, Hsu's MCB, Tukey with each pair's
           own error, a step-down calibrated for each pair's own error, the
           pooled error alone, and blocklab's: the larger of pooled and own,
           step-down on the studentized range) judges the same simulated runs
           of (a) 8 equal settings, (b) 2, (c) six equal with one 5% and one
           10% slower, (d) as (c) and (e) as (a) but each setting with one
           measured setting's own noise. Per rule and number of blocks: runs
           with any false call (family-wise), runs with any interval missing
           its true ratio, power for the 5% / 10%, median half-width. Then
           target_ci runs of (a), (c), (e) judged by blocklab's verdict.
real       The same on the real engine: the mbrc recipe at --quick's size
           (embedded PostgreSQL, 300,000 rows, cold scans), every multiblock_read
           value crossed with pg.random_page_cost = 4 and 5, which a sequential
           scan never reads: eight settings each entered twice under two labels,
           run by the real runner in random order. Power: the cost-5 twins'
           values multiplied by 1.05 / 1.10 (real noise, a known effect).
stopping   The mbrc recipe (3,000,000 rows) run for 15 fixed blocks; both
           stopping rules replayed on its blocks as they came (what the runner
           would have done after each block): unpaired (every setting's median
           interval within 3%) and paired (every setting separated from the
           best or its ratio known to +-3%, with the 5% split over the looks).
generated  The issue's done-when: run directories with +-20% block drift, 3%
           cell noise, 6 blocks, through `blocklab analyse` (reanalyse):
           separated with a true 8% difference, indistinguishable without.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import shutil
import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats as sstats

from blocklab.analysis.family import Contrast, Judged, range_critical, step_down
from blocklab.analysis.paired import (
    BlockCell,
    BlockModel,
    analyse_blocks,
    compare_with_best,
    fit_blocks,
    per_look_alpha,
    unsettled,
)
from blocklab.analysis.simulate import NoiseModel, simulate_cells, write_run
from blocklab.analysis.stats import CONFIDENCE, analyse, noisy_settings
from blocklab.results import RunDir
from blocklab.units import label_of

R = 2000  # bootstrap resamples: the minimum blocklab allows, plenty for a yes/no per run
KNOB, METRIC = "multiblock_read", "rows_per_s"
TWIN = "twin"  # the second label of the duplicated setting (simulation)
NOOP, NOOP_VALUES = "pg.random_page_cost", (4.0, 5.0)  # a knob a sequential scan never reads (real A/A)


# ---------------------------------------------------------------------- verdict rules
def paired_model(cells: list[BlockCell], a: str, b: str, looks: int = 1) -> tuple[float, float, float]:
    """b / a from the per-block ratios, paired t (blocklab today)."""
    return fit_blocks(cells).effect(b, a).interval(per_look_alpha(looks))


def unpaired(cells: list[BlockCell], a: str, b: str) -> tuple[float, float, float]:
    """b / a as blocklab judged it before: ratio of medians, each setting bootstrapped on its own."""
    xa = [c.value for c in cells if c.key == a]
    xb = [c.value for c in cells if c.key == b]
    s = analyse({a: xa, b: xb}, baseline=a, resamples=R).settings[b]
    return s.ratio_to_baseline, s.ratio_ci_low, s.ratio_ci_high


def paired_bootstrap_median(cells: list[BlockCell], a: str, b: str, rng: np.random.Generator) -> tuple[float, float, float]:
    """b / a as the issue proposed: median of per-block ratios, percentile bootstrap over blocks."""
    by = {(c.block, c.key): c.value for c in cells}
    d = np.array([math.log(by[(blk, b)] / by[(blk, a)]) for blk in sorted({c.block for c in cells}) if (blk, a) in by and (blk, b) in by])
    idx = rng.integers(0, d.size, (R, d.size))
    lo, hi = np.quantile(np.median(d[idx], axis=1), [0.025, 0.975])
    return math.exp(float(np.median(d))), math.exp(lo), math.exp(hi)


def separated(interval: tuple[float, float, float]) -> int:
    """+1: b demonstrably higher, -1: lower, 0: the interval contains 1 (or there is none)."""
    _, lo, hi = interval
    return 1 if lo > 1.0 else (-1 if hi < 1.0 else 0)


def rate(k: int, n: int) -> str:
    """'4.6% [3.4, 6.1]' with a Clopper-Pearson 95% interval."""
    lo = sstats.beta.ppf(0.025, k, n - k + 1) if k > 0 else 0.0
    hi = sstats.beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    return f"{k / n:.1%} [{lo:.1%}, {hi:.1%}] ({k}/{n})"


# ---------------------------------------------------------------------- sequential
@dataclass
class Stopped:
    blocks: int
    reached: bool  # every setting settled before max_repeats
    cells: list[BlockCell]


def run_sequential(draw: Callable[[int], list[BlockCell]], rule: str, repeats: int, max_repeats: int, target: float) -> Stopped:
    """Add blocks (draw(block) -> its cells) until `rule` says stop or max_repeats:
    'paired' (today's: analysis/paired.unsettled, looks split), 'naive' (the same
    rule without splitting the 5% over the looks), 'unpaired' (before: every
    setting's median interval within target)."""
    looks = max_repeats - repeats + 1 if rule == "paired" else 1
    cells: list[BlockCell] = []
    for b in range(max_repeats):
        cells += draw(b)
        if b + 1 < repeats:
            continue
        if rule == "unpaired":
            groups = {k: [c.value for c in cells if c.key == k] for k in dict.fromkeys(c.key for c in cells)}
            left = noisy_settings(analyse(groups, resamples=R), target)
        else:
            left = unsettled(analyse_blocks(cells, looks=looks, resamples=R), target)
        if not left:
            return Stopped(b + 1, True, cells)
    return Stopped(max_repeats, False, cells)


def final_interval(stop: Stopped, rule: str, a: str, b: str, looks: int) -> tuple[float, float, float]:
    if rule == "unpaired":
        return unpaired(stop.cells, a, b)
    return paired_model(stop.cells, a, b, looks if rule == "paired" else 1)


def verdict_pair(cells: list[BlockCell], a: str, b: str, looks: int = 1) -> int:
    """What the verdict (paired.compare_with_best, every setting of the run in
    the family) says of b against a: +1 b is the best and a is called slower,
    -1 the reverse, 0 neither (including a best that is neither of them)."""
    model = fit_blocks(cells)
    keys = list(model.keys)
    best = max(keys, key=lambda k: model.levels[k])
    judged = compare_with_best(model, best, keys, per_look_alpha(looks))
    if best == b and a in judged and judged[a].separated:
        return 1
    if best == a and b in judged and judged[b].separated:
        return -1
    return 0


# ---------------------------------------------------------------------- simulate
def measured_levels(rows: list[Any]) -> dict[str, float]:
    cells = [BlockCell(r.block, str(r.settings[KNOB]), r.metrics[METRIC]) for r in rows if r.ok and METRIC in r.metrics]
    levels = fit_blocks(cells).levels
    top = max(levels.values())
    return {k: math.exp(v - top) for k, v in levels.items()}


def simulate(args: argparse.Namespace) -> None:
    rows = RunDir(args.source).rows()
    noise = NoiseModel.from_rows(rows, METRIC)
    levels = measured_levels(rows)
    best = max(levels, key=levels.get)
    print(f"noise model from {args.source} ({len(rows)} rows): {noise.describe()}")
    print("settings at their measured levels: " + ", ".join(f"{k}: {v:.3f}" for k, v in levels.items()) + f"; twin of {best}")
    rng = np.random.default_rng(args.seed)

    def effects(factor: float) -> dict[str, float]:
        return {**levels, TWIN: levels[best] * factor}

    print("\n== fixed repeats: false 'X is faster' for two labels of one setting (A/A) ==")
    print("blocks | unpaired (before issue 20)   | paired, bootstrap of median (issue's proposal) | paired t, the pair alone (issue 20) | the verdict now (family of 8 comparisons)")
    for n in args.fixed:
        counts = [0, 0, 0, 0]
        for _ in range(args.runs):
            cells = simulate_cells(rng, effects(1.0), n, noise)
            counts[0] += separated(unpaired(cells, best, TWIN)) != 0
            counts[1] += separated(paired_bootstrap_median(cells, best, TWIN, rng)) != 0
            counts[2] += separated(paired_model(cells, best, TWIN)) != 0
            counts[3] += verdict_pair(cells, best, TWIN) != 0
        print(f"{n:6d} | {rate(counts[0], args.runs):28s} | {rate(counts[1], args.runs):46s} | {rate(counts[2], args.runs):35s} | {rate(counts[3], args.runs)}")

    print("\n== power, fixed repeats: the twin truly 5% / 10% faster, found faster ==")
    for factor in (1.05, 1.10):
        for n in args.fixed:
            found = [0, 0, 0]
            for _ in range(args.power_runs):
                cells = simulate_cells(rng, effects(factor), n, noise)
                found[0] += separated(unpaired(cells, best, TWIN)) == 1
                found[1] += separated(paired_model(cells, best, TWIN)) == 1
                found[2] += verdict_pair(cells, best, TWIN) == 1
            print(f"+{factor - 1:.0%}, {n:2d} blocks: unpaired {rate(found[0], args.power_runs)}; paired, the pair alone {rate(found[1], args.power_runs)}; "
                  f"the verdict now {rate(found[2], args.power_runs)}")

    rep, mx = args.repeats, args.max_repeats
    looks = mx - rep + 1
    print(f"\n== sequential: target_ci {args.target:.0%}, repeats {rep}, max_repeats {mx} ({looks} looks) ==")
    for factor in (1.0, 1.05, 1.10):
        line = []
        for rule in ("unpaired", "naive", "paired"):
            hits, used, reached = 0, [], 0
            n_runs = args.runs if factor == 1.0 else args.power_runs
            for _ in range(n_runs if rule != "naive" or factor == 1.0 else 0):
                stop = run_sequential(lambda b, f=factor: simulate_cells(rng, effects(f), 1, noise, first_block=b), rule, rep, mx, args.target)
                if rule == "unpaired":
                    verdict = separated(final_interval(stop, rule, best, TWIN, looks))
                else:  # what the verdict says at the stop, looks split ('paired') or not ('naive')
                    verdict = verdict_pair(stop.cells, best, TWIN, looks if rule == "paired" else 1)
                hits += verdict != 0 if factor == 1.0 else verdict == 1
                used.append(stop.blocks)
                reached += stop.reached
            if used:
                what = "false 'faster'" if factor == 1.0 else "found faster"
                line.append(f"{rule}: {what} {rate(hits, len(used))}, blocks {statistics.mean(used):.1f} (stopped early {reached}/{len(used)})")
        print(f"twin x{factor:.2f}:\n  " + "\n  ".join(line))

    print(f"\n== cells to reach target_ci {args.target:.0%} on the mbrc sweep (8 settings, no twin), {args.power_runs} runs ==")
    for rule in ("unpaired", "paired"):
        used, reached = [], 0
        for _ in range(args.power_runs):
            stop = run_sequential(lambda b: simulate_cells(rng, levels, 1, noise, first_block=b), rule, rep, mx, args.target)
            used.append(stop.blocks * len(levels))
            reached += stop.reached
        print(f"{rule:8s}: cells median {statistics.median(used):.0f} (mean {statistics.mean(used):.0f}); target reached before max_repeats in {rate(reached, len(used))}")

    family(args)  # the family of claims against the best: the rules compared, fixed and sequential


# ---------------------------------------------------------------------- the family of claims against the best
# Each rule takes the fitted block model, the selected best, the measured
# settings and the error rate, and gives every other setting's ratio to the
# best with its interval; a call is an interval that excludes 1. All but the
# first and the last use family.step_down with another critical value, so the
# rules differ only in what the gap is divided by and compared with.
FamilyRule = Callable[[BlockModel, str, list[str], float], dict[str, tuple[float, float, float]]]
CALIBRATION_DRAWS = 100_000  # normal draws per calibrated critical value: its 95% point to about +-1%


def _own_contrasts(model: BlockModel, best: str, keys: list[str]) -> list[Contrast]:
    """Each pair's own per-block ratios: the paired t's standard error and degrees of freedom."""
    out = []
    for k in keys:
        if k != best:
            e = model.effect(k, best)
            out.append(Contrast(k, e.estimate, e.se, e.df))
    return out


def _as_intervals(judged: dict[Any, Judged]) -> dict[str, tuple[float, float, float]]:
    return {str(k): (j.ratio, j.low, j.high) for k, j in judged.items()}


def rule_per_comparison(model: BlockModel, best: str, keys: list[str], alpha: float) -> dict[str, tuple[float, float, float]]:
    """Before: each pair's own 95% paired t interval, taken alone."""
    return {k: model.effect(k, best).interval(alpha) for k in keys if k != best}


def rule_holm(model: BlockModel, best: str, keys: list[str], alpha: float) -> dict[str, tuple[float, float, float]]:
    """Holm over the k - 1 comparisons with the best, as if the best were fixed before the data."""
    holm = lambda m, df, a: float(sstats.t.ppf(1 - a / (2 * (m - 1)), df))  # noqa: E731
    return _as_intervals(step_down(_own_contrasts(model, best, keys), len(keys), alpha, holm))


@functools.cache
def _calibrated(settings: int, blocks: int, alpha: float, selected: bool) -> float:
    """The 1 - alpha point of the largest paired t of the best against the
    others, `settings` equal settings in `blocks` complete blocks, normal
    noise, each pair with its own per-block spread (seeded: the same value in
    every run of this script). `selected`: the best is the one with the highest
    mean (the winner's curse included); else a fixed one (one-sided Dunnett)."""
    rng = np.random.default_rng([settings, blocks, 20261124])
    chunk = max(1, 2_000_000 // (settings * blocks))
    tops = []
    for start in range(0, CALIBRATION_DRAWS, chunk):
        x = rng.normal(size=(min(chunk, CALIBRATION_DRAWS - start), blocks, settings))
        best = x.mean(axis=1).argmax(axis=1) if selected else np.zeros(x.shape[0], dtype=int)
        d = np.take_along_axis(x, best[:, None, None], axis=2) - x
        with np.errstate(divide="ignore", invalid="ignore"):
            t = d.mean(axis=1) / (d.std(axis=1, ddof=1) / math.sqrt(blocks))
        t[np.arange(x.shape[0]), best] = -np.inf
        tops.append(t.max(axis=1))
    return float(np.quantile(np.concatenate(tops), 1 - alpha))


def rule_mcb(model: BlockModel, best: str, keys: list[str], alpha: float) -> dict[str, tuple[float, float, float]]:
    """Hsu's MCB with each pair's own error: the one-sided Dunnett critical
    value of k - 1 comparisons with a fixed reference, one step. Its "not the
    best" allows a tie, so with equal settings its calls are not errors by its
    own definition; by the verdict's ("slower") they are."""
    n = max(model.effect(k, best).blocks for k in keys if k != best)
    c = _calibrated(len(keys), n, alpha, selected=False)
    return _as_intervals(step_down(_own_contrasts(model, best, keys), len(keys), alpha, lambda m, df, a: c))


def rule_tukey_own(model: BlockModel, best: str, keys: list[str], alpha: float) -> dict[str, tuple[float, float, float]]:
    """The studentized range of all k settings, each pair's own error and degrees of freedom, one step."""
    k = len(keys)
    return _as_intervals(step_down(_own_contrasts(model, best, keys), k, alpha, lambda m, df, a: range_critical(k, df, a)))


def rule_calibrated_own(model: BlockModel, best: str, keys: list[str], alpha: float) -> dict[str, tuple[float, float, float]]:
    """Each pair's own error, step-down with critical values calibrated for
    exactly that statistic (normal noise, the best selected from the data)."""
    return _as_intervals(step_down(_own_contrasts(model, best, keys), len(keys), alpha,
                                   lambda m, df, a: _calibrated(m, int(round(df)) + 1, a, selected=True)))


def rule_pooled(model: BlockModel, best: str, keys: list[str], alpha: float) -> dict[str, tuple[float, float, float]]:
    """The block model's pooled error alone, step-down on the studentized range."""
    contrasts = [Contrast(c.key, c.estimate, model.residual_sd * math.sqrt(2.0 / model.effect(c.key, best).blocks), float(model.df))
                 for c in _own_contrasts(model, best, keys)]
    return _as_intervals(step_down(contrasts, len(keys), alpha))


def rule_now(model: BlockModel, best: str, keys: list[str], alpha: float) -> dict[str, tuple[float, float, float]]:
    """blocklab now (paired.compare_with_best): the larger of the pooled and the
    pair's own error, step-down on the studentized range, never narrower than
    the pair's own t interval."""
    return _as_intervals(compare_with_best(model, best, keys, alpha))


FAMILY_RULES: dict[str, FamilyRule] = {
    "per comparison (before)": rule_per_comparison,
    "Holm vs best": rule_holm,
    "Hsu MCB (1-sided Dunnett)": rule_mcb,
    "Tukey, own error": rule_tukey_own,
    "own error, calibrated step-down": rule_calibrated_own,
    "pooled error, step-down": rule_pooled,
    "max(pooled, own), step-down (now)": rule_now,
}


@dataclass
class FamilyTally:
    runs: int = 0
    false: int = 0  # runs with at least one false call
    missed: int = 0  # runs with at least one interval missing its true ratio
    found: dict[str, int] = field(default_factory=dict)  # setting -> runs where it was called (true differences)
    widths: list[float] = field(default_factory=list)  # half-widths relative to the ratio

    def add(self, intervals: dict[str, tuple[float, float, float]], truth: dict[str, float], best: str) -> None:
        self.runs += 1
        false = missed = False
        for k, (r, lo, hi) in intervals.items():
            if not (math.isfinite(lo) and math.isfinite(hi)):
                continue
            true = truth[k] / truth[best]  # goal max: below 1 is slower
            call = not (lo <= 1.0 <= hi)
            # a call is false unless the truth lies on the called side of 1
            false |= call and not ((hi < 1.0 and true < 1.0 - 1e-12) or (lo > 1.0 and true > 1.0 + 1e-12))
            missed |= not (lo <= true <= hi)
            if call and truth[k] != max(truth.values()):
                self.found[k] = self.found.get(k, 0) + 1
            self.widths.append((hi - lo) / (2.0 * r))
        self.false += false
        self.missed += missed


def assign_pools(rng: np.random.Generator, labels: list[str], pools: list[np.ndarray] | None) -> dict[str, np.ndarray] | None:
    """For a simulated run: each setting gets one measured setting's own
    residuals as its noise (drawn at random, a different one per setting when
    there are enough): the unequal noise of a real run's settings."""
    if pools is None:
        return None
    pick = rng.choice(len(pools), len(labels), replace=len(pools) < len(labels))
    return {label: pools[p] for label, p in zip(labels, pick)}


def draw_cells(rng: np.random.Generator, effects: dict[str, float], blocks: int, noise: NoiseModel,
               own: dict[str, np.ndarray] | None, first_block: int = 0) -> list[BlockCell]:
    """simulate_cells, or with `own` (assign_pools) each setting's cell noise
    resampled from its own pool; the block drift is the noise model's either way."""
    if own is None:
        return simulate_cells(rng, effects, blocks, noise, first_block=first_block)
    drift = noise.drifts(rng, blocks)
    return [BlockCell(first_block + i, label, 1e7 * factor * math.exp(drift[i] + float(rng.choice(own[label]))))
            for i in range(blocks) for label, factor in effects.items()]


def setting_pools(rows: list[Any]) -> list[np.ndarray]:
    """Each measured setting's residuals, scaled like NoiseModel's (sqrt(n / df))."""
    cells = [BlockCell(r.block, label_of(r.settings), r.metrics[METRIC]) for r in rows if r.ok and METRIC in r.metrics]
    model = fit_blocks(cells)
    n = sum(len(v) for v in model.residuals.values())
    return [np.asarray(v) * math.sqrt(n / model.df) for v in model.residuals.values()]


FAMILY_SCENARIOS = {
    "a": ("8 equal settings", [1.0] * 8, False),
    "b": ("2 equal settings (A/A)", [1.0] * 2, False),
    "c": ("8 settings: six equal, one 5% and one 10% slower", [1.0] * 6 + [0.95, 0.90], False),
    "d": ("as (c), each setting with one measured setting's own noise", [1.0] * 6 + [0.95, 0.90], True),
    "e": ("8 equal, each setting with one measured setting's own noise", [1.0] * 8, True),
}


def family(args: argparse.Namespace) -> None:
    """The comparison of rules: every rule judges the same simulated runs."""
    rows = RunDir(args.source).rows()
    noise = NoiseModel.from_rows(rows, METRIC)
    pools = setting_pools(rows)
    print(f"noise model from {args.source} ({len(rows)} rows): {noise.describe()}; "
          f"per-setting noise sd {min(p.std() for p in pools):.3f}-{max(p.std() for p in pools):.3f}")
    rng = np.random.default_rng(args.seed)
    alpha = 1.0 - CONFIDENCE
    for code in args.scenarios:
        name, levels, own_noise = FAMILY_SCENARIOS[code]
        effects = {f"s{i}": v for i, v in enumerate(levels)}
        slow = {k: v for k, v in effects.items() if v < 1.0}
        print(f"\n== ({code}) {name}: {args.runs} runs per column ==")
        head = "; ".join(f"{n} blocks" for n in args.fixed)
        what = "false family / any interval missing its truth" + (" / found " + ", ".join(f"{1 - v:.0%}" for v in slow.values()) if slow else "") + " / median half-width"
        print(f"rule | {head}   ({what})")
        tallies = {rule: {n: FamilyTally() for n in args.fixed} for rule in FAMILY_RULES}
        for n in args.fixed:
            for _ in range(args.runs):
                cells = draw_cells(rng, effects, n, noise, assign_pools(rng, list(effects), pools if own_noise else None))
                model = fit_blocks(cells)
                keys = list(model.keys)
                best = str(max(keys, key=lambda k: model.levels[k]))
                for rule, judge in FAMILY_RULES.items():
                    tallies[rule][n].add(judge(model, best, keys, alpha), effects, best)
        for rule, by_n in tallies.items():
            cols = []
            for t in by_n.values():
                found = " / " + " ".join(f"{t.found.get(k, 0) / t.runs:.1%}" for k in slow) if slow else ""
                cols.append(f"{t.false / t.runs:.1%} / {t.missed / t.runs:.1%}{found} / {statistics.median(t.widths):.1%}")
            print(f"{rule} | " + " | ".join(cols))
        print("false family rates with 95% intervals, max(pooled, own) step-down (now): "
              + "; ".join(f"{n} blocks {rate(t.false, t.runs)}" for n, t in tallies['max(pooled, own), step-down (now)'].items()))

    if args.sequential_runs:
        rep, mx, target = args.repeats, args.max_repeats, args.target
        looks = mx - rep + 1
        print(f"\n== sequential: target_ci {target:.0%}, repeats {rep}, max_repeats {mx} ({looks} looks), "
              f"the verdict as blocklab gives it (analyse_blocks, unsettled), {args.sequential_runs} runs ==")
        for code in args.sequential:
            name, levels, own_noise = FAMILY_SCENARIOS[code]
            effects = {f"s{i}": v for i, v in enumerate(levels)}
            slower = [k for k, v in effects.items() if v < 1.0]
            tally, used, reached = FamilyTally(), [], 0
            for _ in range(args.sequential_runs):
                own = assign_pools(rng, list(effects), pools if own_noise else None)  # fixed for the whole run
                def draw(b: int, effects: dict[str, float] = effects, own: dict[str, np.ndarray] | None = own) -> list[BlockCell]:
                    return draw_cells(rng, effects, 1, noise, own, first_block=b)

                stop = run_sequential(draw, "paired", rep, mx, target)
                a = analyse_blocks(stop.cells, looks=looks, resamples=R)
                tally.add({str(k): (s.ratio_to_best, s.ratio_to_best_ci_low, s.ratio_to_best_ci_high)
                           for k, s in a.settings.items() if k != a.best}, effects, str(a.best))
                used.append(stop.blocks)
                reached += stop.reached
            found = "; found " + ", ".join(f"{1 - effects[k]:.0%} {tally.found.get(k, 0) / tally.runs:.1%}" for k in slower) if slower else ""
            print(f"({code}) {name}: false family {rate(tally.false, tally.runs)}{found}; "
                  f"blocks {statistics.mean(used):.1f} on average, settled before max_repeats in {rate(reached, len(used))}")


# ---------------------------------------------------------------------- the real engine
def experiment(rows: int, blocks: int, seed: int, name: str, values: list[int] | None = None) -> dict[str, Any]:
    import tomllib

    from blocklab import recipes

    raw = tomllib.loads(recipes.path_of("mbrc").read_text())
    raw.pop("variants", None)
    raw.pop("quick", None)
    raw["name"] = name
    raw["dataset"]["rows"] = rows
    raw["measure"].update({"repeats": blocks, "seed": seed})
    if values:
        raw["knobs"][KNOB] = values
    return raw


def run_mbrc(raw: dict[str, Any], work: Path) -> RunDir:
    from blocklab.experiment import prepare
    from blocklab.runner import SilentReporter, run
    from blocklab.spec import spec_from_dict

    exp = prepare(spec_from_dict(raw, "benchmark", {}), "", "benchmark", cache_dir=work / "cache")
    run_dir = RunDir(work / raw["name"])
    run(exp, run_dir, SilentReporter())
    return run_dir


def noop_pairs(rows: list[Any], factor: float = 1.0) -> tuple[list[BlockCell], list[tuple[str, str]]]:
    """The run's cells (each setting's label, the random_page_cost = 5 twin's
    values multiplied by `factor`) and the A/A pairs: (v at cost 4, v at cost 5)."""
    cells, pairs = [], {}
    for r in rows:
        if not (r.ok and METRIC in r.metrics):
            continue
        cost = float(r.settings[NOOP])
        value = r.metrics[METRIC] * (factor if cost == NOOP_VALUES[1] else 1.0)
        label = label_of(r.settings)
        cells.append(BlockCell(r.block, label, value))
        pairs.setdefault(r.settings[KNOB], {})[cost] = label
    return cells, [(p[NOOP_VALUES[0]], p[NOOP_VALUES[1]]) for p in pairs.values() if len(p) == 2]


def real(args: argparse.Namespace) -> None:
    """Every multiblock_read value crossed with a knob the plan never reads: for
    SELECT count(*) on a table without an index the only plan is a sequential
    scan, whatever random_page_cost says, so each (value, cost 4) and (value,
    cost 5) are the same setting under two labels, run by the real runner in
    its own random order."""
    work = Path(tempfile.mkdtemp(prefix="blocklab-aa-", dir="/var/tmp"))
    os.chmod(work, 0o755)
    runs: list[list[Any]] = []
    try:
        for i in range(args.runs):
            raw = experiment(args.rows, args.blocks, args.seed + i, f"aa-{i}")
            raw["knobs"][NOOP] = list(NOOP_VALUES)
            run_dir = run_mbrc(raw, work)
            rows = run_dir.rows()
            runs.append(rows)
            cells, pairs = noop_pairs(rows)
            model = fit_blocks(cells)
            worst = max(pairs, key=lambda p: abs(model.effect(p[1], p[0]).estimate))
            r, u = paired_model(cells, *worst), unpaired(cells, *worst)
            print(f"run {i + 1:2d}: {sum(x.ok for x in rows)} ok cells; largest twin gap {worst[1]} / cost 4: "
                  f"paired {r[0]:.3f} [{r[1]:.3f}, {r[2]:.3f}], unpaired {u[0]:.3f} [{u[1]:.3f}, {u[2]:.3f}]", flush=True)
            shutil.rmtree(run_dir.path)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    looks = args.blocks - args.repeats + 1
    pooled = [c for rows in runs for c in noop_pairs(rows)[0]]
    print(f"\n{len(runs)} real runs x {len(noop_pairs(runs[0])[1])} twin pairs, {args.blocks} blocks each, "
          f"{len(pooled)} cells; sequential replay from block {args.repeats} ({looks} looks), target_ci {args.target:.0%}")
    for factor in (1.0, 1.05, 1.10):
        got = {"unpaired": 0, "paired": 0, "paired, sequential": 0}
        total, blocks_used = 0, []
        for rows in runs:
            cells, pairs = noop_pairs(rows, factor)
            stop = run_sequential(lambda b, cells=cells: [c for c in cells if c.block == b], "paired", args.repeats, args.blocks, args.target)
            blocks_used.append(stop.blocks)
            for a, b in pairs:
                want = (lambda v: v != 0) if factor == 1.0 else (lambda v: v == 1)
                got["unpaired"] += want(separated(unpaired(cells, a, b)))
                got["paired"] += want(separated(paired_model(cells, a, b)))
                got["paired, sequential"] += want(separated(final_interval(stop, "paired", a, b, looks)))
                total += 1
        what = "A/A, false 'faster'" if factor == 1.0 else f"twin x{factor:.2f}, found faster"
        print(f"{what}: " + "; ".join(f"{k} {rate(v, total)}" for k, v in got.items())
              + f"; the sequential replay stopped after {statistics.mean(blocks_used):.1f} blocks on average")


# ---------------------------------------------------------------------- stopping on real mbrc
def stopping(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="blocklab-stop-", dir="/var/tmp"))
    os.chmod(work, 0o755)
    try:
        for i in range(args.runs):
            run_dir = run_mbrc(experiment(args.rows, args.max_repeats, args.seed + i, f"stop-{i}"), work)
            rows = run_dir.rows()
            cells = [BlockCell(r.block, label_of(r.settings), r.metrics[METRIC]) for r in rows if r.ok]
            k = len({c.key for c in cells})
            print(f"run {i + 1}: {len(cells)} ok cells, {k} settings, {args.max_repeats} blocks")
            for rule in ("unpaired", "paired"):
                stop = run_sequential(lambda b, cells=cells: [c for c in cells if c.block == b], rule, args.repeats, args.max_repeats, args.target)
                if rule == "paired":
                    a = analyse_blocks(stop.cells, looks=args.max_repeats - args.repeats + 1, resamples=R)
                else:
                    a = analyse({key: [c.value for c in stop.cells if c.key == key] for key in dict.fromkeys(c.key for c in stop.cells)}, resamples=R)
                status = f"settled after {stop.blocks} blocks = {stop.blocks * k} cells" if stop.reached else f"not reached in {stop.blocks} blocks ({stop.blocks * k} cells)"
                same = ", ".join(str(s).split("=")[1] for s in a.indistinguishable) or "none"
                print(f"  {rule:8s}: {status}; best {str(a.best).split('=')[1]}, indistinguishable from it: {same}")
                if not stop.reached:
                    left = noisy_settings(a, args.target) if rule == "unpaired" else unsettled(a, args.target)
                    print(f"            still open at the end: {', '.join(_open(a, key, rule) for key in left)}")
            shutil.rmtree(run_dir.path)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _open(a: Any, key: Any, rule: str) -> str:
    """'8 (ratio 0.83 [0.78, 0.89])' for paired, '8 (median +-6.1%)' for unpaired."""
    s = a.settings[key]
    name = str(key).split("=")[1]
    if rule == "unpaired":
        return f"{name} (median +-{s.half_width / s.median:.1%})"
    return f"{name} (ratio {s.ratio_to_best:.3f} [{s.ratio_to_best_ci_low:.3f}, {s.ratio_to_best_ci_high:.3f}])"


# ---------------------------------------------------------------------- generated run directories
def generated(args: argparse.Namespace) -> None:
    from blocklab.report.reanalyse import reanalyse

    noise = NoiseModel(drift_sd=0.0, noise_sd=0.03, drift_uniform=0.20)
    rng = np.random.default_rng(args.seed)
    work = Path(tempfile.mkdtemp(prefix="blocklab-generated-"))
    try:
        for factor in (1.08, 1.0):
            good = 0
            for i in range(args.cases):
                cells = simulate_cells(rng, {"A": 1.0, "B": factor}, args.blocks, noise)
                path = write_run(work / f"r{i}", cells, metric=METRIC, goal="max").path
                summary = reanalyse(path).summary
                sep = summary["indistinguishable"] == []
                good += (sep and summary["best_label"] == "setting=B") if factor > 1 else not sep
                shutil.rmtree(path)
            what = "true 8%: separated" if factor > 1 else "no difference: indistinguishable"
            print(f"{args.blocks} blocks, +-20% drift, 3% noise, {what} in {rate(good, args.cases)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _family_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenarios", nargs="+", default=list(FAMILY_SCENARIOS), choices=list(FAMILY_SCENARIOS),
                   help="fixed-repeats scenarios: " + "; ".join(f"{k}: {v[0]}" for k, v in FAMILY_SCENARIOS.items()).replace("%", "%%"))
    p.add_argument("--sequential", nargs="*", default=["a", "c", "e"], choices=list(FAMILY_SCENARIOS), help="scenarios run with target_ci")
    p.add_argument("--sequential-runs", type=int, default=300, help="0: no sequential runs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("simulate", help="A/A and power on simulated runs with a measured run's drift and noise")
    p.add_argument("--from", dest="source", type=Path, required=True, help="a measured mbrc run (at least 3 blocks)")
    p.add_argument("--runs", type=int, default=1000)
    p.add_argument("--power-runs", type=int, default=300)
    p.add_argument("--fixed", type=int, nargs="+", default=[3, 5, 10, 15])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--max-repeats", type=int, default=15)
    p.add_argument("--target", type=float, default=0.03)
    p.add_argument("--seed", type=int, default=1)
    _family_options(p)
    p = sub.add_parser("family", help="the verdict's claims against the best as a family: rules compared on simulated runs")
    p.add_argument("--from", dest="source", type=Path, required=True, help="a measured run (at least 3 blocks)")
    p.add_argument("--runs", type=int, default=1000)
    p.add_argument("--fixed", type=int, nargs="+", default=[3, 5, 10, 15])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--max-repeats", type=int, default=15)
    p.add_argument("--target", type=float, default=0.03)
    p.add_argument("--seed", type=int, default=1)
    _family_options(p)
    p = sub.add_parser("real", help="A/A on the embedded PostgreSQL: mbrc --quick, one setting under two labels")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--blocks", type=int, default=10)
    p.add_argument("--rows", type=int, default=300_000)
    p.add_argument("--repeats", type=int, default=3, help="first look of the sequential replay")
    p.add_argument("--target", type=float, default=0.03)
    p.add_argument("--seed", type=int, default=1)
    p = sub.add_parser("stopping", help="cells target_ci costs on the real mbrc recipe, paired vs unpaired")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--rows", type=int, default=3_000_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--max-repeats", type=int, default=15)
    p.add_argument("--target", type=float, default=0.03)
    p.add_argument("--seed", type=int, default=1)
    p = sub.add_parser("generated", help="the issue's done-when on generated run directories, via blocklab analyse")
    p.add_argument("--cases", type=int, default=1000)
    p.add_argument("--blocks", type=int, default=6)
    p.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    {"simulate": simulate, "family": family, "real": real, "stopping": stopping, "generated": generated}[args.command](args)


if __name__ == "__main__":
    main()
