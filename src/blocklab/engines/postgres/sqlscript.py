"""The `sql` workload on PostgreSQL (workloads/sql.py SqlDialect): the user's scripts.

* protocol "prepared" (the default): parameters are bound by the server ($1, $2 ... in
  the text it is sent, as text values it casts to what the statement needs). A session
  prepares each statement once, at its first run, and then only executes it, as pgbench
  -M prepared. protocol "simple", as pgbench -M simple (its default): each statement is
  sent whole, parsed and planned every time, its values written into its text as
  psycopg's client-side cursor (ClientCursor) quotes them: a script's values are only
  ints and floats, so literal() writes them itself, equal byte for byte to psycopg's
  (tests/test_sql_protocol.py), at a tenth of its cost. Both go straight through libpq
  (psycopg's pq layer), because psycopg's cursor costs ~50 us of Python per statement,
  which at thousands of statements a second on two cores would measure the client.
* The data set of a setup/load lives in a schema of its own, `blocklab_sql_<hash>`
  (the hash of the setup's and load's content and the row count), its fingerprint the
  schema's COMMENT, written last: built once per machine, kept while its content is.
* The check run: a session default_transaction_read_only, BEGIN READ ONLY; each
  statement under a SAVEPOINT, and one that ends the transaction or turns the
  session's READ ONLY off refuses the script. One the server
  refuses as a write (SQLSTATE 25006) is explained instead (EXPLAIN VERBOSE, FORMAT
  JSON: its ModifyTable nodes name the tables it writes; EXPLAIN runs nothing). What
  the transaction read is in pg_stat_xact_user_tables (this transaction's own scans),
  their indexes in pg_index. Then ROLLBACK: nothing was written.
* On a DSN: sessions are `default_transaction_read_only`, checked still on before
  each statement (the server reports it, 14 and later: no round trip), so every
  transaction begins READ ONLY and a write is an error, never a change (workloads/
  sql.py refuses the statements that would undo it); a script allowed to write
  works on copies in the schema `blocklab_sql` (CREATE TABLE (LIKE ... INCLUDING
  INDEXES, CONSTRAINTS, DEFAULTS, IDENTITY) + INSERT ... SELECT), looked in first
  (search_path). Every cell starts from the originals' rows: its copies are made
  afresh before it. server.py lists that schema among what blocklab made; `blocklab
  clean` drops it.
* Cold cache: PostgreSQL 17 evicts a relation's buffers (pg_buffercache_evict);
  before 17 blocklab evicts by rewriting its own tables (VACUUM FULL), never a
  user's: on such a server the user's tables are measured warm, by design.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import psycopg
from psycopg import pq, sql

from ...jsonvalue import JsonObject, JsonValue, as_list, as_object
from ...workloads.pgscript import Statement
from ...workloads.pgscript_expr import Value
from ...workloads.sql import Bound, CheckStatement, ScriptFacts, SessionAccess
from ..base import DialectBase, EngineError
from .session import PgSession
from .waits import SessionSampler

if TYPE_CHECKING:
    from psycopg.pq.abc import PGconn, PGresult

    from ..base import Session
    from . import PostgresEngine

COPY_SCHEMA = "blocklab_sql"  # the copies of a writing script's tables on a DSN
DATASET_PREFIX = "blocklab_sql_"  # + the data set's hash: a setup/load's schema
READ_ONLY_SQLSTATE = "25006"
TUPLES_OK, COMMAND_OK = pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK


class SqlScripts(DialectBase):
    def __init__(self, engine: PostgresEngine):
        self.engine = engine

    # ------------------------------------------------------------------ statements
    def placeholder(self, n: int) -> str:
        return f"${n}"

    def driver_sql(self, chunks: Sequence[str]) -> str:
        out = [chunks[0]]
        for n, chunk in enumerate(chunks[1:], start=1):
            out += [f"${n}", chunk]
        return "".join(out)

    def execute(self, session: Session, text: str, params: Sequence[Value]) -> int:
        session = _own(session)
        if session.read_only_guard and not read_only_default(session.conn.pgconn):
            raise EngineError(TURNED_OFF)
        names = tuple(f"p{i}" for i in range(len(params)))
        return _prepared(session, text, names)(dict(zip(names, params)))

    def protocols(self) -> tuple[str, ...]:
        return ("prepared", "simple")

    def bind(self, session: Session, statements: Sequence[Statement], protocol: str) -> list[Bound]:
        session = _own(session)
        if protocol == "simple":
            bound = [_simple(session, st.chunks, st.names) for st in statements]
        else:
            bound = [_prepared(session, self.driver_sql(st.chunks), st.names) for st in statements]
        if session.read_only_guard:  # a DSN's READ ONLY session: checked before each statement, as execute() does
            return [_guarded(session.conn.pgconn, run) for run in bound]
        return bound

    def statement_error(self, err: BaseException) -> tuple[str, int | None] | None:
        if not isinstance(err, psycopg.Error) or isinstance(err, psycopg.OperationalError) and err.sqlstate is None:
            return None
        diag = err.diag
        message = diag.message_primary or (str(err).strip().splitlines() or [type(err).__name__])[0]
        if err.sqlstate:
            message = f"PostgreSQL error {err.sqlstate}: {message}"
        position = int(diag.statement_position) - 1 if diag.statement_position else None
        return message, position

    # ------------------------------------------------------------------ sessions
    fork_sessions = True  # a libpq socket: the child uses it, the parent cancels through its own cancel request

    def sql_session(self, access: SessionAccess) -> PgSession:
        session = self.engine.connect()
        try:
            session.execute("SET application_name = 'blocklab sql'")
            if access.read_only:
                session.execute("SET default_transaction_read_only = on")
                session.read_only_guard = True  # and still on before each statement: every transaction begins READ ONLY
            if access.schemas:
                _search_first(session.conn, access.schemas)
        except BaseException:
            session.close()
            raise
        return session

    def can_copy_tables(self) -> bool:
        return self.engine.mode == "dsn"

    def profiler(self, sample_ms: float, sample_nice: int | None) -> SessionSampler:
        return SessionSampler(self.engine, interval=sample_ms / 1000, nice=sample_nice)

    # ------------------------------------------------------------------ the data set
    def dataset_schema(self, fingerprint: str) -> str:
        return DATASET_PREFIX + json.loads(fingerprint)["content"][:12]

    def dataset_built(self, fingerprint: str) -> bool:
        rows = self.engine.query("SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = %s",
                                 (self.dataset_schema(fingerprint),))
        return bool(rows) and rows[0][0] == fingerprint

    def build_dataset(self, fingerprint: str, statements: list[CheckStatement]) -> None:
        schema = sql.Identifier(self.dataset_schema(fingerprint))
        with self.engine.pg_connect(session=False) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(schema))  # a build cut off before its end
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(schema))
            _search_first(conn, (self.dataset_schema(fingerprint),))
            for i, statement in enumerate(statements):
                try:
                    _exec(conn, statement.sql, statement.params)
                except psycopg.Error as err:
                    why = self.statement_error(err)
                    raise EngineError(f"the data set's setup/load failed at its statement {i + 1} "
                                      f"({' '.join(statement.sql.split())[:80]}): {why[0] if why else err}") from None
            conn.execute("CHECKPOINT")
            conn.execute(sql.SQL("ANALYZE"))
            conn.execute(sql.SQL("COMMENT ON SCHEMA {} IS {}").format(schema, sql.Literal(fingerprint)))

    # ------------------------------------------------------------------ the check run
    def check_run(self, statements: list[CheckStatement], access: SessionAccess) -> ScriptFacts:
        facts = ScriptFacts()
        written: set[str] = set()
        with self.engine.pg_connect() as conn:
            if access.schemas:
                _search_first(conn, access.schemas)
            conn.execute("SET default_transaction_read_only = on")  # a transaction after one a statement ended: read only too
            conn.execute("BEGIN READ ONLY")
            try:
                for statement in statements:
                    if statement.transaction is not None:
                        continue  # the check is one transaction of its own
                    conn.execute("SAVEPOINT blocklab_check")
                    try:
                        _exec(conn, statement.sql, statement.params)
                    except psycopg.Error as err:
                        if conn.pgconn.transaction_status != pq.TransactionStatus.INERROR:
                            facts.failed = (statement.index, ENDS_TRANSACTION, None)
                            return facts
                        conn.execute("ROLLBACK TO SAVEPOINT blocklab_check")
                        if err.sqlstate != READ_ONLY_SQLSTATE:
                            why = self.statement_error(err)
                            facts.failed = (statement.index, *(why or (str(err), None)))
                            return facts
                        targets = _write_targets(conn, statement)
                        if isinstance(targets, str):
                            facts.unknown_writes[statement.index] = targets
                        else:
                            facts.writes[statement.index] = targets
                            written.update(targets)
                            if _names_its_schema(conn, statement):
                                facts.uncopyable[statement.index] = (
                                    f"it names {', '.join(targets)} with its schema, and blocklab's copies are found through "
                                    "the search path: name the table without its schema")
                    else:
                        escape = _left_read_only(conn)
                        if escape:
                            facts.failed = (statement.index, escape, None)
                            return facts
                        conn.execute("RELEASE SAVEPOINT blocklab_check")
                facts.relations = _touched(conn, sorted(written))
            finally:
                with contextlib.suppress(psycopg.Error):
                    conn.execute("ROLLBACK")
        return facts

    # ------------------------------------------------------------------ copies on a DSN
    def copy_tables(self, tables: list[str]) -> str:
        """Each copy is made afresh from its original at every cell (runner.run_cell prepares the workload
        at each: every cell starts from the originals' rows, not from what the cells before it wrote),
        records its original in its COMMENT, and has its own sequences: a serial column's default would
        otherwise advance the user's sequence."""
        names = [qualified.split(".", 1) for qualified in tables]
        for name in {n for _, n in names}:
            sources = sorted(f"{s}.{n}" for s, n in names if n == name)
            if len(sources) > 1:
                raise EngineError(f"--allow-writes: the script writes {' and '.join(sources)}, whose copies would both be "
                                  f"{COPY_SCHEMA}.{name}; blocklab copies one table of a name")
        with self.engine.pg_connect(session=False) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(COPY_SCHEMA)))
            conn.execute(sql.SQL("COMMENT ON SCHEMA {} IS {}").format(
                sql.Identifier(COPY_SCHEMA), sql.Literal("blocklab's copies of tables a script writes; blocklab clean removes it")))
            for schema, name in names:
                copy = sql.Identifier(COPY_SCHEMA, name)
                source = _quoted(f"{schema}.{name}")
                original = sql.Identifier(schema, name)
                with conn.transaction():  # afresh at every cell: an earlier cell's or run's copy was written
                    conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(copy))
                    conn.execute(sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES "
                                         "INCLUDING IDENTITY)").format(copy, original))
                    _own_sequences(conn, name, source)
                    conn.execute(sql.SQL("INSERT INTO {} OVERRIDING SYSTEM VALUE SELECT * FROM {}").format(copy, original))
                    conn.execute(sql.SQL("COMMENT ON TABLE {} IS {}").format(copy, sql.Literal(source)))
                conn.execute(sql.SQL("ANALYZE {}").format(copy))
        return COPY_SCHEMA

    # ------------------------------------------------------------------ cold cache
    def cold_problem(self) -> str | None:
        if self.engine.mode == "dsn" and self.engine.major < 17:
            return (f"PostgreSQL {self.engine.major} cannot take a table out of shared buffers (pg_buffercache_evict "
                    "comes with 17), and blocklab evicts by rewriting only its own tables, never yours: your tables are "
                    "measured warm here, by design; set measure.cache = 'warm' or 'auto' (the --script shortcut's)")
        return None


