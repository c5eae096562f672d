"""Two runs side by side: for every setting both measured, B against A.

    result = compare_runs("results/mbrc-monday", "results/mbrc-tuesday")
    for s in result.settings:
        s.label, s.ratio, s.ci_low, s.ci_high, s.p_value, s.verdict

The ratio is median(B) / median(A) of one metric with its bootstrap 95%
interval and a two-sided Mann-Whitney p-value (stats.compare_samples). Runs
measured on a different host, engine version, device or data size are refused
(environment.CHECKED_FIELDS, pyperf's checked metadata) unless `force`, and the
fields that differ are always part of the result.

No printing here: the `compare` command prints what this returns.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..environment import CHECKED_FIELDS
from ..results import ENVIRONMENT_FILE, PLAN_FILE, RESULTS_FILE, SPEC_FILE, SUMMARY_FILE, ResultRow, ResultsError, RunDir
from ..units import label_of, unit_of
from .stats import Comparison, compare_samples

# fields shown when they differ, but never a reason to refuse
INFORMATIVE_FIELDS = ("kernel", "cpu", "cpu_count", "memory_bytes", "file_system", "engine_mode", "blocklab")

_LOWER_IS_BETTER_SUFFIXES = ("_s", "_ms", "_us", "_ns")


class CompareError(ValueError):
    """Input `compare` cannot work with. `argument` names the culprit (RUN_A, RUN_B, --metric)."""

    def __init__(self, argument: str, message: str):
        super().__init__(f"{argument}: {message}" if argument else message)
        self.argument = argument


@dataclass(frozen=True)
class EnvDifference:
    """One environment.json field whose value differs between the runs."""

    field: str
    a: object
    b: object

    def text(self) -> str:
        return f"{self.field}: A {_show(self.a)} vs B {_show(self.b)}"

    def to_dict(self) -> dict[str, object]:
        return {"field": self.field, "a": self.a, "b": self.b}


class EnvironmentMismatch(CompareError):
    """The runs were measured under different conditions and `force` was not given."""

    def __init__(self, differences: list[EnvDifference]):
        self.differences = differences
        listed = "; ".join(d.text() for d in differences)
        super().__init__(
            "RUN_A/RUN_B",
            f"the runs were measured under different conditions ({listed}); "
            "their numbers are not comparable as they stand. Use --force to compare them anyway",
        )


@dataclass(frozen=True)
class SettingComparison:
    """B against A for one setting both runs measured."""

    label: str  # "multiblock_read=16"
    settings: dict[str, object]
    values_a: tuple[float, ...]
    values_b: tuple[float, ...]
    applied_a: dict[str, str]  # what the engine reported for the knobs (first ok row)
    applied_b: dict[str, str]
    comparison: Comparison

    @property
    def ratio(self) -> float:
        return self.comparison.ratio

    @property
    def ci_low(self) -> float:
        return self.comparison.ci_low

    @property
    def ci_high(self) -> float:
        return self.comparison.ci_high

    @property
    def p_value(self) -> float:
        return self.comparison.p_value

    @property
    def verdict(self) -> str:
        return self.comparison.verdict

    @property
    def outcome(self) -> str:
        """'better', 'worse', 'same' (no significant difference) or 'unclear', for B against A."""
        c = self.comparison
        if not math.isfinite(c.ratio):
            return "unclear"
        if c.significant:
            b_higher = c.ratio > 1.0
            return "better" if b_higher == (c.goal == "max") else "worse"
        excludes_one = math.isfinite(c.ci_low) and (c.ci_low > 1.0 or c.ci_high < 1.0)
        if excludes_one or c.p_value < 0.05:
            return "unclear"
        return "same"

    @property
    def applied_differs(self) -> bool:
        """The engine reported different values for the same asked setting (e.g. a capped knob)."""
        common = set(self.applied_a) & set(self.applied_b)
        return any(self.applied_a[k] != self.applied_b[k] for k in common)

    def display(self) -> str:
        """The label with the engine's own reading of each knob when it says more: 'multiblock_read=16 (128kB)'."""
        parts = []
        for knob, value in self.settings.items():
            text = f"{knob}={value}"
            shown = self.applied_a.get(knob)
            if shown is not None and not isinstance(value, bool) and shown.lower() != str(value).lower():
                text += f" ({shown})"
            parts.append(text)
        return ", ".join(parts) or "(defaults)"

    def to_dict(self) -> dict[str, object]:
        return {
            "label": self.label,
            "settings": self.settings,
            "values_a": list(self.values_a),
            "values_b": list(self.values_b),
            "applied_a": self.applied_a,
            "applied_b": self.applied_b,
            "outcome": self.outcome,
            **self.comparison.to_dict(),
        }


