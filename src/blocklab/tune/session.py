"""A tune from the experiment file to tune.json: load and check, search, confirm, write.

    setup = load_tune("mbrc-space.toml", budget="60", seed=1)   # every check, before anything runs
    result = run_tune(setup, RunDir("results/tune-..."), say=print)
    setup = load_saved_tune(Path("results/tune-..."))            # --resume: the same tune again
    result = run_tune(setup, RunDir("results/tune-..."), say=print, resume=True)

The run directory is a run's (experiment.toml, spec.json, environment.json,
results.jsonl with one row per cell) plus tune.json (the search, the race, the
confirmation, the importance, the configuration to paste; rewritten after every
round) and the report (report/tune.py).
"""

from __future__ import annotations

import dataclasses
import signal
import sys
import time
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .. import recipes
from ..engines.base import ApplyClass, EngineError, KnobError
from ..environment import collect as collect_environment
from ..experiment import Experiment, prepare
from ..lazy import import_now
from ..owed import keep_owed_restore
from ..plan import Cell
from ..results import ENVIRONMENT_FILE, EXPERIMENT_FILE, RESULTS_FILE, SPEC_FILE, ResultRow, RunDir, text_digest
from ..runner import Interrupted, engine_stopped_at_exit, measure_cell, raise_interrupt
from ..spec import SpecError, read_experiment_text, spec_from_dict
from .confirm import confirm_winner
from .driver import MIN_BLOCKS, SEARCH_VERSION, Accounts, Search, SearchResult, restart_knobs_of
from .space import CONFIRM_MIN, Dimension, TuneSpec, check_default, split_raw

TUNE_FILE = "tune.json"
TUNE_SPEC_FILE = "tune-spec.json"


@dataclass
class TuneSetup:
    """A checked tune: the experiment (its engine started by the checks, stopped
    again by run_tune), the space with canonical values, the default."""

    exp: Experiment
    spec: TuneSpec
    dimensions: list[Dimension]
    default: dict[str, object]
    text: str
    source: str
    budget_option: str | None


def read_tune_file(target: str, budget: str | None, text: str | None = None,
                   source: str | None = None) -> tuple[dict[str, object], TuneSpec, str, str]:
    """FILE or RECIPE (or the saved `text`) -> (the dict blocklab's spec reads, the tune
    spec, the text, where it came from). SpecError naming the file otherwise."""
    if text is None:
        path = recipes.resolve(target)
        text = read_experiment_text(Path(path))
        source = str(path)
    source = source or target
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise SpecError(f"{source}: malformed TOML: {err}") from None
    if not raw:
        raise SpecError(f"{source}: the experiment file is empty; tune needs [workload], [knobs] and a budget")
    raw, spec = split_raw(raw, source, budget)
    return raw, spec, text, source


def load_tune(target: str, *, budget: str | None = None, seed: int | None = None, cache_dir: Path | None = None,
              text: str | None = None, source: str | None = None) -> TuneSetup:
    """FILE or RECIPE (or the saved `text`) -> a checked TuneSetup. Raises SpecError with
    one line naming what is wrong, before anything is measured."""
    raw, spec, text, source = read_tune_file(target, budget, text, source)
    overrides: dict[str, object] = {"measure.seed": seed} if seed is not None else {}
    exp_spec = spec_from_dict(raw, source, dict(overrides))
    exp = prepare(exp_spec, text, source, cache_dir=cache_dir, raw=raw, overrides=overrides)
    try:
        spec.dimensions = [d if d.is_range else dataclasses.replace(d, values=tuple(exp.knobs[d.name])) for d in spec.dimensions]
        spec.default = _canonical(exp, spec.default, source)
        engine_defaults = {d.name: exp.knob_infos[d.name].default for d in spec.dimensions}
        default = _canonical(exp, check_default(spec, engine_defaults, exp.knobs, source), source)
        _check_budget(spec, source)
    except BaseException:
        exp.engine.stop()
        raise
    return TuneSetup(exp, spec, spec.dimensions, default, text, source, budget)


