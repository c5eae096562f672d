"""A results directory, loaded once for the exporters: the files of the run, the
rows, the summary, and the few derived facts every format needs (how a setting
reads to a person, the unit of a metric, whether the run is complete).

Reading only: nothing here writes. A partial run (interrupted, a torn last
line) and failed cells are normal input, not errors. When summary.json is
missing or older than results.jsonl (a crash between the two writes), the
summary is recomputed from the rows."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engines.base import Capabilities
from ..results import (
    ENVIRONMENT_FILE,
    EXPERIMENT_FILE,
    PLAN_FILE,
    RESULTS_FILE,
    SPEC_FILE,
    SUMMARY_FILE,
    ResultRow,
    ResultsError,
    RunDir,
)
from ..units import HEADLINE_METRICS, describe_size, fmt_bytes, label_of, reported_size, unit_of


@dataclass
class SettingFigures:
    """One metric at one setting: the runs, and their median with its 95% interval."""

    label: str
    settings: dict[str, Any]
    values: list[float]
    median: float
    ci_low: float
    ci_high: float


@dataclass
class RunData:
    """Everything the exporters read, loaded from one results directory."""

    path: Path
    experiment_text: str
    spec: dict[str, Any]
    source: str
    options: dict[str, Any]
    plan: dict[str, Any]
    environment: dict[str, Any]
    rows: list[ResultRow]
    summary: dict[str, Any]
    torn_lines: int = 0
    summary_recomputed: bool = False
    notes: list[str] = field(default_factory=list)
    _figures_cache: dict[str, list[SettingFigures]] = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ the sweep
    @property
    def name(self) -> str:
        return str(self.spec.get("name") or self.summary.get("experiment") or self.path.name)

    @property
    def description(self) -> str:
        return str(self.spec.get("description") or "")

    @property
    def plan_settings(self) -> list[dict[str, Any]]:
        settings = self.plan.get("settings")
        if settings:
            return [dict(s) for s in settings]
        seen: dict[str, dict[str, Any]] = {}
        for row in self.rows:
            seen.setdefault(label_of(row.settings), dict(row.settings))
        return list(seen.values())

    @property
    def labels(self) -> list[str]:
        return [label_of(s) for s in self.plan_settings]

    @property
    def settings_by_label(self) -> dict[str, dict[str, Any]]:
        return {label_of(s): s for s in self.plan_settings}

    @property
    def knobs(self) -> list[str]:
        knobs = list((self.spec.get("knobs") or {}).keys())
        if knobs:
            return knobs
        names: list[str] = []
        for s in self.plan_settings:
            names.extend(k for k in s if k not in names)
        return names

    @property
    def metric(self) -> str:
        measure = self.spec.get("measure") or {}
        return str(self.summary.get("metric") or measure.get("metric") or _default_metric(self.spec, self.rows))

    @property
    def goal(self) -> str:
        measure = self.spec.get("measure") or {}
        return str(self.summary.get("goal") or measure.get("goal") or "max")

    @property
    def unit(self) -> str:
        return unit_of(self.metric)

    @property
    def cells_planned(self) -> int:
        return len(self.plan.get("cells") or []) or int(self.summary.get("cells_planned") or len(self.rows))

    @property
    def ok_rows(self) -> list[ResultRow]:
        return [r for r in self.rows if r.ok]

    @property
    def failed_rows(self) -> list[ResultRow]:
        return [r for r in self.rows if r.failed]

    @property
    def invalid_rows(self) -> list[ResultRow]:
        return [r for r in self.rows if r.invalid]

    @property
    def flagged_rows(self) -> list[ResultRow]:
        return [r for r in self.rows if r.ok and r.notes.get("flags")]

    @property
    def complete(self) -> bool:
        return len({r.cell_id for r in self.rows}) >= self.cells_planned

    @property
    def seed(self) -> Any:
        return self.plan.get("seed", self.summary.get("seed"))

    # ------------------------------------------------------------------ the environment
    @property
    def engine(self) -> str:
        """The engine's name as people write it: environment.json's engine_display
        (an imported run says whose results they are), else the engine class's."""
        from ..engines import engine_class
        from ..engines.base import KnobError

        if self.environment.get("engine_display"):
            return str(self.environment["engine_display"])
        kind = str(self.environment.get("engine") or (self.spec.get("engine") or {}).get("kind") or "engine")
        try:
            return str(engine_class(kind).display)
        except KnobError:
            return kind

    @property
    def capabilities(self) -> Capabilities:
        """What the run's engine declares it measures and how to caption it (an
        empty record for a run imported from elsewhere)."""
        from ..engines import capabilities_of

        return capabilities_of(str(self.environment.get("engine") or (self.spec.get("engine") or {}).get("kind") or ""))

    @property
    def engine_version(self) -> str:
        return str(self.environment.get("engine_version") or "")

    @property
    def engine_line(self) -> str:
        """'PostgreSQL 18.6 (embedded)'."""
        version = str(self.engine_version or "")
        # some engines' version strings name the engine already ('SQLite 3.54.1, apsw ...')
        text = version if version.lower().startswith(self.engine.lower()) else f"{self.engine} {version}".strip()
        mode = self.environment.get("engine_mode")
        return f"{text} ({mode})" if mode else text

    @property
    def block_size(self) -> int | None:
        extra = self.environment.get("engine_extra") or {}
        try:
            return int(extra["block_size"]) if extra.get("block_size") else None
        except (TypeError, ValueError):
            return None

    @property
    def dataset_rows(self) -> int | None:
        rows = (self.spec.get("dataset") or {}).get("rows") or self.environment.get("dataset_rows")
        return int(rows) if rows else None

    @property
    def relation_bytes(self) -> float | None:
        sizes = [r.metrics["relation_bytes"] for r in self.ok_rows if "relation_bytes" in r.metrics]
        return statistics.median(sizes) if sizes else None

    @property
    def direct_io(self) -> bool | None:
        flags = [r.metrics["direct_io"] for r in self.ok_rows if "direct_io" in r.metrics]
        return bool(statistics.median(flags)) if flags else None

    @property
    def device_line(self) -> str:
        """'vda (ext4, virtual disk (virtio))'; a local disk 'sda (ext4, rotational (sysfs))'."""
        from ..probes.os_stats import describe_medium

        env = self.environment
        device = env.get("device")
        if not device:
            return ""
        info = env.get("device_info") or {}
        bits = [b for b in (env.get("file_system") or info.get("fs_type"), info.get("model")) if b]
        if medium := describe_medium(str(info.get("virtual") or ""), info.get("rotational")):
            bits.append(medium)
        return f"{device} ({', '.join(bits)})" if bits else str(device)

    def context_line(self) -> str:
        """One line saying what and where: engine, data set, cache, device, host."""
        parts = [self.engine_line]
        if self.dataset_rows:
            table = f"{self.dataset_rows:,} rows"
            if self.relation_bytes:
                table += f" ({fmt_bytes(self.relation_bytes)})"
            parts.append(table)
        cache = (self.spec.get("measure") or {}).get("cache")
        if cache:
            parts.append(f"{cache} cache" + (", direct I/O" if self.direct_io else ""))
        if self.environment.get("device"):
            fs = self.environment.get("file_system")
            parts.append(f"device {self.environment['device']}" + (f" ({fs})" if fs else ""))
        if self.environment.get("host"):
            parts.append(f"host {self.environment['host']}")
        return " · ".join(parts)

    # ------------------------------------------------------------------ how things read
    def describe_value(self, knob: str, value: object) -> str:
        """As people write it: a page size of 16384 -> '16 kB', 16 blocks -> '16 (128 kB)'
        (from the plan's sizes, else from the size the engine read back)."""
        if isinstance(value, bool):
            return "on" if value else "off"
        said = (self.plan.get("value_text") or {}).get(knob, {}).get(str(value))
        if said is not None:  # how the engine reads it, kept by the run ('64 (read-ahead off)')
            return str(said)
        planned = (self.plan.get("value_bytes") or {}).get(knob, {}).get(str(value))
        if planned is not None:
            return describe_size(value, int(planned))
        size = self._applied_size(knob, value)
        if size is not None and isinstance(value, (int, float)):
            return describe_size(value, size)
        return str(value)

    def value_parts(self, knob: str, value: object) -> tuple[str, str]:
        """('16', '128 kB') for a two-line tick label; ('on', '') otherwise. An engine's
        reading of the value ('read-ahead after 56 of 64 pages') is too long for a tick:
        the legend and the table say it."""
        if str(value) in ((self.plan.get("value_text") or {}).get(knob) or {}):
            planned = (self.plan.get("value_bytes") or {}).get(knob, {}).get(str(value))
            return str(value), (fmt_bytes(int(planned)) if planned is not None else "")
        text = self.describe_value(knob, value)
        if text.endswith(")") and " (" in text:
            head, tail = text[:-1].split(" (", 1)
            return head, tail
        return text, ""

    def native_name(self, knob: str) -> str | None:
        """The engine's own name of a knob ('multiblock_read' -> 'io_combine_limit'),
        or None when no engine of this blocklab knows the run's (an imported run)."""
        from ..engines import engine_class
        from ..engines.base import KnobError

        kind = str(self.environment.get("engine") or (self.spec.get("engine") or {}).get("kind") or "")
        try:
            cls = engine_class(kind)
        except KnobError:
            return None
        native = str(cls.native_name(knob))
        return native if native != knob else None

    def describe_label(self, label: str) -> str:
        """'multiblock_read=16' -> '16 (128 kB)' with one knob;
        'block_size=16384, checksum=on' -> 'block_size=16 kB, checksum=on' with several."""
        settings = self.settings_by_label.get(label)
        if not settings:
            return label
        if len(settings) == 1:
            knob, value = next(iter(settings.items()))
            return self.describe_value(knob, value)
        return ", ".join(f"{k}={self.describe_value(k, v)}" for k, v in settings.items())

    def _applied_size(self, knob: str, value: object) -> int | None:
        for row in self.rows:
            if row.settings.get(knob) == value and knob in row.applied:
                size = reported_size(row.applied[knob])
                if size is not None:
                    return size
        if knob == "multiblock_read" and self.block_size and isinstance(value, int) and not isinstance(value, bool):
            return value * self.block_size
        return None

    # ------------------------------------------------------------------ numbers
    def samples(self, metric: str) -> dict[str, list[float]]:
        """Values of `metric` per setting label (ok rows), in plan order."""
        groups: dict[str, list[float]] = {label: [] for label in self.labels}
        for row in self.ok_rows:
            if metric in row.metrics and math.isfinite(row.metrics[metric]):
                groups.setdefault(label_of(row.settings), []).append(row.metrics[metric])
        return groups

    def figures(self, metric: str) -> list[SettingFigures]:
        """Median and 95% bootstrap interval of `metric` per measured setting, plan order.
        The experiment's own metric takes its figures from the summary."""
        if metric not in self._figures_cache:
            self._figures_cache[metric] = self._compute_figures(metric)
        return list(self._figures_cache[metric])

    def _compute_figures(self, metric: str) -> list[SettingFigures]:
        from ..analysis.stats import median_ci

        out: list[SettingFigures] = []
        summary_settings = self.summary.get("settings") or {}
        seed = int(self.seed or 0)
        for label, values in self.samples(metric).items():
            if not values:
                continue
            entry = summary_settings.get(label) or {}
            if metric == self.metric and entry.get("median") is not None and entry.get("n") == len(values):
                # the figure the best is picked on (the block-adjusted level), so the star sits on the top point
                has_level = _num(entry.get("level"), math.nan) == _num(entry.get("level"), math.nan)
                med = float(entry["level"] if has_level else entry["median"])
                lo = _num(entry.get("level_ci_low" if has_level else "ci_low"), med)
                hi = _num(entry.get("level_ci_high" if has_level else "ci_high"), med)
            else:
                med, lo, hi = median_ci(values, seed=seed)
            out.append(SettingFigures(label, self.settings_by_label.get(label, {}), values, med, lo, hi))
        return out

    def figure_word(self, metric: str) -> str:
        """What a plot's line of `metric` joins: 'block-adjusted level' for the run's own
        metric of a paired analysis (the figure the best is picked on), else 'median'."""
        paired = (self.summary.get("analysis") or {}).get("method") == "paired"
        return "block-adjusted level" if metric == self.metric and paired else "median"

    def metrics_present(self) -> list[str]:
        names: list[str] = []
        for row in self.ok_rows:
            names.extend(k for k in row.metrics if k not in names)
        return names

    def headline_metrics(self) -> list[str]:
        present = set(self.metrics_present())
        return [m for m in HEADLINE_METRICS if m in present and m != self.metric]