@dataclass(frozen=True)
class RunInfo:
    """What the header says about one run."""

    path: Path
    name: str
    started: str
    environment: dict[str, Any]

    def describe(self) -> str:
        env = self.environment
        bits = [self.name]
        if self.started:
            bits.append(self.started)
        if env.get("host"):
            bits.append(f"host {env['host']}")
        if env.get("engine"):
            bits.append(f"{env['engine']} {env.get('engine_version', '')}".strip())
        if env.get("device"):
            bits.append(f"device {env['device']}")
        if env.get("dataset_rows") is not None:
            bits.append(f"{_show(env['dataset_rows'])} rows")
        return ", ".join(bits)


@dataclass(frozen=True)
class RunComparison:
    run_a: RunInfo
    run_b: RunInfo
    metric: str
    goal: str
    unit: str
    settings: tuple[SettingComparison, ...]
    only_in_a: tuple[str, ...] = ()
    only_in_b: tuple[str, ...] = ()
    differences: tuple[EnvDifference, ...] = ()  # checked fields that differ (only with force)
    other_differences: tuple[EnvDifference, ...] = ()  # informative fields and fixed settings
    forced: bool = False
    metrics_available: tuple[str, ...] = ()

    def counts(self) -> dict[str, int]:
        out = {"better": 0, "worse": 0, "same": 0, "unclear": 0}
        for s in self.settings:
            out[s.outcome] += 1
        return out

    def summary_line(self) -> str:
        c = self.counts()
        n = len(self.settings)
        direction = "higher" if self.goal == "max" else "lower"
        parts = []
        if c["better"]:
            parts.append(f"B is better in {c['better']}")
        if c["worse"]:
            parts.append(f"B is worse in {c['worse']}")
        if c["same"]:
            parts.append(f"no significant difference in {c['same']}")
        if c["unclear"]:
            parts.append(f"unclear in {c['unclear']}")
        return (
            f"{self.metric} ({direction} is better), B against A over {n} common setting{'s' if n != 1 else ''}: "
            + ", ".join(parts)
            + "."
        )

    def resolution_note(self) -> str:
        """Said when the runs are too few for the test to call any difference at 5%."""
        from .stats import min_p_value, runs_for_p

        floors = [(min_p_value(s.comparison.n_a, s.comparison.n_b), s.comparison.n_a, s.comparison.n_b) for s in self.settings]
        if not floors or min(f for f, _, _ in floors) < 0.05:
            return ""
        floor, n_a, n_b = min(floors)
        return (f"With {n_a} and {n_b} runs per setting no p-value can fall below {floor:.2g} (the U test's most extreme "
                f"ordering of {n_a + n_b} values): 'no significant difference' here means too few runs, not no difference; "
                f"runs of {runs_for_p()} repeats or more can show one.")

    def to_dict(self) -> dict[str, object]:
        return {
            "run_a": str(self.run_a.path),
            "run_b": str(self.run_b.path),
            "metric": self.metric,
            "goal": self.goal,
            "unit": self.unit,
            "forced": self.forced,
            "differences": [d.to_dict() for d in self.differences],
            "other_differences": [d.to_dict() for d in self.other_differences],
            "settings": [s.to_dict() for s in self.settings],
            "only_in_a": list(self.only_in_a),
            "only_in_b": list(self.only_in_b),
            "summary": self.summary_line(),
            "resolution": self.resolution_note() or None,
        }


