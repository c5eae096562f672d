"""The tune loop: the optimiser proposes, the race measures and judges, the budget counts.

Round after round: ask the optimiser for `candidates` new configurations, race
them in blocks beside the incumbent, the best earlier configuration (an elite)
and the default (race.py), tell the optimiser each one's within-block ratio to
the default, and crown as incumbent the configuration not dropped with the best
credible level (race.credible_levels: each estimate shrunk by how little its
cells say, so one lucky block does not outrank a leader measured in six). Configurations the optimiser proposes again are told what
was measured for them, not measured again. When the budget (less what the
confirmation needs) cannot pay for another round, the incumbent is the winner;
the confirmation (confirm.py) measures it afresh.

Every cell is a row of results.jsonl with a cell id that says where it belongs
(`r3b12:...`: round 3, block 12); the loop is deterministic given the seed and
the rows, so a resumed tune replays it: a cell whose row exists is read, not
measured, and the optimiser is asked and told exactly as before.

Restarts: within a block the configurations are grouped by their restart-class
knobs (plan.order_block, which starts with the group the server runs now), and
each restart is paid from the budget: its seconds (what the engine's apply took
on a cell that changed a restart knob, beyond an ordinary apply; before any was
measured, what the engine declares) converted to cells at the median cell's
duration.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field

from ..analysis.paired import BlockCell, fit_blocks
from ..engines.base import ApplyClass, KnobInfo
from ..lazy import scipy_stats
from ..plan import Cell, Setting, costly_key, order_block
from ..results import ResultRow
from .confirm import CONFIDENCE
from .optimiser import Optimiser
from .race import credible_levels, levels_to, look
from .space import CONFIRM_BLOCKS, CONFIRM_MAX, CONFIRM_MIN, Dimension, TuneSpec

# The search's rules, recorded in tune-spec.json: a resumed tune replays its decisions from
# its rows, which only the rules that took them can do. 2: elites, credible crowning and a
# confirmation sized by the noise (session 5); 1 (or none recorded): before.
SEARCH_VERSION = 2

# How often a slot may draw a configuration already measured before the
# loop takes an unmeasured one at random (small spaces: TPE repeats itself).
_REDRAWS = 12
MIN_BLOCKS = 2  # blocks before the first round's first look (one block of distinct configurations gives no interval)
# Earlier configurations raced again in every round beside the incumbent (irace's elites): the
# best of them by the credible levels. A leader that lost the incumbency to a luckier candidate
# is measured again instead of forgotten (BENCHMARKS.md, tune v6 run 2 and v8).
ELITES = 1
# The confirmation's size, when the race has measured the noise: the fewest blocks whose
# interval would show the incumbent's credible advantage with this power (90%), and the
# race's pooled noise needs this many degrees of freedom before it is trusted.
CONFIRM_POWER = 0.9
CONFIRM_NOISE_DF = 10
# The advantage the size is computed for: the incumbent's credible level less one posterior
# sd (race.credible_levels). The crowned estimate is flattered (the winner's curse): sized for
# the shrunk estimate itself, confirmations of 4-6 blocks were asked for winners truly 1.5-1.7x
# the default at 18% noise, and a quarter of them were told to keep the default (tune_replay).
CONFIRM_GAIN_RISK = 1.0

Measure = Callable[[Cell, dict[str, object]], list[ResultRow]]


@dataclass
class Trial:
    """One configuration the search measured: when, how it fared, why it stopped."""

    label: str
    config: dict[str, object]
    round: int  # the round that proposed it, from 1 (0: the default)
    number: int | None  # the optimiser's trial number (None: the default, or drawn at random)
    blocks: int = 0
    dropped_at: int | None = None  # the global block after which the race dropped it
    dropped_ratio: tuple[float, float, float] | None = None  # its ratio to the best then, with the interval
    value: float | None = None  # told to the optimiser: log ratio to the default, larger is better

    def to_dict(self) -> dict[str, object]:
        return {"label": self.label, "config": self.config, "round": self.round, "number": self.number, "blocks": self.blocks,
                "dropped_at": self.dropped_at, "dropped_ratio": self.dropped_ratio, "value": self.value}


@dataclass
class SearchResult:
    winner: str
    runner_up: str | None
    default: str
    trials: dict[str, Trial]
    events: list[dict[str, object]]
    trace: list[dict[str, object]]
    spent_cells: float
    spent_seconds: float
    rounds: int
    stop_reason: str
    levels: dict[Hashable, float] = field(default_factory=dict)
    confirm_blocks: int = CONFIRM_BLOCKS  # the confirmation's size, fixed when the search ended


class Accounts:
    """What the tune has spent: cells, seconds, and restarts priced in cells."""

    def __init__(self, declared_restart_s: float, estimate_cell_s: float):
        self.cells = 0
        self.seconds = 0.0
        self.restart_cells = 0.0
        self.declared_restart_s = declared_restart_s
        self.estimate_cell_s = estimate_cell_s
        self._cell_s: list[float] = []
        self._apply_s: list[float] = []
        self._restart_apply_s: list[float] = []

    def add(self, row: ResultRow, restarted: bool) -> None:
        self.cells += 1
        seconds = float(row.notes.get("tune_s", 0.0))
        apply_s = float(row.notes.get("apply_s", 0.0))
        self.seconds += seconds
        if restarted:
            self._restart_apply_s.append(apply_s)
            self.restart_cells += self.restart_seconds() / self.cell_seconds()
        else:
            self._cell_s.append(seconds)
            self._apply_s.append(apply_s)

    def cell_seconds(self) -> float:
        """A cell's usual duration: the median measured, else the workload's estimate."""
        if self._cell_s:
            return max(statistics.median(self._cell_s), 1e-3)
        return max(self.estimate_cell_s, 1e-3)

    def restart_seconds(self) -> float:
        """What a restart adds to a cell: measured (beyond an ordinary apply), else declared."""
        if self._restart_apply_s:
            usual = statistics.median(self._apply_s) if self._apply_s else 0.0
            return max(0.0, statistics.median(self._restart_apply_s) - usual)
        return self.declared_restart_s

    def restart_in_cells(self) -> float:
        return self.restart_seconds() / self.cell_seconds()

    @property
    def spent_cells(self) -> float:
        return self.cells + self.restart_cells


class Search:
    """One tune's search; `run()` returns the winner and everything the report shows."""

    def __init__(self, *, spec: TuneSpec, dimensions: list[Dimension], default: Mapping[str, object], goal: str, metric: str,
                 seed: int, restart_knobs: list[str], measure: Measure, accounts: Accounts,
                 say: Callable[[str], None] = lambda _: None):
        self.spec = spec
        self.dimensions = dimensions
        self.names = [d.name for d in dimensions]
        self.goal = goal
        self.metric = metric
        self.seed = seed
        self.restart_knobs = restart_knobs
        self.measure = measure
        self.accounts = accounts
        self.say = say
        self.rng = random.Random(seed * 7919 + 17)
        self.cells: list[BlockCell] = []
        self.default_label = self.label(default)
        self.incumbent = self.default_label
        self._confirm_memo: tuple[tuple[int, str, int], int] | None = None
        expected = max(4, int(self._search_budget_cells() / max(1, 2 * (spec.candidates + 2))) * spec.candidates)
        self.optimiser = Optimiser(dimensions, seed, startup=max(3, min(10, expected // 3)))
        self.trials: dict[str, Trial] = {self.default_label: Trial(self.default_label, dict(default), 0, None, value=0.0)}
        self.optimiser.add_known(default, 0.0)
        self.events: list[dict[str, object]] = []
        self.trace: list[dict[str, object]] = []
        self.next_block = 0
        self.last_restart_key: tuple | None = None
        self.on_round: Callable[[], None] = lambda: None  # after every round (the caller saves tune.json)

    # ------------------------------------------------------------ labels and budget
    def label(self, config: Mapping[str, object]) -> str:
        return Setting(tuple((k, config[k]) for k in self.names)).label

    def setting(self, label: str) -> Setting:
        config = self.trials[label].config
        return Setting(tuple((k, config[k]) for k in self.names))

    def confirmation_cells(self) -> float:
        """What the confirmation will cost: its blocks of three and, with restart knobs,
        the worst case of restarts: two a block (three configurations, grouped, the
        block starting with the group the previous one ended on) and the new instance."""
        blocks = self.confirm_blocks()
        restarts = (2 * blocks + 1) if self.restart_knobs else 0
        return 3 * blocks + restarts * self.accounts.restart_in_cells()

    def confirm_blocks(self) -> int:
        """The confirmation's blocks: [tune] confirm_blocks when given, else sized by the
        noise the race measured. Its claim on the winner is a paired t interval at
        1 - 0.05/6 (three claims) over n blocks, each block's log ratio of two cells
        (sd = the race's residual sd * sqrt 2); the size is the fewest n from CONFIRM_MIN
        whose interval would lie above 1 with 90% power (the noncentral t, the sd
        estimated from the n blocks) if the incumbent's advantage a (conservatively
        shrunk: CONFIRM_GAIN_RISK) is true; when none can, the most there is room for. Capped at CONFIRM_MAX and at a third of the budget, restarts
        counted. Before the noise is measured, or with the default as incumbent,
        CONFIRM_BLOCKS (or the cap if smaller). Why: a fixed 6 blocks
        told a quarter of the tunes (53 of 200 replayed) at 18% cell noise to keep a default the winner beat
        by 1.4-1.7x (benchmarks/tune_replay.py), while at 5% noise 4 blocks show it."""
        if self.spec.confirm_blocks is not None:
            return self.spec.confirm_blocks
        restart = self.accounts.restart_in_cells() if self.restart_knobs else 0.0
        # a third of the budget at most, its restarts counted (confirmation_cells)
        cap = max(CONFIRM_MIN, min(CONFIRM_MAX, int((self._budget_cells() / 3 - restart) / (3 + 2 * restart))))
        fallback = min(CONFIRM_BLOCKS, cap)
        if self.incumbent == self.default_label or len(self.cells) < 3:
            return fallback
        key = (len(self.cells), self.incumbent, cap)  # asked before every block: the fits once per new cell
        if self._confirm_memo is not None and self._confirm_memo[0] == key:
            return self._confirm_memo[1]
        blocks = self._powered_blocks(cap, fallback)
        self._confirm_memo = (key, blocks)
        return blocks

    def _powered_blocks(self, cap: int, fallback: int) -> int:
        model = fit_blocks(self.cells)
        if model.df < CONFIRM_NOISE_DF or not math.isfinite(model.residual_sd):
            return fallback
        gain = credible_levels(self.cells, self.default_label, self.goal, risk=CONFIRM_GAIN_RISK).get(self.incumbent, 0.0)
        spread = model.residual_sd * math.sqrt(2.0)
        tail = 1.0 - (1.0 - CONFIDENCE) / 3 / 2

        if gain <= 0.0:  # nothing to show: no reason to spend more than usual
            return fallback
        for n in range(CONFIRM_MIN, cap + 1):
            # the claim's t statistic is noncentral t with n - 1 df: its sd is estimated too
            if 1.0 - float(scipy_stats.nct.cdf(scipy_stats.t.ppf(tail, n - 1), n - 1, gain * math.sqrt(n) / spread)) >= CONFIRM_POWER:
                return n
        return cap

    def final_confirm_blocks(self) -> int:
        """The confirmation's size when the search has ended: as sized now, but no more
        than the budget has left (the size the search reserved while it ran may have
        been smaller than what the final incumbent and noise ask for)."""
        blocks = self.confirm_blocks()
        if self.spec.confirm_blocks is not None:
            return blocks
        restart = self.accounts.restart_in_cells() if self.restart_knobs else 0.0
        room = self.left_cells() + self.confirmation_cells()  # what the search left, in cells (a duration converted)
        affordable = int((room - restart) / (3 + 2 * restart))
        return max(CONFIRM_MIN, min(blocks, affordable))

    def _budget_cells(self) -> float:
        """The whole budget in cells (a duration converted at the median cell)."""
        budget = self.spec.budget
        return float(budget.cells) if budget.cells is not None else (budget.seconds or 0.0) / self.accounts.cell_seconds()

    def _search_budget_cells(self) -> float:
        budget = self.spec.budget
        if budget.cells is not None:
            return budget.cells - self.confirmation_cells()
        return (budget.seconds or 0.0) / self.accounts.cell_seconds() - self.confirmation_cells()

    def left_cells(self) -> float:
        """Cells the search may still spend (a duration budget converted at the median cell)."""
        budget = self.spec.budget
        if budget.cells is not None:
            return budget.cells - self.confirmation_cells() - self.accounts.spent_cells
        left_s = (budget.seconds or 0.0) - self.accounts.seconds
        return left_s / self.accounts.cell_seconds() - self.confirmation_cells()

    def block_cost(self, labels: list[str]) -> float:
        groups = {costly_key(self.setting(lb), self.restart_knobs) for lb in labels} if self.restart_knobs else set()
        restarts = max(0, len(groups) - (1 if self.last_restart_key in groups else 0))
        return len(labels) + restarts * self.accounts.restart_in_cells()

    # ------------------------------------------------------------ the loop
    def run(self) -> SearchResult:
        rounds = 0
        stop = ""
        while True:
            entrants_min = len({self.incumbent, self.default_label, *self.elites()}) + self.spec.candidates
            # a block's switches between restart groups, priced once a cell has been measured (before
            # that the price is the engine's declared restart over the workload's own guess of a cell)
            restarts = min(entrants_min, 3) - 1 if self.restart_knobs and self.accounts.cells else 0
            need = self.first_look() * (entrants_min + restarts * self.accounts.restart_in_cells())
            if self.left_cells() < need:
                stop = f"budget: {self.left_cells():.0f} cells left before the confirmation, a round needs {need:.0f}"
                break
            candidates = self.propose(rounds)
            if not candidates:
                stop = "every configuration of the space was measured"
                break
            self.race(rounds, candidates)
            rounds += 1
        self.say(f"search done after {rounds} round(s): {stop}")
        levels = levels_to(self.cells, self.default_label, self.goal)
        return SearchResult(
            winner=self.incumbent,
            runner_up=self.runner_up(credible_levels(self.cells, self.default_label, self.goal)),
            default=self.default_label,
            trials=self.trials,
            events=self.events,
            trace=self.trace,
            spent_cells=self.accounts.spent_cells,
            spent_seconds=self.accounts.seconds,
            rounds=rounds,
            stop_reason=stop,
            levels=levels,
            confirm_blocks=self.final_confirm_blocks(),
        )

    def propose(self, round_no: int) -> list[str]:
        """Up to `candidates` configurations not measured before."""
        out: list[str] = []
        for _ in range(self.spec.candidates):
            label = self._draw(round_no, out)
            if label is None:
                break
            out.append(label)
        return out

    def _draw(self, round_no: int, taken: list[str]) -> str | None:
        for _ in range(_REDRAWS):
            number, config = self.optimiser.ask()
            label = self.label(config)
            if label not in self.trials:
                self.trials[label] = Trial(label, config, round_no + 1, number)
                return label
            self.optimiser.tell(number, self.trials[label].value)  # what was measured (None: not yet, or failed)
        drawn = self._unmeasured_at_random()
        if drawn is None:
            return None
        label = self.label(drawn)
        self.trials[label] = Trial(label, drawn, round_no + 1, None)
        return label

    def _unmeasured_at_random(self) -> dict[str, object] | None:
        """A configuration not measured yet, uniformly from the space (ranges by draws)."""
        if all(not d.is_range for d in self.dimensions) and len(self.trials) >= math.prod(d.size() for d in self.dimensions):
            return None
        for _ in range(1000):
            config: dict[str, object] = {d.name: (self.rng.randint(d.low, d.high) if d.is_range and d.low is not None and d.high is not None
                               else self.rng.choice(d.values)) for d in self.dimensions}
            if self.label(config) not in self.trials:
                return config
        return None

    # ------------------------------------------------------------ one round
    def race(self, round_no: int, candidates: list[str]) -> None:
        """Blocks of the candidates, the incumbent and the default until one candidate
        (or none) is left beside the default, or `max_blocks`. Each look judges the
        configurations still in the race on every race cell they have (the incumbent's
        and the default's from earlier rounds too: the block model's pooled noise then
        has degrees of freedom from the first block of a round on, so a clearly worse
        candidate costs one cell, not two)."""
        entrants = list(dict.fromkeys([self.incumbent, self.default_label, *self.elites(), *candidates]))
        alive = list(entrants)
        elites = [e for e in entrants if e not in (self.incumbent, self.default_label, *candidates)]
        self.say(f"round {round_no + 1}: racing {', '.join(candidates)} against the incumbent {self.incumbent}" +
                 (f", the best earlier {', '.join(elites)}" if elites else "") +
                 ("" if self.incumbent == self.default_label else f" and the default {self.default_label}"))
        need = self.first_look()
        blocks = 0
        while blocks < self.spec.max_blocks:
            if self.block_cost(alive) > self.left_cells() and blocks >= need:
                self.say(f"round {round_no + 1}: budget reached after {blocks} blocks")
                break
            block = self.next_block
            self.next_block += 1
            self.measure_block(round_no, block, alive)
            blocks += 1
            for label in alive:
                self.trials[label].blocks += 1
            seen = look(self.cells, alive, goal=self.goal, looks=self.spec.max_blocks, keep=[self.default_label])
            if seen is None:
                continue
            for key, ratio in seen.worse.items():
                gone = str(key)
                alive.remove(gone)
                self.trials[gone].dropped_at = block
                self.trials[gone].dropped_ratio = ratio
                self.events.append({"round": round_no + 1, "block": block, "label": gone, "best": seen.best, "ratio": ratio,
                                    "spent": round(self.accounts.spent_cells, 1)})
                self.say(f"  dropped {gone}: {ratio[0]:.3f}x the best [{ratio[1]:.3f}, {ratio[2]:.3f}] after {blocks} block(s)")
            if len([a for a in alive if a != self.default_label]) <= 1:
                break
        self._finish_round(round_no, candidates)

    def elites(self) -> list[str]:
        """The best ELITES earlier configurations by their credible levels, the incumbent,
        the default and those the race dropped aside."""
        credible = credible_levels(self.cells, self.default_label, self.goal)
        others = [k for k in credible if k not in (self.incumbent, self.default_label) and self.trials[str(k)].dropped_at is None]
        return [str(k) for k in sorted(others, key=lambda k: -credible[k])[:ELITES]]

    def first_look(self) -> int:
        """Blocks a round needs before its first judgement: two in the first round
        (one block of distinct configurations has no noise estimate), one after."""
        return MIN_BLOCKS if not self.cells else 1

    def measure_block(self, round_no: int, block: int, labels: list[str]) -> None:
        settings = [self.setting(lb) for lb in labels]
        rng = random.Random(self.seed * 1_000_003 + block)
        for setting in order_block(settings, self.restart_knobs, rng, self.last_restart_key):
            value = self.measure_one(Cell(index=0, block=block, setting=setting), {"phase": "race", "round": round_no + 1})
            if value is not None:
                self.cells.append(BlockCell(block, setting.label, value))

    def measure_one(self, cell: Cell, tag: dict[str, object]) -> float | None:
        """Measure a cell (or read it back), pay for it and for the restart it needed;
        the metric's value of its valid row, None when it has none."""
        rows = self.measure(cell, tag)
        key = costly_key(cell.setting, self.restart_knobs) if self.restart_knobs else None
        for i, row in enumerate(rows):
            self.accounts.add(row, restarted=i == 0 and key is not None and self.last_restart_key is not None and key != self.last_restart_key)
        self.last_restart_key = key
        ok = [r for r in rows if r.ok and r.metrics.get(self.metric, 0) > 0]
        return float(ok[-1].metrics[self.metric]) if ok else None

    def _finish_round(self, round_no: int, candidates: list[str]) -> None:
        """Tell the optimiser each candidate's level against the default (from every
        race cell: one scale for all rounds), and crown the configuration not dropped
        with the best credible level."""
        levels = levels_to(self.cells, self.default_label, self.goal)
        for label in candidates:
            trial = self.trials[label]
            trial.value = levels.get(label)
            if trial.number is not None:
                self.optimiser.tell(trial.number, trial.value)
            elif trial.value is not None:
                self.optimiser.add_known(trial.config, trial.value)
        for trial in self.trials.values():  # the incumbent and the elite were measured again: tune.json shows it
            if trial.label not in candidates and trial.label in levels:
                trial.value = levels[trial.label]
        credible = credible_levels(self.cells, self.default_label, self.goal)
        # any configuration not dropped may be crowned, an earlier round's too, by its credible level:
        # a candidate's one lucky block does not outrank a leader measured in five
        contenders = [k for k in credible if self.trials[str(k)].dropped_at is None]
        if contenders:
            best = str(max(contenders, key=lambda k: credible[k]))
            if best != self.incumbent:
                self.say(f"round {round_no + 1}: new incumbent {best}")
                self.events.append({"round": round_no + 1, "block": self.next_block - 1, "label": best, "incumbent": True,
                                    "spent": round(self.accounts.spent_cells, 1)})
            self.incumbent = best
        self.trace.append({"round": round_no + 1, "spent": round(self.accounts.spent_cells, 2), "seconds": round(self.accounts.seconds, 1),
                           "incumbent": self.incumbent, "ratio_to_default": math.exp(levels.get(self.incumbent, 0.0))})
        self.on_round()

    def runner_up(self, levels: dict[Hashable, float]) -> str | None:
        """The best of the others by `levels` (the credible ones) measured in at least
        MIN_BLOCKS blocks (the default aside)."""
        others = [k for k in levels if k not in (self.incumbent, self.default_label) and self.trials[str(k)].blocks >= MIN_BLOCKS]
        if not others:
            others = [k for k in levels if k not in (self.incumbent, self.default_label)]
        return str(max(others, key=lambda k: levels[k])) if others else None


def timed(started: float) -> float:
    return round(time.perf_counter() - started, 3)


def restart_knobs_of(infos: Mapping[str, KnobInfo], names: list[str]) -> list[str]:
    return [n for n in names if infos[n].apply >= ApplyClass.RESTART]
