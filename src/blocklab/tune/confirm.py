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
import random
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

from ..analysis.paired import BlockCell, fit_blocks
from ..plan import Cell, costly_key, order_block

if TYPE_CHECKING:
    from .driver import Search, SearchResult

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


def verdict(winner: str, default: str, adv: dict[str, Any] | None, runner_up: str | None = None,
            runner_adv: dict[str, Any] | None = None) -> str:
    """The sentence the console and the report lead with."""
    if winner == default:
        text = f"No configuration measured beat the default ({default}): keep it."
        if runner_up and runner_adv and runner_adv["low"] is not None:
            text += (f" The runner-up {runner_up} is {runner_adv['ratio'] - 1:+.1%} [{runner_adv['low'] - 1:+.1%}, "
                     f"{runner_adv['high'] - 1:+.1%}] against it on fresh blocks.")
        return text
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


def confirm_winner(search: Search, found: SearchResult, *, blocks: int, missing: Callable[[list[Cell]], bool],
                   new_instance: Callable[[], str], say: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """`blocks` fresh blocks of the winner, the runner-up and the default, numbered
    after the search's, restart knobs grouped, measured through the search (its
    accounts pay for them); `new_instance()` (called only when a
    cell of them is still to measure: a resumed tune may have them all) starts the
    engine afresh and says how. Returns the confirmation as tune.json keeps it."""
    entrants = list(dict.fromkeys([found.winner, *([found.runner_up] if found.runner_up else []), found.default]))
    first = search.next_block
    plan: list[Cell] = []
    last: tuple | None = None
    for block in range(first, first + blocks):
        rng = random.Random(search.seed * 1_000_003 + block)
        ordered = order_block([search.setting(lb) for lb in entrants], search.restart_knobs, rng, last)
        last = costly_key(ordered[-1], search.restart_knobs)
        plan += [Cell(0, block, s) for s in ordered]
    fresh = new_instance() if missing(plan) else "the same engine instance (every cell measured before the resume)"
    say(f"confirmation: {blocks} fresh blocks of {', '.join(entrants)} on {fresh}")
    measured: list[BlockCell] = []
    for cell in plan:
        value = search.measure_one(cell, {"phase": "confirm"})  # paid from the budget like the race's cells
        if value is not None:
            measured.append(BlockCell(cell.block, cell.setting.label, value))
    claims = len(entrants) - 1
    goal = search.goal
    adv = advantage(measured, found.winner, found.default, goal, claims) if found.winner != found.default else None
    runner = advantage(measured, found.runner_up, found.winner, goal, claims) if found.runner_up else None
    runner_vs_default = advantage(measured, found.runner_up, found.default, goal, claims) if found.runner_up else None
    return {"entrants": entrants, "blocks": blocks, "first_block": first, "instance": fresh,
            "winner_vs_default": adv, "runner_up_vs_winner": runner, "runner_up_vs_default": runner_vs_default,
            "cells": [{"block": c.block, "label": c.key, "value": c.value} for c in measured],
            "verdict": verdict(found.winner, found.default, adv, found.runner_up, runner_vs_default)}
