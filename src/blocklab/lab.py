"""The library entry points the CLI calls (library first, CLI a thin layer)."""

from __future__ import annotations

import math
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from . import recipes
from .budget import BudgetError, is_off, parse_budget
from .experiment import Experiment, prepare
from .results import PLAN_FILE, SPEC_FILE, WORKLOAD_FILE, RunDir, text_digest
from .spec import Spec, SpecError, WorkloadSpec, load_spec, parse_set_option, spec_from_dict
from .units import value_text
from .workloads import workload_class
from .workloads.base import changed_files

if TYPE_CHECKING:
    from .device.twin import RunTwins


@dataclass
class Overrides:
    """Command-line changes to an experiment file, applied before validation."""

    sets: list[str] = field(default_factory=list)  # --set KNOB=V1,V2
    repeats: int | None = None
    rows: int | None = None
    engine: str | None = None
    dsn: str | None = None
    seed: int | None = None
    quick: bool = False
    budget: str | None = None  # --budget 90s / 200cells, or off (the fixed plan of `repeats` blocks)
    sessions: int | None = None  # --sessions: workload.sessions
    duration_s: float | None = None  # --duration: workload.duration_s
    allow_writes: bool = False  # --allow-writes: workload.allow_writes (workload sql on a DSN)
    cpu_profile: bool = False  # --cpu-profile: the engine's stacks sampled in every cell
    cpu_profile_hz: int | None = None
    trace_function: str | None = None  # --trace-function NAME (--trace-arg N)
    trace_arg: int | None = None

    def as_dotted(self) -> dict[str, object]:
        out: dict[str, object] = {}
        if self.cpu_profile:
            out["measure.cpu_profile"] = True
        if self.cpu_profile_hz is not None:
            out["measure.cpu_profile_hz"] = self.cpu_profile_hz
        if self.trace_function is not None:
            out["measure.trace_function"] = self.trace_function
        if self.trace_arg is not None:
            out["measure.trace_arg"] = self.trace_arg
        if self.quick:
            out["quick"] = True
        if self.engine:
            out["engine.kind"] = self.engine
        if self.dsn:
            out["engine.dsn"] = self.dsn
        if self.repeats is not None:
            out["measure.repeats"] = self.repeats
            out["measure.max_repeats"] = max(self.repeats, 20)
        if self.rows is not None:
            out["dataset.rows"] = self.rows
        if self.seed is not None:
            out["measure.seed"] = self.seed
        if self.budget is not None:
            out["measure.budget"] = self.budget
        if self.sessions is not None:
            out["workload.sessions"] = self.sessions
        if self.duration_s is not None:
            out["workload.duration_s"] = self.duration_s
        if self.allow_writes:
            out["workload.allow_writes"] = True
        for text in self.sets:
            name, values = parse_set_option(text)
            out[f"knobs.{name}"] = values
        return out

    def check(self) -> None:
        seen: dict[str, str] = {}
        for text in self.sets:  # one --set per knob: a second would silently replace the first's values
            name, _ = parse_set_option(text)
            if name in seen:
                raise SpecError(f"--set {name} is given twice ({seen[name]!r}, then {text!r}): give all its values in one "
                                f"--set, e.g. --set {name}=V1,V2,V3")
            seen[name] = text
        if self.repeats is not None and self.repeats < 1:
            raise SpecError(f"--repeats {self.repeats}: must be at least 1")
        if self.rows is not None and self.rows < 1:
            raise SpecError(f"--rows {self.rows}: must be at least 1")
        if self.budget is not None and not is_off(self.budget):
            try:
                parse_budget(self.budget, "--budget")
            except BudgetError as err:
                raise SpecError(f"{err}; or off") from None


def load_experiment(
    target: str,
    overrides: Overrides,
    *,
    allow_server_changes: bool = False,
    cache_dir: Path | None = None,
    text: str | None = None,
) -> Experiment:
    """FILE or RECIPE + overrides -> a validated Experiment (engine checked, nothing run);
    with `text`, that experiment file's text instead (`target` then only names it)."""
    overrides.check()
    dotted = overrides.as_dotted()
    if text is None:
        path = recipes.resolve(target)
        spec, text = load_spec(path, dotted)
        if "dataset.rows" in dotted and (option := workload_class(spec.workload.kind, str(path)).rows_option):
            dotted[f"workload.{option}"] = dotted.pop("dataset.rows")  # a workload that builds no data set: --rows is its own
            spec, text = load_spec(path, dotted)
    else:  # an experiment made from command-line options (sql_shortcut.py): `target` names it
        spec = spec_from_dict(tomllib.loads(text), target, dotted)
        path = Path(target)
    raw = tomllib.loads(text)  # read again once the engine answers: the recipe's adaptations to its version
    exp = prepare(spec, text, str(path), allow_server_changes=allow_server_changes, cache_dir=cache_dir,
                  raw=raw, overrides=dotted)
    exp.options = dict(dotted)
    return exp