def _canonical(exp: Experiment, config: Mapping[str, object], source: str) -> dict[str, object]:
    """Values as the engine writes them (so 'Worker' and 'worker' are one configuration)."""
    try:
        checked = exp.engine.check_settings({**exp.fixed, **config})
    except KnobError as err:
        raise SpecError(f"{source}: tune.default: {err}") from None
    return {k: checked[k] for k in config}


def _check_budget(spec: TuneSpec, source: str) -> None:
    confirm = spec.confirm_blocks if spec.confirm_blocks is not None else CONFIRM_MIN
    need = confirm * 3 + MIN_BLOCKS * (1 + spec.candidates)
    if spec.budget.cells is not None and spec.budget.cells < need:
        raise SpecError(f"--budget {spec.budget.cells}: too small for one round and the confirmation; give at least {need} cells "
                        f"({confirm} confirmation blocks of 3 and {MIN_BLOCKS} race blocks of {1 + spec.candidates})")


def check_search_version(saved: Mapping[str, object], where: str) -> None:
    """A tune started under other search rules cannot be replayed by these: refused, its rows kept."""
    version = saved.get("search_version", 1)
    if version != SEARCH_VERSION:
        raise SpecError(f"{where}: this tune was started by a blocklab whose search rules differ (search version {version}, "
                        f"this one {SEARCH_VERSION}), so its decisions cannot be replayed from its rows; start a new tune "
                        f"(the directory and its rows are left as they are)")


def load_saved_tune(run_path: Path, cache_dir: Path | None = None) -> TuneSetup:
    """The tune a run directory was started with (for --resume)."""
    run_dir = RunDir(run_path)
    if not run_dir.file(TUNE_SPEC_FILE).exists():
        raise SpecError(f"--resume {run_path}: not a blocklab tune directory (no {TUNE_SPEC_FILE})")
    saved = run_dir.read_json(TUNE_SPEC_FILE)
    check_search_version(saved, f"--resume {run_path}")
    text = run_dir.file(EXPERIMENT_FILE).read_text()
    if saved.get("experiment_sha256") != text_digest(text):
        raise SpecError(f"--resume {run_path}: experiment.toml was edited after the tune started; put it back, or start a new tune")
    return load_tune(saved["source"], budget=saved.get("budget"), seed=int(saved["seed"]), cache_dir=cache_dir,
                     text=text, source=saved["source"])


# ---------------------------------------------------------------- running it
class _Reporter:
    """measure_cell's reporter: every line to `say`."""

    def __init__(self, say: Callable[[str], None]):
        self.say = say

    def phase(self, text: str) -> None:
        self.say(text)

    def plan_started(self, total: int, todo: int, estimate_s: float) -> None:
        pass

    def cell_done(self, cell: Cell, row: ResultRow, line: str) -> None:
        self.say(f"  [block {cell.block}] {cell.setting.label} ... {line}")

    def finished(self, summary: dict[str, object]) -> None:
        pass


class _Cells:
    """Measures a cell, or on a resumed tune reads its rows back (never measured twice)."""

    def __init__(self, setup: TuneSetup, run_dir: RunDir, say: Callable[[str], None]):
        self.setup = setup
        self.run_dir = run_dir
        self.reporter = _Reporter(say)
        self.saved: dict[str, list[ResultRow]] = {}
        for row in run_dir.rows():
            self.saved.setdefault(row.cell_id, []).append(row)
        self.count = len(run_dir.rows())

    def measure(self, cell: Cell, tag: dict[str, object]) -> list[ResultRow]:
        if cell.cell_id in self.saved:
            return self.saved[cell.cell_id]
        rows: list[ResultRow] = []
        started = [time.perf_counter()]
        cell = Cell(self.count, cell.block, cell.setting)

        def record(row: ResultRow) -> None:
            now = time.perf_counter()
            row = dataclasses.replace(row, notes={**row.notes, "tune": tag, "tune_s": round(now - started[0], 3)})
            started[0] = now
            self.run_dir.append(row)
            keep_owed_restore(self.setup.exp.engine, self.run_dir)
            rows.append(row)
            self.reporter.cell_done(cell, row, _line(self.setup.exp, cell, row))

        measure_cell(self.setup.exp, cell, self.reporter, record)
        self.count += 1
        self.saved[cell.cell_id] = rows
        return rows

    def missing(self, cells: list[Cell]) -> bool:
        return any(c.cell_id not in self.saved for c in cells)


