"""Do the hosts of a fleet tune agree? Every host's winner measured on every host.

After each host has tuned on its own (its search, its race, its confirmation),
each host measures fresh blocks holding every host's winner and the default
once, in a random order (restart knobs grouped). On each host every other
host's winner is compared with that host's own, paired on the host's blocks
(confirm.advantage; a host's comparisons share 95%). The hosts agree when they
found the same winner, or when no host's winner is shown worse than a host's
own on that host: one configuration then serves them all as far as this
evidence tells. They differ when on some host another host's winner is shown
worse than its own: that host needs its own configuration.
"""

from __future__ import annotations

import random
from typing import TypedDict

from ..analysis.paired import BlockCell
from ..plan import Cell, Setting, costly_key, order_block
from .confirm import Claim, advantage


class Agreement(TypedDict):
    """The hosts' agreement (fleet-tune.json keeps it)."""

    agree: bool
    winners: dict[str, str]  # host -> its winner's label
    hosts: dict[str, dict[str, object]]  # host -> its own winner and the others' claims against it
    verdict: str


def cross_plan(entrants: list[Setting], restart_knobs: list[str], seed: int, first_block: int, blocks: int) -> list[Cell]:
    """`blocks` blocks numbered from `first_block`, each holding every entrant once."""
    plan: list[Cell] = []
    last: tuple | None = None
    for block in range(first_block, first_block + blocks):
        rng = random.Random(seed * 1_000_003 + block)
        ordered = order_block(entrants, restart_knobs, rng, last)
        if restart_knobs:
            last = costly_key(ordered[-1], restart_knobs)
        plan += [Cell(0, block, s) for s in ordered]
    return plan


def judge(winners: dict[str, str], cells: dict[str, list[BlockCell]], goal: str) -> Agreement:
    """winners: host -> its winner's label; cells: host -> its cross blocks. Each host's
    comparisons of the other winners with its own, and the verdict."""
    distinct = list(dict.fromkeys(winners.values()))
    hosts: dict[str, dict[str, object]] = {}
    differs: list[tuple[str, str, tuple[float, float, float]]] = []  # host, another's winner, its ratio to the host's own
    for host, own in winners.items():
        others = [w for w in distinct if w != own]
        judged: dict[str, Claim | None] = {}
        for other in others:
            adv = advantage(cells.get(host) or [], other, own, goal, len(others))
            judged[other] = adv
            if adv is not None and adv["low"] is not None and adv["high"] is not None and adv["high"] < 1.0:
                differs.append((host, other, (adv["ratio"], adv["low"], adv["high"])))
        hosts[host] = {"own": own, "others": judged}
    if len(distinct) == 1:
        text = f"The hosts agree: every host ({', '.join(winners)}) found the same winner, {distinct[0]}."
    elif not differs:
        text = ("The hosts agree as far as the evidence goes: they found different winners, but on no host is another host's "
                "winner shown worse than its own (paired, fresh blocks on each host).")
    else:
        said = "; ".join(f"on {h}, {o} is {ratio - 1:+.1%} [{low - 1:+.1%}, {high - 1:+.1%}] against "
                         f"{hosts[h]['own']}" for h, o, (ratio, low, high) in differs)
        text = f"The hosts differ: {said}. Give each host its own configuration."
    return {"agree": not differs, "winners": winners, "hosts": hosts, "verdict": text}
