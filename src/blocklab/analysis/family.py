"""Comparisons with the best as one family of claims: a step-down on the studentized range.

The verdict says "X is 1.03x slower [1.01, 1.05]" for every setting that is
not the best. Each of those is a claim, and a reader takes all of them at once.
Two things make a per-comparison 95% interval wrong for that:

* several comparisons: seven settings compared with the best are seven chances
  of a false "slower";
* the winner's curse: the best is picked from the same data, so it is the
  luckiest of the settings near the top, and every comparison with it starts
  from a head start. With eight truly equal settings the largest gap to the
  best is the range of eight noisy values, not the difference of two.

The second point is why a Holm (or Dunnett) correction over the k - 1
comparisons with the best is not enough: they assume the reference was fixed
before the data (Holm measured 9-14% of runs with a false call among eight
equal settings, benchmarks/aa.py family), and why Hsu's MCB does not answer
the question either (its "not the best" allows a tie; with eight equal
settings it excludes one of them in 17-27% of runs). What does hold: under equal settings, the
largest standardised gap to the selected best is at most the studentized range
of those settings, so comparing each gap with the range's 95% point gives at
most 5% of runs with any false claim (Tukey's argument), and a step-down keeps
most of the power: once the clearest gap is called, the settings still in
play are fewer and the next critical value is the range of fewer settings
(the step-down argument of Holm, with the range in place of Bonferroni: at the
first false call every truly tied setting is still in play, so the critical
value is at least their range's). With two settings the range's point is
Student's t: the two-setting verdict is exactly what it was.

Which noise a gap is divided by is decided in paired.py (`compare_with_best`);
this module only does the arithmetic: the critical values and the step-down.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from ..lazy import scipy_optimize as _optimize
from ..lazy import scipy_stats as _scipy_stats

# Quadrature of the studentized range's distribution. The inner integral (the
# range of k standard normals) on a fixed z grid, the outer one (the noise
# estimate's chi distribution) on a grid in log(s): both integrands are smooth,
# so the trapezoid rule converges fast. Against scipy.stats.studentized_range
# (which takes 100-400 ms per quantile) these grids agree to 2.4e-4 relative
# or better for k = 2..64, df = 1..1000, alpha = 0.05..0.0017, in about 7 ms;
# tests/test_family.py checks it. The analysis runs after every cell, so the
# speed matters.
_Z = np.linspace(-8.5, 8.5, 97)
# the standard normal's density and distribution on the grid, without importing SciPy at start (lazy.py)
_PHI = np.exp(-0.5 * _Z**2) / math.sqrt(2.0 * math.pi)
_PHI_CDF = np.array([0.5 * math.erfc(-z / math.sqrt(2.0)) for z in _Z])
_S_POINTS = 121
_DF_INFINITE = 1e5  # beyond this the noise estimate is taken as exact


def _range_cdf(w: np.ndarray, k: int) -> np.ndarray:
    """P(range of k independent standard normals <= w), for each w."""
    inner = np.clip(_PHI_CDF[None, :] - _scipy_stats.norm.cdf(_Z[None, :] - w[:, None]), 0.0, 1.0) ** (k - 1)
    return np.clip(k * np.trapezoid(_PHI[None, :] * inner, _Z, axis=1), 0.0, 1.0)


@functools.lru_cache(maxsize=512)
def _log_s_grid(df: float) -> tuple[np.ndarray, np.ndarray]:
    """Nodes u = log(s) and weights for s = sqrt(chi2(df) / df), the estimated
    noise over the true noise; a single node at s = 1 for (nearly) infinite df."""
    if not math.isfinite(df) or df > _DF_INFINITE:
        return np.zeros(1), np.ones(1)
    lo = 0.5 * math.log(_scipy_stats.chi2.ppf(1e-14, df) / df)
    hi = 0.5 * math.log(_scipy_stats.chi2.isf(1e-14, df) / df)
    u = np.linspace(lo, hi, _S_POINTS)
    x = df * np.exp(2.0 * u)
    log_density = math.log(2.0 * df) + 2.0 * u + _scipy_stats.chi2.logpdf(x, df)  # density of u
    weights = np.exp(log_density - log_density.max())
    return u, weights / weights.sum()


def studentized_range_cdf(q: float, k: int, df: float) -> float:
    """P(Q <= q) for the studentized range Q of k means with df degrees of freedom."""
    u, weights = _log_s_grid(float(df))
    return float(weights @ _range_cdf(q * np.exp(u), k))


@functools.lru_cache(maxsize=4096)
def range_critical(settings: int, df: float, alpha: float) -> float:
    """The multiplier of a pair's standard error that the largest of the gaps
    among `settings` equal settings exceeds with probability `alpha`: the
    studentized range's 1 - alpha point over sqrt(2). For two settings it is
    Student's two-sided t, computed as such (exactly the per-comparison rule)."""
    if settings < 2:
        raise ValueError(f"a range needs at least 2 settings, not {settings!r}")
    if not (df > 0 and 0.0 < alpha < 1.0):
        raise ValueError(f"need df > 0 and 0 < alpha < 1, not df={df!r}, alpha={alpha!r}")
    if settings == 2:
        return float(_scipy_stats.t.ppf(1.0 - alpha / 2.0, df))
    target = 1.0 - alpha

    def gap(q: float) -> float:
        return studentized_range_cdf(q, settings, df) - target

    high = 8.0
    while gap(high) < 0:
        high *= 2.0
    return float(_optimize.brentq(gap, 1e-3, high, xtol=1e-7)) / math.sqrt(2.0)


