"""Execute a plan: per cell apply -> cache state -> workload (with probes) -> one result row.

Rows are appended and flushed after every cell, the summary rewritten, so a
crash or Ctrl-C loses at most the cell in flight; `resume` runs only the cells
missing from results.jsonl. The engine is stopped (and a DSN server's settings
restored) on normal exit, on error and on Ctrl-C/SIGTERM.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from . import claims
from .analysis.summary import label_of, summarise
from .engines import make_engine
from .engines.base import ApplyClass, Engine, EngineError, KnobError, KnobInfo
from .environment import collect as collect_environment
from .plan import Cell, Plan, make_plan
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
from .search import check_refinable, coarse_values, next_cells
from .spec import WORKLOAD_AXIS, Spec, SpecError
from .workloads import make_workload
from .workloads.base import Workload


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
        return make_plan(self.knobs, self.spec.measure.repeats, self.seed, apply)

    def describe_setting(self, label: str) -> str:
        """'multiblock_read=16' -> '16 (128 kB)' when there is one knob."""
        if len(self.knobs) == 1:
            knob = next(iter(self.knobs))
            value = label.split("=", 1)[1]
            info = self.knob_infos[knob]
            return info.describe_value(int(value)) if value.lstrip("-").isdigit() and info.kind != "workload" else value
        return label

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
) -> Experiment:
    """Validate everything that needs the engine. Raises SpecError; the engine is
    left stopped on failure. Nothing is changed on a DSN server here."""
    workload = make_workload(spec.workload, spec.dataset, spec.engine.kind, source)
    axes = {n: v for n, v in spec.knobs.items() if n.startswith(WORKLOAD_AXIS)}
    axis_infos = {name: _axis_info(type(workload), name) for name in axes}
    swept = [workload]
    for name, values in axes.items():  # every swept option value must be one the workload accepts
        for value in values:
            swept.append(make_workload(spec.workload, spec.dataset, spec.engine.kind, source, {name[len(WORKLOAD_AXIS):]: value}))
    try:
        engine = make_engine(
            spec.engine.kind, dsn=spec.engine.dsn, allow_server_changes=allow_server_changes, cache_dir=cache_dir
        )
    except (KnobError, EngineError) as err:  # a DSN for an engine that takes none, a malformed DSN
        raise SpecError(f"{source}: engine.dsn: {err}") from None
    try:
        engine.start()
        if spec.measure.cache == "cold" and (problem := engine.cold_cache_problem()):
            raise KnobError(f"measure.cache = 'cold' is not possible here: {problem}")
        check_disk_space(engine, swept)
        engine_knobs = {n: v for n, v in spec.knobs.items() if n not in axes}
        infos: dict[str, KnobInfo] = {name: engine.knob(name) for name in [*spec.engine.settings, *engine_knobs]}
        infos.update(axis_infos)
        raw_fixed = dict(spec.engine.settings)
        fixed = engine.check_settings(raw_fixed)
        knobs: dict[str, list[Any]] = {}
        for name, values in spec.knobs.items():  # in the file's order: the plan and labels keep it
            if name in axes:
                knobs[name] = list(values)
            else:
                knobs[name] = [engine.check_settings({**raw_fixed, name: v}, partial=True)[name] for v in values]
        for point in _grid_points(engine_knobs and {n: knobs[n] for n in engine_knobs}):
            engine.check_settings({**fixed, **point})  # combinations too (a value above a fixed ceiling)
    except (KnobError, EngineError) as err:
        engine.stop()
        raise SpecError(f"{source}: {err}") from None
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


def run(exp: Experiment, run_dir: RunDir, reporter: Reporter, *, resume: bool = False, retry: bool = True) -> dict[str, Any]:
    """Run (or resume) an experiment into `run_dir`; returns the summary.

    A resumed run measures the cells missing from results.jsonl and, unless
    `retry` is False, once more the cells that have no ok row (failed, invalid,
    or cut off by an engine's death), except those whose setting the engine
    refused: the plan is finished, each cell ok once."""
    plan = _load_or_write_plan(exp, run_dir, resume, reporter)
    previous_sigterm = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        with _engine_stopped_at_exit(exp.engine, run_dir):
            reporter.phase(f"engine {exp.spec.engine.kind}: applying the fixed settings, checking the data set")
            exp.engine.apply(exp.fixed)  # so environment.json records the parameters the run measures under
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
    except KeyboardInterrupt:
        refresh_report(run_dir, force=True)
        raise Interrupted(f"interrupted; {len(run_dir.rows())} of {len(plan.cells)} cells are saved") from None
    finally:
        signal.signal(signal.SIGTERM, previous_sigterm)
    summary = write_summary(exp, run_dir, plan)
    refresh_report(run_dir, force=True)
    reporter.finished(summary)
    return summary


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


def keep_owed_restore(engine: Engine, run_dir: RunDir) -> None:
    """What a server given by DSN is still owed (its original settings) is kept in
    the run directory until stop() has put it back, so that a run that ends
    badly leaves `blocklab restore DIR` able to finish the job."""
    owed = engine.owed_restore()
    if owed:
        run_dir.write_json(RESTORE_FILE, owed)


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
        except EngineError as err:
            if exc[0] is None:  # the run went well until here: this is the error to report
                raise EngineError(f"{err}; {restore_hint(self.run_dir)}") from None
        else:
            if not self.engine.owed_restore():
                self.run_dir.remove(RESTORE_FILE)  # put back: nothing owed any more
        finally:
            signal.signal(signal.SIGINT, previous)


def restore_hint(run_dir: RunDir) -> str:
    if run_dir.file(RESTORE_FILE).exists():
        return f"the server's original settings are kept in {run_dir.file(RESTORE_FILE)}: run `blocklab restore {run_dir.path}` when it answers again"
    return "no server setting is owed"


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
    cold = exp.spec.measure.cache == "cold"
    stage = "apply"  # a failure while applying the setting is the setting's own (unless the engine died)
    try:
        t0 = time.perf_counter()
        applied = engine.apply(settings)
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
        status = checks.status
        notes.update(checks.to_notes())
    except (KeyboardInterrupt, Interrupted):
        raise
    except Exception as err:  # a failed cell is a result too; the run goes on
        applied, metrics = {}, {}
        status = f"{'refused: ' if stage == 'apply' else ''}{type(err).__name__}: {err}"
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
    )
    summary["experiment"] = exp.spec.name
    summary["cells_planned"] = len(plan.cells)
    summary.update(validity_counts(run_dir.rows()))
    summary["seed"] = exp.seed
    run_dir.write_json(SUMMARY_FILE, summary)
    return summary


def validity_counts(rows: list[ResultRow]) -> dict[str, Any]:
    """How many cells failed, were invalid (and why) or flagged: in summary.json for the console and the report."""
    invalid = [r for r in rows if r.invalid]
    return {
        "cells_failed": sum(1 for r in rows if r.failed),
        "failed_cells": [r.cell_id for r in rows if r.failed],
        "cells_invalid": len(invalid),
        "invalid_cells": [{"cell_id": r.cell_id, "why": r.status.removeprefix("invalid: ")} for r in invalid],
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