def _line(exp: Experiment, cell: Cell, row: ResultRow) -> str:
    if row.failed:
        return f"FAILED: {row.status}"
    text = exp.workload_for(cell.setting.as_dict()).describe(row.metrics)
    return f"INVALID ({row.status}): {text}" if row.invalid else text


def run_tune(setup: TuneSetup, run_dir: RunDir, *, say: Callable[[str], None] = lambda _: None, resume: bool = False,
             warn: Callable[[str], None] | None = None) -> dict[str, object]:
    """Search, confirm, write tune.json and the report; returns tune.json's content.
    Progress goes to `say`, a report that could not be written to `warn` (stderr
    unless given). Ctrl-C raises runner.Interrupted with every finished cell kept."""
    import_now()  # SciPy before any cell: an interrupt never lands in its first import (lazy.py)
    exp = setup.exp
    if not resume:
        try:
            _start_dir(setup, run_dir)
        except BaseException:
            exp.engine.stop()  # started by the checks: nothing of it may outlive a refusal
            raise
    cells = _Cells(setup, run_dir, say)
    infos = exp.knob_infos
    restart_knobs = restart_knobs_of(infos, [d.name for d in setup.dimensions])
    declared = exp.engine.change_cost(ApplyClass.RESTART, restart_knobs) if restart_knobs else 0.0
    # a cell is its workload and what surrounds it (apply, read-back, the claims' checks): until one
    # is measured, the workload's own guess plus half a second
    estimate = exp.workload.estimate_seconds() + 0.5
    search = Search(spec=setup.spec, dimensions=setup.dimensions, default=setup.default, goal=exp.goal, metric=exp.metric,
                    seed=exp.seed, restart_knobs=restart_knobs, measure=cells.measure, accounts=Accounts(declared, estimate), say=say)
    previous_sigterm = signal.signal(signal.SIGTERM, raise_interrupt)  # a kill stops the engine like Ctrl-C
    try:
        with engine_stopped_at_exit(exp.engine, run_dir):
            exp.on_changed = lambda: keep_owed_restore(exp.engine, run_dir)
            exp.engine.apply(exp.fixed)
            if not resume or not run_dir.file(ENVIRONMENT_FILE).exists():
                run_dir.write_json(ENVIRONMENT_FILE, collect_environment(exp.engine.info(), exp.engine.data_dir(),
                                                                         {"dataset_rows": exp.spec.dataset.rows}))

            def save_round() -> None:  # tune.json after every round: the report of an interrupted tune shows it
                _write_state(setup, run_dir, search, None)

            search.on_round = save_round
            found = search.run()
            _write_state(setup, run_dir, search, found)
            confirmation = _confirm(setup, found, search, cells, say)
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted; {len(run_dir.rows())} cells are saved") from None
    finally:
        signal.signal(signal.SIGTERM, previous_sigterm)
    state = _write_state(setup, run_dir, search, found, confirmation)
    write_report(run_dir, warn or to_stderr)
    return state


def _start_dir(setup: TuneSetup, run_dir: RunDir) -> None:
    run_dir.create()
    if run_dir.file(TUNE_SPEC_FILE).exists() or run_dir.file(RESULTS_FILE).exists():
        raise SpecError(f"{run_dir.path}: already holds a run; use blocklab tune --resume {run_dir.path} or another --out")
    run_dir.write_text(EXPERIMENT_FILE, setup.text)
    exp = setup.exp
    run_dir.write_json(SPEC_FILE, {"source": setup.source, "spec": exp.spec.model_dump(), "options": {"budget": setup.budget_option},
                                   "experiment_sha256": text_digest(setup.text)})
    run_dir.write_json(TUNE_SPEC_FILE, {"source": setup.source, "budget": setup.budget_option, "seed": exp.seed,
                                        "search_version": SEARCH_VERSION,
                                        "experiment_sha256": text_digest(setup.text), "tune": setup.spec.to_dict()})