def load_saved_experiment(run_path: Path, *, allow_server_changes: bool = False, cache_dir: Path | None = None) -> Experiment:
    """The experiment a results directory was started with, for --resume."""
    run_dir = RunDir(run_path)
    if not run_dir.file(PLAN_FILE).exists():
        raise SpecError(f"--resume {run_path}: not a blocklab results directory (no {PLAN_FILE})")
    saved = run_dir.read_json(SPEC_FILE)
    spec = Spec.model_validate(saved["spec"])
    text = run_dir.file("experiment.toml").read_text()
    recorded = saved.get("experiment_sha256")
    if recorded and recorded != text_digest(text):
        raise SpecError(
            f"--resume {run_path}: experiment.toml was edited after the run started; a resumed run measures the "
            "experiment it started with, so the edits would not be used: put the file back as it was, or start "
            "a new run with the edited file"
        )
    if run_dir.file(WORKLOAD_FILE).exists():  # the user's scripts (workload sql): as they were, and the seed drawn then
        record = run_dir.read_json(WORKLOAD_FILE)
        source = Path(saved["source"])
        changed = changed_files(record, source.parent if source.is_file() else Path.cwd())
        if changed:
            raise SpecError(f"--resume {run_path}: {changed}; a resumed run measures the scripts it started with, so "
                            "put the file back as it was, or start a new run with the edited file")
        if spec.workload.options().get("seed") is None and record.get("seed") is not None:
            workload = WorkloadSpec.model_validate({**spec.workload.model_dump(), "seed": record["seed"]})
            spec = spec.model_copy(update={"workload": workload})
    exp = prepare(spec, text, saved["source"], allow_server_changes=allow_server_changes, cache_dir=cache_dir)
    exp.options = saved.get("options", {})
    return exp


def give_budget(exp: Experiment, run_path: Path, budget: str) -> None:
    """`blocklab run --resume DIR --budget B`: the run goes on with budget B in place of the
    one it started with (B counts what was measured before too: a way to extend it), kept
    in its spec.json for the next resume."""
    if is_off(budget):
        raise SpecError("--budget off with --resume: a resumed run keeps its stopping rule; --budget with --resume gives "
                        "it a new, larger budget, e.g. --budget 10m or --budget 200cells")
    try:
        parse_budget(budget, "--budget")
    except BudgetError as err:
        raise SpecError(f"{err}") from None
    exp.spec = exp.spec.model_copy(update={"measure": exp.spec.measure.model_copy(update={"budget": budget})})
    exp.options = {**exp.options, "measure.budget": budget}
    run_dir = RunDir(run_path)
    saved = run_dir.read_json(SPEC_FILE)
    saved["spec"]["measure"]["budget"] = budget
    saved["options"] = exp.options
    run_dir.write_json(SPEC_FILE, saved)


def plan_text(exp: Experiment) -> list[str]:
    """The dry run: the cells in order, where restarts happen, an estimated time."""
    plan = exp.plan()
    costly = {index: (cls, knobs) for index, cls, knobs in plan.costly_changes()}
    lines = [
        f"experiment {exp.spec.name}: {len(plan.settings)} settings x {exp.spec.measure.repeats} repeats "
        f"= {len(plan.cells)} cells, seed {plan.seed}, cache {exp.spec.measure.cache}",
        f"engine {exp.spec.engine.kind}" + (f" at {exp.spec.engine.dsn}" if exp.spec.engine.dsn else " (embedded)"),
    ]
    for why in exp.spec.adapted:
        lines.append(f"adapted {why}")
    for what in exp.spec.overridden:
        lines.append(f"override {what}")
    for warning in exp.warnings():
        lines.append(f"warning: {warning}")
    for name, value in exp.fixed.items():
        info = exp.knob_infos[name]
        lines.append(f"fixed   {name} = {info.describe_value(value)}  [{info.apply.label}]")
    for name, values in exp.knobs.items():
        info = exp.knob_infos[name]
        where = "workload option" if name.startswith("workload.") else f"{exp.spec.engine.kind} {info.native}"
        shown = ", ".join(value_text(v) if info.kind == "workload" else info.describe_value(v) for v in values)
        lines.append(f"sweep   {name} ({where}) = {shown}  [{info.apply.label}]")
    total = 0.0
    for cell in plan.cells:
        note = ""
        if cell.index in costly:
            cls, knobs = costly[cell.index]
            note = f"   <- {cls.label}: {', '.join(knobs)}"
            total += exp.engine.change_cost(cls, knobs)  # the engine knows what a restart or reinit costs it
        lines.append(f"  {cell.index + 1:4d}  block {cell.block + 1}  {exp.setting_text(cell.setting.label)}{note}")
        total += exp.workload_for(cell.setting.as_dict()).estimate_seconds()  # swept options change it
    lines.append(f"{len(costly)} restart/reinit step(s); estimated time {total:.0f} s (plus building the data set once)")
    lines[-1:-1] = stopping_text(exp, len(plan.settings), total / max(1, exp.spec.measure.repeats))
    # the device twin runs beside the cells: each cell's I/O replayed right after it (device/interleave.py)
    from .device.replay import FIO_OVERHEAD_S

    lines.insert(-1, "then the device twin: fio replays each cell's I/O right after it, for as long as the cell ran, "
                     f"about {FIO_OVERHEAD_S:.2f} s more a cell (--device-twin off skips it)")
    return lines


