"""Execute a plan: per cell apply -> cache state -> workload (with probes) -> one result row.

Rows are appended and flushed after every cell, the summary rewritten, so a
crash or Ctrl-C loses at most the cell in flight; `resume` runs only the cells
missing from results.jsonl. The engine is stopped (and a DSN server's settings
restored) on normal exit, on error and on Ctrl-C/SIGTERM.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from . import claims
from .analysis.efficiency import add_to_summary as add_efficiency
from .analysis.summary import label_of, summarise
from .device.twin import measure_run
from .engines import make_engine
from .engines.base import ApplyClass, Engine, EngineError, KnobError, KnobInfo
from .environment import collect as collect_environment
from .owed import keep_owed_restore, put_back_owed, restore_hint
from .plan import Cell, Plan, _fmt, grid, make_plan
from .report.writer import refresh_report
from .results import (
    ENVIRONMENT_FILE,
    EXPERIMENT_FILE,
    PLAN_FILE,
    RESTORE_FILE,
    SPEC_FILE,
    SUMMARY_FILE,
    ResultRow,
    RunDir,
)
from .search import check_refinable, coarse_values, next_cells, sequential_looks
from .spec import WORKLOAD_AXIS, Spec, SpecError, spec_from_dict
from .workloads import make_workload
from .workloads.base import Workload, timed_series


class Reporter(Protocol):
    """What the runner tells the person watching (the CLI prints, tests record)."""

    def phase(self, text: str) -> None: ...
    def plan_started(self, total: int, todo: int, estimate_s: float) -> None: ...
    def cell_done(self, cell: Cell, row: ResultRow, line: str) -> None: ...
    def finished(self, summary: dict[str, Any]) -> None: ...


class SilentReporter:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def phase(self, text: str) -> None:
        self.lines.append(text)

    def plan_started(self, total: int, todo: int, estimate_s: float) -> None:
        self.lines.append(f"plan {todo}/{total}")

    def cell_done(self, cell: Cell, row: ResultRow, line: str) -> None:
        self.lines.append(line)

    def finished(self, summary: dict[str, Any]) -> None:
        self.lines.append(summary.get("verdict", ""))


@dataclass
class Experiment:
    """A validated experiment, ready to run: everything checked, nothing changed yet."""

    spec: Spec
    spec_text: str
    source: str
    engine: Engine
    workload: Workload
    knob_infos: dict[str, KnobInfo]
    knobs: dict[str, list[Any]]  # canonical values
    fixed: dict[str, Any]  # canonical fixed settings
    metric: str
    goal: str
    seed: int
    options: dict[str, Any] = field(default_factory=dict)
    _workloads: dict[tuple, Workload] = field(default_factory=dict)
    # called after every apply(): run() keeps what the engine now owes in restore.json
    on_changed: Callable[[], None] | None = None

    def workload_for(self, settings: dict[str, Any]) -> Workload:
        """The workload with this cell's swept options (one instance per combination)."""
        _, options = split_settings(settings)
        if not options:
            return self.workload
        key = tuple(sorted((k, str(v)) for k, v in options.items()))
        if key not in self._workloads:
            spec = self.spec
            self._workloads[key] = make_workload(spec.workload, spec.dataset, spec.engine.kind, self.source, options)
        return self._workloads[key]

    def plan(self) -> Plan:
        apply = {k: info.apply for k, info in self.knob_infos.items() if k in self.knobs}
        plan = make_plan(self.knobs, self.spec.measure.repeats, self.seed, apply)
        plan.value_bytes = self.value_bytes()
        return plan

    def describe_setting(self, label: str) -> str:
        """A setting as people write it: 'multiblock_read=16' -> '16 (128 kB)' with one
        knob, 'block_size=16384, checksum=on' -> 'block_size=16 kB, checksum=on' with several."""
        settings = self._settings_by_label().get(label) or _parse_label(label, self.knobs)
        if settings is None:
            return label
        described = {k: self._describe_value(k, v) for k, v in settings.items()}
        if len(described) == 1:
            return next(iter(described.values()))
        return ", ".join(f"{k}={v}" for k, v in described.items())

    def setting_text(self, label: str) -> str:
        """A setting on a line of its own: 'multiblock_read = 16 (128 kB)', or the
        knobs' list when there are several."""
        if len(self.knobs) == 1:
            return f"{next(iter(self.knobs))} = {self.describe_setting(label)}"
        return self.describe_setting(label)

    def _describe_value(self, knob: str, value: Any) -> str:
        info = self.knob_infos.get(knob)
        if info is None or info.kind == "workload":
            return str(value) if not isinstance(value, bool) else ("on" if value else "off")
        return info.describe_value(value)

    def _settings_by_label(self) -> dict[str, dict[str, Any]]:
        return {s.label: s.as_dict() for s in grid(self.knobs)}

    def value_bytes(self) -> dict[str, dict[str, int]]:
        """For knobs that are sizes: the bytes each swept value stands for, kept in
        plan.json so a report drawn later (or elsewhere) prints '16 kB', not 16384."""
        out: dict[str, dict[str, int]] = {}
        for knob, values in self.knobs.items():
            info = self.knob_infos.get(knob)
            if info is None or info.kind == "workload":
                continue
            sizes = {_fmt(v): size for v in values if (size := info.size_bytes(v)) is not None}
            if sizes:
                out[knob] = sizes
        return out

    def knob_label(self) -> str:
        return ", ".join(self.knobs) if self.knobs else "setting"

    def baseline_label(self) -> str | None:
        """The engine's default value when it is in the sweep, else the first value."""
        if len(self.knobs) != 1:
            return None
        knob, values = next(iter(self.knobs.items()))
        default = self.knob_infos[knob].default
        chosen = default if default in values else values[0]
        return label_of({knob: chosen})


