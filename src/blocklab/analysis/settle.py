"""Is the verdict settled, and if not, how many more blocks would settle it.

The budgeted stopping rule (search.py, `--budget`): after every block, the run
stops when every setting is settled against the best: the interval of its
ratio to the best excludes 1 (separated) or lies within MARGIN of 1 (as good as
the best for any practical purpose). When the budget ends first, each pair
still undecided gets an estimate of the blocks that would settle it, from the
noise measured so far:

    On the log scale a pair's interval is  d +- h,  d = log(ratio to the best).
    After n blocks  h(n) = c(n) * s / sqrt(n):  s the spread of the pair's
    per-block log ratios (the larger of the pair's own and the block model's
    pooled one, sqrt(2) x its residual sd: what the verdict's intervals use),
    c(n) Student's t with n - 1 degrees of freedom at the per-look error rate
    (5% / looks), Bonferroni-split over the k - 1 comparisons with the best
    (the family's step-down is never wider than that).
    The pair settles once h shrinks to the distance it has to clear:
      separated:   h < |d|                                   (the interval leaves 1.0)
      within:      h <= min(d - log(1 - m), log(1 + m) - d)  (inside the margin m)
    whichever comes first: h* = max(|d|, min(d - log(1 - m), log(1 + m) - d)).
    The estimate is the smallest n with h(n) <= h*.

This assumes the ratio stays where it is and the noise stays as measured: an
estimate, said as one. A ratio that sits right on the margin's edge needs very
many blocks; the estimate is capped at MAX_ESTIMATE and said as "more than".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..results import ResultRow
from ..units import label_of

MARGIN = 0.03  # the budgeted rule's equivalence margin: within 3% of the best is as good as it
MAX_ESTIMATE = 1000  # blocks; beyond this an estimate means "it will not settle this way"


def margin_of(practical: float) -> float:
    """The rule's margin: the experiment's `practical` when it gives one, else 3%."""
    return practical if practical > 0 else MARGIN


def state(low: float, high: float, margin: float) -> str:
    """'separated', 'within' (the margin) or 'undecided' for a ratio-to-best interval."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "undecided"
    if low > 1.0 or high < 1.0:
        return "separated"
    if low >= 1.0 - margin and high <= 1.0 + margin:
        return "within"
    return "undecided"


def blocks_to_settle(ratio: float, spread: float, blocks: int, margin: float, alpha: float, comparisons: int) -> int | None:
    """Blocks in all that would settle this pair (the module's formula), None
    when the noise is not known yet (no spread)."""
    from scipy.special import stdtrit  # Student's t quantile: stdtrit(df, p) = t.ppf(p, df), without the wrapper's cost

    if not (ratio > 0 and math.isfinite(spread) and spread >= 0 and math.isfinite(ratio)):
        return None
    d = math.log(ratio)
    target = max(abs(d), min(d - math.log(1.0 - margin), math.log(1.0 + margin) - d))
    level = 1.0 - alpha / (2.0 * max(1, comparisons))
    # every candidate n at once: one t quantile call for the whole range (a call per n cost
    # ~0.2 s a summary, written after every cell)
    ns = np.arange(max(2, blocks + 1), MAX_ESTIMATE + 1)
    if ns.size == 0:
        return MAX_ESTIMATE
    fits = np.nonzero(stdtrit(ns - 1, level) * spread / np.sqrt(ns) <= target)[0]
    return int(ns[fits[0]]) if fits.size else MAX_ESTIMATE


def pair_spread(rows: Iterable[ResultRow], metric: str, a: str, b: str) -> tuple[float, int]:
    """The sample standard deviation of log(a / b) over the blocks holding both
    (the per-block ratio's spread, log scale ~ a fraction), and how many blocks."""
    per: dict[str, dict[int, list[float]]] = {a: {}, b: {}}
    for r in rows:
        label = label_of(r.settings)
        value = r.metrics.get(metric)
        if r.ok and label in per and value is not None and value > 0 and math.isfinite(value):
            per[label].setdefault(r.block, []).append(math.log(value))
    shared = sorted(set(per[a]) & set(per[b]))
    diffs = [sum(per[a][k]) / len(per[a][k]) - sum(per[b][k]) / len(per[b][k]) for k in shared]
    if len(diffs) < 2:
        return math.nan, len(diffs)
    mean = sum(diffs) / len(diffs)
    return math.sqrt(sum((x - mean) ** 2 for x in diffs) / (len(diffs) - 1)), len(diffs)


def undecided(analysis: Mapping[str, Any], rows: list[ResultRow], metric: str, margin: float) -> list[dict[str, Any]]:
    """The pairs (setting, best) of a summary's analysis that are neither separated
    nor within the margin, each with its interval, the blocks holding both, the
    per-block ratio's spread and the blocks estimated to settle it."""
    best = analysis.get("best")
    measured = [s for s in analysis.get("settings") or [] if s.get("n")]
    pooled = math.sqrt(2.0) * _num(analysis.get("residual_sd"))  # a per-block ratio holds two cells' noise
    alpha = 0.05 / max(1, int(analysis.get("looks") or 1))
    out = []
    for s in measured:
        key = s.get("key")
        if key == best or not s.get("n"):
            continue
        ratio, low, high = (_num(s.get(f)) for f in ("ratio_to_best", "ratio_to_best_ci_low", "ratio_to_best_ci_high"))
        if state(low, high, margin) != "undecided":
            continue
        own, blocks = pair_spread(rows, metric, str(key), str(best))
        spread = max((x for x in (own, pooled) if math.isfinite(x)), default=math.nan)
        needed = blocks_to_settle(ratio, spread, blocks, margin, alpha, len(measured) - 1)
        out.append({
            "setting": key, "best": best, "ratio": _finite(ratio), "low": _finite(low), "high": _finite(high),
            "blocks": blocks, "spread": _finite(spread), "blocks_to_settle": needed,
            "more_blocks": None if needed is None else max(0, needed - blocks),
        })
    return out


def undecided_lines(pairs: list[dict[str, Any]], describe: Any = str) -> list[str]:
    """One line a pair: '8 (64 kB) against 16 (128 kB): 0.93x [0.86, 1.01], per-block spread 6.1%
    over 12 blocks: about 9 more blocks (21 in all)'."""
    lines = []
    for p in pairs:
        head = f"{describe(str(p['setting']))} against {describe(str(p['best']))}: "
        if p["ratio"] is not None and p["low"] is not None:
            head += f"{_x(p['ratio'])}x [{_x(p['low'])}, {_x(p['high'])}]"
        else:
            head += "no interval yet"
        if p["spread"] is not None:
            head += f", per-block ratio spread {100 * p['spread']:.1f}% over {p['blocks']} blocks"
        needed = p["blocks_to_settle"]
        if needed is None:
            tail = "no noise measured yet to estimate from"
        elif needed >= MAX_ESTIMATE:
            tail = f"more than {MAX_ESTIMATE} blocks (the ratio sits on the edge of the margin)"
        else:
            tail = f"about {p['more_blocks']} more block(s) ({needed} in all)"
        lines.append(f"  {head}: {tail}")
    return lines


def _x(x: float) -> str:
    """A ratio: three decimals, or three figures when an interval with few blocks runs off to extremes."""
    return f"{x:.3f}" if 0.001 <= x < 1000 else f"{x:.3g}"


def _num(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) else math.nan


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


__all__ = ["MARGIN", "MAX_ESTIMATE", "blocks_to_settle", "margin_of", "pair_spread", "state", "undecided", "undecided_lines"]
