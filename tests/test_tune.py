"""blocklab tune without a database: the space and its refusals, the search on
synthetic response surfaces whose optimum and noise are known (found, and the
stated interval holds), and the whole tune on the null engine (report, resume)."""

from __future__ import annotations

import itertools
import json
import math
import random
import re
import statistics
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from blocklab.analysis.paired import BlockCell, fit_blocks
from blocklab.cli import main
from blocklab.plan import Cell, Setting
from blocklab.results import ResultRow, RunDir
from blocklab.runner import Interrupted
from blocklab.spec import SpecError
from blocklab.tune.confirm import confirm_winner, predict, verdict
from blocklab.tune.driver import SEARCH_VERSION, Accounts, Search, Trial
from blocklab.tune.race import credible_levels, levels_to
from blocklab.tune.session import load_saved_tune, load_tune, run_tune
from blocklab.tune.space import CONFIRM_BLOCKS, CONFIRM_MIN, Dimension, TuneSpec, parse_budget, split_raw

# ------------------------------------------------------------------ the space


def test_budget_is_cells_or_a_duration():
    assert parse_budget(60).cells == 60 and parse_budget("60").cells == 60
    assert parse_budget("90s").seconds == 90 and parse_budget("1h30m").seconds == 5400 and parse_budget("20m").seconds == 1200
    for bad in ("0", "3x", "", "m", True, "-5"):
        with pytest.raises(SpecError, match="budget"):
            parse_budget(bad)


def test_knobs_are_sets_or_ranges_and_a_range_is_checked_by_its_ends():
    raw = {"knobs": {"a": [1, 4, 2], "b": ["x", "y"], "c": {"min": 1, "max": 64, "log": True}}, "tune": {"budget": 40}}
    rest, spec = split_raw(raw, "t.toml", None)
    assert rest["knobs"] == {"a": [1, 4, 2], "b": ["x", "y"], "c": [1, 64]} and "tune" not in rest
    a, b, c = spec.dimensions
    assert a.ordinal and not b.ordinal and c.is_range and c.log
    assert spec.size() == 3 * 2 * 64 and spec.budget.cells == 40


@pytest.mark.parametrize("knobs, tune, message", [
    ({"a": {"min": 5, "max": 2}}, {}, "knobs.a: min 5 is not below max 2"),
    ({"a": {"min": 1, "max": 8, "step": 2}}, {}, "knobs.a.step: unknown field of a range; accepted: min, max, log"),
    ({"a": {"min": 0, "max": 8, "log": True}}, {}, "a log range needs min >= 1"),
    ({"a": {"min": 1.5, "max": 8}}, {}, "knobs.a.min: 1.5 is not accepted"),
    ({"a": [1, 1]}, {}, "lists a value twice"),
    ({"a": [1, 2]}, {"default": {"b": 1}}, "tune.default.b: not a knob of [knobs]"),
    ({"a": [1, 2]}, {"budget": "soon"}, "not a budget"),
    ({"a": [1, 2]}, {"candidates": 0}, "tune.candidates: 0 is not accepted: an integer from 1 to 12"),
    ({"a": [1, 2]}, {"speed": 1}, "tune.speed: unknown field"),
    ({"a": [1]}, {}, "the space holds one configuration"),
])
def test_bad_spaces_are_refused_with_what_is_accepted(knobs, tune, message):
    with pytest.raises(SpecError, match=re.escape(message)):
        split_raw({"knobs": knobs, "tune": {"budget": 40, **tune}}, "t.toml", None)


# ------------------------------------------------------------------ a synthetic surface
# Three knobs: an ordinal set (peak at 16), a categorical (z best), a range (peak at 20).
# Lognormal noise of NOISE per cell and a block drift of +-10% that the blocks must cancel.
NOISE = 0.05
DIMS = [Dimension("io", values=(1, 2, 4, 8, 16, 32, 64)), Dimension("mode", values=("x", "y", "z")),
        Dimension("depth", values=(0, 10, 20, 30, 40, 50))]
