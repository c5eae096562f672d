"""A null workload for runner tests: a number derived from the settings, seeded
noise, an optional sleep (to interrupt it) and an optional failure."""

from __future__ import annotations

import random
import time
from typing import Any

from ..spec import DatasetSpec
from .base import Options


class NullOptions(Options):
    sleep_s: float = 0.0
    fail_level: int | None = None  # raise when null.level equals this
    noise: float = 0.01
    peak: int | None = None  # score peaks at this level (for search tests)


class NullWorkload:
    name = "null"
    default_metric = "score"
    default_goal = "max"
    engines = ("null",)
    Options = NullOptions

    def __init__(self, options: NullOptions, dataset: DatasetSpec):
        self.options = options
        self.rng = random.Random(1)

    def prepare(self, engine: Any) -> None:
        pass

    def relations(self) -> list[str]:
        return []

    def run(self, engine: Any) -> dict[str, float]:
        level = int(engine.current.get("null.level", 0))
        if self.options.fail_level is not None and level == self.options.fail_level:
            raise RuntimeError(f"null workload told to fail at level {level}")
        time.sleep(self.options.sleep_s)
        base = 10_000 - (level - self.options.peak) ** 2 if self.options.peak is not None else level + 1
        return {"score": base * (1 + self.rng.gauss(0, self.options.noise)), "elapsed_s": self.options.sleep_s}

    def describe(self, m: dict[str, float]) -> str:
        return f"score {m['score']:.2f}"

    def estimate_seconds(self) -> float:
        return self.options.sleep_s


WORKLOAD = NullWorkload
