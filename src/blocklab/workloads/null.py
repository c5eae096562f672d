"""A null workload for runner tests, shaped like full_scan: a table built once
per fingerprint, one timed "scan" that counts its rows, and a score derived
from the engine's level setting with seeded noise, an optional sleep (to
interrupt it) and an optional failure. Any engine with a null dialect runs it
(the null engine; tests add engines of their own)."""

from __future__ import annotations

import json
import random
import time
from typing import ClassVar, Protocol, cast

from ..engines.base import Capabilities, DialectBase, Engine, Session, table_is_current
from ..probes.io import RunProbe
from ..spec import DatasetSpec
from .base import Options


class NullDialect(Protocol):
    """What the null workload needs from an engine."""

    def build_table(self, table: str, rows: int, fingerprint: str) -> None:
        """A table of `rows` rows, its fingerprint stored."""

    def count_rows(self, session: Session, table: str) -> int:
        """The table's rows."""

    def level(self) -> int:
        """The engine's current level setting (the score is derived from it)."""


class NullOptions(Options):
    sleep_s: float = 0.0
    fail_level: int | None = None  # raise when the level equals this
    noise: float = 0.01
    peak: int | None = None  # score peaks at this level (for search tests)


class NullWorkload:
    name: ClassVar[str] = "null"
    default_metric: ClassVar[str] = "score"
    work: ClassVar[tuple[str, str]] = ("rows", "row")  # the metric counting its work, and its unit (CPU per unit)
    # the figures every run reports: what measure.metric may name (checked before anything runs)
    metrics: ClassVar[tuple[str, ...]] = ('score', 'elapsed_s', 'rows')
    rows_option: ClassVar[str | None] = None  # --rows sizes dataset.rows
    default_goal: ClassVar[str] = "max"
    Dialect: ClassVar[type] = NullDialect
    needs: ClassVar[str] = "a table in memory and a level setting"
    Options = NullOptions
    dialect_class: type[DialectBase] = DialectBase
    capabilities: Capabilities = Capabilities()  # the engine's: set by make_workload

    def __init__(self, options: NullOptions, dataset: DatasetSpec):
        self.options = options
        self.dataset = dataset
        self.rng = random.Random(1)

    def fingerprint(self) -> str:
        return json.dumps({"blocklab_dataset": "null", "rows": self.dataset.rows})

    def prepare(self, engine: Engine) -> None:
        if not table_is_current(engine, self.dataset.table, self.fingerprint()):
            cast(NullDialect, engine.dialect(self.name)).build_table(self.dataset.table, self.dataset.rows, self.fingerprint())

    def relations(self) -> list[str]:
        return [self.dataset.table]

    def run(self, engine: Engine) -> dict[str, float]:
        dialect = cast(NullDialect, engine.dialect(self.name))
        level = dialect.level()
        if self.options.fail_level is not None and level == self.options.fail_level:
            raise RuntimeError(f"null workload told to fail at level {level}")
        with engine.connect() as session, RunProbe(engine, session):
            rows = dialect.count_rows(session, self.dataset.table)
            time.sleep(self.options.sleep_s)
        base = 10_000 - (level - self.options.peak) ** 2 if self.options.peak is not None else level + 1
        return {"score": base * (1 + self.rng.gauss(0, self.options.noise)), "elapsed_s": self.options.sleep_s, "rows": float(rows)}

    def describe(self, m: dict[str, float]) -> str:
        return f"score {m['score']:.2f}"

    def disk_bytes(self) -> float:
        return 0.0  # its tables live in memory

    def estimate_seconds(self) -> float:
        return self.options.sleep_s


WORKLOAD = NullWorkload