GAIN = {"x": 1.0, "y": 0.85, "z": 1.12}


def truth(config: dict[str, Any]) -> float:
    io_term = 1.0 - 0.02 * abs(math.log2(config["io"]) - 4) ** 1.5
    depth_term = 1.0 - ((config["depth"] - 20) / 80) ** 2
    return 1000.0 * io_term * depth_term * GAIN[config["mode"]]


OPTIMUM = truth({"io": 16, "mode": "z", "depth": 20})
DEFAULT = {"io": 1, "mode": "x", "depth": 0}


def synthetic_measure(seed: int, noise: float = NOISE):
    """Cells of 1 s; a change of mode restarts the engine: its apply takes 2 s more."""
    rng = random.Random(seed)
    drift: dict[int, float] = {}
    mode = ["x"]

    def measure(cell: Cell, tag: dict[str, Any]) -> list[ResultRow]:
        config = cell.setting.as_dict()
        factor = drift.setdefault(cell.block, 1.0 + rng.uniform(-0.1, 0.1))
        value = truth(config) * factor * math.exp(rng.gauss(0.0, noise))
        apply_s = 2.01 if config["mode"] != mode[0] else 0.01
        mode[0] = config["mode"]
        return [ResultRow(cell=0, block=cell.block, settings=config, applied={}, metrics={"score": value},
                          cell_id=cell.cell_id, notes={"tune_s": 1.0 + apply_s, "apply_s": apply_s, "tune": tag})]

    return measure


def synthetic_tune(seed: int, budget: int = 150) -> tuple[Search, Any, dict[str, Any]]:
    spec = TuneSpec(DIMS, parse_budget(budget), candidates=6, max_blocks=3, confirm_blocks=4)
    measure = synthetic_measure(seed)
    search = Search(spec=spec, dimensions=DIMS, default=DEFAULT, goal="max", metric="score", seed=seed, restart_knobs=["mode"],
                    measure=measure, accounts=Accounts(declared_restart_s=2.0, estimate_cell_s=1.0))
    found = search.run()
    confirmation = confirm_winner(search, found, blocks=spec.confirm_blocks, missing=lambda _: True,
                                  new_instance=lambda: "a new instance")
    return search, found, confirmation


def test_the_search_finds_the_optimum_and_its_stated_interval_holds():
    ratios, holds, spent = [], 0, []
    for seed in range(10):
        search, found, confirmation = synthetic_tune(seed)
        winner = search.trials[found.winner].config
        ratios.append(truth(winner) / OPTIMUM)
        adv = confirmation["winner_vs_default"]
        true_ratio = truth(winner) / truth(DEFAULT)
        holds += adv is not None and adv["low"] <= true_ratio <= adv["high"]
        spent.append(search.accounts.spent_cells)
    # 126 configurations, 5 of them within 3% of the optimum, the default at 70% of it; 150 cells
    # with every restart priced at 2 cells (the confirmation's included) are 40% of an exhaustive
    # sweep of three blocks. Here 6 of 10 tunes land within 3%, all within 3.6% (the misses are
    # the optimum's neighbours: io 8 or 32 with depth 10 or 30)
    assert sum(r >= 0.97 for r in ratios) >= 6, f"within 3% of the optimum: {ratios}"
    assert min(ratios) >= 0.96, f"a tune far from the optimum: {ratios}"
    assert holds >= 9, f"the stated interval held in {holds} of 10"
    assert max(spent) <= 150, spent