def _num(value: Any, default: float) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return default
    return v if math.isfinite(v) else default


def _default_metric(spec: dict[str, Any], rows: list[ResultRow]) -> str:
    kind = (spec.get("workload") or {}).get("kind")
    if kind:
        try:
            from ..workloads import workload_class

            return str(workload_class(kind).default_metric)
        except Exception:  # an unknown workload still has a report
            pass
    for row in rows:
        if row.metrics:
            return next(iter(row.metrics))
    return "value"


# ---------------------------------------------------------------------- loading
def load_run(path: Path | str) -> RunData:
    """Read a results directory. ResultsError if it is not one (no plan.json)."""
    rd = RunDir(path)
    if not rd.path.is_dir():
        raise ResultsError(f"{rd.path}: no such directory")
    if not rd.exists():
        raise ResultsError(f"{rd.path}: not a blocklab results directory (no {PLAN_FILE})")
    plan = rd.read_json(PLAN_FILE)
    notes: list[str] = []
    saved_spec = _optional_json(rd, SPEC_FILE, notes)
    environment = _optional_json(rd, ENVIRONMENT_FILE, notes)
    summary = _optional_json(rd, SUMMARY_FILE, notes)
    try:
        experiment_text = rd.file(EXPERIMENT_FILE).read_text()
    except OSError:
        experiment_text = ""
    rows = rd.rows()
    data = RunData(
        path=rd.path,
        experiment_text=experiment_text,
        spec=dict(saved_spec.get("spec") or {}),
        source=str(saved_spec.get("source") or ""),
        options=dict(saved_spec.get("options") or {}),
        plan=plan,
        environment=environment,
        rows=rows,
        summary=summary,
        torn_lines=rd.torn_lines,
        notes=notes,
    )
    if rd.torn_lines:
        data.notes.append(
            f"{rd.torn_lines} incomplete line(s) at the end of {RESULTS_FILE} ignored (a cell cut short by a crash)"
        )
    if _summary_stale(summary, rows):
        _refresh_stale_summary(data)
    _older_statistics_note(data)
    _import_notes(rd, data)
    return data


