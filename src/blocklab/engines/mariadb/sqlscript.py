"""The `sql` workload on MariaDB (workloads/sql.py SqlDialect): the user's scripts.

* Parameters: PyMySQL's %s, which it escapes into the statement's text (MariaDB's
  text protocol: the driver, not blocklab, quotes each value); a statement without
  parameters is sent as it is. MariaDB's errors carry no offset: an error names the
  statement's first line.
* Everything happens in blocklab's database `blocklab` (the private instance's, or
  the one blocklab makes on a server by DSN); a script names other databases'
  tables with their database (`shop.orders`).
* The data set of a setup/load: its fingerprint and the tables it made are kept in
  the table `blocklab_sql_meta` (the tables also when the build fails or is cut off,
  without the fingerprint); a data set of another content first drops those.
* The check run: a READ ONLY session without autocommit, START TRANSACTION READ
  ONLY; each statement under a SAVEPOINT, and one that ended the transaction
  (an implicit commit: DDL, ANALYZE TABLE, FLUSH) refuses the script. One
  MariaDB refuses as a write (error 1792) is explained instead (EXPLAIN
  FORMAT=JSON names its tables); then ROLLBACK. The relations a cold cell evicts
  (the private instance restarts, which empties the buffer pool, and drops their
  files from the OS page cache) are the tables of blocklab's database (its catalog).
* On a server by DSN every session is READ ONLY; a writing script is refused even
  with --allow-writes: MariaDB has no search path that would send a script's
  writes to copies of its tables.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pymysql

from ...jsonvalue import JsonObject, JsonValue, as_list, as_object
from ...workloads.pgscript import Statement
from ...workloads.sql import Bound, CheckStatement, ScriptFacts, SessionAccess, bind_by_execute
from ..base import DialectBase, EngineError
from .dsn import DATABASE
from .session import MariadbSession
from .waits import SessionWaitProfiler

if TYPE_CHECKING:
    from pymysql.cursors import Cursor

    from ..base import Session
    from . import MariadbEngine

META = "blocklab_sql_meta"
READ_ONLY_ERROR = 1792  # ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION


class SqlScripts(DialectBase):
    def __init__(self, engine: MariadbEngine):
        self.engine = engine

    def placeholder(self, n: int) -> str:
        return "%s"

    def driver_sql(self, chunks: Sequence[str]) -> str:
        if len(chunks) == 1:
            return chunks[0]  # sent as it is: PyMySQL formats only a statement given parameters
        return "%s".join(c.replace("%", "%%") for c in chunks)

    def execute(self, session: Session, text: str, params: Sequence[object]) -> int:
        with _own(session).conn.cursor() as cur:
            count = cur.execute(text, tuple(params) if params else None)
            cur.fetchall()
        return int(count or 0)

    def protocols(self) -> tuple[str, ...]:
        return ("simple",)  # PyMySQL writes the values into the statement's text

    def bind(self, session: Session, statements: Sequence[Statement], protocol: str) -> list[Bound]:
        return bind_by_execute(self, session, statements)

    def statement_error(self, err: BaseException) -> tuple[str, int | None] | None:
        if not isinstance(err, pymysql.err.MySQLError) or not err.args or not isinstance(err.args[0], int):
            return None
        return f"MariaDB error {err.args[0]}: {err.args[1] if len(err.args) > 1 else err}", None

    fork_sessions = True  # a socket: the child uses it, the parent cancels by KILL QUERY from a connection of its own

    def sql_session(self, access: SessionAccess) -> MariadbSession:
        session = self.engine.connect()
        if access.read_only:
            session.execute("SET SESSION TRANSACTION READ ONLY")
        return session

    def can_copy_tables(self) -> bool:
        return self.engine.mode == "dsn"

    def copy_tables(self, tables: list[str]) -> str:
        raise EngineError(f"a writing script on a MariaDB server given by --dsn cannot be sent to copies of "
                          f"{', '.join(tables)}: MariaDB has no search path; run it on the private instance (no --dsn)")

    def profiler(self, sample_ms: float, sample_nice: int | None) -> SessionWaitProfiler:
        return SessionWaitProfiler(self.engine)

    def cold_problem(self) -> str | None:
        return None  # the engine's own cold_cache_problem refuses a server by DSN

    # ------------------------------------------------------------------ the data set
    def dataset_schema(self, fingerprint: str) -> str | None:
        return None  # blocklab's database

    def _recorded(self) -> JsonObject | None:
        if not self.engine.query("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                                 (DATABASE, META))[0][0]:
            return None
        rows = self.engine.query(f"SELECT fingerprint FROM `{META}` WHERE name = 'dataset'")
        return as_object(json.loads(rows[0][0])) if rows else None  # written by build_dataset: an object

    def dataset_built(self, fingerprint: str) -> bool:
        recorded = self._recorded()
        return recorded is not None and recorded.get("fingerprint") == fingerprint

    def build_dataset(self, fingerprint: str, statements: list[CheckStatement]) -> None:
        previous = self._recorded()
        with self.engine.sql_connect(session=False) as conn, conn.cursor() as cur:
            cur.execute(f"CREATE TABLE IF NOT EXISTS `{META}` (name VARCHAR(64) PRIMARY KEY, fingerprint TEXT)")
            previous_tables = {t for t in as_list((previous or {}).get("tables")) if isinstance(t, str)}
            for table in sorted(previous_tables & _tables(cur)):  # the catalog's names only
                cur.execute(f"DROP TABLE IF EXISTS {_ident(table)}")
            cur.execute(f"DELETE FROM `{META}`")
            before = _tables(cur)
            built = False
            try:
                for i, statement in enumerate(statements):
                    try:
                        cur.execute(statement.sql, tuple(statement.params) if statement.params else None)
                    except pymysql.err.MySQLError as err:
                        raise EngineError(f"the data set's setup/load failed at its statement {i + 1} "
                                          f"({' '.join(statement.sql.split())[:80]}): {err}") from None
                made = sorted(_tables(cur) - before)
                for table in made:
                    self.engine.analyze(table)
                built = True
            finally:  # the tables made are recorded even when the build fails or is cut off: the next build drops them
                with contextlib.suppress(pymysql.err.MySQLError), self.engine.sql_connect(session=False) as fresh, \
                        fresh.cursor() as c:  # a connection of its own: the build's may be cut off mid-statement
                    record = {"fingerprint": fingerprint if built else None, "tables": sorted(_tables(c) - before)}
                    c.execute(f"REPLACE INTO `{META}` VALUES ('dataset', %s)", (json.dumps(record),))

    # ------------------------------------------------------------------ the check run
    def check_run(self, statements: list[CheckStatement], access: SessionAccess) -> ScriptFacts:
        facts = ScriptFacts()
        with self.engine.sql_connect(autocommit=False) as conn, conn.cursor() as cur:
            # READ ONLY for the session too, and no autocommit: a statement that commits implicitly
            # (ANALYZE TABLE, FLUSH, DDL, LOCK TABLES) ends the transaction, and what follows it must
            # still write nothing; such a statement is refused below, by the transaction it ended
            cur.execute("SET SESSION TRANSACTION READ ONLY")
            cur.execute("START TRANSACTION READ ONLY")
            try:
                for statement in statements:
                    if statement.transaction is not None:
                        continue
                    cur.execute("SAVEPOINT blocklab_check")
                    try:
                        cur.execute(statement.sql, tuple(statement.params) if statement.params else None)
                        cur.fetchall()
                    except pymysql.err.MySQLError as err:
                        if not _in_transaction(cur):
                            facts.failed = (statement.index, ENDS_TRANSACTION, None)
                            return facts
                        cur.execute("ROLLBACK TO SAVEPOINT blocklab_check")
                        if not err.args or err.args[0] != READ_ONLY_ERROR:
                            why = self.statement_error(err)
                            facts.failed = (statement.index, *(why or (str(err), None)))
                            return facts
                        facts.writes[statement.index] = _explained_tables(cur, statement)
                        facts.uncopyable[statement.index] = ("MariaDB has no search path that would send the script's "
                                                             "writes to copies of its tables; run it on the private "
                                                             "instance (no --dsn)")
                    else:
                        left = ENDS_TRANSACTION if not _in_transaction(cur) else _read_write(cur)
                        if left:
                            facts.failed = (statement.index, left, None)
                            return facts
                facts.relations = sorted(_tables(cur) - {META})
            finally:
                cur.execute("ROLLBACK")
        return facts


def _own(session: Session) -> MariadbSession:
    """A session given to the dialect: always one of this engine's own."""
    assert isinstance(session, MariadbSession), session
    return session