def _confirm(setup: TuneSetup, found: SearchResult, search: Search, cells: _Cells, say: Callable[[str], None]) -> dict[str, object]:
    """Fresh blocks of the winner, the runner-up and the default on a restarted engine."""
    exp = setup.exp

    def new_instance() -> str:
        exp.engine.stop()  # a new instance: the embedded server restarted, its caches empty
        exp.engine.start()
        exp.engine.apply(exp.fixed)
        return "a restarted engine instance"

    return confirm_winner(search, found, blocks=found.confirm_blocks, missing=cells.missing,
                          new_instance=new_instance, say=say)


def state_head(setup: TuneSetup) -> dict[str, object]:
    """What tune.json says of the experiment, the same all along (a fleet's host computes it)."""
    exp = setup.exp
    return {"experiment": exp.spec.name, "engine": exp.spec.engine.kind, "metric": exp.metric, "goal": exp.goal, "seed": exp.seed,
            "space": setup.spec.to_dict(), "space_size": setup.spec.size(), "fixed_lines": config_lines_of(exp, exp.fixed)}


def _write_state(setup: TuneSetup, run_dir: RunDir, search: Search, found: SearchResult | None,
                 confirmation: dict[str, object] | None = None) -> dict[str, object]:
    return write_state(run_dir, state_head(setup), search, found, confirmation, lambda c: config_lines_of(setup.exp, c))


def write_state(run_dir: RunDir, head: Mapping[str, object], search: Search, found: SearchResult | None,
                confirmation: Mapping[str, object] | None, lines: Callable[[dict[str, object]], list[str]]) -> dict[str, object]:
    """tune.json: `head` (state_head), the search so far, the confirmation; `lines` renders a
    configuration as the engine takes it."""
    winner = found.winner if found else search.incumbent
    config = search.trials[winner].config
    fixed_lines = head.get("fixed_lines") or []
    state: dict[str, object] = {
        **{k: v for k, v in head.items() if k != "fixed_lines"},
        "default": search.default_label,
        "winner": winner,
        "winner_config": config,
        "runner_up": found.runner_up if found else None,
        # what the verdict recommends: the winner only when the confirmation showed it better than the default
        "recommended": confirmation["recommended"] if confirmation else None,
        "done": confirmation is not None,
        "rounds": found.rounds if found else None,
        "stop_reason": found.stop_reason if found else "",
        "spent_cells": round(search.accounts.spent_cells, 2),
        "measured_cells": search.accounts.cells,
        "restart_cells": round(search.accounts.restart_cells, 2),
        "spent_seconds": round(search.accounts.seconds, 1),
        "trials": [t.to_dict() for t in search.trials.values()],
        "events": search.events,
        "trace": search.trace,
        "levels": {str(k): v for k, v in (found.levels if found else {}).items()},
        "confirmation": confirmation,
        "importance": search.optimiser.importance() if found else {},
        "config_lines": lines(config),
        "fixed_lines": fixed_lines,
    }
    run_dir.write_json(TUNE_FILE, state)
    return state


def config_lines_of(exp: Experiment, settings: Mapping[str, object]) -> list[str]:
    engine_settings = {k: v for k, v in settings.items() if not k.startswith("workload.")}
    if not engine_settings:
        return []
    try:
        return exp.engine.config_lines(engine_settings)
    except (KnobError, EngineError) as err:
        return [f"# could not render the configuration: {err}"]


def to_stderr(text: str) -> None:
    """A warning where a command's output is not: stderr."""
    print(text, file=sys.stderr, flush=True)


def write_report(run_dir: RunDir, warn: Callable[[str], None] = to_stderr) -> None:
    try:
        from ..report.tune import write_tune_report

        write_tune_report(run_dir)
    except Exception as err:  # the report never loses a tune: warn (stderr) why it could not render
        warn(f"the report could not be written: {type(err).__name__}: {err}")


__all__ = ["TuneSetup", "load_tune", "load_saved_tune", "run_tune", "state_head", "write_state", "write_report", "to_stderr", "config_lines_of",
           "TUNE_FILE"]
