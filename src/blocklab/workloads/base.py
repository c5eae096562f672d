"""The protocol every workload implements, the options model it validates, and
how a workload states what it needs from an engine (its Dialect).

A workload never asks which engine it runs on. It names, as a Protocol class
of its own (`Dialect`), the few things that differ between engines: how its
tables are built, the statement it times, how dirty pages are flushed, which
profiler watches its sessions. Each engine package implements the dialects it
supports and lists them in its class's `dialects` table; a workload asks for
its own with `engine.dialect(self.name)`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

from ..engines.base import Capabilities, DialectBase, Engine, missing_methods, protocol_methods
from ..jsonvalue import as_list, as_object

if TYPE_CHECKING:
    from ..spec import DatasetSpec

# Figures the probes add to any workload's run where the engine or host reports them
# (its I/O counters, CPU, the device's): measure.metric may name these too, and any
# of the I/O pattern's `pattern.*` figures
COMMON_METRICS = (
    "reads", "read_bytes", "writes", "write_bytes", "fsyncs", "hits", "evictions", "read_time_ms", "write_time_ms",
    "server_cpu_s", "cpu_busy_pct", "device_reads", "device_read_bytes", "device_writes", "device_write_bytes",
    "proc_read_bytes",
)


def metric_accepted(workload: Workload, metric: str) -> bool:
    """Whether `metric` is a figure a run of this workload can report."""
    return metric in workload.metrics or metric in COMMON_METRICS or metric.startswith("pattern.")


class Options(BaseModel):
    """Base of each workload's options (the extra fields of [workload])."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Workload(Protocol):
    name: ClassVar[str]
    default_metric: ClassVar[str]  # what the verdict is about unless measure.metric says otherwise
    # the result row's metric that counts the run's work and its unit in words, ("rows",
    # "row inserted"): CPU profiles are divided by it (analysis/cpu_profile.py)
    work: ClassVar[tuple[str, str]]
    default_goal: ClassVar[str]  # "max" (throughput) or "min" (elapsed)
    metrics: ClassVar[tuple[str, ...]]  # the figures every run reports: what measure.metric may name
    rows_option: ClassVar[str | None]  # the option --rows sets when the workload builds no data set (else dataset.rows)
    Dialect: ClassVar[type]  # the Protocol an engine implements to run this workload
    needs: ClassVar[str]  # what the dialect provides, in words (for the refusal message)
    dialect_class: type[DialectBase]  # the chosen engine's dialect class (set by make_workload; estimates use it)
    capabilities: Capabilities  # the chosen engine's (set by make_workload; describe() captions with it)

    def prepare(self, engine: Engine) -> None:
        """Build the data set if it is missing or stale; cheap when it is there."""

    def relations(self) -> list[str]:
        """Tables/indexes a cold-cache cell evicts before it runs."""

    def run(self, engine: Engine) -> dict[str, float]:
        """One timed execution; a flat dict of numbers."""

    def describe(self, metrics: dict[str, float]) -> str:
        """One console line about one cell's metrics."""

    def estimate_seconds(self) -> float:
        """A rough duration of one run, for `blocklab plan`."""

    def disk_bytes(self) -> float:
        """A generous estimate of the data set's bytes on disk on the chosen engine
        (its dialect's bytes_per_row), checked against the free space before anything runs."""



_Options = Options  # the base class, under a name WorkloadClass's own `Options` attribute does not shadow


class WorkloadClass(Protocol):
    """A workload's class as the registry hands it out (its module's WORKLOAD): what it
    declares before it is made, and how it is made from its validated options."""

    name: str
    needs: str
    default_metric: str
    rows_option: str | None
    work: tuple[str, str]
    Dialect: type
    Options: type[_Options]

    def __call__(self, options: _Options, dataset: DatasetSpec) -> Workload: ...


def timed_series(workload: object) -> tuple[dict[str, list[float]], str] | None:
    """A timed workload's per-second series of its last run and the name of the
    series its steadiness is judged on (analysis/series.py drift()); None for a
    workload that is not timed. Timed workloads say so with two attributes:
    `steady_series` (a class attribute, e.g. 'device_read_iops') and `series`
    (set by each run from its RunProbe(per_second=True))."""
    key = getattr(workload, "steady_series", None)
    if not key:
        return None
    return dict(getattr(workload, "series", None) or {}), str(key)


def workload_cold_problem(workload: object, engine: Engine) -> str | None:
    """Why this workload's relations cannot be evicted on this engine although the engine
    evicts its own data sets (a workload over the user's own tables says so with a
    `own_relations_cold_problem(engine)` method); None for the others."""
    ask = getattr(workload, "own_relations_cold_problem", None)
    return ask(engine) if ask is not None else None


def workload_check(workload: object, engine: Engine) -> None:
    """What a workload checks on the started engine before anything runs, changing nothing
    (its `check(engine)`: the sql workload's check run of the user's scripts); SpecError."""
    check = getattr(workload, "check", None)
    if check is not None:
        check(engine)


def workload_record(workload: object) -> dict[str, object] | None:
    """What a workload keeps with its run for the report (its `report_record()`: the user's
    scripts, for workload `sql`), written as workload.json; None for the others."""
    record = getattr(workload, "report_record", None)
    return record() if record is not None else None


def changed_files(record: Mapping[str, object], base: Path) -> str | None:
    """The first file of a workload.json (`report_record()`: scripts, setup, load, each with its sha256)
    whose content is no longer what the run started with, and how; None: all as they were. A
    relative name (a run recorded before paths were kept absolute) is found from `base`."""
    entries = [as_object(e) for e in (*as_list(record.get("scripts")), record.get("setup"), record.get("load"))]
    for entry in (e for e in entries if e.get("sha256")):
        path = base / str(entry["file"])
        try:
            digest = hashlib.sha256(path.read_text(encoding="utf-8").encode()).hexdigest()
        except (OSError, UnicodeDecodeError) as err:
            return f"{path} can no longer be read ({getattr(err, 'strerror', None) or err})"
        if digest != entry["sha256"]:
            return f"{path} was edited after the run started"
    return None


def dialect_bytes_per_row(dialect_class: type[DialectBase], default: float) -> float:
    """What a row of this workload's tables takes on the engine (its dialect says; else `default`)."""
    declared = dialect_class.bytes_per_row
    return float(default if declared is None else declared)


__all__ = ["Options", "Workload", "dialect_bytes_per_row", "missing_methods", "protocol_methods", "timed_series"]