def _own(session: Session) -> PgSession:
    """A session given to the dialect: always one of this engine's own."""
    assert isinstance(session, PgSession), session
    return session


def _prepared(session: PgSession, text: str, names: tuple[str, ...]) -> Bound:
    """The statement prepared on the session at its first run (as pgbench -M prepared), then only
    executed: its values sent as text (str() of an int or a float: its repr), which the server
    casts to what the statement needs."""
    pgconn = session.conn.pgconn
    exec_prepared = pgconn.exec_prepared
    name: bytes | None = session.prepared.get(text)

    def run(env: dict[str, Value]) -> int:
        nonlocal name
        if name is None:
            name = _prepare(session, text)
        result = exec_prepared(name, [str(env[n]).encode() for n in names])
        return int(result.ntuples) if result.status == TUPLES_OK else _count(result)

    return run


def _guarded(pgconn: PGconn, run: Bound) -> Bound:
    """A statement on a READ ONLY session of someone's server: run only while the session is still
    READ ONLY (the server reports it: no round trip)."""
    def guarded(env: dict[str, Value]) -> int:
        if not read_only_default(pgconn):
            raise EngineError(TURNED_OFF)
        return run(env)

    return guarded


def _prepare(session: PgSession, text: str) -> bytes:
    name: bytes | None = session.prepared.get(text)
    if name is None:
        name = f"blocklab_sql_{len(session.prepared)}".encode()
        _checked(session.conn.pgconn.prepare(name, text.encode()))
        session.prepared[text] = name
    return name


