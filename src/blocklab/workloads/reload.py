"""Workload `reload` (seed 004): empty a keyed table and fill it again from a
source table, in one transaction:

    DELETE FROM target;  INSERT INTO target SELECT * FROM source;  COMMIT

The source (`dataset.rows` rows of (id, 'blabla ' || id)) and the target (the
same columns with a primary key) are built once and reused while their
fingerprint matches and the engine does not say they need a rebuild (a new
checksum algorithm or page format). Before each cell, untimed, the target is
brought back to the same state: it holds the source's rows, and the previous
cell's dead versions are cleaned away (PostgreSQL's VACUUM, InnoDB's purge,
nothing on SQLite), so every cell deletes the same live rows into the same
free space. How each engine does it is its `reload` dialect
(engines/<name>/); a dialect's notes (MariaDB's `purge_waited`: the wait for
purge completed) become metrics of the cell.

Metrics: elapsed_s (delete + insert + commit, and the flush when asked),
rows_per_s (rows inserted per second of the whole), I/O counter deltas.
"""

from __future__ import annotations

import json
import time
from typing import ClassVar, Protocol, cast

from pydantic import Field

from ..engines.base import Capabilities, DialectBase, Engine, Session, table_is_current
from ..probes.io import RunProbe
from ..spec import DatasetSpec
from .base import Options, dialect_bytes_per_row
from .row_insert import io_metrics

SOURCE = "blocklab_reload_src"
TARGET = "blocklab_reload_dst"


class ReloadDialect(Protocol):
    """What delete-all + insert-select needs from an engine."""

    def build_reload_tables(self, source: str, target: str, rows: int, fingerprint: str) -> None:
        """(Re)create the source (pk, name) with `rows` rows and the keyed target
        holding the same rows, both carrying `fingerprint`."""

    def ready_reload(self, source: str, target: str, rows: int) -> dict[str, float]:
        """Untimed, before each cell: the target holds the source's rows and the
        previous cell's dead versions are gone. Returns notes kept as metrics."""

    def reload_session(self) -> Session:
        """The session the timed transaction runs in (session knobs applied)."""

    def delete_and_insert(self, session: Session, source: str, target: str) -> int:
        """The timed transaction: delete every row of target, insert source's, commit.
        Returns the rows inserted."""

    def flush_table(self, session: Session, table: str) -> None:
        """Write the table's dirty pages now (where the engine computes checksums)."""

    def after_run(self, table: str) -> None:
        """Untimed bookkeeping after the cell (e.g. statistics for relation_bytes)."""


class ReloadOptions(Options):
    flush: bool = Field(
        default=False,
        description="time the writing of the dirty pages too: PostgreSQL CHECKPOINT (its data checksums are "
        "computed when a page is written, which otherwise happens after the cell), MariaDB FLUSH TABLES ... "
        "FOR EXPORT; SQLite writes its pages at the commit anyway",
    )


class Reload:
    name: ClassVar[str] = "reload"
    default_metric: ClassVar[str] = "elapsed_s"
    work: ClassVar[tuple[str, str]] = ("rows", "row inserted")  # the metric counting its work, and its unit (CPU per unit)
    # the figures every run reports: what measure.metric may name (checked before anything runs)
    metrics: ClassVar[tuple[str, ...]] = ('elapsed_s', 'rows_per_s', 'rows', 'table_bytes')
    rows_option: ClassVar[str | None] = None  # --rows sizes dataset.rows
    default_goal: ClassVar[str] = "min"
    Dialect: ClassVar[type] = ReloadDialect
    needs: ClassVar[str] = "the source and keyed target tables, the timed delete + insert, the flush"
    Options = ReloadOptions
    dialect_class: type[DialectBase] = DialectBase
    capabilities: Capabilities = Capabilities()  # the engine's: set by make_workload

    def __init__(self, options: ReloadOptions, dataset: DatasetSpec):
        self.options = options
        self.dataset = dataset
        self.notes: dict[str, float] = {}  # the last prepare's, kept as metrics

    def relations(self) -> list[str]:
        return [SOURCE, TARGET]

    def fingerprint(self) -> str:
        return json.dumps({"blocklab_dataset": "reload", "build": 2, "rows": self.dataset.rows})

    # ------------------------------------------------------------------ data set
    def prepare(self, engine: Engine) -> None:
        dialect = cast(ReloadDialect, engine.dialect(self.name))
        fp = self.fingerprint()
        if not (table_is_current(engine, SOURCE, fp) and table_is_current(engine, TARGET, fp)):
            dialect.build_reload_tables(SOURCE, TARGET, self.dataset.rows, fp)
        self.notes = dialect.ready_reload(SOURCE, TARGET, self.dataset.rows)

    # ------------------------------------------------------------------ timed run
    def run(self, engine: Engine) -> dict[str, float]:
        dialect = cast(ReloadDialect, engine.dialect(self.name))
        # flush: the pages are written by the engine's background writer, whose counters it publishes
        # a moment later: the window waits for them to settle
        with dialect.reload_session() as session, RunProbe(engine, session, settle=self.options.flush) as probe:
            t0 = time.perf_counter()
            inserted = dialect.delete_and_insert(session, SOURCE, TARGET)
            if self.options.flush:  # the dirty pages written (and checksummed) inside the timing
                dialect.flush_table(session, TARGET)
            elapsed = time.perf_counter() - t0
        dialect.after_run(TARGET)
        if inserted != self.dataset.rows:
            raise RuntimeError(f"reload: inserted {inserted:,} rows, not the source's {self.dataset.rows:,}")
        metrics = {
            "elapsed_s": elapsed,
            "rows": float(inserted),
            "rows_per_s": inserted / elapsed if elapsed > 0 else 0.0,
            "table_bytes": float(engine.relation_bytes(TARGET)),
            **self.notes,
        }
        metrics.update(io_metrics(probe.deltas, engine.capabilities))
        # one session: the source read in order, the target filled page after page
        metrics.update(probe.pattern(elapsed, sequential=True, direct=engine.direct_io_active(),
                                     data_bytes=metrics["table_bytes"], sessions=1))
        return metrics

    def describe(self, m: dict[str, float]) -> str:
        text = f"{m['elapsed_s']:.3f} s, delete + insert of {m['rows']:,.0f} rows, {m['rows_per_s']:,.0f} rows/s"
        if "write_bytes" in m:
            text += f", wrote {m['write_bytes'] / 1e6:,.1f} MB"
        return text

    def disk_bytes(self) -> float:
        return 2 * self.dataset.rows * dialect_bytes_per_row(self.dialect_class, 130.0)  # source and keyed target

    def estimate_seconds(self) -> float:
        return self.dataset.rows / 200_000 + 0.3


WORKLOAD = Reload
