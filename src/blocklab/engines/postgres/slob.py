"""The slob workload on PostgreSQL (workloads/slob.py SlobDialect).

Each session's table has exactly one row per heap page: a 2,000-byte filler
stored PLAIN (no compression, no TOAST) and fillfactor 10, so a second row
never fits in a page at load time while up to three newer versions of it
still do (HOT: the table does not grow while pruning keeps up). Keys are
loaded in random order, so neighbouring keys live in far-apart pages and a
range of `work_unit` keys read through the index costs `work_unit` random
single-page reads: PostgreSQL's "db file sequential read". The build checks
pages = rows and refuses otherwise.

A PL/pgSQL procedure runs the loop server-side and returns its iteration and
update counts (INOUT parameters). The sessions read through the index only
(no sequential or bitmap scan, which would prefetch) with track_io_timing on
(read_time in pg_stat_io). With a small shared_buffers and direct I/O (the
recipe), nearly every read is a physical read; the index stays cached.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from psycopg import sql

from ...errors import SpecError
from ...workloads.slob import open_sessions
from ..base import DialectBase
from .session import PgSession

if TYPE_CHECKING:
    from ..base import Session
    from . import PostgresEngine

FILLER_BYTES = 2000  # fillfactor 10 keeps the 2nd row out at load; 3 more versions fit for HOT updates
FILLFACTOR = 10
PROCEDURE = "blocklab_slob_run"
BUILD_VERSION = 2


class SlobTables(DialectBase):
    table_shape: ClassVar[dict[str, object]] = {"build": BUILD_VERSION, "filler": FILLER_BYTES, "fillfactor": FILLFACTOR}
    bytes_per_row: ClassVar[float] = 8192 + 40  # one heap page a row, and its index entry

    def __init__(self, engine: PostgresEngine):
        self.engine = engine

    def build_slob_table(self, table: str, rows: int, fingerprint: str) -> None:
        build_slob_table(self.engine, table, rows, fingerprint)

    def prepare_slob(self) -> None:
        with self.engine.pg_connect(session=False) as conn:
            conn.execute(_PROCEDURE_SQL)

    def slob_sessions(self, count: int) -> list[Session]:
        return open_sessions(count, self.slob_session)  # a connection per SLOB session

    def slob_session(self) -> PgSession:
        session = self.engine.connect()
        try:
            session.execute("SET application_name = 'blocklab slob'")
            session.execute("SET track_io_timing = on")  # read_time in pg_stat_io
            session.execute("SET enable_seqscan = off")  # SLOB reads through the index, one page at a time:
            session.execute("SET enable_bitmapscan = off")  # no bitmap heap scan (it prefetches)
        except BaseException:
            session.close()
            raise
        return session

    def slob_loop(self, session: PgSession, table: str, scale: int, work_unit: int, update_pct: float,
                  run_time_s: float, think_ms: float) -> tuple[int, int, float]:
        row = session.execute(
            f"CALL {PROCEDURE}(%s, %s, %s, %s, %s, %s, NULL, NULL, NULL)",
            (table, scale, work_unit, update_pct, run_time_s, think_ms),
        )[0]
        return int(row[0]), int(row[1]), float(row[2])


_PROCEDURE_SQL = f"""
CREATE OR REPLACE PROCEDURE {PROCEDURE}(
    p_table text, p_scale integer, p_work_unit integer, p_update_pct float8, p_run_time_s float8, p_think_ms float8,
    INOUT iterations bigint, INOUT updates bigint, INOUT elapsed_s float8)
LANGUAGE plpgsql AS $body$
DECLARE
    t_start timestamptz := clock_timestamp();
    t_end timestamptz := clock_timestamp() + make_interval(secs => p_run_time_s);
    sel text := format('SELECT count(filler) FROM %I WHERE id BETWEEN $1 AND $2', p_table);
    upd text := format('UPDATE %I SET val = val + 1 WHERE id BETWEEN $1 AND $2', p_table);
    lo integer;
    n bigint;
BEGIN
    iterations := 0;
    updates := 0;
    WHILE clock_timestamp() < t_end LOOP
        lo := 1 + floor(random() * (p_scale - p_work_unit + 1))::integer;
        EXECUTE sel INTO n USING lo, lo + p_work_unit - 1;
        IF random() * 100 < p_update_pct THEN
            EXECUTE upd USING lo, lo + p_work_unit - 1;
            updates := updates + 1;
            COMMIT;
        END IF;
        iterations := iterations + 1;
        IF p_think_ms > 0 THEN
            PERFORM pg_sleep(p_think_ms / 1000.0);
        END IF;
    END LOOP;
    elapsed_s := extract(epoch FROM clock_timestamp() - t_start);
END
$body$
"""


def build_slob_table(engine: PostgresEngine, table: str, rows: int, fingerprint: str) -> None:
    """One SLOB table: `rows` rows, one per heap page, keys in random order, an
    index on the key; built in one transaction (no WAL with wal_level=minimal),
    vacuumed, analysed and checkpointed. SpecError if pages != rows."""
    q = f'"{table}"'
    with engine.pg_connect(session=False, autocommit=False) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {q}")
        conn.execute(
            f"CREATE TABLE {q} (id integer NOT NULL, val integer NOT NULL, filler text) "
            f"WITH (fillfactor = {FILLFACTOR}, autovacuum_enabled = false)"
        )
        conn.execute(f"ALTER TABLE {q} ALTER COLUMN filler SET STORAGE PLAIN")  # (STORAGE in CREATE TABLE: 16+)
        conn.execute(
            f"INSERT INTO {q} SELECT i, 0, repeat('x', {FILLER_BYTES}) FROM generate_series(1, %s) AS i ORDER BY random()",
            (rows,),
        )
        conn.execute(f'CREATE UNIQUE INDEX "{table}_key" ON {q} (id)')
        conn.commit()
    with engine.pg_connect(session=False) as conn:
        conn.execute(f"VACUUM ANALYZE {q}")
        pages = conn.execute("SELECT pg_relation_size(%s::regclass) / current_setting('block_size')::integer", (table,)).fetchall()[0][0]
        if int(pages) != rows:
            raise SpecError(f"workload slob: table {table} has {pages:,} pages for {rows:,} rows; expected one row per page")
        conn.execute(sql.SQL("COMMENT ON TABLE {} IS {}").format(sql.Identifier(table), sql.Literal(fingerprint)))  # complete only now
        conn.execute("CHECKPOINT")


def rows_per_page(engine: PostgresEngine, table: str) -> dict[str, int]:
    """Live rows and heap pages, and the largest number of rows in any page (for tests)."""
    pages = engine.query("SELECT pg_relation_size(%s::regclass) / current_setting('block_size')::integer", (table,))[0][0]
    rows, most = engine.query(
        f'SELECT count(*), coalesce(max(n), 0) FROM (SELECT (ctid::text::point)[0] AS page, count(*) AS n FROM "{table}" GROUP BY 1) s'
    )[0]
    return {"pages": int(pages), "pages_with_rows": int(rows), "max_rows_per_page": int(most)}