def _simple(session: PgSession, chunks: Sequence[str], names: tuple[str, ...]) -> Bound:
    """The statement sent whole (as pgbench -M simple, its default): the server parses and plans it
    every time. Its values are written into its text as psycopg's client-side cursor quotes them
    (literal()): never pasted as they come."""
    pgconn = session.conn.pgconn
    exec_ = pgconn.exec_
    if not names:
        whole = chunks[0].encode()
        return lambda env: _count(exec_(whole))
    template = b"%s".join(c.encode().replace(b"%", b"%%") for c in chunks)  # bytes % (the literals,)

    def run(env: dict[str, Value]) -> int:
        result = exec_(template % tuple([literal(env[n]) for n in names]))
        return int(result.ntuples) if result.status == TUPLES_OK else _count(result)

    return run


def literal(value: object) -> bytes:
    """A script's value (an int or a float) as a SQL literal, exactly as psycopg's ClientCursor
    quotes it (tests/test_sql_protocol.py compares the two): a negative number with a space
    before it, so that `-:x` never reads as a `--` comment; infinities and NaN as typed strings."""
    if type(value) is int:
        return b"%d" % value if value >= 0 else b" %d" % value
    if isinstance(value, float):
        if value != value:
            return b"'NaN'::float8"
        if value in (_INF, -_INF):
            return b"'Infinity'::float8" if value > 0 else b"'-Infinity'::float8"
        text = repr(value).encode()
        return b" " + text if text[:1] == b"-" else text  # -0.0 too
    raise TypeError(f"a script's value is an int or a float, not {type(value).__name__} ({value!r})")


