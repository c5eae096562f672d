"""The confirmation: fresh blocks of the winner, the runner-up and the default.

The search picked its winner from the same data it would be judged on (the
winner's curse: the luckiest of the good configurations looks best). So the
verdict comes from blocks measured after the search, on a new engine instance
where the engine allows it (the embedded server restarted: its caches empty),
each block holding the three once in a random order. Two claims are made from
them, each with a paired t interval (the per-block ratios, analysis/paired.py)
at 1 - 0.05/2 so that both hold together with 95%: the winner against the
default (its advantage) and the runner-up against the winner.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Any

from ..analysis.paired import BlockCell, fit_blocks

CONFIDENCE = 0.95


def advantage(cells: list[BlockCell], a: Hashable, b: Hashable, goal: str, claims: int) -> dict[str, Any] | None:
    """How much better `a` is than `b` (a ratio, above 1 = better; for a goal of
    min, b's metric over a's) with its paired interval; None without two shared blocks."""
    mine = [c for c in cells if c.key in (a, b)]
    if not mine:
        return None
    model = fit_blocks(mine, [a, b])
    if a not in model.levels or b not in model.levels:
        return None
    effect = model.effect(a, b)
    alpha = (1.0 - CONFIDENCE) / max(1, claims)
    ratio, low, high = effect.interval(alpha)
    if goal == "min":
        ratio, low, high = 1.0 / ratio, 1.0 / high, 1.0 / low
    out = {"ratio": ratio, "low": low, "high": high, "blocks": effect.blocks, "confidence": 1.0 - alpha,
           "log_se": effect.se if math.isfinite(effect.se) else None, "df": effect.df}
    if not (math.isfinite(low) and math.isfinite(high)):
        out.update(low=None, high=None)
    return out


def verdict(winner: str, default: str, adv: dict[str, Any] | None, describe: str) -> str:
    """The sentence the console and the report lead with."""
    if winner == default:
        return f"No configuration measured beat the default ({describe})."
    if adv is None or adv["low"] is None:
        return f"The winner is {winner}; the confirmation has too few blocks for an interval on its advantage over the default."
    gain = adv["ratio"] - 1.0
    band = f"[{adv['low'] - 1:+.1%}, {adv['high'] - 1:+.1%}]"
    conf = f"{adv['confidence']:.1%}"
    if adv["low"] > 1.0:
        return f"The winner {winner} is {gain:+.1%} {band} better than the default ({conf} interval, fresh blocks)."
    if adv["high"] < 1.0:
        return f"The winner {winner} is {gain:+.1%} {band} against the default on fresh blocks: worse; keep the default."
    return f"The winner {winner} is {gain:+.1%} {band} against the default on fresh blocks: not told apart from it."
