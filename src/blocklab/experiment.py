"""A validated experiment, ready to run, and how one is made (`prepare`).

`prepare` checks everything that needs the engine before anything runs: every
knob and value, the fixed settings and their combinations with the swept ones,
the disk space for the data set, whether a cold cache is possible; all problems
are told in one message. `Experiment` then answers what the runner (runner.py),
a fleet worker (fleet/worker.py) and the console ask of it: the plan, the
workload for a cell, how a setting reads. Nothing here changes a server.
"""

from __future__ import annotations

import functools
import math
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from .engines import engine_class, make_engine
from .engines.base import ApplyClass, CpuProfileDialect, Engine, EngineError, KnobError, KnobInfo
from .errors import nearest
from .plan import Plan, grid, make_plan
from .probes import cpu_profile, trace_function
from .search import check_refinable, coarse_values
from .spec import WORKLOAD_AXIS, Spec, SpecError, spec_from_dict
from .units import fmt_bytes, label_of, value_text
from .workloads import make_workload
from .workloads.base import COMMON_METRICS, Workload, metric_accepted, workload_check, workload_cold_problem

__all__ = ["Experiment", "prepare", "split_settings", "ApplyClass"]


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
    fixed: dict[str, object]  # canonical fixed settings
    metric: str
    goal: str
    seed: int
    options: dict[str, object] = field(default_factory=dict)
    _workloads: dict[tuple, Workload] = field(default_factory=dict)
    # called after every apply(): run() keeps what the engine now owes in restore.json
    on_changed: Callable[[], None] | None = None
    # where each cell's CPU profile is kept (run_dir/profiles), set by the runner; None: not kept
    profile_dir: Path | None = None
    # the grid's settings by label, for the knobs they were made of (describe_setting runs for
    # every setting of every verdict after every cell: 108 settings rebuilt the grid 108 times)
    _labels: tuple[tuple, dict[str, dict[str, object]]] | None = field(default=None, repr=False, compare=False)

    def workload_for(self, settings: dict[str, object]) -> Workload:
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
        plan.value_text = self.value_text()
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

    def _describe_value(self, knob: str, value: object) -> str:
        info = self.knob_infos.get(knob)
        if info is None or info.kind == "workload":
            return str(value) if not isinstance(value, bool) else ("on" if value else "off")
        return info.describe_value(value)

    def _settings_by_label(self) -> dict[str, dict[str, object]]:
        key = tuple((k, tuple(map(repr, v))) for k, v in self.knobs.items())
        if self._labels is None or self._labels[0] != key:
            self._labels = (key, {s.label: s.as_dict() for s in grid(self.knobs)})
        return self._labels[1]

    def value_bytes(self) -> dict[str, dict[str, int]]:
        """For knobs that are sizes: the bytes each swept value stands for, kept in
        plan.json so a report drawn later (or elsewhere) prints '16 kB', not 16384."""
        out: dict[str, dict[str, int]] = {}
        for knob, values in self.knobs.items():
            info = self.knob_infos.get(knob)
            if info is None or info.kind == "workload":
                continue
            sizes = {value_text(v): size for v in values if (size := info.size_bytes(v)) is not None}
            if sizes:
                out[knob] = sizes
        return out

    def warnings(self) -> list[str]:
        """What the plan and the run say before any cell: a data set smaller than the
        largest read swept (--rows 10: one page, every read the same 8 kB, and a
        verdict about nothing)."""
        out = []
        data = max((self.workload_for(s.as_dict()).disk_bytes() for s in grid(self.knobs)), default=0.0) if self.knobs else 0.0
        for knob, values in self.knobs.items():
            info = self.knob_infos.get(knob)
            if info is None or (info.generic or knob) not in READ_SIZE_KNOBS or data <= 0:
                continue
            sizes = {v: size for v in values if (size := info.size_bytes(v)) is not None}
            if not sizes or max(sizes.values()) <= data:
                continue
            largest = max(sizes, key=lambda v: sizes[v])
            per_row = data / max(self.spec.dataset.rows, 1)
            rows = _round_up(10 * sizes[largest] / per_row) if per_row > 0 else 0
            same = [info.describe_value(v) for v in values if v in sizes and sizes[v] >= data]
            out.append(
                f"the data set ({self.spec.dataset.rows:,} rows, about {fmt_bytes(data)}) is smaller than the largest read "
                f"swept ({knob} = {info.describe_value(largest)}): a read is never larger than the table, so "
                f"{', '.join(same)} cannot differ from each other and the verdict would rank noise"
                + (f"; give --rows {rows:,} or more (ten times the largest read)" if rows else "")
            )
        return out

    def load_axes(self) -> list[str]:
        """The swept knobs that are the workload's load (slob's sessions and update share):
        ranked never, the real knobs within each of their levels (analysis/load.py)."""
        from .analysis.load import load_axes_of

        return load_axes_of(self.spec.workload.kind, self.knobs)

    def value_text(self) -> dict[str, dict[str, str]]:
        """For knobs whose values the engine reads out ('64' -> '64 (read-ahead off)'):
        each swept value's text, kept in plan.json for a report drawn later."""
        out: dict[str, dict[str, str]] = {}
        for knob, values in self.knobs.items():
            info = self.knob_infos.get(knob)
            if info is None or info.kind == "workload":
                continue
            texts = {value_text(v): info.describe_value(v) for v in values if info.meaning(v)}
            if texts:
                out[knob] = texts
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
    raw: dict[str, object] | None = None,
    overrides: dict[str, object] | None = None,
) -> Experiment:
    """Validate everything that needs the engine. Raises SpecError; the engine is
    left stopped on failure. Nothing is changed on a DSN server here. With the
    experiment file's `raw` dict (and the command line's `overrides`), the spec is
    derived again once the engine answers, adapted to its version and mode."""
    check_profiling(spec, source)  # before the engine starts: a refusal leaves nothing running
    if raw is not None:
        engine = _engine_for(spec, source, allow_server_changes, cache_dir, "engine.dsn" in (overrides or {}))
        check_trace_target(engine, spec, source)
        try:
            engine.start()
            spec = spec_from_dict(raw, source, dict(overrides or {}), engine_version=engine.version_tuple(), dsn=engine.mode == "dsn")
        except (KnobError, EngineError) as err:
            engine.stop()
            raise SpecError(f"{source}: {err}") from None
        except BaseException:
            engine.stop()
            raise
        return _prepare(spec, spec_text, source, engine, _set_knobs(overrides))
    engine = _engine_for(spec, source, allow_server_changes, cache_dir)
    check_trace_target(engine, spec, source)
    return _prepare(spec, spec_text, source, engine, _set_knobs(overrides))


