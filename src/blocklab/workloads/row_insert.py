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
  before every run, so it always carries the current checksum algorithm
  (`tables_must_be_rebuilt` is reset after the recreate). `flush = true` times
  `FLUSH TABLES ... FOR EXPORT` after the commit: it writes the table's dirty
  pages (InnoDB, too, computes a page's checksum when the page is written).

The table is dropped and created empty before every timed run, outside the
timing, so every cell inserts into the same empty table. `index = true` adds a
B-tree index on the column (the seed's follow-up: with and without an index);
it is a data-set change, declared REINIT in AXIS_COST so the plan groups it.

Metrics: elapsed_s (the timed loop and its commit), rows_per_s, and the
engine's I/O counter deltas around it (pg_stat_io / SQLite's vfsstat shim).
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import Field

from ..engines.base import ApplyClass
from ..probes.io import IoProbe
from ..spec import DatasetSpec
from .base import Options

TABLE = "blocklab_ins"

# I/O counter deltas kept as metrics (when the engine reports them)
IO_KEYS = (
    "reads", "read_bytes", "writes", "write_bytes", "fsyncs", "hits", "evictions",
    "journal_writes", "journal_write_bytes", "wal_writes", "wal_write_bytes", "cache_writes", "cache_spills",
    "server_cpu_s", "device_writes", "device_write_bytes",
)


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
    name = "row_insert"
    default_metric = "elapsed_s"
    default_goal = "min"
    engines = ("postgres", "sqlite", "mariadb")
    Options = RowInsertOptions
    AXIS_COST = {"index": ApplyClass.REINIT}

    def __init__(self, options: RowInsertOptions, dataset: DatasetSpec):
        self.options = options
        self.dataset = dataset

    def relations(self) -> list[str]:
        return [TABLE, f"{TABLE}_n"] if self.options.index else [TABLE]

    def fingerprint(self) -> str:
        return f"row_insert table n integer, index={self.options.index}"

    def prepare(self, engine: Any) -> None:
        """Nothing to build once but MariaDB's stored procedure: run() recreates the
        table before each timed loop."""
        if engine.name == "mariadb":
            _mariadb_create_procedure(engine)

    def run(self, engine: Any) -> dict[str, float]:
        o = self.options
        recreate_table(engine, TABLE, "n integer", index_column="n" if o.index else None)
        if engine.name == "sqlite":
            elapsed, d = _sqlite_insert_loop(engine, o.rows, o.batch)
        elif engine.name == "mariadb":
            elapsed, d = _mariadb_insert_loop(engine, o.rows, o.flush)
            engine.analyze(TABLE)  # untimed: exact page counts for relation_bytes()
        else:
            elapsed, d = _pg_insert_loop(engine, o.rows, o.flush)
        quoted = f"`{TABLE}`" if engine.name == "mariadb" else f'"{TABLE}"'
        count = int(engine.query(f"SELECT count(*) FROM {quoted}")[0][0])
        if count != o.rows:
            raise RuntimeError(f"row_insert: the table holds {count:,} rows after the loop, not {o.rows:,}")
        metrics = {
            "elapsed_s": elapsed,
            "rows": float(o.rows),
            "rows_per_s": o.rows / elapsed if elapsed > 0 else 0.0,
            "index": 1.0 if o.index else 0.0,
            "table_bytes": float(engine.relation_bytes(TABLE)),
        }
        metrics.update(io_metrics(d))
        return metrics

    def describe(self, m: dict[str, float]) -> str:
        text = f"{m['elapsed_s']:.3f} s, {m['rows']:,.0f} rows, {m['rows_per_s']:,.0f} rows/s"
        if "write_bytes" in m:
            text += f", wrote {m['write_bytes'] / 1e6:,.1f} MB"
        return text

    def estimate_seconds(self) -> float:
        # measured on a 2-core VM: PL/pgSQL 220k (indexed) - 400k rows/s with the timed CHECKPOINT;
        # SQLite executemany 650k rows/s at 4k+ pages without checks, 150k averaged over the
        # checksum recipe's quick sweep (1k pages, cksumvfs, cell_size_check, index);
        # MariaDB's stored procedure 60k-190k rows/s (~100k typical); plus the untimed recreate
        rate = {"sqlite": 200_000, "mariadb": 100_000}.get(getattr(self, "engine_kind", ""), 250_000)
        return self.options.rows / rate + 0.3


WORKLOAD = RowInsert


# ---------------------------------------------------------------------- shared helpers (reload uses them too)
def io_metrics(deltas: dict[str, float]) -> dict[str, float]:
    return {k: float(deltas[k]) for k in IO_KEYS if k in deltas}


def recreate_table(engine: Any, table: str, columns: str, *, index_column: str | None = None) -> None:
    """Drop and create an empty table (and its index), untimed; checkpointed on
    PostgreSQL so the previous cell's dirty pages are not written inside this one."""
    if engine.name == "mariadb":
        with engine.connect(session=False) as conn, conn.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS `{table}`")
            cur.execute(f"CREATE TABLE `{table}` ({columns}) ENGINE=InnoDB")
            if index_column:
                cur.execute(f"CREATE INDEX `{table}_{index_column}` ON `{table}` ({index_column})")
        # a table created now carries the current checksum algorithm and page size
        engine.tables_must_be_rebuilt = False
        return
    statements = [f'DROP TABLE IF EXISTS "{table}"', f'CREATE TABLE "{table}" ({columns})']
    if index_column:
        statements.append(f'CREATE INDEX "{table}_{index_column}" ON "{table}" ({index_column})')
    if engine.name == "sqlite":
        conn = engine.connect()
        try:
            for sql in statements:
                conn.execute(sql)
        finally:
            conn.close()
        return
    with engine.connect(session=False) as conn:
        for sql in statements:
            conn.execute(sql)
        conn.execute(f'ALTER TABLE "{table}" SET (autovacuum_enabled = false)')  # no autovacuum inside a cell
        conn.execute("CHECKPOINT")


def _pg_insert_loop(engine: Any, rows: int, flush: bool = False) -> tuple[float, dict[str, float]]:
    sql = (
        "DO $blocklab$ BEGIN "
        f"FOR i IN 1..{int(rows)} LOOP INSERT INTO \"{TABLE}\" VALUES (i); END LOOP; "
        "END $blocklab$"
    )
    with engine.connect() as conn:
        with IoProbe(engine, conn) as probe:
            t0 = time.perf_counter()
            conn.execute(sql)  # autocommit: the block is one transaction, committed at its end
            if flush:
                conn.execute("CHECKPOINT")  # the dirty pages written (and checksummed) inside the timing
            elapsed = time.perf_counter() - t0
    return elapsed, probe.deltas


def _sqlite_insert_loop(engine: Any, rows: int, batch: int) -> tuple[float, dict[str, float]]:
    conn = engine.connect()
    sql = f'INSERT INTO "{TABLE}" VALUES (?)'
    try:
        with IoProbe(engine, conn) as probe:
            t0 = time.perf_counter()
            for lo in range(1, rows + 1, batch):
                hi = min(lo + batch, rows + 1)
                conn.execute("BEGIN")
                conn.executemany(sql, ((i,) for i in range(lo, hi)))  # one prepared statement, stepped per row
                conn.execute("COMMIT")
            elapsed = time.perf_counter() - t0
    finally:
        conn.close()
    return elapsed, probe.deltas


PROCEDURE = "blocklab_ins_loop"


def _mariadb_create_procedure(engine: Any) -> None:
    """The seed's PL/SQL loop as a stored procedure, created once per data directory
    (it lives in the `blocklab` database, which is per page size)."""
    with engine.connect(session=False) as conn, conn.cursor() as cur:
        cur.execute(
            f"CREATE PROCEDURE IF NOT EXISTS `{PROCEDURE}`(IN n INT) "
            "BEGIN DECLARE i INT DEFAULT 1; "
            f"WHILE i <= n DO INSERT INTO `{TABLE}` VALUES (i); SET i = i + 1; END WHILE; "
            "END"
        )


def _mariadb_insert_loop(engine: Any, rows: int, flush: bool = False) -> tuple[float, dict[str, float]]:
    with engine.connect(autocommit=False) as conn:
        with IoProbe(engine, conn) as probe:
            t0 = time.perf_counter()
            with conn.cursor() as cur:
                cur.execute(f"CALL `{PROCEDURE}`(%s)", (int(rows),))  # one transaction ...
                while cur.nextset():
                    pass
            conn.commit()  # ... committed at its end, as the seed's loop
            if flush:
                with conn.cursor() as cur:  # the table's dirty pages written (and checksummed) inside the timing
                    cur.execute(f"FLUSH TABLES `{TABLE}` FOR EXPORT")
                    cur.execute("UNLOCK TABLES")
            elapsed = time.perf_counter() - t0
    return elapsed, probe.deltas
