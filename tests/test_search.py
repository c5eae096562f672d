"""Refine search: the budget, the confirmation of the best, the bisection, and the
runner growing the plan on the null engine."""

from __future__ import annotations

import json

import pytest

from blocklab.experiment import prepare
from blocklab.results import RunDir
from blocklab.runner import Interrupted, SilentReporter, run
from blocklab.search import (
    CONFIRM_FACTOR,
    bisection_cost,
    coarse_values,
    midpoint,
    neighbours_of,
    refine_budget,
    refine_candidates,
    refine_step,
)
from blocklab.spec import spec_from_dict

STEP = dict(goal="max", repeats=3, max_repeats=20, budget=96, seed=1)


def test_budget_is_a_quarter_of_the_full_grid_but_covers_the_coarse_sweep():
    assert refine_budget(1, 128, 3) == 96
    # 1..8 has 4 coarse values (1, 2, 4, 8): 12 scans, more than a quarter of 24
    assert refine_budget(1, 8, 3) == 12


def test_neighbours_and_midpoints():
    assert neighbours_of(16, [1, 8, 16, 32, 128]) == [8, 32]
    assert neighbours_of(1, [1, 8, 16]) == [8]
    assert neighbours_of(16, [1, 8, 16]) == [8]
    assert midpoint(16, 32) == 24 and midpoint(16, 8) == 12
    assert midpoint(16, 17) == 16 and midpoint(17, 16) == 17, "adjacent values have no midpoint of their own"


def test_candidates_skip_values_already_planned():
    medians = {8: 10.0, 16: 20.0, 32: 12.0}
    assert refine_candidates(medians, "max") == [12, 24]
    assert refine_candidates(medians, "max", planned=[24]) == [12]
    assert refine_candidates(medians, "min") == [12], "8 is the best when lower is better; its one neighbour is 16"


def test_bisection_cost_halves_each_gap_to_adjacency():
    assert bisection_cost(16, [8, 32], 3) == (3 + 4) * 3
    assert bisection_cost(16, [15, 17], 3) == 0


def test_clear_winner_is_bisected_without_confirmation():
    samples = {8: [10.0, 10.1, 9.9], 16: [20.0, 20.2, 19.8], 32: [12.0, 12.1, 11.9]}
    step = refine_step(samples, spent=9, **STEP)
    assert step.values == [12, 24] and step.blocks == 3
    assert step.why.startswith("refine: adding value = 12, 24")


def test_best_not_separated_from_a_neighbour_gets_one_more_block_first():
    # 16 leads on its median, but 32's runs overlap it: which side to bisect is not yet known
    samples = {8: [10.0, 10.1, 9.9], 16: [20.0, 14.0, 21.0], 32: [19.0, 13.0, 20.5]}
    step = refine_step(samples, spent=9, **STEP)
    assert step.values == [16, 32] and step.blocks == 1, "only the best and the unseparated neighbour"
    assert "not yet separated" in step.why and "16 (3 runs)" in step.why