def _set_knobs(overrides: dict[str, object] | None) -> frozenset[str]:
    """The knobs the command line named (--set): an engine's refusal of one names the option, not the file."""
    return frozenset(k[len("knobs."):] for k in (overrides or {}) if k.startswith("knobs."))


def _blamed(message: str, source: str, set_knobs: frozenset[str]) -> str:
    """Who a refusal is about: `--set NAME` when it is one problem with a knob the user typed, else the file."""
    named = [k for k in set_knobs if repr(k) in message or f"{k}:" in message]
    if len(named) == 1 and "problems:" not in message:
        return f"--set {named[0]}"
    return source


def check_profiling(spec: Spec, source: str) -> None:
    """`measure.cpu_profile` / `trace_function` need perf (or bpftrace) allowed here and
    an engine that names its processes (its `cpu_profile` dialect): SpecError with the
    reason, the setting and the fix, before anything starts."""
    m = spec.measure
    if not (m.cpu_profile or m.trace_function):
        if m.trace_arg is not None:
            raise SpecError(f"{source}: measure.trace_arg = {m.trace_arg} needs measure.trace_function (--trace-function NAME)")
        return
    what = "measure.cpu_profile (--cpu-profile)" if m.cpu_profile else "measure.trace_function (--trace-function)"
    cls = engine_class(spec.engine.kind)
    if "cpu_profile" not in cls.dialects:
        why = cls.capabilities.why_not("cpu_profile") or "it does not say which processes are its own (no cpu_profile dialect)"
        raise SpecError(f"{source}: {what}: the {cls.display} engine cannot be profiled: {why}")
    if spec.engine.dsn:
        raise SpecError(f"{source}: {what}: a server given by --dsn runs processes blocklab does not own (perhaps on "
                        "another host); profile blocklab's own engine (no --dsn)")
    if m.cpu_profile and (problem := cpu_profile.perf_problem()):
        raise SpecError(f"{source}: measure.cpu_profile (--cpu-profile): {problem}")
    for knob, value in m.cpu_profile_where.items():
        values = [str(v).lower() for v in spec.knobs.get(knob, [])]
        if str(value).lower() not in values:
            raise SpecError(f"{source}: measure.cpu_profile_where.{knob} = {value!r} is not accepted; accepted: a value the "
                            f"run sweeps {knob} over ({', '.join(values) or f'it does not sweep {knob}'})")
    if m.trace_function and (problem := trace_function.bpftrace_problem()):
        raise SpecError(f"{source}: measure.trace_function (--trace-function): {problem}")


def check_trace_target(engine: Engine, spec: Spec, source: str) -> None:
    """The traced function must be one the engine's binary has (before the engine starts)."""
    name = spec.measure.trace_function
    if not name:
        return
    binary = cast(CpuProfileDialect, engine.dialect("cpu_profile")).trace_binary()
    if problem := trace_function.function_problem(binary, name):
        raise SpecError(f"{source}: measure.trace_function = {name!r} (--trace-function): {problem}")


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


def check_metric(spec: Spec, workload: Workload, source: str) -> None:
    """measure.metric names a figure the workload reports: a typo would measure every
    cell and then have nothing to judge."""
    metric = spec.measure.metric
    if metric is not None and not metric_accepted(workload, metric):
        raise SpecError(f"{source}: measure.metric: {metric!r} is not a figure of workload {workload.name!r}"
                        f"{nearest(metric, [*workload.metrics, *COMMON_METRICS])}; accepted: {', '.join(workload.metrics)}, "
                        f"{', '.join(COMMON_METRICS)} where the engine reports them, or pattern.* (the I/O pattern's figures)")


