"""Randomised blocks, costly knobs outermost, reproducible from the seed."""

from __future__ import annotations

from collections import Counter

from blocklab.engines.base import ApplyClass
from blocklab.plan import make_plan


def test_every_setting_once_per_block_in_varying_order():
    plan = make_plan({"k": [1, 2, 4, 8, 16]}, repeats=6, seed=3)
    assert len(plan.cells) == 30
    orders = []
    for block in range(6):
        values = [c.setting.as_dict()["k"] for c in plan.cells if c.block == block]
        assert sorted(values) == [1, 2, 4, 8, 16]
        orders.append(tuple(values))
    assert len(set(orders)) > 1, "blocks should be shuffled independently"
    assert len({c.cell_id for c in plan.cells}) == 30


def test_seed_reproduces_plan():
    a = make_plan({"k": [1, 2, 3]}, repeats=3, seed=42)
    b = make_plan({"k": [1, 2, 3]}, repeats=3, seed=42)
    assert [x.cell_id for x in a.cells] == [x.cell_id for x in b.cells]
    assert a.to_dict()["seed"] == 42


def test_restart_knob_grouped_and_carried_across_blocks():
    knobs = {"cheap": [1, 2, 3, 4], "costly": ["a", "b", "c"]}
    classes = {"cheap": ApplyClass.SESSION, "costly": ApplyClass.RESTART}
    plan = make_plan(knobs, repeats=4, seed=9, apply_class=classes)
    changes = plan.costly_changes()
    # within a block each costly value runs as one group: 2 changes per block,
    # and a block starts where the previous one ended, so no change at the boundary
    assert len(changes) == 2 * 4
    sequence = [c.setting.as_dict()["costly"] for c in plan.cells]
    runs = [v for i, v in enumerate(sequence) if i == 0 or sequence[i - 1] != v]
    assert len(runs) == 1 + len(changes)
    assert Counter(sequence) == {"a": 16, "b": 16, "c": 16}