_DF_GRID_FROM = 30  # degrees of freedom from here on are rounded down to a node
_DF_STEP = 1.05  # of this geometric grid


def df_node(df: float) -> float:
    """`df` rounded down to a node of a 5% geometric grid from 30 on (whole numbers);
    below 30, infinite or above _DF_INFINITE it is left as it is. A sweep's pooled
    degrees of freedom grow with every cell; each new value cost a solve of the
    studentized range's quantile for every step of the step-down (about 0.6 s a cell
    with 108 settings), while the solves of a node are reused from the cache. Critical
    values fall as df grows, so the node's is never the smaller: an interval is at most
    slightly wider (under 0.7% from df 30 on), never narrower. Small df are left alone:
    there a step of one changes the critical value by far more, and a Welch df (a
    fraction, never repeated) gains nothing from a cache."""
    if not math.isfinite(df) or df > _DF_INFINITE or df < _DF_GRID_FROM:
        return df
    steps = math.floor(math.log(df / _DF_GRID_FROM) / math.log(_DF_STEP) + 1e-9)
    return float(min(math.floor(df), math.floor(_DF_GRID_FROM * _DF_STEP**steps)))


def range_critical_at_node(settings: int, df: float, alpha: float) -> float:
    """range_critical at df's node (df_node): what the verdicts use."""
    return range_critical(settings, df_node(df), alpha)


@dataclass(frozen=True)
class Contrast:
    """log(setting / best) and what judges it.

    `se`: the standard error the gap is divided by; `df`: the degrees of
    freedom of the critical value; `floor`: a half-width the interval never
    goes under (0: none). NaN se or df <= 0: no interval."""

    key: Hashable
    estimate: float
    se: float
    df: float
    floor: float = 0.0


@dataclass(frozen=True)
class Judged:
    """A contrast's interval (ratio scale) and whether it is a call.

    `critical`: the multiplier of se used; `in_play`: how many settings the
    step that judged it counted (the best and every setting not yet called)."""

    key: Hashable
    ratio: float
    low: float
    high: float
    critical: float
    in_play: int

    @property
    def separated(self) -> bool:
        """The interval excludes 1: a call ("slower"). Decided on the interval
        as shown, so an interval and its verdict can never disagree."""
        return not (self.low <= 1.0 <= self.high)


def step_down(
    contrasts: Sequence[Contrast],
    settings: int,
    alpha: float,
    critical: Callable[[int, float, float], float] = range_critical_at_node,
) -> dict[Hashable, Judged]:
    """Judge every contrast with the best, the family's error held at `alpha`.

    At each step, among the contrasts not yet judged, the one furthest beyond
    its critical value (the range of the settings still in play) is judged:
    called if its gap exceeds the critical value and its floor, and then the
    settings in play are one fewer. At the first gap within its critical value
    every contrast left is judged at that step's critical values and the
    procedure stops: none of them is called, so the intervals shown agree
    with the calls. A contrast whose floor vetoes the call is judged but does
    not shrink the family (the conservative choice: it was not called).

    `settings`: the measured settings, the best included (contrasts without an
    interval still count: they are in the family). Contrasts without an
    interval are left out of the answer. `critical(in_play, df, alpha)`: the
    studentized range's at df's node by default (df_node); benchmarks/aa.py passes others (Holm's,
    a fixed one for single-step rules) to compare them on the same data."""
    if settings < 2 and contrasts:
        raise ValueError(f"{len(contrasts)} contrasts need at least 2 settings, not {settings!r}")
    open_ = [c for c in contrasts if math.isfinite(c.se) and c.se >= 0 and c.df > 0 and math.isfinite(c.estimate)]
    in_play = settings
    out: dict[Hashable, Judged] = {}

    def judged(c: Contrast, critical: float) -> Judged:
        half = max(critical * c.se, c.floor)
        return Judged(c.key, math.exp(c.estimate), math.exp(c.estimate - half), math.exp(c.estimate + half), critical, in_play)

    while open_:
        crit = {c.key: critical(in_play, c.df, alpha) for c in open_}
        top = max(open_, key=lambda c: _beyond(c, crit[c.key]))
        if _beyond(top, crit[top.key]) <= 1.0:
            out.update((c.key, judged(c, crit[c.key])) for c in open_)
            break
        out[top.key] = j = judged(top, crit[top.key])
        open_.remove(top)
        if j.separated:
            in_play -= 1
    return out


def _beyond(c: Contrast, critical: float) -> float:
    """|gap| / (critical x se): above 1, beyond the critical value."""
    if c.se == 0:
        return math.inf if c.estimate != 0 else 0.0
    return abs(c.estimate) / (critical * c.se)
