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

import inspect
from typing import ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

from ..engines.base import Engine


class Options(BaseModel):
    """Base of each workload's options (the extra fields of [workload])."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Workload(Protocol):
    name: ClassVar[str]
    default_metric: ClassVar[str]  # what the verdict is about unless measure.metric says otherwise
    default_goal: ClassVar[str]  # "max" (throughput) or "min" (elapsed)
    Dialect: ClassVar[type]  # the Protocol an engine implements to run this workload
    needs: ClassVar[str]  # what the dialect provides, in words (for the refusal message)
    dialect_class: type  # the chosen engine's dialect class (set by make_workload; estimates use it)

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


def dialect_bytes_per_row(dialect_class: type, default: float) -> float:
    """What a row of this workload's tables takes on the engine (its dialect says; else `default`)."""
    return float(getattr(dialect_class, "bytes_per_row", default))


def protocol_methods(protocol: type) -> list[str]:
    """The methods a dialect Protocol asks for (its own, public ones)."""
    return sorted(
        name for name, member in vars(protocol).items()
        if not name.startswith("_") and inspect.isfunction(member)
    )


def missing_methods(dialect_class: type, protocol: type) -> list[str]:
    """What `dialect_class` lacks of `protocol` (empty: it implements it)."""
    return [m for m in protocol_methods(protocol) if not callable(getattr(dialect_class, m, None))]


