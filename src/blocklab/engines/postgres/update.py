"""The update workload on PostgreSQL (workloads/update.py UpdateDialect).

* The table is built server-side in one transaction (no WAL with
  wal_level=minimal), keyed, analysed, updated once in full (the steady
  state: each page holds one old version of each row) and checkpointed.
  Autovacuum is off for it, so it never runs inside a cell.
* `val = val + 1` keeps every row the same size, and the low fillfactor
  leaves room in each page for the new version: every update is HOT (no
  index entry; the row stays in its page and its session's page range) and
  the table does not grow. A cell's update prunes the previous versions
  (on-access HOT pruning, inside the timed statement) and leaves its own for
  the next cell: the same work every cell, a steady state. `hot_share` and
  `table_growth_bytes` are the proof.
* `vacuum = true` runs VACUUM before each cell instead (a "freshly vacuumed
  table": no old versions, every page all-visible). It costs a pass over the
  table per cell, and every update then clears a visibility-map bit: one VM
  page covers the whole table, so with more sessions than cores they queue on
  it (LWLock:BufferContent) while its holder waits for a CPU.
* The sessions' profile comes from the wait sampler (waits.py); who wrote
  the pages from pg_stat_io per process type (counters.py): `backend_writes`,
  pages the sessions had to write themselves to get a free buffer, is
  PostgreSQL's version of Oracle's free buffer waits.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, ClassVar

from psycopg import sql

from ..base import DialectBase
from .session import PgSession
from .waits import SessionSampler

if TYPE_CHECKING:
    from . import PostgresEngine


class UpdateTables(DialectBase):
    refused_options: ClassVar[dict[str, str]] = {}

    def __init__(self, engine: PostgresEngine):
        self.engine = engine

    def build_update_table(self, table: str, rows: int, fillfactor: int, pad: int, fingerprint: str) -> None:
        build_update_table(self.engine, table, rows, fillfactor, pad, fingerprint)

    def ready_update(self, table: str, vacuum: bool) -> dict[str, float]:
        if vacuum:
            with self.engine.pg_connect(session=False) as conn:
                conn.execute(sql.SQL("VACUUM {}").format(sql.Identifier(table)))  # the previous cell's old versions: gone, untimed
        return {}

    def update_session(self) -> PgSession:
        session = self.engine.connect()
        try:
            session.execute("SET enable_seqscan = off")  # the pages go through shared buffers, not a scan ring
            session.execute("SET application_name = 'blocklab update'")
        except BaseException:
            session.close()
            raise
        return session

    def update_range(self, session: PgSession, table: str, lo: int, hi: int) -> int:
        cur = session.conn.execute(
            sql.SQL("UPDATE {} SET val = val + 1 WHERE id BETWEEN %s AND %s").format(sql.Identifier(table)), (lo, hi)
        )
        return int(cur.rowcount)

    def profiler(self, sample_ms: float, sample_nice: int | None) -> SessionSampler:
        return SessionSampler(self.engine, interval=sample_ms / 1000, nice=sample_nice)

    def table_window(self, table: str) -> TableStats:
        return TableStats(self.engine, table)


class TableStats:
    """The table's size and update counters around a point."""

    def __init__(self, engine: PostgresEngine, table: str):
        self.engine = engine
        self.table = table

    def __enter__(self) -> TableStats:
        self.before = _table_stats(self.engine, self.table)
        self.shared_buffers = _shared_buffers_bytes(self.engine)
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.after = _table_stats(self.engine, self.table)

    def metrics(self, touched_share: float) -> dict[str, float]:
        before, after = self.before, self.after
        upd = after["n_tup_upd"] - before["n_tup_upd"]
        hot = after["n_tup_hot_upd"] - before["n_tup_hot_upd"]
        touched = after["bytes"] * touched_share
        return {
            "table_bytes": float(after["bytes"]),
            "table_growth_bytes": float(after["bytes"] - before["bytes"]),
            "hot_share": hot / upd if upd else 0.0,
            "shared_buffers_bytes": float(self.shared_buffers),
            "touched_bytes": touched,
            "cache_ratio": touched / self.shared_buffers if self.shared_buffers else 0.0,
        }


def _table_stats(engine: PostgresEngine, table: str) -> dict[str, int]:
    row = engine.query(
        "SELECT pg_relation_size(c.oid), coalesce(s.n_tup_upd, 0), coalesce(s.n_tup_hot_upd, 0) "
        "FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid "
        "WHERE c.relname = %s AND c.relnamespace = current_schema()::regnamespace",
        (table,),
    )[0]
    return {"bytes": int(row[0]), "n_tup_upd": int(row[1]), "n_tup_hot_upd": int(row[2])}


def _shared_buffers_bytes(engine: PostgresEngine) -> int:
    setting, unit = engine.query("SELECT setting, unit FROM pg_settings WHERE name = 'shared_buffers'")[0]
    return int(setting) * {"8kB": 8192, "kB": 1024, "MB": 1024**2}.get(unit or "", 1)


def build_update_table(engine: PostgresEngine, table: str, rows: int, fillfactor: int, pad: int, fingerprint: str) -> float:
    """The update table, server-side; returns the seconds it took."""
    t0 = time.perf_counter()
    t = sql.Identifier(table)
    with engine.pg_connect(session=False, autocommit=False) as conn:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(t))
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (id integer NOT NULL, val integer NOT NULL, name text, pad text) "
                "WITH (fillfactor = {}, autovacuum_enabled = false)"
            ).format(t, sql.Literal(int(fillfactor)))
        )
        conn.execute(
            sql.SQL("INSERT INTO {} SELECT i, 0, 'blabla ' || i, repeat('x', {}) FROM generate_series(1, %s) AS i").format(
                t, sql.Literal(int(pad))
            ),
            (rows,),
        )
        conn.execute(sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} PRIMARY KEY (id)").format(t, sql.Identifier(f"{table}_pkey")))
        conn.commit()
    with engine.pg_connect(session=False) as conn:
        conn.execute(sql.SQL("ANALYZE {}").format(t))
        conn.execute("SET enable_seqscan = off")  # as the sessions do
        conn.execute(sql.SQL("UPDATE {} SET val = val + 1").format(t))
        conn.execute(sql.SQL("COMMENT ON TABLE {} IS {}").format(t, sql.Literal(fingerprint)))  # complete only now
        conn.execute("CHECKPOINT")
    return time.perf_counter() - t0