def test_the_confirmation_is_sized_by_the_noise_the_race_measured():
    """Without [tune] confirm_blocks, the fewest blocks that would show the incumbent's
    advantage with 90% power: at 5% noise the smallest confirmation, at 18% (a cold scan on
    a virtual disk) more than the fixed 6 that told a quarter of such tunes to keep the
    default; within a third of the budget, restarts counted, and the budget still holds."""
    sizes = {}
    budget = 300  # a third holds 12 blocks and their restarts (2 cells each) in the worst case
    for noise in (0.05, 0.18):
        spec = TuneSpec(DIMS, parse_budget(budget), candidates=6, max_blocks=3)
        assert spec.confirm_blocks is None
        search = Search(spec=spec, dimensions=DIMS, default=DEFAULT, goal="max", metric="score", seed=1, restart_knobs=["mode"],
                        measure=synthetic_measure(1, noise), accounts=Accounts(declared_restart_s=2.0, estimate_cell_s=1.0))
        found = search.run()
        sizes[noise] = found.confirm_blocks
        restart = search.accounts.restart_in_cells()
        assert 3 * found.confirm_blocks + (2 * found.confirm_blocks + 1) * restart <= budget / 3, (noise, found.confirm_blocks)
        confirmation = confirm_winner(search, found, blocks=found.confirm_blocks, missing=lambda _: True,
                                      new_instance=lambda: "a new instance")
        assert confirmation["blocks"] == found.confirm_blocks
        assert search.accounts.spent_cells <= budget, (noise, search.accounts.spent_cells)
    assert sizes[0.05] == CONFIRM_MIN, sizes
    assert sizes[0.18] > CONFIRM_BLOCKS, sizes


def test_a_confirmation_size_the_experiment_names_is_kept(tmp_path):
    _, spec = split_raw({"knobs": {"a": [1, 2]}, "tune": {"budget": 60, "confirm_blocks": 5}}, "t.toml", None)
    assert spec.confirm_blocks == 5
    _, spec = split_raw({"knobs": {"a": [1, 2]}, "tune": {"budget": 60}}, "t.toml", None)
    assert spec.confirm_blocks is None
    with pytest.raises(SpecError, match=r"tune.confirm_blocks: 2 is not accepted: an integer from 3 to 30"):
        split_raw({"knobs": {"a": [1, 2]}, "tune": {"budget": 60, "confirm_blocks": 2}}, "t.toml", None)


@pytest.mark.parametrize("confirm_blocks", [None, 4])
def test_the_budget_holds_whatever_the_round_size_and_the_confirmation_s(confirm_blocks):
    """Every round's entrants (an elite among them) and the confirmation (sized at the end,
    or named) stay within the budget: 40 tunes, budgets 30-93 cells, 2 or 6 candidates a
    round, with and without a restart knob."""
    over = []
    for budget in range(30, 94, 16):
        for candidates, restart_knobs, seed in itertools.product((2, 6), ([], ["mode"]), range(2)):
            spec = TuneSpec(DIMS, parse_budget(budget), candidates=candidates, max_blocks=3, confirm_blocks=confirm_blocks)
            search = Search(spec=spec, dimensions=DIMS, default=DEFAULT, goal="max", metric="score", seed=seed,
                            restart_knobs=restart_knobs, measure=synthetic_measure(seed),
                            accounts=Accounts(declared_restart_s=2.0, estimate_cell_s=1.0))
            found = search.run()
            confirm_winner(search, found, blocks=found.confirm_blocks, missing=lambda _: True, new_instance=lambda: "new")
            if search.accounts.spent_cells > budget:
                over.append((budget, candidates, restart_knobs, seed, round(search.accounts.spent_cells, 2)))
    assert over == []


def heldout_ratio(seed: int, winner: dict[str, Any], blocks: int) -> float:
    """A re-measurement on a 'new instance' (noise and drift drawn afresh): `blocks`
    blocks of the winner and the default, the paired estimate of winner / default."""
    measure = synthetic_measure(10_000 + seed)
    cells = []
    for block in range(blocks):
        for label, config in (("winner", winner), ("default", DEFAULT)):
            setting = Setting(tuple(config.items()))
            cells.append(BlockCell(block, label, measure(Cell(0, block, setting), {})[0].metrics["score"]))
    return fit_blocks(cells, ["winner", "default"]).effect("winner", "default").interval(0.05)[0]


COVERAGE_RUNS = 100
HELDOUT_BLOCKS = 6


