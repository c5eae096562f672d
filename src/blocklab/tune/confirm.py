"""The confirmation: fresh blocks of the winner, the runner-up and the default.

The search picked its winner from the same data it would be judged on (the
winner's curse: the luckiest of the good configurations looks best). So the
verdict comes from blocks measured after the search, on a new engine instance
where the engine allows it (the embedded server restarted: its caches empty),
each block holding the three once in a random order. Every pair of them is a
claim (three: the winner against the default, its advantage; the runner-up
against the winner; the runner-up against the default), each with a paired t
interval (the per-block ratios, analysis/paired.py) at 1 - 0.05/3 so that all
hold together with 95% (Bonferroni; with two entrants one claim at 95%).

Each claim carries two intervals, both from the confirmation's blocks alone:
the confidence interval of the true advantage (`low`, `high`: the true ratio
lies in it with the stated confidence), and the prediction interval of a
re-measurement (`predict_low`, `predict_high`: where the estimate of another
`blocks` fresh blocks will fall with the same confidence). A re-measurement is
itself noisy, so its estimate falls inside the confidence interval less often
than the interval's confidence; the prediction interval widens the confidence
interval's half-width by sqrt(1 + n/m) for a re-measurement of m blocks
(`predict(claim, m)`: the difference of two independent means, the spread
estimated from the confirmation's n blocks, Student t with its n - 1 degrees
of freedom).

The winner is recommended only when the confirmation shows it better than
the default (the interval's lower end above 1); otherwise the verdict says to
keep the default, whatever the search's estimates said.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, TypedDict

from ..analysis.paired import BlockCell, fit_blocks
from ..lazy import scipy_stats
from ..plan import Cell, costly_key, order_block

if TYPE_CHECKING:
    from .driver import Search, SearchResult

CONFIDENCE = 0.95


class Claim(TypedDict):
    """One paired claim of the confirmation (tune.json keeps it): the ratio, its
    confidence interval (None when the blocks give none) and its prediction interval."""

    ratio: float
    low: float | None
    high: float | None
    blocks: int
    confidence: float
    log_se: float | None
    df: float
    predict_low: float | None
    predict_high: float | None


def advantage(cells: list[BlockCell], a: Hashable, b: Hashable, goal: str, claims: int) -> Claim | None:
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
    finite = math.isfinite(low) and math.isfinite(high)
    out: Claim = {"ratio": ratio, "low": low if finite else None, "high": high if finite else None, "blocks": effect.blocks,
                  "confidence": 1.0 - alpha, "log_se": effect.se if math.isfinite(effect.se) else None, "df": effect.df,
                  "predict_low": None, "predict_high": None}
    out["predict_low"], out["predict_high"] = predict(out, effect.blocks)
    return out


def predict(claim: Claim, blocks: int) -> tuple[float | None, float | None]:
    """Where the estimate of a re-measurement of `blocks` fresh blocks (paired, the
    same design) falls with the claim's confidence: the ratio times
    exp(+-t * log_se * sqrt(1 + n/blocks)), t of the claim's n - 1 degrees of freedom.
    (None, None) when the claim has no interval."""
    se, df, n = claim.get("log_se"), float(claim.get("df") or 0.0), int(claim.get("blocks") or 0)
    if se is None or not math.isfinite(se) or df <= 0 or n < 2 or blocks < 1:
        return None, None
    t = float(scipy_stats.t.ppf(1.0 - (1.0 - claim["confidence"]) / 2.0, df))
    half = t * se * math.sqrt(1.0 + n / blocks)
    centre = math.log(claim["ratio"])
    return math.exp(centre - half), math.exp(centre + half)


def shown_better(claim: Claim | None) -> bool:
    """Does the confirmation show the winner better than the default (its interval above 1)?"""
    return claim is not None and claim["low"] is not None and claim["low"] > 1.0


def verdict(winner: str, default: str, adv: Claim | None, runner_up: str | None = None,
            runner_adv: Claim | None = None) -> str:
    """The sentence the console and the report lead with."""
    if winner == default:
        text = f"No configuration measured beat the default ({default}): keep it."
        if runner_up and runner_adv and runner_adv["low"] is not None and runner_adv["high"] is not None:
            text += (f" The runner-up {runner_up} is {runner_adv['ratio'] - 1:+.1%} [{runner_adv['low'] - 1:+.1%}, "
                     f"{runner_adv['high'] - 1:+.1%}] against it on fresh blocks.")
        return text
    if adv is None or adv["low"] is None or adv["high"] is None:  # low and high are None together
        return (f"The search's winner {winner} was not shown better than the default: the confirmation has too few blocks "
                f"for an interval on its advantage; keep the default ({default}).")
    gain = adv["ratio"] - 1.0
    band = f"[{adv['low'] - 1:+.1%}, {adv['high'] - 1:+.1%}]"
    conf = f"{adv['confidence']:.1%}"
    if adv["low"] > 1.0:
        text = f"The winner {winner} is {gain:+.1%} {band} better than the default ({conf} interval, {adv['blocks']} fresh blocks)."
        predict_low, predict_high = adv.get("predict_low"), adv.get("predict_high")
        if predict_low is not None and predict_high is not None:
            text += (f" A re-measurement of {adv['blocks']} blocks should find {predict_low - 1:+.1%} to "
                     f"{predict_high - 1:+.1%} ({conf} prediction interval).")
        return text
    if adv["high"] < 1.0:
        return f"The search's winner {winner} is {gain:+.1%} {band} against the default on fresh blocks: worse; keep the default ({default})."
    return (f"The search's winner {winner} is {gain:+.1%} {band} against the default on fresh blocks: not shown better; "
            f"keep the default ({default}).")


def confirm_winner(search: Search, found: SearchResult, *, blocks: int, missing: Callable[[list[Cell]], bool],
                   new_instance: Callable[[], str], say: Callable[[str], None] = lambda _: None) -> dict[str, object]:
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
    claims = len(entrants) * (len(entrants) - 1) // 2  # every pair below is a claim; they hold together
    goal = search.goal
    adv = advantage(measured, found.winner, found.default, goal, claims) if found.winner != found.default else None
    runner = advantage(measured, found.runner_up, found.winner, goal, claims) if found.runner_up else None
    runner_vs_default = advantage(measured, found.runner_up, found.default, goal, claims) if found.runner_up else None
    recommended = found.winner if found.winner != found.default and shown_better(adv) else found.default
    return {"entrants": entrants, "blocks": blocks, "first_block": first, "instance": fresh, "recommended": recommended,
            "winner_vs_default": adv, "runner_up_vs_winner": runner, "runner_up_vs_default": runner_vs_default,
            "cells": [{"block": c.block, "label": c.key, "value": c.value} for c in measured],
            "verdict": verdict(found.winner, found.default, adv, found.runner_up, runner_vs_default)}
