"""Execute a plan: per cell apply -> cache state -> workload (with probes) -> one result row.

Rows are appended and flushed after every cell, so a crash or Ctrl-C loses at
most the cell in flight; the summary is rewritten after a cell unless that
would spend more than a tenth of the run's time on it (a sweep of 108 settings
analysed for 0.3-0.5 s after every 0.2 s cell), and always at the end and on
Ctrl-C; `resume` runs only the cells
missing from results.jsonl. The engine is stopped (and a DSN server's settings
restored) on normal exit, on error and on Ctrl-C/SIGTERM. The experiment it
runs was made and checked before by experiment.py (`prepare`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import re
import signal
import time
from collections.abc import Callable
from types import FrameType
from typing import Protocol

from . import claims
from .analysis.summary import validity_counts
from .budget import CELL_SECONDS_NOTE
from .device.fio import FioNotFound
from .device.interleave import BesideCells
from .device.twin import measure_run, why_not, write_interleaved
from .engines.base import Engine, EngineError, KnobError
from .environment import collect as collect_environment
from .experiment import Experiment, split_settings
from .lazy import import_now
from .owed import keep_owed_restore, put_back_owed, restore_hint
from .plan import Cell, Plan
from .probes.cpu_profile import CALL_GRAPH_NAME, CellProfiler, observing
from .probes.trace_function import CellTracer
from .report.writer import refresh_report
from .results import (
    ENVIRONMENT_FILE,
    EXPERIMENT_FILE,
    PLAN_FILE,
    RESTORE_FILE,
    SPEC_FILE,
    WORKLOAD_FILE,
    ResultRow,
    RunDir,
    text_digest,
    write_atomic,
)
from .run_summary import summary_due, summary_if_behind, write_summary
from .search import next_cells, rule_wants_more
from .spec import SpecError
from .workloads.base import timed_series, workload_record

PROFILES_DIR = "profiles"  # each profiled cell's folded stacks (measure.cpu_profile)


class Reporter(Protocol):
    """What the runner tells the person watching (the CLI prints, tests record)."""

    def phase(self, text: str) -> None: ...
    def plan_started(self, total: int, todo: int, estimate_s: float) -> None: ...
    def cell_done(self, cell: Cell, row: ResultRow, line: str) -> None: ...
    def finished(self, summary: dict[str, object]) -> None: ...


class SilentReporter:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def phase(self, text: str) -> None:
        self.lines.append(text)

    def plan_started(self, total: int, todo: int, estimate_s: float) -> None:
        self.lines.append(f"plan {todo}/{total}")

    def cell_done(self, cell: Cell, row: ResultRow, line: str) -> None:
        self.lines.append(line)

    def finished(self, summary: dict[str, object]) -> None:
        self.lines.append(str(summary.get("verdict", "")))


class Interrupted(Exception):
    """Ctrl-C or SIGTERM: the cell in flight is dropped, everything before it is kept."""


class BudgetSpent(SpecError):
    """--resume of a run whose budget is spent with cells or blocks still owed: nothing
    would be measured; the message says how to give it more."""


class EngineDied(EngineError):
    """The engine died and could not be brought back, or died again on the cell re-run after a crash."""


def run(exp: Experiment, run_dir: RunDir, reporter: Reporter, *, resume: bool = False, retry: bool = True,
        device_twin: str | None = None) -> dict[str, object]:
    """Run (or resume) an experiment into `run_dir`; returns the summary.

    A resumed run measures the cells missing from results.jsonl and, unless
    `retry` is False, once more the cells that have no ok row (failed, invalid,
    or cut off by an engine's death), except those whose setting the engine
    refused: the plan is finished, each cell ok once. `device_twin` "on" replays
    each cell's I/O with fio right after the cell (device/interleave.py), "off"
    records that it did not; None leaves it out."""
    import_now()  # SciPy before any cell: an interrupt never lands in its first import (lazy.py)
    plan = _load_or_write_plan(exp, run_dir, resume, reporter)
    if resume:
        check_budget_left(exp, run_dir, plan, retry=retry)
    beside: BesideCells | None = None
    exp.profile_dir = run_dir.path / PROFILES_DIR
    previous_sigterm = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        with engine_stopped_at_exit(exp.engine, run_dir):
            for why in exp.spec.adapted:  # said before anything is measured: the numbers are of this adaptation
                reporter.phase(f"adapted: {why}")
            for what in exp.spec.overridden:
                reporter.phase(f"override: {what}")
            if resume and run_dir.file(RESTORE_FILE).exists():  # a run that ended badly left something changed
                done = put_back_owed(run_dir.read_json(RESTORE_FILE), str(run_dir.file(RESTORE_FILE)))
                run_dir.remove(RESTORE_FILE)
                reporter.phase("put back what the interrupted run had changed: " + (", ".join(done) or "nothing"))
            exp.on_changed = lambda: keep_owed_restore(exp.engine, run_dir)
            reporter.phase(f"engine {exp.spec.engine.kind}: applying the fixed settings, checking the data set")
            try:
                exp.engine.apply(exp.fixed)  # so environment.json records the parameters the run measures under
            except (EngineError, KnobError):
                raise
            except Exception as err:  # a server's own refusal (a privilege it does not grant): one line, no traceback
                first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                raise EngineError(f"the fixed settings could not be applied: {first}") from None
            finally:
                keep_owed_restore(exp.engine, run_dir)
            env = collect_environment(exp.engine.info(), exp.engine.data_dir(), {"dataset_rows": exp.spec.dataset.rows})
            if not resume or not run_dir.file(ENVIRONMENT_FILE).exists():
                run_dir.write_json(ENVIRONMENT_FILE, env)
            beside = _twin_beside_cells(exp, run_dir, device_twin, reporter)
            _clock.restart()  # a time budget counts from here: the cells and what the run does between them
            if (record := workload_record(exp.workload)) is not None and not (resume and run_dir.file(WORKLOAD_FILE).exists()):
                run_dir.write_json(WORKLOAD_FILE, record)  # the user's scripts, for the report (a resume checked it: lab.py)
            retry_ids = retryable_cells(run_dir.rows()) if resume and retry else set()
            budget = exp.spec.measure.parsed_budget()
            attempted: set[str] = set()  # each cell at most once per invocation (its re-measures aside)
            while True:
                have = {row.cell_id for row in run_dir.rows()}
                todo = [c for c in plan.cells if c.cell_id not in attempted and (c.cell_id not in have or c.cell_id in retry_ids)]
                if todo:
                    reporter.plan_started(len(plan.cells), len(todo), sum(exp.workload_for(c.setting.as_dict()).estimate_seconds() for c in todo))
                for cell in todo:
                    if budget is not None and budget.used_up(run_dir.rows()):
                        break  # the budget counts every row, those of a run resumed included
                    attempted.add(cell.cell_id)
                    _run_and_record(exp, cell, run_dir, plan, reporter, beside)
                cells, settings, why = next_cells(exp, plan, run_dir.rows())
                if why:
                    reporter.phase(why)
                if not cells:
                    break
                plan.extend(cells, settings)
                run_dir.write_json(PLAN_FILE, plan.to_dict())
            if budget is not None and budget.used_up(run_dir.rows()):
                _end_plan_at_budget(exp, plan, run_dir)
            list_created(exp, reporter)
        if beside is not None:
            reporter.phase(write_interleaved(run_dir, beside).summary_line())
        elif device_twin is not None:  # off, or no twin possible here: twin.json says why
            reporter.phase(measure_run(run_dir, device_twin, on_phase=reporter.phase).summary_line())
    except KeyboardInterrupt:
        if beside is not None:
            write_interleaved(run_dir, beside)
        summary_if_behind(exp, run_dir, plan)
        refresh_report(run_dir, force=True)
        raise Interrupted(f"interrupted; {len(run_dir.rows())} of {len(plan.cells)} cells are saved") from None
    except Exception:  # the engine died, a write failed...: the summary of every row saved, then the error
        summary_if_behind(exp, run_dir, plan)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous_sigterm)
        if beside is not None:
            beside.close()  # its test files, also after Ctrl-C or an error
    summary = write_summary(exp, run_dir, plan)
    if message := refresh_report(run_dir, force=True):  # the last report too says why it could not render
        reporter.phase(message)
    reporter.finished(summary)
    return summary


def check_budget_left(exp: Experiment, run_dir: RunDir, plan: Plan | None = None, *, retry: bool = True) -> None:
    """Before a resumed run starts anything: BudgetSpent when its budget is spent while
    planned cells are not measured, or the stopping rule would add a block (a resume
    would measure nothing); the message names the command that gives it more."""
    budget = exp.spec.measure.parsed_budget()
    rows = run_dir.rows()
    if budget is None or not budget.used_up(rows):
        return
    if plan is None:
        saved = run_dir.read_json(PLAN_FILE)
        plan = Plan.from_dict(saved, exp.plan().apply_class)
    have = {r.cell_id for r in rows}
    retry_ids = retryable_cells(rows) if retry else set()
    owed = [c for c in plan.cells if c.cell_id not in have or c.cell_id in retry_ids]
    if owed:
        what = f"{len(owed)} of its {len(plan.cells)} planned cells are not measured"
        more: float = sum(exp.workload_for(c.setting.as_dict()).estimate_seconds() for c in owed)
        cells = len(owed)
    elif left := rule_wants_more(exp, plan, rows):
        what = f"the verdict is not settled ({len(left)} setting(s)), so the stopping rule would add a block"
        more = sum(exp.workload_for(s.as_dict()).estimate_seconds() for s in plan.settings)
        cells = len(plan.settings)
    else:
        return
    if budget.cells is not None:
        bigger = f"{budget.cells + cells}cells"
    else:
        seconds = max(budget.seconds or 0.0, budget.spent(rows)) + max(more, 10.0)
        bigger = f"{math.ceil(seconds / 60)}m" if seconds >= 60 else f"{math.ceil(seconds)}s"
    raise BudgetSpent(f"{run_dir.path}: its budget is spent ({budget.spent_text(rows)}) and {what}: resuming would measure "
                      f"nothing. Give it a larger budget (it replaces the old one and counts what is measured): "
                      f"blocklab run --resume {run_dir.path} --budget {bigger}")


def _end_plan_at_budget(exp: Experiment, plan: Plan, run_dir: RunDir) -> None:
    """A budget spent inside a block the stopping rule added ends the plan there: the
    block's unmeasured cells were never owed (the run is complete, not partial). The
    first `repeats` blocks stay planned: a run short of them is partial."""
    measured = {row.cell_id for row in run_dir.rows()}
    kept = [c for c in plan.cells if c.block < exp.spec.measure.repeats or c.cell_id in measured]
    if len(kept) != len(plan.cells):
        plan.cells = kept
        run_dir.write_json(PLAN_FILE, plan.to_dict())


def list_created(exp: Experiment, reporter: Reporter) -> None:
    """On someone else's server: what blocklab made there, and how to remove it.
    A server gone by now is not this list's failure: stopping the engine says so
    (and keeps what is owed in restore.json)."""
    try:
        made = exp.engine.created_objects()
    except Exception as err:  # the server's own error (psycopg, PyMySQL), whatever the engine
        reporter.phase(f"what blocklab made on this server cannot be listed now ({str(err).splitlines()[0]}); "
                       f"blocklab clean --engine {exp.spec.engine.kind} --dsn ... removes it later")
        return
    if made:
        reporter.phase(f"on this server blocklab made: {', '.join(made)}; they are kept for the next run: remove them "
                       f"with blocklab clean --engine {exp.spec.engine.kind} --dsn ...")


def retryable_cells(rows: list[ResultRow]) -> set[str]:
    """Cells with no ok row whose failures were not the setting's own (refused by the engine)."""
    ok = {r.cell_id for r in rows if r.ok}
    refused = {r.cell_id for r in rows if r.refused}
    return {r.cell_id for r in rows if r.cell_id not in ok and r.cell_id not in refused}


class _Lap:
    """The wall time between one recorded row and the next: the cell, its replay, and the
    summary and report written after the row before it (what a time budget counts)."""

    def __init__(self) -> None:
        self.last = time.perf_counter()

    def restart(self) -> None:
        self.last = time.perf_counter()

    def lap(self) -> float:
        now = time.perf_counter()
        seconds, self.last = now - self.last, now
        return round(seconds, 3)


_clock = _Lap()


def _twin_beside_cells(exp: Experiment, run_dir: RunDir, mode: str | None, reporter: Reporter) -> BesideCells | None:
    """fio ready to replay each cell's I/O beside it (device/interleave.py) when the
    twin is on and can run here; None otherwise (twin.json then says why)."""
    if mode != "on":
        return None
    data_dir = exp.engine.data_dir()
    if why_not(data_dir) is not None or data_dir is None:
        return None
    try:
        beside = BesideCells.open(run_dir, data_dir)
    except FioNotFound:
        return None
    reporter.phase(f"device twin: fio replays each cell's I/O right after it, for as long as the cell ran, on {beside.device}")
    return beside


def _run_and_record(exp: Experiment, cell: Cell, run_dir: RunDir, plan: Plan, reporter: Reporter,
                    beside: BesideCells | None = None) -> None:
    """Run one cell and record it in the run directory (see measure_cell), with the
    device twin's replay beside it when `beside` is given."""
    measure_cell(exp, cell, reporter, lambda row: _record(exp, cell, row, run_dir, plan, reporter, beside))


def measure_cell(exp: Experiment, cell: Cell, reporter: Reporter, record: Callable[[ResultRow], None]) -> None:
    """Run one cell, handing every row to `record` as soon as it exists. A cell whose
    claims did not hold is measured once more at once. A cell that failed because
    the engine died (not because of its setting) is recorded as such, the engine
    restarted (its own crash recovery), and the cell measured again; a second death
    stops the run (EngineDied). Split from _run_and_record so that a fleet worker
    (fleet/worker.py) measures with the same rules and streams the rows back
    instead of writing them."""
    died = remeasured = refusal_checked = False
    attempt = 0
    while True:
        attempt += 1
        row = run_cell(exp, cell, reporter, attempt=attempt)
        why = exp.engine.health() if row.failed else None
        if why is None and row.refused and not refusal_checked:
            # a refusal counts only when it repeats: a connection lost while the setting was
            # applied (the server killed in a restart's shutdown, then started again by it)
            # is no refusal, and --resume would never measure a refused cell again
            refusal_checked = True
            again = run_cell(exp, cell, reporter, attempt=attempt + 1)
            if not again.refused:
                record(dataclasses.replace(row, status=f"failed at apply, then applied again: {row.status.removeprefix('refused: ')}"))
                attempt += 1
                row = again
                why = exp.engine.health() if row.failed else None
            else:
                attempt += 1
                row = again  # refused twice: the setting's own fault, recorded once
        if why is not None:
            row = dataclasses.replace(row, status=f"engine died: {why}", notes={**row.notes, "error": row.status})
        record(row)
        if why is not None:
            if died:
                raise EngineDied(f"the {exp.spec.engine.kind} engine died again on cell {cell.cell_id}: {why}" + _log(exp.engine))
            died = True
            reporter.phase(f"the engine died ({why}); restarting it (crash recovery) and measuring cell {cell.cell_id} again")
            try:
                exp.engine.recover()
            except EngineError as err:
                raise EngineDied(f"the {exp.spec.engine.kind} engine died ({why}) and could not be restarted: {err}" + _log(exp.engine)) from None
            continue
        if row.invalid and not remeasured:
            remeasured = True
            continue
        return


def _record(exp: Experiment, cell: Cell, row: ResultRow, run_dir: RunDir, plan: Plan, reporter: Reporter,
            beside: BesideCells | None = None) -> None:
    replay = None
    if beside is not None:  # the replay first: its time goes into the row's (a time budget counts it)
        try:
            row, replay = beside.after(row, reporter.phase)
        except BaseException:  # Ctrl-C (or an error) during the replay: the cell measured before it is kept
            run_dir.append(dataclasses.replace(row, notes={**row.notes, CELL_SECONDS_NOTE: _clock.lap()}))
            raise
    row = dataclasses.replace(row, notes={**row.notes, CELL_SECONDS_NOTE: _clock.lap()})
    run_dir.append(row)
    if beside is not None:
        beside.keep(replay)
    keep_owed_restore(exp.engine, run_dir)
    # the report reads the summary: redrawn only after a fresh one (and never stops a run; it says why it could not render)
    if summary_due(run_dir, lambda: write_summary(exp, run_dir, plan)) and (message := refresh_report(run_dir)):
        reporter.phase(message)
    reporter.cell_done(cell, row, cell_line(exp, cell, row))


def _log(engine: Engine) -> str:
    tail = engine.log_tail()
    return f"\n{tail}" if tail else ""


def cell_line(exp: Experiment, cell: Cell, row: ResultRow) -> str:
    if row.status.startswith("engine died:"):
        return f"ENGINE DIED: {row.status.removeprefix('engine died: ')}"
    if row.failed:
        return f"FAILED: {row.status}"
    line = exp.workload_for(cell.setting.as_dict()).describe(row.metrics)
    if row.invalid:
        again = "; measuring it again" if row.notes.get("attempt", 1) == 1 else "; left out"
        return f"INVALID ({row.status.removeprefix('invalid: ')}){again}: {line}"
    flags = row.notes.get("flags")
    return f"{line}  [flag: {'; '.join(flags)}]" if flags else line


def raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


class engine_stopped_at_exit:
    def __init__(self, engine: Engine, run_dir: RunDir):
        self.engine = engine
        self.run_dir = run_dir

    def __enter__(self) -> None:
        self.engine.start()

    def __exit__(self, *exc: object) -> None:
        # a second Ctrl-C while stopping must not leave the server running
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            self.engine.stop()
        except Exception as err:  # EngineError, or a driver's own error from a server gone away
            if exc[0] is None:  # the run went well until here: this is the error to report
                first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                raise EngineError(f"{first}; {restore_hint(self.run_dir)}") from None
        else:
            if not self.engine.owed_restore():
                self.run_dir.remove(RESTORE_FILE)  # put back: nothing owed any more
        finally:
            signal.signal(signal.SIGINT, previous)


def run_cell(exp: Experiment, cell: Cell, reporter: Reporter, attempt: int = 1) -> ResultRow:
    """Apply, check the settings took, prepare, evict and prove it (cold), run, check the
    run's own claims (claims.py): one row, `ok`, `invalid: why` or the error."""
    engine_settings, _ = split_settings(cell.setting.as_dict())
    settings = {**exp.fixed, **engine_settings}
    workload = exp.workload_for(cell.setting.as_dict())
    engine = exp.engine
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    notes: dict[str, object] = {"attempt": attempt} if attempt > 1 else {}
    checks = claims.CellChecks()
    series: dict[str, list[float]] = {}  # a timed workload's, second by second
    cold = exp.spec.measure.cache == "cold"
    stage = "apply"  # a failure while applying the setting is the setting's own (unless the engine died)
    try:
        t0 = time.perf_counter()
        try:
            applied = engine.apply(settings)
        finally:
            if exp.on_changed is not None:  # restore.json from the first change, not after the cell
                exp.on_changed()
        stage = "run"
        notes["apply_s"] = round(time.perf_counter() - t0, 3)
        claims.check_settings(engine, settings, checks)
        workload.prepare(engine)
        relations = workload.relations()
        if cold:
            notes["evicted"] = evicted = engine.evict(relations)
            claims.check_cold_start(engine, relations, evicted, checks)
        direct = engine.direct_io_active()
        profiler = _profiler(exp)
        tracer = CellTracer(engine, m.trace_function, m.trace_arg) if (m := exp.spec.measure).trace_function else None
        with observing(profiler, tracer):
            metrics = workload.run(engine)
        if profiler is not None:
            notes["cpu_profile"] = _keep_profile(exp, cell, attempt, profiler)
        if tracer is not None:
            notes["trace"] = tracer.result.to_dict()
        if direct:
            claims.check_direct_io(engine, relations, cold, checks)
        claims.check_metrics(metrics, cold, checks)
        if (timed := timed_series(workload)) is not None:
            series, steady_key = timed
            if (steady := claims.check_steady(series, steady_key, checks)) is not None:
                notes["steady"] = steady
        status = checks.status
        notes.update(checks.to_notes())
    except (KeyboardInterrupt, Interrupted):
        raise
    except Exception as err:  # a failed cell is a result too; the run goes on
        applied, metrics, series = {}, {}, {}
        status = f"{'refused: ' if stage == 'apply' else ''}{type(err).__name__}: {err}"
    notes.update(engine.cell_notes())  # e.g. the exact db_bench commands, failed cells too
    return ResultRow(
        cell=cell.index,
        block=cell.block,
        settings=cell.setting.as_dict(),
        applied=applied,
        metrics=metrics,
        status=status,
        cell_id=cell.cell_id,
        started=started,
        notes={**notes, "fixed": {k: str(v) for k, v in exp.fixed.items()}},
        series=series,
    )


def _profiler(exp: Experiment) -> CellProfiler | None:
    """A cell's CPU profiler when the experiment asks for profiles (and the run keeps them)."""
    m = exp.spec.measure
    if not m.cpu_profile or exp.profile_dir is None:
        return None
    return CellProfiler(exp.engine, hz=m.cpu_profile_hz)


def _keep_profile(exp: Experiment, cell: Cell, attempt: int, profiler: CellProfiler) -> dict[str, object]:
    """The cell's folded stacks in profiles/<cell-id>.folded (a re-measure: -<attempt>);
    what the result row's notes say of it."""
    assert exp.profile_dir is not None
    slug = re.sub(r"[^A-Za-z0-9._=-]+", "_", cell.cell_id)  # 'b0:block_size=1024, checksum=on' -> a plain file name
    name = f"{slug}.folded" if attempt == 1 else f"{slug}-{attempt}.folded"
    exp.profile_dir.mkdir(exist_ok=True)
    write_atomic(exp.profile_dir / name, profiler.profile.folded_text().encode())
    targets = profiler.targets
    return {"file": f"{exp.profile_dir.name}/{name}", **profiler.profile.summary(), "hz": profiler.hz,
            "event": profiler.event, "call_graph": CALL_GRAPH_NAME, "windows": profiler.windows,
            "processes": targets.what if targets else ""}


def _load_or_write_plan(exp: Experiment, run_dir: RunDir, resume: bool, reporter: Reporter) -> Plan:
    if resume:
        if torn := run_dir.set_aside_torn_lines():
            reporter.phase(f"{torn} line(s) of {run_dir.file('results.jsonl')} cut off by a crash: set aside in results.jsonl.torn")
        saved = run_dir.read_json(PLAN_FILE)
        exp.seed = int(saved["seed"])
        initial = exp.plan()
        # the saved plan may have grown (refine, adaptive repeats): its start must be ours
        if [c.cell_id for c in initial.cells] != [c["cell_id"] for c in saved["cells"][: len(initial.cells)]]:
            raise SpecError(
                f"{run_dir.path}: the experiment differs from the one this run started with; "
                "resume needs the same experiment file and options"
            )
        return Plan.from_dict(saved, initial.apply_class)
    run_dir.create()
    if run_dir.file(PLAN_FILE).exists():
        raise SpecError(f"{run_dir.path}: already holds a run; use --resume {run_dir.path} or another --out")
    plan = exp.plan()
    run_dir.write_text(EXPERIMENT_FILE, exp.spec_text)
    run_dir.write_json(SPEC_FILE, {"source": exp.source, "spec": exp.spec.model_dump(), "options": exp.options,
                                   "experiment_sha256": text_digest(exp.spec_text)})
    run_dir.write_json(PLAN_FILE, plan.to_dict())
    return plan


__all__ = ["BudgetSpent", "Interrupted", "check_budget_left", "run", "run_cell", "SilentReporter", "validity_counts"]