_INF = float("inf")


def _count(result: PGresult) -> int:
    """The rows a statement returned or changed; the server's error raised as psycopg raises it."""
    status = result.status
    if status == TUPLES_OK:
        return int(result.ntuples)
    if status != COMMAND_OK:
        raise psycopg.errors.error_from_result(result)
    changed = result.command_tuples
    return int(changed) if changed else 0


TURNED_OFF = ("a statement of the script turned the session's READ ONLY off (default_transaction_read_only = off; a "
              "function's set_config, RESET, DISCARD): stopped before the next statement, which could have written; on a "
              "server given by --dsn a script may not change it")
ENDS_TRANSACTION = ("this statement ends the transaction (COMMIT, PREPARE TRANSACTION ...), and the check run, READ ONLY and "
                    "rolled back, must stay one transaction; leave it out of the script (BEGIN/COMMIT of its own are fine)")


def _left_read_only(conn: psycopg.Connection) -> str | None:
    """Why the check run's transaction is no longer the READ ONLY one it began (None: it is)."""
    if conn.pgconn.transaction_status != pq.TransactionStatus.INTRANS:
        return ENDS_TRANSACTION
    if not read_only_default(conn.pgconn):
        return ("this statement turns the session's READ ONLY off (default_transaction_read_only), and every transaction "
                "after it could write; a script may not change it")
    return None


def read_only_default(pgconn: PGconn) -> bool:
    """Is default_transaction_read_only on? Without a round trip where the server reports it (14 and later)."""
    reported = pgconn.parameter_status(b"default_transaction_read_only")
    if reported is None:
        result = _checked(pgconn.exec_(b"SELECT current_setting('default_transaction_read_only')"))
        reported = result.get_value(0, 0)
    return bytes(reported or b"") == b"on"


SEQUENCE_TYPES = ("smallint", "integer", "bigint")