def stopping_text(exp: Experiment, settings: int, block_s: float) -> list[str]:
    """The plan's lines on when the run stops: the rule and its budget, or the fixed blocks."""
    from .analysis.settle import margin_of

    measure = exp.spec.measure
    budget = measure.parsed_budget()
    if budget is None:
        if measure.target_ci:
            return [f"stops when every ratio to the best is known to +-{measure.target_ci:.0%} (target_ci), after at least "
                    f"{measure.repeats} and at most {measure.max_repeats} blocks"]
        return [f"stops after the {measure.repeats} block(s) above (no budget: give --budget 5m to stop by the rule)"]
    margin = margin_of(measure.practical)
    cap = f"{measure.max_repeats} blocks ({measure.max_repeats * settings} cells)"
    fits = ""
    if budget.seconds is not None and block_s > 0:
        fits = f"; about {budget.seconds / block_s:.0f} block(s) of ~{block_s:.0f} s fit in it"
    first = measure.repeats
    short = ""
    if budget.cells is not None and budget.cells < first * settings:
        short = f"{first * settings} cells; give --budget {first * settings}cells or more"
    elif budget.seconds is not None and block_s > 0 and budget.seconds < first * block_s:
        short = f"about {first * block_s:.0f} s; give --budget {math.ceil(first * block_s * 1.5)}s or more"
    warning = [f"warning: the budget ({budget.text()}) ends inside the first {first} block(s) the rule needs before its "
               f"first look ({short}, or fewer --repeats): the run would stop partial, with no verdict "
               "(blocklab run --resume DIR --budget MORE goes on)"] if short else []
    return [
        *warning,
        f"budget {budget.text()}{fits}",
        f"stopping rule: after block {measure.repeats}, and after every block from then on, the run stops when every "
        f"setting is separated from the best or within {margin:.0%} of it; otherwise it adds a block, until the budget "
        f"or {cap} is spent, and then names the pairs still undecided with the blocks estimated to settle each",
    ]


def restore_server(run_path: Path) -> list[str] | None:
    """Put back what a run still owed a server given by DSN (its restore.json), then
    forget it; what was done, one line a setting. None when the run owes nothing
    (nothing to do is not an error)."""
    from .results import RESTORE_FILE

    run_dir = RunDir(run_path)
    if not run_dir.file(RESTORE_FILE).exists():
        if not run_dir.file(PLAN_FILE).exists():
            raise SpecError(f"{run_path}: not a blocklab results directory (no {PLAN_FILE})")
        return None
    from .owed import put_back_owed

    done = put_back_owed(run_dir.read_json(RESTORE_FILE), str(run_dir.file(RESTORE_FILE)))
    run_dir.remove(RESTORE_FILE)
    return done


def clean_server(kind: str, dsn: str, *, dry_run: bool = False) -> list[str]:
    """Remove what blocklab made on a server given by DSN (its tables and procedures,
    or its own database); what was (or, dry_run, would be) removed."""
    from .engines import make_engine
    from .engines.base import KnobError

    if not dsn:
        raise SpecError("clean works on a server given by --dsn (blocklab's own engines keep their data in its cache directory)")
    try:
        engine = make_engine(kind, dsn=dsn)
    except KnobError as err:
        raise SpecError(f"--engine {kind}: {err}") from None
    engine.start()
    try:
        return engine.created_objects() if dry_run else engine.drop_created()
    finally:
        engine.stop()
def device_twin_only(run_path: Path, say: Callable[[str], None]) -> tuple[RunTwins, dict[str, object], Callable[[str], str]]:
    """`blocklab run --resume DIR --device-twin only`: the device twin of a run already
    measured (no engine started: the rows hold the I/O patterns, environment.json the
    data directory), then its summary and report brought up to date. Returns the
    twins, the summary and how its setting labels read."""
    from .analysis.efficiency import add_to_summary
    from .device.twin import measure_run, why_not
    from .report.data import load_run
    from .report.writer import write_report
    from .results import ENVIRONMENT_FILE, SUMMARY_FILE

    run_dir = RunDir(run_path)
    if not run_dir.file(PLAN_FILE).exists():
        raise SpecError(f"--resume {run_path}: not a blocklab results directory (no {PLAN_FILE})")
    env = run_dir.read_json(ENVIRONMENT_FILE) if run_dir.file(ENVIRONMENT_FILE).exists() else {}
    if reason := why_not(env.get("data_dir")):
        raise SpecError(f"--device-twin only: {reason}")
    twins = measure_run(run_dir, "on", on_phase=say)
    data = load_run(run_dir.path)  # the summary, recomputed from the rows if it is older than they are
    summary = data.summary
    add_to_summary(summary, run_dir, data.describe_label)
    run_dir.write_json(SUMMARY_FILE, summary)
    write_report(run_dir.path)
    return twins, summary, data.describe_label