# ---------------------------------------------------------------------- loading
@dataclass
class ComparedRun:
    info: RunInfo
    rows: list[ResultRow]
    order: list[str]  # setting keys in the plan's order
    default_metric: str | None
    default_goal: str | None
    fixed: dict[str, object]


def read_run(path: Path | str, argument: str) -> ComparedRun:
    path = Path(path)
    accepted = f"a results directory written by `blocklab run` (it holds {PLAN_FILE}, {RESULTS_FILE} and {ENVIRONMENT_FILE})"
    if not path.is_dir():
        raise CompareError(argument, f"{path} is not a directory; give {accepted}")
    run_dir = RunDir(path)
    if not run_dir.file(PLAN_FILE).exists():
        if run_dir.file("sysstats.json").exists():
            raise CompareError(argument, f"{path} holds system statistics (sysstats.json), not an experiment run; give {accepted}")
        raise CompareError(argument, f"{path} is not a blocklab results directory (no {PLAN_FILE}); give {accepted}")
    try:
        env = run_dir.read_json(ENVIRONMENT_FILE)
        plan = run_dir.read_json(PLAN_FILE)
        rows = [r for r in run_dir.rows() if r.ok]
    except (ResultsError, KeyError, TypeError, ValueError, AttributeError) as err:
        raise CompareError(argument, f"{path}: cannot be read: {err}") from None
    if not isinstance(env, dict):
        raise CompareError(argument, f"{path / ENVIRONMENT_FILE}: not an object")
    if not rows:
        raise CompareError(argument, f"{path} has no successful measurement yet (no ok row in {RESULTS_FILE})")
    order = [_key(s) for s in plan.get("settings", []) if isinstance(s, dict)]
    for r in rows:
        if _key(r.settings) not in order:
            order.append(_key(r.settings))
    default_metric = default_goal = None
    name = path.name
    fixed: dict[str, object] = {}
    if run_dir.file(SUMMARY_FILE).exists():
        try:
            summary = run_dir.read_json(SUMMARY_FILE)
            default_metric, default_goal = summary.get("metric"), summary.get("goal")
            name = summary.get("experiment") or name
        except ResultsError:
            pass
    if run_dir.file(SPEC_FILE).exists():
        try:
            spec = run_dir.read_json(SPEC_FILE).get("spec", {})
            measure = spec.get("measure", {})
            default_metric = default_metric or measure.get("metric")
            default_goal = default_goal or measure.get("goal")
            name = spec.get("name") or name
            fixed = dict(spec.get("engine", {}).get("settings", {}))
        except (ResultsError, AttributeError):
            pass
    started = min((r.started for r in rows if r.started), default="")
    return ComparedRun(RunInfo(path, name, started, env), rows, order, default_metric, default_goal, fixed)


def _key(settings: Mapping[str, object]) -> str:
    return json.dumps(settings, sort_keys=True, default=str)


def _show(value: object) -> str:
    if value is None:
        return "(missing)"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


# ---------------------------------------------------------------------- comparing
def environment_differences(
    env_a: dict[str, object], env_b: dict[str, object], fields: tuple[str, ...] = CHECKED_FIELDS
) -> list[EnvDifference]:
    """The listed fields whose values differ (a field missing on one side differs)."""
    return [EnvDifference(f, env_a.get(f), env_b.get(f)) for f in fields if env_a.get(f) != env_b.get(f)]


def goal_of(metric: str) -> str:
    """'min' for times (elapsed_s, read_time_ms), 'max' for everything else (throughputs)."""
    if "_per_" in metric:
        return "max"
    return "min" if metric.endswith(_LOWER_IS_BETTER_SUFFIXES) or "latency" in metric else "max"


def metrics_in(rows: list[ResultRow]) -> set[str]:
    return {m for r in rows for m in r.metrics}