IMPORT_NOTES_FILE = "import-notes.json"  # written by importers/rundir.py


def _import_notes(rd: RunDir, data: RunData) -> None:
    """An imported run's fields left out ("not read") and consistency marks, as notes of the report."""
    doc = _optional_json(rd, IMPORT_NOTES_FILE, data.notes)
    files = sorted((doc.get("files") or {}).items())
    for kind, key in (("not read (left out, the rest imported)", "not_read"), ("marked", "marks")):
        texts = [str(t) for _, entry in files for t in entry.get(key) or []]
        if len(texts) <= 3:
            data.notes += [f"{kind}: {t}" for t in texts]
        else:  # one line for many: the list is in the file
            data.notes.append(f"{kind}: {len(texts)} notes in {IMPORT_NOTES_FILE}, the first: {texts[0]}")
    for text in doc.get("runs") or []:
        data.notes.append(str(text))


def _optional_json(rd: RunDir, name: str, notes: list[str]) -> dict[str, Any]:
    """A file the report can do without: missing or unreadable means empty, with a note."""
    if not rd.file(name).exists():
        return {}
    try:
        data = rd.read_json(name)
    except ResultsError as err:
        notes.append(f"{err}; left out of this report")
        return {}
    return data if isinstance(data, dict) else {}


def _summary_stale(summary: dict[str, Any], rows: list[ResultRow]) -> bool:
    """The summary counts other rows than results.jsonl holds. Ok, failed and invalid
    rows are counted apart (validity_counts); a summary without cells_invalid counted
    the invalid ones among the failed."""
    if not summary:
        return True
    counted = sum(int(summary.get(key) or 0) for key in ("cells_ok", "cells_failed", "cells_invalid"))
    return counted != len(rows)


