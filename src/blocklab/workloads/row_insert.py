"""Workload `row_insert`: N single-row INSERTs in a loop that runs next to the
data (seed 001: "a simple INSERT in a PL/SQL loop", block size x checksum
level), into a table of one integer column, optionally indexed.

* PostgreSQL: one PL/pgSQL DO block, `FOR i IN 1..N LOOP INSERT ... VALUES (i)`,
  one transaction (the seed's loop commits once at the end).
* SQLite (in-process, so "server-side" is the connection itself): one prepared
  statement executed N times by apsw's executemany (no Python per row), in
  transactions of `batch` rows (SQLite commits are fsyncs; a commit per row
  would measure the disk's flush latency, not the pages).
* MariaDB (InnoDB): a stored procedure `blocklab_ins_loop(n)` (created once per
  data directory) with a WHILE loop of single-row INSERTs, CALLed in one
  transaction and committed at the end. The table is ENGINE=InnoDB, recreated
  before every run, so it always carries the current checksum algorithm.
  `flush = true` times `FLUSH TABLES ... FOR EXPORT` after the commit: it
  writes the table's dirty pages (InnoDB, too, computes a page's checksum when
  the page is written).

Each engine's side (the loop, the recreate, the flush) is its `row_insert`
dialect in its own package (engines/<name>/); this file holds what is common.

The table is dropped and created empty before every timed run, outside the
timing, so every cell inserts into the same empty table. `index = true` adds a
B-tree index on the column (the seed's follow-up: with and without an index);
it is a data-set change, declared REINIT in AXIS_COST so the plan groups it.

Metrics: elapsed_s (the timed loop and its commit), rows_per_s, and the
engine's I/O counter deltas around it (pg_stat_io / SQLite's vfsstat shim).
"""

from __future__ import annotations

import time
from typing import ClassVar, Protocol, cast

from pydantic import Field

from ..engines.base import ApplyClass, Capabilities, DialectBase, Engine, Session
from ..probes.io import RunProbe
from ..spec import DatasetSpec
from .base import Options, dialect_bytes_per_row

TABLE = "blocklab_ins"

# I/O counter deltas kept as metrics (when the engine reports them), beside the
# engine's own write counters (its Capabilities.write_counters)
IO_KEYS = ("reads", "read_bytes", "writes", "write_bytes", "fsyncs", "hits", "server_cpu_s", "device_writes", "device_write_bytes")


class InsertDialect(Protocol):
    """What the single-row INSERT loop needs from an engine."""

    rows_per_s: ClassVar[float]  # a rough loop rate, for the plan's estimate

    def prepare_inserts(self, table: str) -> None:
        """What the loop needs once per data directory (a stored procedure ...)."""

    def recreate_table(self, table: str, index: bool) -> None:
        """Drop and create the table `table (n integer)` empty (and a B-tree index
        on n), untimed, with nothing of the previous cell left to write."""

    def insert_session(self) -> Session:
        """The session the loop runs in (session knobs applied)."""

    def insert_loop(self, session: Session, table: str, rows: int, batch: int) -> None:
        """The timed loop: INSERT n = 1..rows one row at a time, next to the data,
        committed as the engine's loop commits (once; SQLite every `batch` rows)."""

    def flush_table(self, session: Session, table: str) -> None:
        """Write the table's dirty pages now (where the engine computes checksums)."""

    def after_run(self, table: str) -> None:
        """Untimed bookkeeping after the loop (e.g. statistics for relation_bytes)."""

    def count_rows(self, table: str) -> int:
        """The table's rows (the check that the loop did its work)."""


class RowInsertOptions(Options):
    rows: int = Field(default=100_000, ge=1, le=100_000_000, description="single-row INSERTs per run")
    index: bool = Field(default=False, description="a B-tree index on the inserted column")
    batch: int = Field(default=1_000, ge=1, le=10_000_000, description="SQLite: rows per transaction")
    flush: bool = Field(
        default=False,
        description="PostgreSQL: time a CHECKPOINT after the loop too (MariaDB: FLUSH TABLES ... FOR EXPORT) (its data checksums are computed when a "
        "page is written out, which otherwise happens after the cell); SQLite writes its pages at each commit",
    )