def _own_sequences(conn: psycopg.Connection, name: str, source: str) -> None:
    """The copy COPY_SCHEMA.name of `source` (LIKE ... INCLUDING DEFAULTS, IDENTITY) numbers its rows
    from sequences of its own, each starting after its original's current value (pg_sequences.last_value,
    read without advancing it): a serial column's nextval('the user's sequence') default repointed to a
    new sequence in COPY_SCHEMA, an identity column's sequence (new already) moved on."""
    copy_text = _quoted(f"{COPY_SCHEMA}.{name}")
    serial = conn.execute(
        "SELECT a.attname, pg_get_expr(ad.adbin, ad.adrelid), sc.oid::regclass::text FROM pg_attrdef ad "
        "JOIN pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum "
        "JOIN pg_depend d ON d.classid = 'pg_attrdef'::regclass AND d.objid = ad.oid AND d.refclassid = 'pg_class'::regclass "
        "JOIN pg_class sc ON sc.oid = d.refobjid AND sc.relkind = 'S' WHERE ad.adrelid = %s::regclass ORDER BY a.attnum",
        (copy_text,)).fetchall()
    for column, default, sequence in serial:
        if not re.fullmatch(r"nextval\('(?:[^']|'')*'::regclass\)", str(default)):
            raise EngineError(f"--allow-writes: {source}.{column}'s default ({default}) draws from the sequence {sequence} "
                              "inside an expression; blocklab cannot give its copy a sequence of its own, and the copy's "
                              "inserts would advance yours")
        info = conn.execute("SELECT format_type(seqtypid, NULL), seqstart, seqincrement, seqmin, seqmax, seqcache, seqcycle "
                            "FROM pg_sequence WHERE seqrelid = %s::regclass", (sequence,)).fetchone()
        assert info is not None  # the catalog's own sequence
        kind, start, increment, low, high, cache, cycle = info
        if kind not in SEQUENCE_TYPES:
            raise EngineError(f"--allow-writes: the sequence {sequence} is of type {kind}; accepted: {', '.join(SEQUENCE_TYPES)}")
        own = sql.Identifier(COPY_SCHEMA, f"{name}_{column}_seq"[:63])
        conn.execute(sql.SQL("DROP SEQUENCE IF EXISTS {}").format(own))
        conn.execute(sql.SQL("CREATE SEQUENCE {} AS {} INCREMENT BY {} MINVALUE {} MAXVALUE {} START WITH {} CACHE {} {} "
                             "OWNED BY {}").format(own, sql.SQL(kind), sql.Literal(int(increment)), sql.Literal(int(low)),
                                                   sql.Literal(int(high)), sql.Literal(int(start)), sql.Literal(int(cache)),
                                                   sql.SQL("CYCLE" if cycle else "NO CYCLE"),
                                                   sql.Identifier(COPY_SCHEMA, name, str(column))))
        conn.execute(sql.SQL("ALTER TABLE {} ALTER COLUMN {} SET DEFAULT nextval({}::regclass)").format(
            sql.Identifier(COPY_SCHEMA, name), sql.Identifier(str(column)), sql.Literal(own.as_string(conn))))
        _continue_from(conn, own.as_string(conn), sequence)
    identity = conn.execute("SELECT attname, pg_get_serial_sequence(%s, attname), pg_get_serial_sequence(%s, attname) "
                            "FROM pg_attribute WHERE attrelid = %s::regclass AND attidentity <> ''",
                            (copy_text, source, copy_text)).fetchall()
    for _, own_text, original in identity:
        if own_text and original:
            _continue_from(conn, str(own_text), str(original))


def _continue_from(conn: psycopg.Connection, own: str, original: str) -> None:
    """The sequence `own` goes on where `original` is, which is read, not advanced."""
    row = conn.execute("SELECT last_value FROM pg_sequences "
                       "WHERE (quote_ident(schemaname) || '.' || quote_ident(sequencename))::regclass = %s::regclass",
                       (original,)).fetchone()
    if row and row[0] is not None:  # None: never drawn from (or not ours to read): the copy starts where it starts
        conn.execute("SELECT setval(%s::regclass, %s, true)", (own, row[0]))