def test_the_claimed_interval_holds_in_95_percent_of_seeded_tunes():
    """The hold rate, statistically. 100 seeded tunes on the synthetic surface (126
    configurations, the default at 70% of the optimum, a race that picks its winner
    from noisy blocks: the winner's curse is there to be fallen for). Each claim is
    a 97.5% interval (two claims share 95%). An honest interval contains the true
    advantage in about 97.5 of 100; one that held only 80% of the time (e.g. the
    race's cells mixed in, which flatter the winner) would reach 92 with a chance
    of about 0.1% (binomial: mean 80, sd 4). The same for the prediction interval
    against a simulated held-out re-measurement of 6 fresh blocks (what the
    benchmark checks on the real engine)."""
    covered, predicted, beat_default, recommended = 0, 0, 0, 0
    misses, flattered = [], []
    for seed in range(COVERAGE_RUNS):
        search, found, confirmation = synthetic_tune(500 + seed, budget=90)
        winner = search.trials[found.winner].config
        adv = confirmation["winner_vs_default"]
        assert adv is not None and adv["low"] is not None, f"seed {500 + seed}: no claim on the winner ({found.winner})"
        assert adv["confidence"] == pytest.approx(1 - 0.05 / 3) and adv["blocks"] == 4  # three pairs among winner, runner-up, default: Bonferroni
        true_ratio = truth(winner) / truth(DEFAULT)
        covered += adv["low"] <= true_ratio <= adv["high"]
        low, high = predict(adv, HELDOUT_BLOCKS)
        held = heldout_ratio(500 + seed, winner, HELDOUT_BLOCKS)
        predicted += low <= held <= high
        if not low <= held <= high:
            misses.append((found.winner, round(held, 3), round(low, 3), round(high, 3)))
        beat_default += true_ratio > 1.0
        flattered.append(found.levels[found.winner] - math.log(true_ratio))  # the race's own estimate of the winner, log error
        recommended += confirmation["recommended"] == found.winner
    assert covered >= 92, f"the claimed interval held the true advantage in {covered} of {COVERAGE_RUNS}"
    assert predicted >= 92, f"the held-out estimate fell in the prediction interval in {predicted} of {COVERAGE_RUNS}: {misses}"
    assert beat_default == COVERAGE_RUNS, "every winner truly beats the default here (it sits at 70% of the optimum)"
    assert recommended >= 95, f"the winner was recommended in {recommended} of {COVERAGE_RUNS}"
    # the winner's curse the fresh blocks avoid: the race's estimate of its winner is too kind (here by about 2%)
    assert statistics.fmean(flattered) > 0.01, f"the race's estimates of its winners: {math.exp(statistics.fmean(flattered)):.3f}x the truth"


def test_the_prediction_interval_is_the_confidence_interval_widened_for_a_noisy_re_measurement():
    claim = {"ratio": 1.2, "low": None, "high": None, "blocks": 4, "confidence": 0.975, "log_se": 0.05, "df": 3.0}
    t = 4.1765  # Student t, 3 degrees of freedom, 98.75%
    low, high = predict(claim, 4)
    assert math.log(high / 1.2) == pytest.approx(t * 0.05 * math.sqrt(2), rel=1e-3)
    low6, high6 = predict(claim, 6)
    assert math.log(high6 / 1.2) == pytest.approx(t * 0.05 * math.sqrt(1 + 4 / 6), rel=1e-3) and low6 > low
    assert predict({**claim, "log_se": None}, 4) == (None, None) and predict({**claim, "blocks": 1}, 4) == (None, None)


