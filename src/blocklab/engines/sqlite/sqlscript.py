"""The `sql` workload on SQLite (workloads/sql.py SqlDialect): the user's scripts.

* Parameters are `?`, bound by SQLite; apsw keeps each connection's prepared
  statements in its statement cache.
* The data set of a setup/load lives in blocklab's one database file beside the
  others. SQLite has no schemas and no table comments: the file's blocklab_meta table
  keeps the fingerprint of the sql data set built last and the tables it made, and a
  data set of another content first drops those (its tables would clash).
* The check run: BEGIN; each statement under a SAVEPOINT; ROLLBACK. There is no
  server of someone else's here, so nothing is refused for writing; the relations a
  cold cell evicts are the file's (SQLite keeps every table in the one file, and its
  eviction drops that file from the OS page cache and closes every connection).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import apsw

from ...jsonvalue import JsonObject, as_list, as_object
from ...workloads.pgscript import Statement
from ...workloads.sql import Bound, CheckStatement, ScriptFacts, SessionAccess, bind_by_execute
from ..base import DialectBase, EngineError, SessionProfiler
from .session import SqliteSession

if TYPE_CHECKING:
    from ..base import Session
    from . import SqliteEngine

META = "blocklab_meta"
DATASET_KEY = "blocklab_sql_dataset"  # its fingerprint: {"fingerprint": ..., "tables": [...]}


class SqlScripts(DialectBase):
    def __init__(self, engine: SqliteEngine):
        self.engine = engine

    def placeholder(self, n: int) -> str:
        return "?"

    def driver_sql(self, chunks: Sequence[str]) -> str:
        return "?".join(chunks)

    def execute(self, session: Session, text: str, params: Sequence[object]) -> int:
        conn = _own(session).conn
        before = conn.total_changes()  # changes() would repeat the last write's count after a COMMIT
        rows = conn.execute(text, tuple(params)).fetchall()
        return len(rows) if rows else int(conn.total_changes() - before)

    def protocols(self) -> tuple[str, ...]:
        return ("prepared",)  # apsw prepares each statement once (its statement cache) and binds its values

    def bind(self, session: Session, statements: Sequence[Statement], protocol: str) -> list[Bound]:
        return bind_by_execute(self, session, statements)

    def statement_error(self, err: BaseException) -> tuple[str, int | None] | None:
        if not isinstance(err, apsw.Error):
            return None
        offset = getattr(err, "error_offset", -1)  # apsw's: where SQLite stopped reading the statement, -1 unknown
        return f"SQLite error: {err}", (int(offset) if isinstance(offset, int) and offset >= 0 else None)

    fork_sessions = False  # SQLite forbids carrying a connection across fork (its locks are per process) and its cancel, interrupt(), works only in-process

    def sql_session(self, access: SessionAccess) -> SqliteSession:
        session = self.engine.connect()
        if access.read_only:
            session.execute("PRAGMA query_only = 1")
        return session

    def can_copy_tables(self) -> bool:
        return False  # the file is blocklab's own

    def profiler(self, sample_ms: float, sample_nice: int | None) -> SessionProfiler | None:
        return None  # SQLite has no wait events to sample

    def cold_problem(self) -> str | None:
        return None

    def copy_tables(self, tables: list[str]) -> str:
        raise EngineError("SQLite's database is blocklab's own: its scripts write it, no copies are made")

    # ------------------------------------------------------------------ the data set
    def dataset_schema(self, fingerprint: str) -> str | None:
        return None  # SQLite has one namespace (main)

    def _recorded(self) -> JsonObject | None:
        if not self.engine.query("SELECT count(*) FROM sqlite_master WHERE name = ?", (META,))[0][0]:
            return None
        rows = self.engine.query(f'SELECT fingerprint FROM "{META}" WHERE name = ?', (DATASET_KEY,))
        return as_object(json.loads(rows[0][0])) if rows else None  # written by build_dataset: an object

    def dataset_built(self, fingerprint: str) -> bool:
        recorded = self._recorded()
        return recorded is not None and recorded.get("fingerprint") == fingerprint

    def build_dataset(self, fingerprint: str, statements: list[CheckStatement]) -> None:
        previous = self._recorded()
        conn = self.engine.sqlite_connect()
        try:
            for table in as_list((previous or {}).get("tables")):
                conn.execute(f'DROP TABLE IF EXISTS "{table}"')
            before = _tables(conn)
            conn.execute("BEGIN")
            for i, statement in enumerate(statements):
                if statement.transaction is not None:
                    continue  # the build is one transaction
                try:
                    conn.execute(statement.sql, tuple(statement.params)).fetchall()
                except apsw.Error as err:
                    conn.execute("ROLLBACK")
                    raise EngineError(f"the data set's setup/load failed at its statement {i + 1} "
                                      f"({' '.join(statement.sql.split())[:80]}): {err}") from None
            made = sorted(_tables(conn) - before)
            self.engine.set_table_fingerprint(conn, DATASET_KEY, json.dumps({"fingerprint": fingerprint, "tables": made}))
            conn.execute("COMMIT")
            conn.execute("ANALYZE").fetchall()
        finally:
            self.engine._forget(conn)

    # ------------------------------------------------------------------ the check run
    def check_run(self, statements: list[CheckStatement], access: SessionAccess) -> ScriptFacts:
        facts = ScriptFacts()
        conn = self.engine.sqlite_connect()
        try:
            conn.execute("BEGIN")
            try:
                for statement in statements:
                    if statement.transaction is not None:
                        continue
                    try:
                        conn.execute(statement.sql, tuple(statement.params)).fetchall()
                    except apsw.Error as err:
                        why = self.statement_error(err)
                        facts.failed = (statement.index, *(why or (str(err), None)))
                        return facts
                facts.relations = sorted(_tables(conn, ("table", "index")))
            finally:
                conn.execute("ROLLBACK")
        finally:
            self.engine._forget(conn)
        return facts


def _own(session: Session) -> SqliteSession:
    """A session given to the dialect: always one of this engine's own."""
    assert isinstance(session, SqliteSession), session
    return session


def _tables(conn: apsw.Connection, types: tuple[str, ...] = ("table",)) -> set[str]:
    """The file's user tables (and indexes), not SQLite's own or blocklab's meta table."""
    marks = ", ".join("?" for _ in types)
    rows = conn.execute(f"SELECT name FROM sqlite_master WHERE type IN ({marks}) AND name NOT LIKE 'sqlite_%' "
                        f"AND name != '{META}'", types).fetchall()
    return {str(r[0]) for r in rows}