def _refresh_stale_summary(data: RunData) -> None:
    old = data.summary
    try:
        summary = recompute_summary(data)
    except Exception as err:  # the report still shows the rows
        data.notes.append(f"the summary could not be recomputed from {RESULTS_FILE}: {type(err).__name__}: {err}")
        return
    data.summary = summary
    data.summary_recomputed = True
    if old:
        data.notes.append(f"{SUMMARY_FILE} was older than {RESULTS_FILE}; the summary here is recomputed from the rows")


def recompute_summary(data: RunData) -> dict[str, Any]:
    """The summary of a loaded run, as the runner would write it today."""
    from ..analysis.load import load_axes_of
    from ..analysis.summary import summarise, validity_counts  # scipy: loaded when a summary is computed, not for every report
    from ..search import sequential_looks

    old = data.summary
    measure = data.spec.get("measure") or {}
    baseline = old.get("baseline") if old.get("baseline") in data.labels else None
    summary = summarise(
        data.rows,
        metric=data.metric,
        goal=data.goal,
        setting_labels=data.labels,
        settings_by_label=data.settings_by_label,
        baseline=baseline,
        practical=float(measure.get("practical") or 0.0),
        seed=int(data.seed or 0),
        describe_setting=data.describe_label,
        knob_label=", ".join(data.knobs) or "setting",
        unit=data.unit,
        looks=sequential_looks(measure),
        cells_planned=data.cells_planned,
        load_axes=load_axes_of(str((data.spec.get("workload") or {}).get("kind") or ""), data.knobs),
    )
    summary.update(validity_counts(data.rows))  # as the runner counts them: failed, invalid and flagged apart
    for key in ("experiment", "cells_planned", "seed", "settle"):
        if key in old:
            summary[key] = old[key]
    _add_why(summary, data, old)
    if old.get("words_from") == "import":  # an importer's own headline and verdict (device limits, system statistics,
        for key in ("headline", "verdict", "limits", "words_from"):  # SLOB series): the rows do not change on import
            if key in old:
                summary[key] = old[key]
        if old.get("unranked"):  # values that are each a limit or a statistic by itself: no 'best' among them
            from ..importers.rundir import unranked

            unranked(summary)
    summary.setdefault("experiment", data.name)
    summary.setdefault("cells_planned", data.cells_planned)
    summary.setdefault("seed", data.seed)
    from ..analysis.efficiency import add_to_summary

    add_to_summary(summary, data.path, data.describe_label)  # the disk's line and the bottleneck's reasoning, as the runner adds them
    return summary