def test_a_winner_the_confirmation_does_not_show_better_is_not_recommended():
    """The search's winner is the luck of the race; when the fresh blocks do not show
    it better than the default, the verdict says to keep the default."""
    base = {"ratio": 1.0, "blocks": 4, "confidence": 0.975, "log_se": 0.05, "df": 3.0, "predict_low": 0.8, "predict_high": 1.2}
    unsure = verdict("io=8, mode=z", "io=1, mode=x", {**base, "ratio": 1.04, "low": 0.95, "high": 1.14})
    assert "not shown better" in unsure and "keep the default (io=1, mode=x)" in unsure
    worse = verdict("io=8, mode=z", "io=1, mode=x", {**base, "ratio": 0.9, "low": 0.85, "high": 0.95})
    assert "worse; keep the default" in worse
    assert "keep the default" in verdict("io=8, mode=z", "io=1, mode=x", None)
    better = verdict("io=8, mode=z", "io=1, mode=x", {**base, "ratio": 1.3, "low": 1.1, "high": 1.5})
    assert "better than the default" in better and "keep" not in better and "re-measurement of 4 blocks" in better
    # a whole confirmation whose winner is truly worse than the default: recommended is the default
    search, found, _ = synthetic_tune(2, budget=60)
    bad = {"io": 64, "mode": "y", "depth": 50}
    label = search.label(bad)
    search.trials[label] = Trial(label, bad, 1, None)
    found.winner, found.runner_up = label, None
    confirmation = confirm_winner(search, found, blocks=4, missing=lambda _: True, new_instance=lambda: "a new instance")
    assert confirmation["recommended"] == found.default
    assert "keep the default" in confirmation["verdict"], confirmation["verdict"]


def test_the_race_drops_the_clearly_worse_and_restarts_are_paid_from_the_budget():
    search, found, _ = synthetic_tune(3)
    dropped = [t for t in found.trials.values() if t.dropped_at is not None]
    assert dropped, "with 5% noise, configurations 15% or more below the best are dropped"
    for t in dropped:
        ratio, low, high = t.dropped_ratio
        assert high < 1.0, f"{t.label} dropped with an interval reaching 1: {t.dropped_ratio}"
    assert found.default in found.trials and found.trials[found.default].dropped_at is None, "the default is never dropped"
    # each restart priced at what it measured over an ordinary apply (2 s), in cells of 1.01 s
    assert search.accounts.restart_in_cells() == pytest.approx(2.0 / 1.01)
    assert search.accounts.restart_cells > 0
    assert search.accounts.spent_cells == pytest.approx(search.accounts.cells + search.accounts.restart_cells)
    assert [e for e in found.events if e.get("incumbent")], "the incumbent changed at least once"


def _lucky_one_block_cells(noise: float) -> list[BlockCell]:
    """A default, a leader measured in six blocks at 1.6x it and twenty others
    (0.8x to 1.45x) in two blocks each, every cell off its truth by +-noise (log
    scale, alternating); then a newcomer measured in one block whose estimate is
    5% above the leader's."""
    truths = {"default": 1.0, "leader": 1.6, **{f"other{i}": 0.8 + 0.65 * i / 19 for i in range(20)}}
    cells = []
    for n, (key, truth_) in enumerate(truths.items()):
        blocks = range(6) if key in ("default", "leader") else (2 * (n % 3), 2 * (n % 3) + 1)
        cells += [BlockCell(b, key, 1000.0 * truth_ * math.exp(noise * (1 if (b + n) % 2 else -1))) for b in blocks]
    model = fit_blocks(cells)  # a configuration of one cell has no residual: it leaves this fit as it is
    return cells + [BlockCell(5, "newcomer", math.exp(model.levels["leader"] + 0.05 + model.block_effects[5]))]


@pytest.mark.parametrize("noise, crowned", [(0.14, "leader"), (0.01, "newcomer")])
def test_a_lucky_single_block_outranks_a_well_measured_leader_only_when_the_noise_is_small(noise, crowned):
    """What the search crowns: the credible levels shrink each estimate by how little
    its cells say. At 14% per-cell noise the newcomer's one block, 5% above the
    leader's six-block estimate, is mostly noise; at 1% it is information."""
    cells = _lucky_one_block_cells(noise)
    raw = levels_to(cells, "default", "max")
    assert max(raw, key=lambda k: raw[k]) == "newcomer"  # the raw estimates crown the newcomer either way
    credible = credible_levels(cells, "default", "max")
    assert max(credible, key=lambda k: credible[k]) == crowned, credible
    assert credible["default"] == 0.0