ENDS_TRANSACTION = ("this statement ends the transaction implicitly (MariaDB commits before it: DDL, ANALYZE, FLUSH, LOCK "
                    "TABLES ...), and the check run, READ ONLY and rolled back, must stay one transaction; leave it out "
                    "of the script (run it before blocklab, or in the setup)")


def _in_transaction(cur: Cursor) -> bool:
    cur.execute("SELECT @@in_transaction")
    row = cur.fetchone()
    return bool(row and int(row[0]))


def _read_write(cur: Cursor) -> str | None:
    """Why the check run's session is no longer READ ONLY (a procedure's SET SESSION TRANSACTION READ WRITE)."""
    cur.execute("SELECT @@session.tx_read_only")
    row = cur.fetchone()
    if row and int(row[0]):
        return None
    return ("this statement turns the session's READ ONLY off (SET SESSION TRANSACTION READ WRITE, tx_read_only), and "
            "what follows it could write; a script may not change it")


def _ident(name: str) -> str:
    """A name from the catalog as MariaDB quotes an identifier."""
    return "`" + name.replace("`", "``") + "`"


def _tables(cur: Cursor) -> set[str]:
    cur.execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_TYPE = 'BASE TABLE'",
                (DATABASE,))
    return {str(r[0]) for r in cur.fetchall()}


def _explained_tables(cur: Cursor, statement: CheckStatement) -> list[str]:
    """The tables EXPLAIN FORMAT=JSON names for a statement (its plan: nothing runs)."""
    try:
        cur.execute("EXPLAIN FORMAT=JSON " + statement.sql, tuple(statement.params) if statement.params else None)
        plan: JsonValue = json.loads(cur.fetchall()[0][0])
    except (pymysql.err.MySQLError, IndexError, ValueError):
        return [f"{DATABASE}.?"]
    found: set[str] = set()

    def walk(node: JsonValue) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("table_name"), str):
                found.add(f"{DATABASE}.{node['table_name']}")
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(plan)
    return sorted(found)