def prepare(
    spec: Spec,
    spec_text: str,
    source: str,
    *,
    allow_server_changes: bool = False,
    cache_dir: Path | None = None,
    raw: dict[str, Any] | None = None,
    overrides: dict[str, Any] | None = None,
) -> Experiment:
    """Validate everything that needs the engine. Raises SpecError; the engine is
    left stopped on failure. Nothing is changed on a DSN server here. With the
    experiment file's `raw` dict (and the command line's `overrides`), the spec is
    derived again once the engine answers, adapted to its version and mode."""
    if raw is not None:
        engine = _engine_for(spec, source, allow_server_changes, cache_dir)
        try:
            engine.start()
            spec = spec_from_dict(raw, source, dict(overrides or {}), engine_version=engine.version_tuple(), dsn=engine.mode == "dsn")
        except (KnobError, EngineError) as err:
            engine.stop()
            raise SpecError(f"{source}: {err}") from None
        except BaseException:
            engine.stop()
            raise
        return _prepare(spec, spec_text, source, engine)
    return _prepare(spec, spec_text, source, _engine_for(spec, source, allow_server_changes, cache_dir))


class Problems:
    """Validation problems gathered, so that one message tells them all (and every
    flag they need) instead of one per try."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def add(self, message: str) -> None:
        if message not in self.messages:
            self.messages.append(message)

    def attempt(self, check: Callable[[], Any]) -> Any:
        try:
            return check()
        except KnobError as err:
            self.add(str(err))
            return None

    def raise_if_any(self) -> None:
        if not self.messages:
            return
        if len(self.messages) == 1:
            raise KnobError(self.messages[0])
        flags = sorted({flag for m in self.messages for flag in ("--allow-server-changes",) if flag in m})
        needs = f"\n  it needs {' and '.join(flags)}" if flags else ""
        raise KnobError(f"{len(self.messages)} problems:\n  " + "\n  ".join(self.messages) + needs)


def _engine_for(spec: Spec, source: str, allow_server_changes: bool, cache_dir: Path | None) -> Engine:
    try:
        return make_engine(spec.engine.kind, dsn=spec.engine.dsn, allow_server_changes=allow_server_changes, cache_dir=cache_dir)
    except (KnobError, EngineError) as err:  # a DSN for an engine that takes none, a malformed DSN
        raise SpecError(f"{source}: engine.dsn: {err}") from None


def _prepare(spec: Spec, spec_text: str, source: str, engine: Engine) -> Experiment:
    try:
        workload = make_workload(spec.workload, spec.dataset, spec.engine.kind, source)
    except BaseException:
        engine.stop()
        raise
    axes = {n: v for n, v in spec.knobs.items() if n.startswith(WORKLOAD_AXIS)}
    axis_infos = {name: _axis_info(type(workload), name) for name in axes}
    try:
        swept = [workload]
        for name, values in axes.items():  # every swept option value must be one the workload accepts
            for value in values:
                swept.append(make_workload(spec.workload, spec.dataset, spec.engine.kind, source, {name[len(WORKLOAD_AXIS):]: value}))
        engine.start()
        problems = Problems()
        if spec.measure.cache == "cold" and (problem := engine.cold_cache_problem()):
            problems.add(f"measure.cache = 'cold' is not possible here: {problem}")
        problems.attempt(lambda: check_disk_space(engine, swept))
        engine_knobs = {n: v for n, v in spec.knobs.items() if n not in axes}
        infos: dict[str, KnobInfo] = {}
        for name in [*spec.engine.settings, *engine_knobs]:
            if (info := problems.attempt(functools.partial(engine.knob, name))) is not None:
                infos[name] = info
        infos.update(axis_infos)
        raw_fixed = {k: v for k, v in spec.engine.settings.items() if k in infos}
        for name, value in raw_fixed.items():  # each fixed setting on its own: every problem is told at once
            problems.attempt(functools.partial(engine.check_settings, {name: value}, partial=True))
        knobs: dict[str, list[Any]] = {}
        for name, values in spec.knobs.items():  # in the file's order: the plan and labels keep it
            if name in axes:
                knobs[name] = list(values)
            elif name in infos:
                checked = [problems.attempt(functools.partial(engine.check_settings, {**raw_fixed, name: v}, partial=True)) for v in values]
                knobs[name] = [c[name] for c in checked if c is not None]
        problems.raise_if_any()
        fixed = engine.check_settings(raw_fixed)
        for point in _grid_points(engine_knobs and {n: knobs[n] for n in engine_knobs}):
            engine.check_settings({**fixed, **point})  # combinations too (a value above a fixed ceiling)
    except (KnobError, EngineError) as err:
        engine.stop()
        adapted = "".join(f"\n  (adapted to this server: {why})" for why in spec.adapted)
        raise SpecError(f"{source}: {err}{adapted}") from None
    except BaseException:
        engine.stop()
        raise
    if spec.measure.search == "refine":
        name = check_refinable(knobs, {k: infos[k].kind for k in knobs}, source)
        knobs[name] = coarse_values(knobs[name])
    metric = spec.measure.metric or workload.default_metric
    goal = spec.measure.goal or workload.default_goal
    seed = spec.measure.seed if spec.measure.seed is not None else random.SystemRandom().randrange(2**31)
    return Experiment(spec, spec_text, source, engine, workload, infos, knobs, fixed, metric, goal, seed)


def check_disk_space(engine: Engine, workloads: list[Workload]) -> None:
    """The data set must fit where blocklab's own engine keeps it: refused before
    anything runs, not found out as a full disk half-way. (A server given by DSN
    keeps its data on a disk of its own.)"""
    data_dir = engine.data_dir()
    if engine.mode == "dsn" or data_dir is None:
        return
    need = max(w.disk_bytes() for w in workloads) + float(engine.install_bytes)
    more = need - directory_bytes(Path(data_dir))  # a data set built before is reused
    free = free_bytes(Path(data_dir))
    if more > free:
        raise KnobError(
            f"not enough disk space in {data_dir}: the data set needs about {need / 1e6:,.0f} MB there "
            f"({more / 1e6:,.0f} MB more than it holds now) and {free / 1e6:,.0f} MB are free; make dataset.rows "
            "smaller, free some space, or keep the engine's data elsewhere with BLOCKLAB_CACHE=DIR"
        )


def directory_bytes(path: Path) -> float:
    """Bytes the files under `path` take on disk (what they hold, not their apparent size)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
    return float(total)


