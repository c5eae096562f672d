"""Grid × repeats -> ordered cells.

Repeats run in randomised blocks: each block runs every setting once, in a
fresh random order, so drift hits all settings alike. Costly knobs (restart,
reinit) are outermost: within a block the settings that share their costly
values run together, and a block starts with the costly group the previous
block ended on, so each block needs as few restarts as possible.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from typing import Any

from .engines.base import ApplyClass
from .units import label_of


@dataclass(frozen=True)
class Setting:
    """One point of the grid: knob -> canonical value, in the spec's knob order."""

    values: tuple[tuple[str, Any], ...]

    def as_dict(self) -> dict[str, Any]:
        return dict(self.values)

    @property
    def label(self) -> str:
        return label_of(self.as_dict())


@dataclass(frozen=True)
class Cell:
    index: int
    block: int
    setting: Setting

    @property
    def cell_id(self) -> str:
        return f"b{self.block}:{self.setting.label}"


@dataclass
class Plan:
    cells: list[Cell]
    seed: int
    settings: list[Setting]
    apply_class: dict[str, ApplyClass] = field(default_factory=dict)
    # knob -> value as labelled -> bytes, for knobs that are sizes (the report's '16 kB')
    value_bytes: dict[str, dict[str, int]] = field(default_factory=dict)
    # knob -> value as labelled -> how it reads for the engine ('64 (read-ahead off)'), where the engine says
    value_text: dict[str, dict[str, str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "seed": self.seed,
            "settings": [s.as_dict() for s in self.settings],
            "apply_class": {k: v.label for k, v in self.apply_class.items()},
            "value_bytes": self.value_bytes,
            "value_text": self.value_text,
            "cells": [
                {"index": c.index, "block": c.block, "cell_id": c.cell_id, "settings": c.setting.as_dict()}
                for c in self.cells
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], apply_class: dict[str, ApplyClass]) -> Plan:
        settings = [Setting(tuple(s.items())) for s in data["settings"]]
        cells = [Cell(c["index"], c["block"], Setting(tuple(c["settings"].items()))) for c in data["cells"]]
        value_bytes = {k: {str(v): int(b) for v, b in sizes.items()} for k, sizes in (data.get("value_bytes") or {}).items()}
        value_text = {k: {str(v): str(t) for v, t in texts.items()} for k, texts in (data.get("value_text") or {}).items()}
        return cls(cells=cells, seed=int(data["seed"]), settings=settings, apply_class=apply_class, value_bytes=value_bytes,
                   value_text=value_text)

    def extend(self, cells: list[Cell], settings: list[Setting]) -> None:
        self.cells.extend(cells)
        self.settings.extend(s for s in settings if s not in self.settings)

    def costly_changes(self) -> list[tuple[int, ApplyClass, list[str]]]:
        """Where the plan must restart or reinitialise: (cell index, class, knobs changed)."""
        out: list[tuple[int, ApplyClass, list[str]]] = []
        previous: dict[str, object] | None = None
        for cell in self.cells:
            current = cell.setting.as_dict()
            changed = [k for k, v in current.items() if previous is None or previous.get(k) != v]
            costly = [k for k in changed if self.apply_class.get(k, ApplyClass.SESSION) >= ApplyClass.RESTART]
            if costly and previous is not None:
                worst = max(self.apply_class[k] for k in costly)
                out.append((cell.index, worst, costly))
            previous = current
        return out


def grid(knobs: dict[str, list[Any]]) -> list[Setting]:
    names = list(knobs)
    return [Setting(tuple(zip(names, combo))) for combo in itertools.product(*(knobs[n] for n in names))]


def make_plan(
    knobs: dict[str, list[Any]],
    repeats: int,
    seed: int,
    apply_class: dict[str, ApplyClass] | None = None,
    first_block: int = 0,
    previous_costly: tuple | None = None,
    first_index: int = 0,
) -> Plan:
    """Order `repeats` randomised blocks of the grid. `first_block` and
    `previous_costly` let adaptive repeats append blocks to an existing plan."""
    apply_class = dict(apply_class or {})
    settings = grid(knobs)
    rng = random.Random(seed * 1_000_003 + first_block)
    costly = [k for k in knobs if apply_class.get(k, ApplyClass.SESSION) >= ApplyClass.RESTART]
    cells: list[Cell] = []
    last_key = previous_costly
    for block in range(first_block, first_block + repeats):
        ordered = order_block(settings, costly, rng, last_key)
        for setting in ordered:
            cells.append(Cell(index=first_index + len(cells), block=block, setting=setting))
        last_key = costly_key(ordered[-1], costly)
    return Plan(cells=cells, seed=seed, settings=settings, apply_class=apply_class)


def costly_key(setting: Setting, costly: list[str]) -> tuple:
    d = setting.as_dict()
    return tuple(str(d[k]) for k in costly)


def order_block(settings: list[Setting], costly: list[str], rng: random.Random, last_key: tuple | None) -> list[Setting]:
    groups: dict[tuple, list[Setting]] = {}
    for setting in settings:
        groups.setdefault(costly_key(setting, costly), []).append(setting)
    keys = list(groups)
    rng.shuffle(keys)
    if last_key in groups:  # carry on with what the server runs now: one restart saved
        keys.remove(last_key)
        keys.insert(0, last_key)
    ordered: list[Setting] = []
    for key in keys:
        members = list(groups[key])
        rng.shuffle(members)
        ordered.extend(members)
    return ordered