def _param(value: object) -> bytes:
    """A parameter as text, which the server casts to the type the statement needs (as pgbench sends them)."""
    return (repr(value) if isinstance(value, float) else str(value)).encode()


def _checked(result: pq.abc.PGresult) -> pq.abc.PGresult:
    """The result, or the server's error raised as psycopg raises it (SQLSTATE, position and all)."""
    if result.status not in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK):
        raise psycopg.errors.error_from_result(result)
    return result


def _exec(conn: psycopg.Connection, text: str, params: Sequence[object]) -> pq.abc.PGresult:
    """One statement with its parameters, unprepared (the check run, the data set's build)."""
    return _checked(conn.pgconn.exec_params(text.encode(), [_param(p) for p in params]))


def _search_first(conn: psycopg.Connection, schemas: Sequence[str]) -> None:
    """The session looks in `schemas` first, then where it looked before."""
    conn.execute("SELECT set_config('search_path', %s || ', ' || current_setting('search_path'), false)",
                 (", ".join(sql.Identifier(s).as_string(conn) for s in schemas),))


def _write_targets(conn: psycopg.Connection, statement: CheckStatement) -> list[str] | str:
    """The tables a statement the server refused as a write would write, from its plan;
    why not, when it has no plan (DDL, a function's own writes)."""
    conn.execute("SAVEPOINT blocklab_explain")
    try:
        result = _exec(conn, "EXPLAIN (VERBOSE, FORMAT JSON) " + statement.sql, statement.params)
    except psycopg.Error as err:
        conn.execute("ROLLBACK TO SAVEPOINT blocklab_explain")
        return f"it is not a table write PostgreSQL can explain: {(err.diag.message_primary or str(err)).strip()}"
    conn.execute("RELEASE SAVEPOINT blocklab_explain")
    value = result.get_value(0, 0) if result.ntuples else None
    plan: JsonValue = json.loads(bytes(value).decode()) if value is not None else []
    found: list[str] = []

    def walk(node: JsonObject) -> None:
        if node.get("Node Type") == "ModifyTable" and node.get("Relation Name"):
            found.append(f"{node.get('Schema', 'public')}.{node['Relation Name']}")
        for child in as_list(node.get("Plans")):
            walk(as_object(child))

    for entry in as_list(plan):  # EXPLAIN's JSON: a list of {"Plan": {...}}
        walk(as_object(as_object(entry)["Plan"]))
    if not found:
        return "its plan writes no table (a function or a command that writes elsewhere)"
    return sorted(set(found))


def _names_its_schema(conn: psycopg.Connection, statement: CheckStatement) -> bool:
    """Does the statement find its tables without the search path (schema.table)? Its plan is
    asked with an empty search path: only a statement that names the schemas has one."""
    conn.execute("SAVEPOINT blocklab_path")
    try:
        conn.execute("SET LOCAL search_path = pg_catalog")
        _exec(conn, "EXPLAIN " + statement.sql, statement.params)
        return True
    except psycopg.Error:
        return False
    finally:
        conn.execute("ROLLBACK TO SAVEPOINT blocklab_path")  # the search path with it


def _touched(conn: psycopg.Connection, written: list[str]) -> list[str]:
    """Tables this transaction scanned (its own statistics) or would write, and their indexes."""
    rows = conn.execute(
        "SELECT schemaname || '.' || relname FROM pg_stat_xact_user_tables "
        "WHERE seq_scan + coalesce(idx_scan, 0) + n_tup_ins + n_tup_upd + n_tup_del > 0 ORDER BY 1"
    ).fetchall()
    tables = sorted({str(r[0]) for r in rows} | set(written))
    if not tables:
        return []
    indexes = conn.execute(
        "SELECT n.nspname || '.' || c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE i.indrelid = ANY(SELECT to_regclass(quote_ident(split_part(t, '.', 1)) || '.' || quote_ident(split_part(t, '.', 2))) "
        "FROM unnest(%s::text[]) AS t) ORDER BY 1",
        (tables,),
    ).fetchall()
    return [_quoted(t) for t in tables] + [_quoted(str(r[0])) for r in indexes]


def _quoted(qualified: str) -> str:
    """schema.name as regclass reads it whatever the case of its parts."""
    schema, name = qualified.split(".", 1)
    return f'"{schema}"."{name}"'
