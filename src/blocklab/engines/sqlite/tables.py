"""The row_insert and reload workloads on SQLite (workloads/row_insert.py
InsertDialect, workloads/reload.py ReloadDialect).

SQLite runs in this process, so "server-side" is the connection itself:
* row_insert: one prepared statement executed N times by apsw's executemany
  (no Python per row), in transactions of `batch` rows (SQLite commits are
  fsyncs; a commit per row would measure the disk's flush latency, not the
  pages);
* reload: the source and the target (declared `pk INT PRIMARY KEY`, not
  INTEGER, so the key is a separate index as in the seed and not the rowid)
  carry their fingerprint in the file's blocklab_meta table, which goes with
  the file when a page size or checksum change makes a new one; the target is
  reloaded (untimed) when it is short; the previous cell's rows are what the
  next cell deletes.
* flush: nothing to do, SQLite writes its pages at every commit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ..base import DialectBase

if TYPE_CHECKING:
    from . import SqliteEngine, SqliteSession


class _Tables(DialectBase):
    def __init__(self, engine: SqliteEngine):
        self.engine = engine

    def flush_table(self, session: SqliteSession, table: str) -> None:
        pass  # SQLite wrote the pages at the commit

    def after_run(self, table: str) -> None:
        pass  # dbstat counts the pages at any time


class InsertLoop(_Tables):
    # executemany 650k rows/s at 4k+ pages without checks, ~150k averaged over the checksum
    # recipe's quick sweep (1k pages, cksumvfs, cell_size_check, index); 2-core VM
    rows_per_s: ClassVar[float] = 200_000

    def prepare_inserts(self, table: str) -> None:
        pass  # nothing to create once

    def recreate_table(self, table: str, index: bool) -> None:
        conn = self.engine.sqlite_connect()
        try:
            conn.execute(f'DROP TABLE IF EXISTS "{table}"')
            conn.execute(f'CREATE TABLE "{table}" (n integer)')
            if index:
                conn.execute(f'CREATE INDEX "{table}_n" ON "{table}" (n)')
        finally:
            self.engine._forget(conn)

    def insert_session(self) -> SqliteSession:
        return self.engine.connect()

    def insert_loop(self, session: SqliteSession, table: str, rows: int, batch: int) -> None:
        conn = session.conn
        sql = f'INSERT INTO "{table}" VALUES (?)'
        for lo in range(1, rows + 1, batch):
            hi = min(lo + batch, rows + 1)
            conn.execute("BEGIN")
            conn.executemany(sql, ((i,) for i in range(lo, hi)))  # one prepared statement, stepped per row
            conn.execute("COMMIT")

    def count_rows(self, table: str) -> int:
        return int(self.engine.query(f'SELECT count(*) FROM "{table}"')[0][0])


class ReloadTables(_Tables):
    def build_reload_tables(self, source: str, target: str, rows: int, fingerprint: str) -> None:
        conn = self.engine.sqlite_connect()
        try:
            with conn:  # one transaction
                for t in (source, target):
                    conn.execute(f'DROP TABLE IF EXISTS "{t}"')
                conn.execute(f'CREATE TABLE "{source}" (pk INT NOT NULL, name TEXT)')
                conn.execute(
                    f'INSERT INTO "{source}" WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s '
                    f"WHERE i < ?) SELECT i, 'blabla ' || i FROM s",
                    (int(rows),),
                )
                conn.execute(f'CREATE TABLE "{target}" (pk INT PRIMARY KEY, name TEXT)')
                conn.execute(f'INSERT INTO "{target}" SELECT * FROM "{source}"')
                for t in (source, target):
                    self.engine.set_table_fingerprint(conn, t, fingerprint)
        finally:
            self.engine._forget(conn)

    def ready_reload(self, source: str, target: str, rows: int) -> dict[str, float]:
        conn = self.engine.sqlite_connect()
        try:
            if conn.execute(f'SELECT count(*) FROM "{target}"').fetchall()[0][0] != rows:
                with conn:
                    conn.execute(f'DELETE FROM "{target}"')
                    conn.execute(f'INSERT INTO "{target}" SELECT * FROM "{source}"')
        finally:
            self.engine._forget(conn)
        return {}

    def reload_session(self) -> SqliteSession:
        return self.engine.connect()

    def delete_and_insert(self, session: SqliteSession, source: str, target: str) -> int:
        conn = session.conn
        conn.execute("BEGIN")
        conn.execute(f'DELETE FROM "{target}"')
        conn.execute(f'INSERT INTO "{target}" SELECT * FROM "{source}"')
        inserted = conn.changes()
        conn.execute("COMMIT")
        return int(inserted)