def free_bytes(path: Path) -> float:
    """Bytes an unprivileged writer may still use on the file system holding `path`."""
    while not path.exists():
        path = path.parent
    st = os.statvfs(path)
    return float(st.f_bavail * st.f_frsize)


def _grid_points(knobs: dict[str, list[Any]]) -> list[dict[str, Any]]:
    from .plan import grid

    return [s.as_dict() for s in grid(knobs)] if knobs else []


def _axis_info(workload_cls: Any, name: str) -> KnobInfo:
    """A swept workload option as a knob: its cost tells the plan how to order it
    (a workload declares costly options, e.g. one that rebuilds its data, in AXIS_COST)."""
    option = name[len(WORKLOAD_AXIS):]
    cost = getattr(workload_cls, "AXIS_COST", {}).get(option, ApplyClass.SESSION)
    return KnobInfo(native=option, generic=None, kind="workload", apply=cost, description="workload option")


def split_settings(settings: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(engine knobs, workload options) of one cell's settings."""
    engine = {k: v for k, v in settings.items() if not k.startswith(WORKLOAD_AXIS)}
    workload = {k[len(WORKLOAD_AXIS):]: v for k, v in settings.items() if k.startswith(WORKLOAD_AXIS)}
    return engine, workload


# ---------------------------------------------------------------------- running
class Interrupted(Exception):
    """Ctrl-C or SIGTERM: the cell in flight is dropped, everything before it is kept."""


class EngineDied(EngineError):
    """The engine died and could not be brought back, or died again on the cell re-run after a crash."""


def run(exp: Experiment, run_dir: RunDir, reporter: Reporter, *, resume: bool = False, retry: bool = True,
        device_twin: str | None = None) -> dict[str, Any]:
    """Run (or resume) an experiment into `run_dir`; returns the summary.

    A resumed run measures the cells missing from results.jsonl and, unless
    `retry` is False, once more the cells that have no ok row (failed, invalid,
    or cut off by an engine's death), except those whose setting the engine
    refused: the plan is finished, each cell ok once. `device_twin` "on" replays
    each setting's I/O with fio after the cells (device/twin.py), "off" records
    that it did not; None leaves it out."""
    plan = _load_or_write_plan(exp, run_dir, resume, reporter)
    previous_sigterm = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        with _engine_stopped_at_exit(exp.engine, run_dir):
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
            retry_ids = retryable_cells(run_dir.rows()) if resume and retry else set()
            attempted: set[str] = set()  # each cell at most once per invocation (its re-measures aside)
            while True:
                have = {row.cell_id for row in run_dir.rows()}
                todo = [c for c in plan.cells if c.cell_id not in attempted and (c.cell_id not in have or c.cell_id in retry_ids)]
                if todo:
                    reporter.plan_started(len(plan.cells), len(todo), sum(exp.workload_for(c.setting.as_dict()).estimate_seconds() for c in todo))
                for cell in todo:
                    attempted.add(cell.cell_id)
                    _run_and_record(exp, cell, run_dir, plan, reporter)
                cells, settings, why = next_cells(exp, plan, run_dir.rows())
                if why:
                    reporter.phase(why)
                if not cells:
                    break
                plan.extend(cells, settings)
                run_dir.write_json(PLAN_FILE, plan.to_dict())
            list_created(exp, reporter)
        if device_twin is not None:  # after every cell, the engine stopped: fio never disturbs a cell (issue 19)
            reporter.phase(measure_run(run_dir, device_twin, on_phase=reporter.phase).summary_line())
    except KeyboardInterrupt:
        refresh_report(run_dir, force=True)
        raise Interrupted(f"interrupted; {len(run_dir.rows())} of {len(plan.cells)} cells are saved") from None
    finally:
        signal.signal(signal.SIGTERM, previous_sigterm)
    summary = write_summary(exp, run_dir, plan)
    refresh_report(run_dir, force=True)
    reporter.finished(summary)
    return summary


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


def _run_and_record(exp: Experiment, cell: Cell, run_dir: RunDir, plan: Plan, reporter: Reporter) -> None:
    """Run one cell and record it in the run directory (see measure_cell)."""
    measure_cell(exp, cell, reporter, lambda row: _record(exp, cell, row, run_dir, plan, reporter))


def measure_cell(exp: Experiment, cell: Cell, reporter: Reporter, record: Callable[[ResultRow], None]) -> None:
    """Run one cell, handing every row to `record` as soon as it exists. A cell whose
    claims did not hold is measured once more at once. A cell that failed because
    the engine died (not because of its setting) is recorded as such, the engine
    restarted (its own crash recovery), and the cell measured again; a second death
    stops the run (EngineDied). Split from _run_and_record so that a fleet worker
    (fleet/worker.py) measures with the same rules and streams the rows back
    instead of writing them."""
    died = remeasured = False
    attempt = 0
    while True:
        attempt += 1
        row = run_cell(exp, cell, reporter, attempt=attempt)
        why = exp.engine.health() if row.failed else None
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


def _record(exp: Experiment, cell: Cell, row: ResultRow, run_dir: RunDir, plan: Plan, reporter: Reporter) -> None:
    run_dir.append(row)
    keep_owed_restore(exp.engine, run_dir)
    write_summary(exp, run_dir, plan)
    if message := refresh_report(run_dir):  # the report never stops a run; it says why it could not render
        reporter.phase(message)
    reporter.cell_done(cell, row, _cell_line(exp, cell, row))


def _log(engine: Engine) -> str:
    tail = engine.log_tail()
    return f"\n{tail}" if tail else ""


def _cell_line(exp: Experiment, cell: Cell, row: ResultRow) -> str:
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


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


class _engine_stopped_at_exit:
    def __init__(self, engine: Engine, run_dir: RunDir):
        self.engine = engine
        self.run_dir = run_dir

    def __enter__(self) -> None:
        self.engine.start()

    def __exit__(self, *exc: Any) -> None:
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
    notes: dict[str, Any] = {"attempt": attempt} if attempt > 1 else {}
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
            notes["evicted"] = engine.evict(relations)
            claims.check_cold_start(engine, relations, notes["evicted"], checks)
        direct = engine.direct_io_active()
        metrics = workload.run(engine)
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


def write_summary(exp: Experiment, run_dir: RunDir, plan: Plan) -> dict[str, Any]:
    labels = [s.label for s in plan.settings]
    summary = summarise(
        run_dir.rows(),
        metric=exp.metric,
        goal=exp.goal,
        setting_labels=labels,
        settings_by_label={s.label: s.as_dict() for s in plan.settings},
        baseline=exp.baseline_label(),
        practical=exp.spec.measure.practical,
        seed=exp.seed,
        describe_setting=exp.describe_setting,
        knob_label=exp.knob_label(),
        unit=_unit_of(exp.metric),
        looks=sequential_looks(exp.spec.measure),
    )
    summary["experiment"] = exp.spec.name
    summary["cells_planned"] = len(plan.cells)
    summary.update(validity_counts(run_dir.rows()))
    summary["seed"] = exp.seed
    add_efficiency(summary, run_dir, exp.describe_setting)  # the engine against its device twin, when the rows allow
    run_dir.write_json(SUMMARY_FILE, summary)
    return summary


def validity_counts(rows: list[ResultRow]) -> dict[str, Any]:
    """How many cells failed, were invalid (and why) or flagged: in summary.json for the console and the report."""
    invalid = [r for r in rows if r.invalid]
    measured = {r.cell_id for r in rows if r.ok}
    return {
        "cells_failed": sum(1 for r in rows if r.failed),
        "failed_cells": [r.cell_id for r in rows if r.failed],
        # measurements whose claims did not hold (each kept, never counted) ...
        "cells_invalid": len(invalid),
        "invalid_cells": [{"cell_id": r.cell_id, "why": r.status.removeprefix("invalid: ")} for r in invalid],
        # ... of which the cells measured again with every claim holding, and those left without a number
        "invalid_remeasured": len({r.cell_id for r in invalid} & measured),
        "cells_without_valid": len({r.cell_id for r in rows if not r.ok} - measured),
        "cells_flagged": sum(1 for r in rows if r.ok and r.notes.get("flags")),
    }


def _unit_of(metric: str) -> str:
    return {"rows_per_s": "rows/s", "mb_per_s": "MB/s", "elapsed_s": "s", "iops": "IOPS"}.get(metric, "")


def text_digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def new_run_dir(root: Path, name: str) -> RunDir:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = root / f"{name}-{stamp}"
    n = 1
    while path.exists():
        n += 1
        path = root / f"{name}-{stamp}-{n}"
    return RunDir(path)


Callback = Callable[..., None]
__all__ = ["Experiment", "Interrupted", "prepare", "run", "run_cell", "new_run_dir", "SilentReporter", "ApplyClass"]


def _parse_label(label: str, knobs: dict[str, list[Any]]) -> dict[str, Any] | None:
    """A label a refine step added (not in the first grid) back into its settings;
    None when it is not 'knob=value, ...' over the experiment's knobs."""
    out: dict[str, Any] = {}
    for part in label.split(", "):
        knob, sep, text = part.partition("=")
        if not sep or knob not in knobs:
            return None
        out[knob] = int(text) if text.lstrip("-").isdigit() else text
    return out