def test_an_earlier_leader_is_raced_again_beside_the_incumbent():
    """irace's elites: besides the incumbent, the best earlier configuration is
    measured in every round, so a leader that lost the incumbency to a luckier
    candidate is measured again, not forgotten."""
    search, found, _ = synthetic_tune(3)
    crowned = {e["label"] for e in found.events if e.get("incumbent")}
    raced_again = [t for t in found.trials.values()
                   if t.label not in crowned and t.label != found.default and t.blocks > search.spec.max_blocks]
    assert raced_again, [(t.label, t.blocks) for t in found.trials.values()]


# ------------------------------------------------------------------ on the null engine
NULL_TOML = """
name = "nulltune"
[engine]
kind = "null"
[workload]
kind = "null"
peak = 37
noise = 0.03
mode_gain = {a = 1.0, b = 1.08, c = 0.9}
[knobs]
"null.level" = {min = 0, max = 100}
"null.mode" = ["a", "b", "c"]
[measure]
cache = "warm"
[tune]
budget = 90
default = {"null.level" = 10}
"""


def null_score(level: int, mode: str) -> float:
    return (10_000 - (level - 37) ** 2) * {"a": 1.0, "b": 1.08, "c": 0.9}[mode]


def write(tmp_path: Path, text: str = NULL_TOML) -> str:
    path = tmp_path / "space.toml"
    path.write_text(text)
    return str(path)


def test_a_tune_on_the_null_engine_finds_the_optimum_and_writes_its_report(tmp_path):
    setup = load_tune(write(tmp_path), seed=4)
    state = run_tune(setup, RunDir(tmp_path / "run"))
    winner = state["winner_config"]
    assert null_score(winner["null.level"], winner["null.mode"]) >= 0.97 * null_score(37, "b"), winner
    adv = state["confirmation"]["winner_vs_default"]
    assert adv["low"] <= null_score(winner["null.level"], winner["null.mode"]) / null_score(10, "a") <= adv["high"]
    assert state["config_lines"] == [f"level = {winner['null.level']}", f"mode = {winner['null.mode']}"]
    assert set(state["importance"]) == {"null.level", "null.mode"}
    rows = RunDir(tmp_path / "run").rows()
    assert len({r.cell_id for r in rows}) == len(rows) and state["spent_cells"] <= 90
    assert all(r.notes["tune"]["phase"] in ("race", "confirm") for r in rows)
    html = (tmp_path / "run" / "report.html").read_text()
    for section in ("The configuration to paste", "Confirmation on fresh blocks", "Search trace", "Which knobs matter", "The race"):
        assert section in html
    assert (tmp_path / "run" / "plots" / "tune-trace.png").stat().st_size > 1000
    (tmp_path / "run" / "report.html").unlink()
    again = CliRunner().invoke(main, ["report", str(tmp_path / "run")])
    assert again.exit_code == 0 and "report.html" in again.output and (tmp_path / "run" / "report.html").exists()


class CutAfter:
    def __init__(self, cells: int):
        self.cells = cells

    def __call__(self, line: str) -> None:
        if line.startswith("  [block"):
            self.cells -= 1
            if self.cells == 0:
                raise KeyboardInterrupt