def test_confirmation_stops_at_its_cap_and_the_bisection_goes_on():
    cap = CONFIRM_FACTOR * 3
    samples = {8: [10.0] * 3, 16: [20.0, 14.0, 21.0] * (cap // 3), 32: [19.0, 13.0, 20.5] * (cap // 3)}
    step = refine_step(samples, spent=40, **STEP)
    assert step.values == [12, 24] and step.blocks == 3


def test_confirmation_respects_max_repeats():
    samples = {8: [10.0] * 3, 16: [20.0, 14.0, 21.0, 20.0], 32: [19.0, 13.0, 20.5, 19.0]}
    step = refine_step(samples, spent=11, **{**STEP, "max_repeats": 4})
    assert step.values == [12, 24], "both contenders already have max_repeats runs"


def test_confirmation_leaves_room_for_the_rest_of_the_bisection():
    samples = {8: [10.0] * 3, 16: [20.0, 14.0, 21.0], 32: [19.0, 13.0, 20.5]}
    reserve = bisection_cost(16, [8, 32], 3)
    tight = refine_step(samples, spent=96 - reserve - 1, **STEP)
    assert tight.values == [12, 24], "no confirmation when it would eat the bisection's share"
    roomy = refine_step(samples, spent=96 - reserve - 2, **STEP)
    assert roomy.values == [16, 32]


def test_bisection_stops_when_the_budget_is_spent():
    samples = {8: [10.0] * 3, 16: [20.0] * 3, 32: [12.0] * 3}
    step = refine_step(samples, spent=92, **STEP)
    assert step.values == []
    assert step.why == "refine: scan budget spent (92 of 96); value = 12, 24 left untested"


def test_done_when_the_neighbours_are_adjacent_and_separated():
    samples = {15: [10.0] * 3, 16: [20.0] * 3, 17: [12.0] * 3}
    assert refine_step(samples, spent=9, **STEP).values == []
    assert refine_step(samples, spent=9, **STEP).why == ""


def test_single_runs_count_as_not_separated():
    samples = {8: [10.0], 16: [20.0], 32: [12.0]}
    step = refine_step(samples, spent=3, **{**STEP, "repeats": 1})
    assert step.values == [16, 8, 32] and step.blocks == 1, "one run gives no interval to separate anything"


def test_a_value_without_successful_runs_is_not_planned_again():
    samples = {8: [10.0] * 3, 12: [], 16: [20.0] * 3, 32: [12.0] * 3}
    assert refine_step(samples, spent=12, **STEP).values == [24]


# ------------------------------------------------------------- on the null engine
def refine_experiment(noise: float, seed: int = 2, peak: int = 37, repeats: int = 3):
    raw = {
        "engine": {"kind": "null"},
        "workload": {"kind": "null", "peak": peak, "noise": noise},
        "knobs": {"null.level": [1, 128]},
        "measure": {"repeats": repeats, "seed": seed, "search": "refine", "cache": "warm"},
    }
    return prepare(spec_from_dict(raw, "t", {}), "", "t")


def test_noisy_refine_confirms_stays_in_budget_and_lands_near_the_peak(tmp_path):
    exp = refine_experiment(noise=0.05)
    assert exp.knobs["null.level"] == coarse_values([1, 128])
    reporter = SilentReporter()
    run_dir = RunDir(tmp_path / "run")
    summary = run(exp, run_dir, reporter)
    rows = run_dir.rows()
    assert len(rows) <= refine_budget(1, 128, 3)
    assert any("not yet separated" in line for line in reporter.lines), "noise this size must trigger confirmation"
    best = summary["best"]["null.level"]
    # the score is 10,000 - (level - 37)^2: within 2% means |level - 37| <= 14
    assert abs(best - 37) <= 14, f"refine picked {best}"
    plan = json.loads(run_dir.file("plan.json").read_text())
    assert len(plan["cells"]) == len(rows), "every cell the plan grew to was run"
    assert len({c["cell_id"] for c in plan["cells"]}) == len(rows)


def test_confirmation_blocks_hold_each_value_once(tmp_path):
    exp = refine_experiment(noise=0.05)
    run_dir = RunDir(tmp_path / "run")
    run(exp, run_dir, SilentReporter())
    by_block: dict[int, list[int]] = {}
    for row in run_dir.rows():
        by_block.setdefault(row.block, []).append(row.settings["null.level"])
    for block, values in by_block.items():
        assert len(values) == len(set(values)), f"block {block} runs a value twice: {values}"


class CtrlCAfter(SilentReporter):
    """Raises KeyboardInterrupt after n cells, as Ctrl-C would."""

    def __init__(self, n: int):
        super().__init__()
        self.n = n

    def cell_done(self, cell, row, line):
        super().cell_done(cell, row, line)
        self.n -= 1
        if self.n == 0:
            raise KeyboardInterrupt


def test_noisy_refine_resumes_within_budget(tmp_path):
    cut_dir = RunDir(tmp_path / "cut")
    with pytest.raises(Interrupted):
        run(refine_experiment(noise=0.05), cut_dir, CtrlCAfter(30))
    run(refine_experiment(noise=0.05), cut_dir, SilentReporter(), resume=True)
    # the null workload's noise restarts with the resumed run, so the samples differ from an
    # uninterrupted run; the plan must still be whole: every cell run once, within budget
    ids = [r.cell_id for r in cut_dir.rows()]
    assert len(ids) == len(set(ids)) and len(ids) <= refine_budget(1, 128, 3)
