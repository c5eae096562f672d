"""The protocol every workload implements, and the options model it validates."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict


class Options(BaseModel):
    """Base of each workload's options (the extra fields of [workload])."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@runtime_checkable
class Workload(Protocol):
    name: str
    default_metric: str  # what the verdict is about unless measure.metric says otherwise
    default_goal: str  # "max" (throughput) or "min" (elapsed)
    engines: tuple[str, ...]  # engines it can run on
    engine_kind: str  # the engine this instance will run on (set by make_workload; estimates depend on it)

    def prepare(self, engine: Any) -> None:
        """Build the data set if it is missing or stale; cheap when it is there."""

    def relations(self) -> list[str]:
        """Tables/indexes a cold-cache cell evicts before it runs."""

    def run(self, engine: Any) -> dict[str, float]:
        """One timed execution; a flat dict of numbers."""

    def describe(self, metrics: dict[str, float]) -> str:
        """One console line about one cell's metrics."""

    def estimate_seconds(self) -> float:
        """A rough duration of one run, for `blocklab plan`."""