def compare_runs(
    run_a: Path | str,
    run_b: Path | str,
    *,
    metric: str | None = None,
    force: bool = False,
    seed: int = 0,
) -> RunComparison:
    """B against A for each setting both measured. Raises CompareError on bad
    input and EnvironmentMismatch (a CompareError) on unlike runs without `force`."""
    return compare_loaded(read_run(run_a, "RUN_A"), read_run(run_b, "RUN_B"), metric=metric, force=force, seed=seed)


def compare_loaded(
    a: ComparedRun, b: ComparedRun, *, metric: str | None = None, force: bool = False, seed: int = 0, checked: tuple[str, ...] = CHECKED_FIELDS
) -> RunComparison:
    """compare_runs on loaded runs. `checked`: the environment fields that must match
    (analysis/fleet.py compares two hosts of one run, whose host and device differ by design)."""
    differences = environment_differences(a.info.environment, b.info.environment, checked)
    if differences and not force:
        raise EnvironmentMismatch(differences)
    other = environment_differences(a.info.environment, b.info.environment, INFORMATIVE_FIELDS)
    if a.fixed != b.fixed:
        other.append(EnvDifference("fixed settings", a.fixed, b.fixed))

    common_metrics = metrics_in(a.rows) & metrics_in(b.rows)
    if metric is None:
        metric = a.default_metric if a.default_metric in common_metrics else (
            b.default_metric if b.default_metric in common_metrics else None
        )
        if metric is None:
            raise CompareError(
                "--metric",
                f"the runs have no default metric in common; choose one of: {', '.join(sorted(common_metrics)) or '(none)'}",
            )
    elif metric not in common_metrics:
        raise CompareError(
            "--metric",
            f"{metric!r} is not measured in both runs; metrics present in both: {', '.join(sorted(common_metrics)) or '(none)'}",
        )
    if metric == a.default_metric and a.default_goal in ("max", "min"):
        goal = a.default_goal
    else:
        goal = goal_of(metric)

    samples_a = _samples(a.rows, metric)
    samples_b = _samples(b.rows, metric)
    common = [k for k in a.order if k in samples_a and k in samples_b]
    if not common:
        raise CompareError(
            "RUN_A/RUN_B",
            f"no setting measured in both runs (A: {_labels(samples_a, a.order)}; B: {_labels(samples_b, b.order)}); "
            "compare needs runs that measured at least one identical setting",
        )

    results = []
    for index, k in enumerate(common):
        settings = json.loads(k)
        values_a, applied_a = samples_a[k]
        values_b, applied_b = samples_b[k]
        comparison = compare_samples(values_a, values_b, goal=goal, seed=seed + index, name_a="A", name_b="B")
        results.append(
            SettingComparison(
                label=label_of(settings),
                settings=settings,
                values_a=tuple(values_a),
                values_b=tuple(values_b),
                applied_a=applied_a,
                applied_b=applied_b,
                comparison=comparison,
            )
        )
    only_a = tuple(label_of(json.loads(k)) for k in a.order if k in samples_a and k not in samples_b)
    only_b = tuple(label_of(json.loads(k)) for k in b.order if k in samples_b and k not in samples_a)
    return RunComparison(
        run_a=a.info,
        run_b=b.info,
        metric=metric,
        goal=goal,
        unit=unit_of(metric),
        settings=tuple(results),
        only_in_a=only_a,
        only_in_b=only_b,
        differences=tuple(differences),
        other_differences=tuple(other),
        forced=force,
        metrics_available=tuple(sorted(common_metrics)),
    )


def _samples(rows: list[ResultRow], metric: str) -> dict[str, tuple[list[float], dict[str, str]]]:
    out: dict[str, tuple[list[float], dict[str, str]]] = {}
    for r in rows:
        value = r.metrics.get(metric)
        if value is None or not math.isfinite(value):
            continue
        key = _key(r.settings)
        if key not in out:
            knobs = {k: str(v) for k, v in r.applied.items() if k in r.settings}
            out[key] = ([], knobs)
        out[key][0].append(value)
    return out


def _labels(samples: Mapping[str, object], order: list[str]) -> str:
    labels = [label_of(json.loads(k)) for k in order if k in samples]
    return "; ".join(labels) if labels else "(nothing)"