def _add_why(summary: dict[str, object], data: RunData, old: Mapping[str, object]) -> None:
    """A profiled or traced run's sections (measure.cpu_profile, measure.trace_function),
    computed from the rows as the runner adds them; an old section is kept when they
    cannot be (a workload blocklab no longer has)."""
    from ..analysis.cpu_profile import add_to_summary as add_cpu_profile
    from ..analysis.function_trace import add_to_summary as add_trace
    from ..spec import SpecError
    from ..workloads import workload_class

    measure = data.spec.get("measure") or {}
    if not (measure.get("cpu_profile") or measure.get("trace_function")):
        return
    try:
        work = workload_class(str((data.spec.get("workload") or {}).get("kind") or ""), data.source).work
    except (SpecError, AttributeError):
        work = None
    if measure.get("cpu_profile") and work is not None:
        add_cpu_profile(summary, data.rows, data.path, data.knobs, work, dict(measure.get("cpu_profile_where") or {}))
    if measure.get("trace_function") and work is not None:
        add_trace(summary, data.rows, label_of, str(measure["trace_function"]), measure.get("trace_arg"), work)
    for key in ("cpu_profile", "profile_verdict", "trace"):
        if key not in summary and key in old:
            summary[key] = old[key]


def _older_statistics_note(data: RunData) -> None:
    """A summary written by an older blocklab keeps its older verdict until
    `blocklab analyse` recomputes it; the reader should know which one they see."""
    from ..analysis.summary import STATISTICS_VERSION

    summary = data.summary
    if not summary or data.summary_recomputed or not summary.get("settings"):
        return
    version = summary.get("statistics_version", 1)
    if isinstance(version, int) and version < STATISTICS_VERSION:
        data.notes.append(
            f"{SUMMARY_FILE} was computed by an older blocklab (each setting on its own, drift between blocks not "
            f"cancelled); `blocklab analyse {data.path}` recomputes it with within-block ratios"
        )