def test_an_interrupted_tune_resumes_where_it_stopped(tmp_path):
    whole = run_tune(load_tune(write(tmp_path), seed=8), RunDir(tmp_path / "whole"))
    whole_ids = [r.cell_id for r in RunDir(tmp_path / "whole").rows()]
    with pytest.raises(Interrupted):
        run_tune(load_tune(write(tmp_path), seed=8), RunDir(tmp_path / "cut"), say=CutAfter(25))
    assert len(RunDir(tmp_path / "cut").rows()) == 25
    resumed = run_tune(load_saved_tune(tmp_path / "cut"), RunDir(tmp_path / "cut"), resume=True)
    ids = [r.cell_id for r in RunDir(tmp_path / "cut").rows()]
    assert len(ids) == len(set(ids)), "a cell measured twice"
    # the replay rebuilt the optimiser, the race and the block order: the first cell measured after
    # the resume is the one the uninterrupted tune measured next (later ones differ: the null
    # workload's noise starts afresh in the resumed process)
    assert ids[:26] == whole_ids[:26]
    assert resumed["done"] and whole["done"]
    assert json.loads((tmp_path / "cut" / "tune.json").read_text())["confirmation"] is not None


def test_a_tune_started_under_other_search_rules_is_refused_on_resume_and_left_as_it_is(tmp_path):
    with pytest.raises(Interrupted):
        run_tune(load_tune(write(tmp_path), seed=8), RunDir(tmp_path / "cut"), say=CutAfter(10))
    spec_file = tmp_path / "cut" / "tune-spec.json"
    saved = json.loads(spec_file.read_text())
    assert saved["search_version"] == SEARCH_VERSION
    del saved["search_version"]  # as a tune started before the version was recorded
    spec_file.write_text(json.dumps(saved))
    rows = (tmp_path / "cut" / "results.jsonl").read_text()
    with pytest.raises(SpecError, match=r"search rules differ \(search version 1, this one 2\).*start a new tune"):
        load_saved_tune(tmp_path / "cut")
    assert (tmp_path / "cut" / "results.jsonl").read_text() == rows


