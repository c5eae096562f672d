"""The row_insert and reload workloads on PostgreSQL (workloads/row_insert.py
InsertDialect, workloads/reload.py ReloadDialect).

* row_insert: one PL/pgSQL DO block, `FOR i IN 1..N LOOP INSERT ... VALUES (i)`,
  one transaction (the seed's loop commits once at the end); the table is
  recreated before each run with autovacuum off and a CHECKPOINT, so the
  previous cell's dirty pages are not written inside this one.
* reload: the source and the keyed target are built in one transaction and
  carry the fingerprint as their COMMENT; before each cell VACUUM (untimed)
  removes the previous cell's dead versions, so every cell deletes the same
  live rows into the same free space.
* flush: a CHECKPOINT writes the dirty pages, and computes their data
  checksums, inside the timing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from psycopg import sql

from ..base import DialectBase
from .session import PgSession

if TYPE_CHECKING:
    from . import PostgresEngine


class _Tables(DialectBase):
    def __init__(self, engine: PostgresEngine):
        self.engine = engine

    def flush_table(self, session: PgSession, table: str) -> None:
        session.execute("CHECKPOINT")  # the dirty pages written (and checksummed) now

    def after_run(self, table: str) -> None:
        pass  # pg_relation_size is exact at any time


class InsertLoop(_Tables):
    rows_per_s: ClassVar[float] = 250_000  # PL/pgSQL 220k (indexed) - 400k rows/s with the timed CHECKPOINT

    def prepare_inserts(self, table: str) -> None:
        pass  # the DO block needs nothing created

    def recreate_table(self, table: str, index: bool) -> None:
        t = sql.Identifier(table)
        with self.engine.pg_connect(session=False) as conn:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(t))
            conn.execute(sql.SQL("CREATE TABLE {} (n integer) WITH (autovacuum_enabled = false)").format(t))  # no autovacuum inside a cell
            if index:
                conn.execute(sql.SQL("CREATE INDEX {} ON {} (n)").format(sql.Identifier(f"{table}_n"), t))
            conn.execute("CHECKPOINT")

    def insert_session(self) -> PgSession:
        return self.engine.connect()

    def insert_loop(self, session: PgSession, table: str, rows: int, batch: int) -> None:
        body = sql.SQL("BEGIN FOR i IN 1..{} LOOP INSERT INTO {} VALUES (i); END LOOP; END").format(
            sql.Literal(int(rows)), sql.Identifier(table)
        )
        # autocommit: the block is one transaction, committed at its end
        session.conn.execute(sql.SQL("DO $blocklab$ {} $blocklab$").format(body))

    def count_rows(self, table: str) -> int:
        with self.engine.pg_connect(session=False) as conn:
            row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))).fetchone()
        return int(row[0]) if row else 0


class ReloadTables(_Tables):
    def build_reload_tables(self, source: str, target: str, rows: int, fingerprint: str) -> None:
        src, dst = sql.Identifier(source), sql.Identifier(target)
        with self.engine.pg_connect(session=False, autocommit=False) as conn:
            for t in (src, dst):
                conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(t))
            conn.execute(sql.SQL("CREATE TABLE {} (pk integer NOT NULL, name text)").format(src))
            conn.execute(sql.SQL("INSERT INTO {} SELECT i, 'blabla ' || i FROM generate_series(1, %s) AS i").format(src), (rows,))
            conn.execute(sql.SQL("CREATE TABLE {} (pk integer PRIMARY KEY, name text) WITH (autovacuum_enabled = false)").format(dst))
            conn.execute(sql.SQL("INSERT INTO {} SELECT * FROM {}").format(dst, src))
            for t in (src, dst):  # complete only now: the fingerprint commits with the rows
                conn.execute(sql.SQL("COMMENT ON TABLE {} IS {}").format(t, sql.Literal(fingerprint)))
            conn.commit()

    def ready_reload(self, source: str, target: str, rows: int) -> dict[str, float]:
        with self.engine.pg_connect(session=False) as conn:
            conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(source)))
            conn.execute(sql.SQL("VACUUM {}").format(sql.Identifier(target)))  # the previous cell's dead versions: gone, untimed
            conn.execute("CHECKPOINT")
        return {}

    def reload_session(self) -> PgSession:
        return self.engine.connect()

    def delete_and_insert(self, session: PgSession, source: str, target: str) -> int:
        conn = session.conn
        src, dst = sql.Identifier(source), sql.Identifier(target)
        with conn.transaction():
            conn.execute(sql.SQL("DELETE FROM {}").format(dst))
            inserted = conn.execute(sql.SQL("INSERT INTO {} SELECT * FROM {}").format(dst, src)).rowcount
        return int(inserted)