class RowInsert:
    name: ClassVar[str] = "row_insert"
    default_metric: ClassVar[str] = "elapsed_s"
    work: ClassVar[tuple[str, str]] = ("rows", "row inserted")  # the metric counting its work, and its unit (CPU per unit)
    # the figures every run reports: what measure.metric may name (checked before anything runs)
    metrics: ClassVar[tuple[str, ...]] = ('elapsed_s', 'rows_per_s', 'rows', 'table_bytes')
    default_goal: ClassVar[str] = "min"
    # it builds no data set: --rows means its own [workload] rows (the INSERTs per run)
    rows_option: ClassVar[str | None] = "rows"
    Dialect: ClassVar[type] = InsertDialect
    needs: ClassVar[str] = "a server-side loop of single-row INSERTs, the table's recreate and flush"
    Options = RowInsertOptions
    AXIS_COST = {"index": ApplyClass.REINIT}
    dialect_class: type[DialectBase] = DialectBase
    capabilities: Capabilities = Capabilities()  # the engine's: set by make_workload

    def __init__(self, options: RowInsertOptions, dataset: DatasetSpec):
        self.options = options
        self.dataset = dataset

    def relations(self) -> list[str]:
        return [TABLE, f"{TABLE}_n"] if self.options.index else [TABLE]

    def fingerprint(self) -> str:
        return f"row_insert table n integer, index={self.options.index}"

    def prepare(self, engine: Engine) -> None:
        """Nothing to build once but what the engine's loop needs: run() recreates
        the table before each timed loop."""
        cast(InsertDialect, engine.dialect(self.name)).prepare_inserts(TABLE)

    def run(self, engine: Engine) -> dict[str, float]:
        o = self.options
        dialect = cast(InsertDialect, engine.dialect(self.name))
        dialect.recreate_table(TABLE, o.index)
        # flush: the pages are written by the engine's background writer, whose counters it publishes
        # a moment later: the window waits for them to settle
        with dialect.insert_session() as session, RunProbe(engine, session, settle=o.flush) as probe:
            t0 = time.perf_counter()
            dialect.insert_loop(session, TABLE, o.rows, o.batch)
            if o.flush:
                dialect.flush_table(session, TABLE)  # the dirty pages written (and checksummed) inside the timing
            elapsed = time.perf_counter() - t0
        dialect.after_run(TABLE)
        count = dialect.count_rows(TABLE)
        if count != o.rows:
            raise RuntimeError(f"row_insert: the table holds {count:,} rows after the loop, not {o.rows:,}")
        metrics = {
            "elapsed_s": elapsed,
            "rows": float(o.rows),
            "rows_per_s": o.rows / elapsed if elapsed > 0 else 0.0,
            "index": 1.0 if o.index else 0.0,
            "table_bytes": float(engine.relation_bytes(TABLE)),
        }
        metrics.update(io_metrics(probe.deltas, engine.capabilities))
        # one session appending rows: the table grows page after page
        metrics.update(probe.pattern(elapsed, sequential=True, direct=engine.direct_io_active(),
                                     data_bytes=metrics["table_bytes"], sessions=1))
        return metrics

    def describe(self, m: dict[str, float]) -> str:
        text = f"{m['elapsed_s']:.3f} s, {m['rows']:,.0f} rows, {m['rows_per_s']:,.0f} rows/s"
        if "write_bytes" in m:
            text += f", wrote {m['write_bytes'] / 1e6:,.1f} MB"
        return text

    def disk_bytes(self) -> float:
        return self.options.rows * dialect_bytes_per_row(self.dialect_class, 80.0) * (2 if self.options.index else 1)

    def estimate_seconds(self) -> float:
        rate = cast(type[InsertDialect], self.dialect_class).rows_per_s  # declared by every insert dialect (checked)
        return self.options.rows / float(rate) + 0.3


WORKLOAD = RowInsert


def io_metrics(deltas: dict[str, float], capabilities: Capabilities) -> dict[str, float]:
    """The I/O counter deltas a write workload keeps (reload uses it too): the
    common ones and the engine's own write counters, when it reports them."""
    return {k: float(deltas[k]) for k in (*IO_KEYS, *capabilities.write_counters) if k in deltas}