def test_a_report_that_cannot_be_written_is_warned_on_stderr(tmp_path):
    """The tune is kept (tune.json, its verdict on stdout); why its report is missing goes to stderr."""
    out = tmp_path / "run"
    (out / "report.html").mkdir(parents=True)  # report.html cannot be written over a directory
    result = CliRunner().invoke(main, ["tune", write(tmp_path), "--budget", "40", "--seed", "4", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "the report could not be written: ResultsWriteError: cannot write" in result.stderr
    assert "could not be written" not in result.stdout
    assert json.loads((out / "tune.json").read_text())["done"] and "spent " in result.stdout


# ------------------------------------------------------------------ the command's refusals
def refused(args: list[str]) -> str:
    result = CliRunner().invoke(main, ["tune", *args])
    assert result.exit_code == 2, result.output
    return result.output


def test_bad_input_is_refused_before_anything_runs(tmp_path):
    path = write(tmp_path)
    out = tmp_path / "never"
    assert "--budget 5: too small for one round and the confirmation; give at least" in refused([path, "--budget", "5", "--out", str(out)])
    assert "not a budget; give cells (an integer such as 60) or a duration" in refused([path, "--budget", "3x", "--out", str(out)])
    assert "tune.default.null.level = 500 lies outside the space 0..100" in refused(
        [write(tmp_path, NULL_TOML.replace('"null.level" = 10', '"null.level" = 500')), "--out", str(out)])
    assert "unknown knob 'null.modez' on engine null; accepted: null.level, null.mode" in refused(
        [write(tmp_path, NULL_TOML.replace('"null.mode" = ["a", "b", "c"]', '"null.modez" = ["a", "b"]')), "--out", str(out)])
    assert "knobs.null.level: min 50 is not below max 10" in refused(
        [write(tmp_path, NULL_TOML.replace("{min = 0, max = 100}", "{min = 50, max = 10}")), "--out", str(out)])
    assert "5000 is out of range; accepted: an integer from 0 to 1,000" in refused(
        [write(tmp_path, NULL_TOML.replace("{min = 0, max = 100}", "{min = 0, max = 5000}")), "--out", str(out)])
    assert f"--resume: {tmp_path}: not a fleet tune directory (no spec.json naming a fleet, or no hosts/)" in " ".join(
        refused(["--resume", str(tmp_path), "--fleet", "tls://sched:8786"]).split())
    assert "--hosts, --certs, --insecure and --share-disk go with --fleet ADDRESS" in refused([path, "--hosts", "a,b"])
    assert "--resume continues a tune exactly as it started" in refused(["--resume", str(tmp_path), "--budget", "9"])
    assert not out.exists(), "nothing was written"


def test_the_engine_default_must_lie_in_the_space(tmp_path):
    text = NULL_TOML.replace('default = {"null.level" = 10}', "").replace("{min = 0, max = 100}", "{min = 5, max = 100}")
    output = refused([write(tmp_path, text)])
    assert "the engine's default of null.level = 0 lies outside the space 5..100; add it to the knob's values or name another" in output


def test_engines_render_their_own_configuration_lines(tmp_path):
    """The winner as each engine takes it: PRAGMAs for SQLite, db_bench flags for RocksDB
    (PostgreSQL's ALTER SYSTEM lines: tests/test_tune_postgres.py)."""
    from blocklab.engines.rocksdb import RocksDbEngine
    from blocklab.engines.sqlite import SqliteEngine

    sqlite = SqliteEngine(tmp_path / "sqlite")
    sqlite.start()
    try:
        lines = sqlite.config_lines(sqlite.check_settings({"block_size": 8192, "sqlite.journal_mode": "wal", "buffer_cache": 100}))
    finally:
        sqlite.stop()
    assert lines == ["PRAGMA page_size = 8192;  -- then VACUUM to rewrite the file", "PRAGMA journal_mode = wal;", "PRAGMA cache_size = 100;"]
    rocksdb = RocksDbEngine(cache_dir=tmp_path / "rocksdb")
    rocksdb.start()
    try:
        flags = rocksdb.config_lines(rocksdb.check_settings({"block_size": 8192, "multiblock_read": 4, "direct_io": True}))
    finally:
        rocksdb.stop()
    assert "--block_size=8192" in flags and "--readahead_size=32768" in flags and "--use_direct_reads=true" in flags


# ------------------------------------------------------------------ a fleet's hosts: do they agree?
def test_hosts_whose_winners_are_worse_on_each_other_differ_and_those_within_noise_agree():
    """tune/agree.py on cells whose truth is known: on host-a its own winner A is 20% better
    than host-b's winner B, on host-b the other way round; then a fleet where B is as good as
    A on host-a (within noise). (The whole fleet tune: tests/test_tune_fleet.py.)"""
    from blocklab.tune.agree import cross_plan, judge

    rng = random.Random(3)

    def cells(ratios: dict[str, float]) -> list[BlockCell]:
        out = []
        for block in range(4):
            drift = rng.uniform(0.8, 1.2)
            out += [BlockCell(block, k, 100 * r * drift * math.exp(rng.gauss(0, 0.02))) for k, r in ratios.items()]
        return out

    winners = {"host-a": "A", "host-b": "B"}
    differ = judge(winners, {"host-a": cells({"A": 1.2, "B": 1.0}), "host-b": cells({"A": 1.0, "B": 1.2})}, "max")
    assert not differ["agree"] and differ["verdict"].startswith("The hosts differ: on host-a, B is -1")
    assert "against A; on host-b, A is -1" in differ["verdict"] and "Give each host its own configuration" in differ["verdict"]
    alike = judge(winners, {"host-a": cells({"A": 1.0, "B": 1.0}), "host-b": cells({"A": 1.0, "B": 1.01})}, "max")
    assert alike["agree"] and alike["verdict"].startswith("The hosts agree as far as the evidence goes")
    assert alike["hosts"]["host-a"]["others"]["B"]["blocks"] == 4
    same = judge({"host-a": "A", "host-b": "A"}, {}, "max")
    assert same["agree"] and "found the same winner, A" in same["verdict"]
    plan = cross_plan([Setting((("k", 1),)), Setting((("k", 2),))], [], 7, 30, 3)
    assert [c.block for c in plan] == [30, 30, 31, 31, 32, 32] and len({c.cell_id for c in plan}) == 6
