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
estimate, said as one. The distance to clear is never below about half the
margin (a ratio on the margin's edge is as far from 1.0), so only large noise
needs very many blocks; an estimate beyond MAX_ESTIMATE is MAX_ESTIMATE + 1,
said as "more than" it (MAX_ESTIMATE itself is a number).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..results import ResultRow
from ..units import label_of
from .stats import Analysis, SettingStats

MARGIN = 0.03  # the budgeted rule's equivalence margin: within 3% of the best is as good as it
MAX_ESTIMATE = 1000  # blocks; more than this (an estimate > MAX_ESTIMATE) means "it will not settle this way"


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
    when the noise is not known yet (no spread); MAX_ESTIMATE + 1 when more than
    MAX_ESTIMATE blocks would be needed."""
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
        return MAX_ESTIMATE + 1
    fits = np.nonzero(stdtrit(ns - 1, level) * spread / np.sqrt(ns) <= target)[0]
    return int(ns[fits[0]]) if fits.size else MAX_ESTIMATE + 1


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


def unsettled_settings(analysis: Analysis | None, rows: Iterable[ResultRow], planned: Sequence[str],
                       target: float | None, margin: float) -> list[str]:
    """The settings a run that stops by the rule cannot stop on yet: those the search's rule
    names (paired.unsettled: no interval, or neither separated from the best, nor within the
    margin, nor as precise as `target`), then the `planned` settings without a measurement
    whose setting the engine did not refuse (never measured is never settled). The one
    function behind the stopping rule (search.py), summary.json's settle status and the
    undecided list (undecided)."""
    from .paired import unsettled

    keys = [str(k) for k in unsettled(analysis, target, margin)] if analysis is not None else []
    measured = {str(k) for k, s in analysis.settings.items() if s.n > 0} if analysis is not None else set()
    refused = {label_of(r.settings) for r in rows if r.refused}
    return keys + [p for p in planned if p not in measured and p not in refused and p not in keys]


def analysis_of(d: Mapping[str, Any]) -> Analysis:
    """A summary's analysis (Analysis.to_dict) read back, NaN where the JSON holds null."""
    def stats_of(s: Mapping[str, object]) -> SettingStats:
        values: dict[str, Any] = {f.name: s.get(f.name) for f in dataclasses.fields(SettingStats) if f.name in s}
        for name in ("outliers", "outlier_indices"):
            values[name] = tuple(values.get(name) or ())
        filled: dict[str, Any] = {k: math.nan if v is None and k != "key" else v for k, v in values.items()}
        return SettingStats(**filled)

    settings: dict[Hashable, SettingStats] = {}
    for s in d.get("settings") or []:
        st = stats_of(s)
        settings[st.key] = st
    return Analysis(
        metric=str(d.get("metric") or ""), goal=str(d.get("goal") or "max"), baseline=d.get("baseline"), best=d.get("best"),
        indistinguishable=tuple(d.get("indistinguishable") or ()), settings=settings, resamples=int(d.get("resamples") or 0),
        seed=int(d.get("seed") or 0), practical=_num(d.get("practical") or 0.0), method=str(d.get("method") or "unpaired"),
        family=str(d.get("family") or ""), looks=int(d.get("looks") or 1), blocks=int(d.get("blocks") or 0),
        residual_sd=_num(d.get("residual_sd")), df=int(d.get("df") or 0),
        drift={int(b): _num(v) for b, v in d.get("drift") or []}, unpaired=tuple(d.get("unpaired") or ()),
    )


def undecided(analysis: Mapping[str, Any] | None, rows: list[ResultRow], metric: str, margin: float,
              planned: Sequence[str] = (), target: float | None = None) -> list[dict[str, object]]:
    """The settings of a summary's analysis the stopping rule has not settled
    (unsettled_settings), each a pair (setting, best) with its interval, the blocks
    holding both, the per-block ratio's spread and the blocks estimated to settle it;
    a planned setting never measured says so ("measured": False), the one setting
    measured with nothing to compare it with too ("alone": True)."""
    analysis = analysis or {}
    keys = unsettled_settings(analysis_of(analysis) if analysis.get("settings") else None, rows, planned, target, margin)
    best = analysis.get("best")
    by_key = {str(s.get("key")): s for s in analysis.get("settings") or []}
    measured = [s for s in by_key.values() if s.get("n")]
    pooled = math.sqrt(2.0) * _num(analysis.get("residual_sd"))  # a per-block ratio holds two cells' noise
    alpha = 0.05 / max(1, int(analysis.get("looks") or 1))
    out: list[dict[str, object]] = []
    for key in keys:
        s = by_key.get(key) or {}
        if not s.get("n") or key == best:
            out.append({"setting": key, "best": best, "ratio": None, "low": None, "high": None, "blocks": int(s.get("n") or 0),
                        "spread": None, "blocks_to_settle": None, "more_blocks": None,
                        **({"alone": True} if s.get("n") else {"measured": False})})
            continue
        ratio, low, high = (_num(s.get(f)) for f in ("ratio_to_best", "ratio_to_best_ci_low", "ratio_to_best_ci_high"))
        own, blocks = pair_spread(rows, metric, str(key), str(best))
        spread = max((x for x in (own, pooled) if math.isfinite(x)), default=math.nan)
        needed = blocks_to_settle(ratio, spread, blocks, margin, alpha, len(measured) - 1)
        out.append({
            "setting": key, "best": best, "ratio": _finite(ratio), "low": _finite(low), "high": _finite(high),
            "blocks": blocks, "spread": _finite(spread), "blocks_to_settle": needed,
            "more_blocks": None if needed is None else max(0, needed - blocks),
        })
    return out


def undecided_lines(pairs: list[dict[str, Any]], describe: Callable[[str], str] = str) -> list[str]:
    """One line a pair: '8 (64 kB) against 16 (128 kB): 0.93x [0.86, 1.01], per-block spread 6.1%
    over 12 blocks: about 9 more blocks (21 in all)'."""
    lines = []
    for p in pairs:
        if p.get("measured") is False:
            lines.append(f"  {describe(str(p['setting']))}: not measured yet")
            continue
        if p.get("alone"):
            lines.append(f"  {describe(str(p['setting']))}: the only setting measured ({p['blocks']} block(s)): nothing to "
                         "compare it with yet")
            continue
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
        elif needed > MAX_ESTIMATE:
            tail = f"more than {MAX_ESTIMATE} blocks (the noise is too large to settle it this way)"
        else:
            tail = f"about {p['more_blocks']} more block(s) ({needed} in all)"
        lines.append(f"  {head}: {tail}")
    return lines


def _x(x: float) -> str:
    """A ratio: three decimals, or three figures when an interval with few blocks runs off to extremes."""
    return f"{x:.3f}" if 0.001 <= x < 1000 else f"{x:.3g}"


def _num(x: object) -> float:
    return float(x) if isinstance(x, (int, float)) else math.nan


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


__all__ = ["MARGIN", "MAX_ESTIMATE", "analysis_of", "blocks_to_settle", "margin_of", "pair_spread", "state", "undecided",
           "undecided_lines", "unsettled_settings"]
