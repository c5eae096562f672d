"""Statistics for sweeps: medians, bootstrap intervals, ratios, outliers.

Pure numpy/scipy; no engine, no I/O.

Conventions
-----------
* Every interval is a 95% percentile-bootstrap interval. The resampling is
  vectorised: one matrix of random indices per setting (rows = resamples),
  reduced with ``np.median(axis=1)``.
* Each setting gets its own random stream, spawned from ``SeedSequence(seed)``
  by the setting's position, so a run is reproducible and the groups are
  resampled independently of each other.
* Ratios are always ``setting / reference`` on the metric's own scale
  (``ratio_to_baseline = median(s) / median(baseline)``). Whether a ratio above
  1 is good depends on the goal: ``"max"`` for throughput-like metrics,
  ``"min"`` for elapsed-like ones. The ratio interval is the percentile
  interval of the bootstrap medians of the setting divided, draw by draw, by
  the independent bootstrap medians of the reference.
* Outliers are flagged with the modified z-score and never dropped.
* A setting with fewer than two samples has no interval: its ``ci_low`` and
  ``ci_high`` equal its median (and ``n`` tells why).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from ..lazy import scipy_stats as _scipy_stats

CONFIDENCE = 0.95
MIN_RESAMPLES = 2000
DEFAULT_RESAMPLES = 4000
GOALS = ("max", "min")

# Largest resample matrix built at once (elements); bigger jobs are cut into
# row chunks, each still vectorised.
_CHUNK_ELEMENTS = 4_000_000
# Modified z-score (Iglewicz & Hoaglin): 0.6745 * (x - median) / MAD > 3.5.
_MZ_FACTOR = 0.6745
_MZ_THRESHOLD = 3.5
# When MAD == 0 (more than half the values identical) fall back to the mean
# absolute deviation: |x - median| / (1.253314 * meanAD).
_MEANAD_FACTOR = 1.253314


# --------------------------------------------------------------------------
# result types


def jsonable(value: object) -> Any:
    """A JSON-friendly copy: NaN/inf -> None, tuples -> lists, numpy -> Python."""
    if isinstance(value, (bool, type(None), str)):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else None
    if isinstance(value, Mapping):
        return {str(k) if not isinstance(k, str) else k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [jsonable(v) for v in value]
    return str(value)


@dataclass(frozen=True)
class SettingStats:
    """The figures for one setting. Ratios are ``this setting / reference``."""

    key: Hashable
    n: int
    median: float
    ci_low: float
    ci_high: float
    cv: float  # sample standard deviation / mean; NaN when n < 2 or mean == 0
    minimum: float
    maximum: float
    outliers: tuple[float, ...]
    ratio_to_baseline: float
    ratio_ci_low: float
    ratio_ci_high: float
    ratio_to_best: float
    ratio_to_best_ci_low: float
    ratio_to_best_ci_high: float
    outlier_indices: tuple[int, ...] = ()
    # "series": a single run whose interval comes from its own per-second
    # series (analysis/series.py); "" for the bootstrap over runs.
    interval_source: str = ""
    # What the best is picked on, the table's and the plot's main figure: paired,
    # the block-adjusted level (the geometric mean with each block's drift taken
    # out, analysis/paired.py) with its interval; unpaired, the median and its
    # bootstrap interval. NaN: not computed (a summary from an older blocklab).
    level: float = math.nan
    level_ci_low: float = math.nan
    level_ci_high: float = math.nan

    def figure(self) -> tuple[float, float, float]:
        """(value, low, high) the verdict is decided on: the level, else the median."""
        if math.isfinite(self.level):
            return self.level, self.level_ci_low, self.level_ci_high
        return self.median, self.ci_low, self.ci_high

    @property
    def has_interval(self) -> bool:
        """False when n < 2 (the interval is then only the median itself), unless
        a single run's own series gave it one."""
        return self.n >= 2 or self.interval_source == "series"

    @property
    def half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2.0

    def to_dict(self) -> dict[str, object]:
        return {f.name: jsonable(getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True)
class Analysis:
    """The analysis of one metric over the settings of a sweep."""

    metric: str
    goal: str
    baseline: Hashable | None
    best: Hashable | None
    indistinguishable: tuple  # keys, best excluded, in insertion order
    settings: Mapping[Hashable, SettingStats]
    resamples: int
    seed: int
    practical: float
    # How the ratios were computed: "unpaired" (each setting's bootstrap median
    # on its own) or "paired" (within blocks, analysis/paired.py).
    method: str = "unpaired"
    # How the ratios to the best hold together: "" (each interval is a 95% one
    # on its own) or "step-down range" (paired: the intervals to the best are a
    # family whose chance of any false call is 5%; family.py).
    family: str = ""
    looks: int = 1  # the 95% is split over this many looks (sequential stopping)
    blocks: int = 0
    residual_sd: float = math.nan  # paired: the block model's residual spread (log scale)
    df: int = 0
    drift: Mapping[int, float] = field(default_factory=dict)  # paired: block -> log drift
    unpaired: tuple = ()  # paired: settings compared with the best without a shared block

    @property
    def confidence_per_look(self) -> float:
        return 1.0 - (1.0 - CONFIDENCE) / self.looks

    def to_dict(self) -> dict[str, object]:
        return {
            "metric": self.metric,
            "goal": self.goal,
            "baseline": jsonable(self.baseline),
            "best": jsonable(self.best),
            "indistinguishable": jsonable(list(self.indistinguishable)),
            # A list, not an object: keys may be tuples, and order matters.
            "settings": [s.to_dict() for s in self.settings.values()],
            "resamples": self.resamples,
            "seed": self.seed,
            "practical": jsonable(self.practical),
            "confidence": CONFIDENCE,
            "method": self.method,
            "family": self.family,
            "looks": self.looks,
            "confidence_per_look": self.confidence_per_look,
            "blocks": self.blocks,
            "residual_sd": jsonable(self.residual_sd),
            "df": self.df,
            # a list, not an object: JSON keys would be strings
            "drift": [[int(b), jsonable(v)] for b, v in self.drift.items()],
            "unpaired": jsonable(list(self.unpaired)),
        }


@dataclass(frozen=True)
class Comparison:
    """B against A: ``ratio = median(B) / median(A)``."""

    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    verdict: str
    goal: str = "max"
    median_a: float = math.nan
    median_b: float = math.nan
    n_a: int = 0
    n_b: int = 0
    significant: bool = False

    def to_dict(self) -> dict[str, object]:
        return {f.name: jsonable(getattr(self, f.name)) for f in fields(self)}


# --------------------------------------------------------------------------
# building blocks


def check_goal(goal: str) -> str:
    if goal not in GOALS:
        raise ValueError(f"goal must be 'max' (higher is better) or 'min' (lower is better), not {goal!r}")
    return goal


def check_resamples(resamples: int) -> int:
    if int(resamples) != resamples or resamples < MIN_RESAMPLES:
        raise ValueError(f"resamples must be an integer >= {MIN_RESAMPLES}, not {resamples!r}")
    return int(resamples)


def _as_array(values: Sequence[float], what: str = "samples") -> np.ndarray:
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{what} contain non-finite values (NaN or inf): {list(values)!r}")
    return x


def bootstrap_medians(values: Sequence[float] | np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """``resamples`` bootstrap medians of ``values`` (vectorised resample matrix).

    With fewer than two values every resample is the data itself, so the
    result is constant (or all NaN for no data)."""
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    n = x.size
    if n == 0:
        return np.full(resamples, np.nan)
    if n == 1:
        return np.full(resamples, x[0])
    out = np.empty(resamples)
    rows = max(1, _CHUNK_ELEMENTS // n)
    for start in range(0, resamples, rows):
        stop = min(resamples, start + rows)
        idx = rng.integers(0, n, size=(stop - start, n))
        out[start:stop] = np.median(x[idx], axis=1)
    return out


def percentile_interval(draws: np.ndarray) -> tuple[float, float]:
    finite = draws[np.isfinite(draws)]
    if finite.size < draws.size or finite.size == 0:
        # A reference median of zero makes the ratio meaningless.
        return math.nan, math.nan
    tail = (1.0 - CONFIDENCE) / 2.0
    lo, hi = np.quantile(finite, [tail, 1.0 - tail])
    return float(lo), float(hi)


def _ratio(num: float, den: float) -> float:
    if den == 0 or not math.isfinite(num) or not math.isfinite(den):
        return math.nan
    return num / den


def _ratio_interval(num_draws: np.ndarray, den_draws: np.ndarray) -> tuple[float, float]:
    with np.errstate(divide="ignore", invalid="ignore"):
        return percentile_interval(num_draws / den_draws)


def median_ci(
    values: Sequence[float], *, seed: int = 0, resamples: int = DEFAULT_RESAMPLES
) -> tuple[float, float, float]:
    """(median, ci_low, ci_high) of one sample; the interval is degenerate for n < 2."""
    resamples = check_resamples(resamples)
    x = _as_array(values)
    if x.size == 0:
        return math.nan, math.nan, math.nan
    med = float(np.median(x))
    if x.size < 2:
        return med, med, med
    lo, hi = percentile_interval(bootstrap_medians(x, np.random.default_rng(seed), resamples))
    return med, lo, hi


MIN_OUTLIER_N = 5  # fewer runs than this give no outlier verdict


def flag_outliers(values: Sequence[float] | np.ndarray) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """Indices and values whose modified z-score exceeds 3.5 (never removed).

    ``|0.6745 * (x - median) / MAD| > 3.5``. If MAD is 0 (more than half the
    values equal) the mean absolute deviation is used instead
    (``|x - median| / (1.2533 * meanAD)``); if that is 0 too, every value is
    equal and nothing is flagged."""
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    if x.size < MIN_OUTLIER_N:
        # with 3 or 4 runs the MAD is one of two distances and the score is
        # mostly their ratio: half of all settings would be "outliers"
        return (), ()
    med = np.median(x)
    dev = np.abs(x - med)
    mad = np.median(dev)
    if mad > 0:
        score = _MZ_FACTOR * dev / mad
    else:
        mean_ad = dev.mean()
        if mean_ad == 0:
            return (), ()
        score = dev / (_MEANAD_FACTOR * mean_ad)
    idx = np.flatnonzero(score > _MZ_THRESHOLD)
    return tuple(int(i) for i in idx), tuple(float(x[i]) for i in idx)


def coefficient_of_variation(x: np.ndarray) -> float:
    if x.size < 2:
        return math.nan
    mean = x.mean()
    if mean == 0:
        return math.nan
    return float(x.std(ddof=1) / abs(mean))


def _better(a: float, b: float, goal: str) -> bool:
    return a > b if goal == "max" else a < b


# --------------------------------------------------------------------------
# the analysis of a sweep


def analyse(
    samples: Mapping[Any, Sequence[float]],  # Any: Mapping is invariant in its key, and callers key by int or str
    *,
    goal: str = "max",
    baseline: Hashable | None = None,
    practical: float = 0.0,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    metric: str = "",
) -> Analysis:
    """Per-setting statistics, ratios to the baseline and to the best, the best.

    ``samples`` maps a setting key to its measured values (insertion order is
    kept). ``baseline`` defaults to the first key with data. A setting is
    *indistinguishable* from the best when the 95% interval of its ratio to the
    best contains 1, or when its median differs from the best's by no more
    than ``practical`` (a fraction of the best median, e.g. 0.03)."""
    goal = check_goal(goal)
    resamples = check_resamples(resamples)
    if not samples:
        raise ValueError("no settings to analyse")
    if not (practical >= 0 and math.isfinite(practical)):
        raise ValueError(f"practical must be a non-negative fraction, not {practical!r}")

    keys = list(samples)
    arrays = {k: _as_array(samples[k], f"samples of {k!r}") for k in keys}
    measured = [k for k in keys if arrays[k].size > 0]
    if baseline is None:
        baseline = measured[0] if measured else None
    elif baseline not in arrays:
        raise ValueError(f"baseline {baseline!r} is not one of the settings: {keys!r}")
    elif arrays[baseline].size == 0:
        raise ValueError(f"baseline {baseline!r} has no samples")

    children = np.random.SeedSequence(seed).spawn(len(keys))
    draws: dict[Hashable, np.ndarray] = {}
    medians: dict[Hashable, float] = {}
    for k, child in zip(keys, children):
        x = arrays[k]
        medians[k] = float(np.median(x)) if x.size else math.nan
        draws[k] = bootstrap_medians(x, np.random.default_rng(child), resamples)

    best: Hashable | None = None
    for k in measured:
        if best is None or _better(medians[k], medians[best], goal):
            best = k

    def ratio_to(k: Hashable, ref: Hashable | None) -> tuple[float, float, float]:
        if ref is None or arrays[k].size == 0:
            return math.nan, math.nan, math.nan
        if k == ref:
            return 1.0, 1.0, 1.0
        r = _ratio(medians[k], medians[ref])
        if math.isnan(r):
            return math.nan, math.nan, math.nan
        lo, hi = _ratio_interval(draws[k], draws[ref])
        return r, lo, hi

    settings: dict[Hashable, SettingStats] = {}
    indistinguishable: list[Hashable] = []
    for k in keys:
        x = arrays[k]
        n = int(x.size)
        if n == 0:
            nan = math.nan
            settings[k] = SettingStats(k, 0, nan, nan, nan, nan, nan, nan, (), nan, nan, nan, nan, nan, nan, ())
            continue
        med = medians[k]
        if n >= 2:
            lo, hi = percentile_interval(draws[k])
        else:
            lo = hi = med
        out_idx, out_val = flag_outliers(x.tolist())
        rb, rb_lo, rb_hi = ratio_to(k, baseline)
        rt, rt_lo, rt_hi = ratio_to(k, best)
        settings[k] = SettingStats(
            key=k,
            n=n,
            median=med,
            ci_low=lo,
            ci_high=hi,
            cv=coefficient_of_variation(x),
            minimum=float(x.min()),
            maximum=float(x.max()),
            outliers=out_val,
            ratio_to_baseline=rb,
            ratio_ci_low=rb_lo,
            ratio_ci_high=rb_hi,
            ratio_to_best=rt,
            ratio_to_best_ci_low=rt_lo,
            ratio_to_best_ci_high=rt_hi,
            outlier_indices=out_idx,
            level=med,  # unpaired: the best is picked on the medians
            level_ci_low=lo,
            level_ci_high=hi,
        )
        if k != best:
            overlaps = rt_lo <= 1.0 <= rt_hi  # False for NaN
            best_med = medians[best]
            close = abs(med - best_med) <= practical * abs(best_med)
            if overlaps or close:
                indistinguishable.append(k)

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
    )


def noisy_settings(analysis: Analysis, target: float) -> list[Hashable]:
    """Settings whose interval half-width exceeds ``target * |median|``.

    Settings with fewer than two samples have no interval yet and are always
    returned: they need more repeats before anything can be said."""
    if not (target > 0 and math.isfinite(target)):
        raise ValueError(f"target must be a positive fraction, not {target!r}")
    noisy = []
    for k, s in analysis.settings.items():
        if s.n < 2 or not math.isfinite(s.half_width) or s.half_width > target * abs(s.median):
            noisy.append(k)
    return noisy


# --------------------------------------------------------------------------
# two samples (the `compare` command)


def _fmt_factor(f: float) -> str:
    if not math.isfinite(f):
        return "?"
    if f < 2:
        return f"{f:.2f}"
    if f < 10:
        return f"{f:.1f}"
    return f"{f:.0f}"


def _fmt_p(p: float) -> str:
    if not math.isfinite(p):
        return "p=n/a"
    if p < 0.001:
        return "p<0.001"
    return f"p={p:.2g}" if p < 0.1 else f"p={p:.2f}"


def min_p_value(n_a: int, n_b: int) -> float:
    """The smallest two-sided p-value the exact Mann-Whitney U test can give for
    samples of n_a and n_b distinct values: the two most extreme of the
    C(n_a + n_b, n_a) equally likely orderings. 2 against 2: 2/6 = 0.33."""
    if n_a < 1 or n_b < 1:
        return 1.0
    return min(1.0, 2.0 / math.comb(n_a + n_b, n_a))


def runs_for_p(alpha: float = 0.05) -> int:
    """The fewest runs a side whose smallest two-sided p-value is below `alpha` (4 for 0.05)."""
    n = 1
    while min_p_value(n, n) >= alpha:
        n += 1
    return n


def compare_samples(
    a: Sequence[float],
    b: Sequence[float],
    *,
    goal: str = "max",
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    alpha: float = 0.05,
    name_a: str = "A",
    name_b: str = "B",
) -> Comparison:
    """B against A: ratio of medians B/A with its bootstrap interval (the two
    samples resampled independently) and a two-sided Mann-Whitney U p-value.

    The difference is called significant when the interval excludes 1 and
    p < alpha; when only one of the two says so the verdict says it is unclear."""
    goal = check_goal(goal)
    resamples = check_resamples(resamples)
    xa = _as_array(a, f"samples of {name_a}")
    xb = _as_array(b, f"samples of {name_b}")
    if xa.size == 0 or xb.size == 0:
        raise ValueError(f"both samples need at least one value ({name_a}: {xa.size}, {name_b}: {xb.size})")
    sa, sb = np.random.SeedSequence(seed).spawn(2)
    da = bootstrap_medians(xa, np.random.default_rng(sa), resamples)
    db = bootstrap_medians(xb, np.random.default_rng(sb), resamples)
    med_a, med_b = float(np.median(xa)), float(np.median(xb))
    ratio = _ratio(med_b, med_a)
    lo, hi = _ratio_interval(db, da) if math.isfinite(ratio) else (math.nan, math.nan)

    p = float(_scipy_stats.mannwhitneyu(xb, xa, alternative="two-sided").pvalue)
    if not math.isfinite(p):
        p = 1.0

    ci_excludes_one = math.isfinite(lo) and (lo > 1.0 or hi < 1.0)
    significant = ci_excludes_one and p < alpha
    small = " (n<2 on one side: no real interval)" if min(xa.size, xb.size) < 2 else ""

    if not math.isfinite(ratio):
        verdict = f"{name_b} vs {name_a}: ratio undefined (median of {name_a} is 0), {_fmt_p(p)}"
    else:
        # Factor >= 1 and its interval, in the direction of the difference.
        b_higher = ratio >= 1.0
        if b_higher:
            factor, f_lo, f_hi = ratio, lo, hi
        else:
            factor, f_lo, f_hi = 1.0 / ratio, 1.0 / hi, 1.0 / lo
        faster = b_higher == (goal == "max")
        word = "faster" if faster else "slower"
        interval = f"[{_fmt_factor(f_lo)}, {_fmt_factor(f_hi)}]"
        raw = f"{name_b}/{name_a} = {ratio:.3f} [{lo:.3f}, {hi:.3f}], {_fmt_p(p)}"
        if significant:
            verdict = f"{name_b} is {_fmt_factor(factor)}x {word} than {name_a} {interval}, {_fmt_p(p)}"
        elif ci_excludes_one or p < alpha:
            which = "the interval excludes 1 but the U test does not agree" if ci_excludes_one else (
                "the U test says different but the interval contains 1"
            )
            verdict = f"unclear: {name_b} looks {_fmt_factor(factor)}x {word} than {name_a} ({raw}); {which}"
        else:
            verdict = f"no significant difference between {name_b} and {name_a}: {raw}"
    verdict += small
    floor = min_p_value(int(xa.size), int(xb.size))
    if floor >= alpha and not significant:
        verdict += (f" (with {xa.size} and {xb.size} runs no p-value can fall below {floor:.2g}: too few to call a "
                    f"difference; {runs_for_p(alpha)} a side could)")
    return Comparison(
        ratio=ratio,
        ci_low=lo,
        ci_high=hi,
        p_value=p,
        verdict=verdict,
        goal=goal,
        median_a=med_a,
        median_b=med_b,
        n_a=int(xa.size),
        n_b=int(xb.size),
        significant=significant,
    )