def _engine_for(spec: Spec, source: str, allow_server_changes: bool, cache_dir: Path | None, dsn_typed: bool = False) -> Engine:
    try:
        return make_engine(spec.engine.kind, dsn=spec.engine.dsn, allow_server_changes=allow_server_changes, cache_dir=cache_dir)
    except (KnobError, EngineError) as err:  # a DSN for an engine that takes none, a malformed DSN
        told = str(err).removeprefix("--dsn: ")
        raise SpecError(f"--dsn: {told}" if dsn_typed else f"{source}: engine.dsn: {told}") from None


def _prepare(spec: Spec, spec_text: str, source: str, engine: Engine, set_knobs: frozenset[str] = frozenset()) -> Experiment:
    try:
        workload = make_workload(spec.workload, spec.dataset, spec.engine.kind, source)
        check_metric(spec, workload, source)
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
        spec = resolve_cache(spec, engine, workload)
        problems = Problems()
        if spec.measure.cache == "cold" and (problem := engine.cold_cache_problem() or workload_cold_problem(workload, engine)):
            problems.add(f"measure.cache = 'cold' is not possible here: {problem}")
        problems.attempt(lambda: check_disk_space(engine, swept))
        workload_check(workload, engine)  # e.g. the user's scripts, run once and rolled back
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
        fixed = engine.check_settings({**raw_fixed})
        for point in _grid_points(engine_knobs and {n: knobs[n] for n in engine_knobs}):
            engine.check_settings({**fixed, **point})  # combinations too (a value above a fixed ceiling)
        if spec.measure.search == "refine":  # refused here too: the engine started above is stopped
            name = check_refinable(knobs, {k: infos[k].kind for k in knobs}, source)
            knobs[name] = coarse_values(knobs[name])
    except (KnobError, EngineError) as err:
        engine.stop()
        adapted = "".join(f"\n  (adapted to this server: {why})" for why in spec.adapted)
        raise SpecError(f"{_blamed(str(err), source, set_knobs)}: {err}{adapted}") from None
    except BaseException:
        engine.stop()
        raise
    metric = spec.measure.metric or workload.default_metric
    goal = spec.measure.goal or workload.default_goal
    seed = spec.measure.seed if spec.measure.seed is not None else random.SystemRandom().randrange(2**31)
    return Experiment(spec, spec_text, source, engine, workload, infos, knobs, fixed, metric, goal, seed)


def resolve_cache(spec: Spec, engine: Engine, workload: Workload) -> Spec:
    """measure.cache = 'auto': cold where a cold cache can be made and proven for this workload
    on this engine, else warm, with why among the spec's adaptations (said before the run)."""
    if spec.measure.cache != "auto":
        return spec
    problem = engine.cold_cache_problem() or workload_cold_problem(workload, engine)
    measure = spec.measure.model_copy(update={"cache": "warm" if problem else "cold"})
    adapted = [*spec.adapted, f"measure.cache = 'auto' measures warm here: {problem}"] if problem else spec.adapted
    return spec.model_copy(update={"measure": measure, "adapted": adapted})


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


# knobs whose values are the size of a read (by the project's generic vocabulary, not an engine's names)
READ_SIZE_KNOBS = frozenset({"multiblock_read", "read_ahead", "block_size"})


def _round_up(x: float) -> int:
    """10,000 -> 10,000; 123,456 -> 200,000: a number of rows a person would type."""
    if x <= 0:
        return 0
    step = 10 ** max(int(math.log10(x)), 0)
    return int(math.ceil(x / step) * step)


def _grid_points(knobs: dict[str, list[Any]]) -> list[dict[str, object]]:
    from .plan import grid

    return [s.as_dict() for s in grid(knobs)] if knobs else []


def _axis_info(workload_cls: object, name: str) -> KnobInfo:
    """A swept workload option as a knob: its cost tells the plan how to order it
    (a workload declares costly options, e.g. one that rebuilds its data, in AXIS_COST)."""
    option = name[len(WORKLOAD_AXIS):]
    cost = getattr(workload_cls, "AXIS_COST", {}).get(option, ApplyClass.SESSION)
    return KnobInfo(native=option, generic=None, kind="workload", apply=cost, description="workload option")


def split_settings(settings: dict[str, object]) -> tuple[dict[str, object], dict[str, object]]:
    """(engine knobs, workload options) of one cell's settings."""
    engine = {k: v for k, v in settings.items() if not k.startswith(WORKLOAD_AXIS)}
    workload = {k[len(WORKLOAD_AXIS):]: v for k, v in settings.items() if k.startswith(WORKLOAD_AXIS)}
    return engine, workload

def _parse_label(label: str, knobs: dict[str, list[Any]]) -> dict[str, object] | None:
    """A label a refine step added (not in the first grid) back into its settings;
    None when it is not 'knob=value, ...' over the experiment's knobs."""
    out: dict[str, object] = {}
    for part in label.split(", "):
        knob, sep, text = part.partition("=")
        if not sep or knob not in knobs:
            return None
        out[knob] = int(text) if text.lstrip("-").isdigit() else text
    return out
