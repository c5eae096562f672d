"""The update workload on MariaDB/InnoDB (workloads/update.py UpdateDialect).

The same sessions and statement as on PostgreSQL: one UPDATE per session over
its own key range, autocommitted (committed at the statement's end, as on
PostgreSQL). It is a single set-based statement, as the seed's, so no
stored-procedure loop is needed to keep the work server-side.

* the table is built server-side (Sequence engine, seq_1_to_N) with the same
  columns and a PRIMARY KEY, so each session's range is a range of the
  clustered index; persistent statistics are never recalculated inside a cell
  (STATS_AUTO_RECALC=0).
* `fillfactor` has no table option in InnoDB; it becomes innodb_fill_factor
  during a sorted rebuild of the table after the load (ALTER TABLE ... FORCE):
  each leaf page is filled to that percentage, so the table has about as many
  pages as PostgreSQL's at the same fillfactor (at 45: ~2.2x the pages of a
  full table) and the same rows-to-buffer-pool ratio. InnoDB updates
  `val = val + 1` in place (the old version goes to the undo log), so the free
  room is not needed for the updates themselves and the table never grows
  (`table_growth_bytes`, from the tablespace's size).
* The table is updated once in full after the build (untimed), which sizes the
  undo space for a cell's worth of old versions; before each cell InnoDB's
  purge of the previous cell's undo is waited for (innodb_max_purge_lag_wait
  = 0, untimed, at most 120 s: `purge_waited` = 1 when it completed, 0 when
  it timed out or a DSN user may not wait): the steady state of every cell.
  `fillfactor` other than a DSN server's innodb_fill_factor needs
  allow_server_changes (refused before the table is dropped). A cold cell's restart (the
  runner's eviction) writes every dirty page first: nothing dirty, nothing
  cached at the start.
* Probes: each session's time profile (waits.py), measured from
  performance_schema per server thread (waits timed, CPU bounded by the
  thread's schedstat, the rest unaccounted) in the same `profile.*` metrics;
  SHOW GLOBAL STATUS deltas (counters.py: `innodb.buffer_pool_reads`, `.buffer_pool_wait_free`
  (waits for a free page: InnoDB's free buffer waits), `.pages_written`, ...)
  and the data-file waits of performance_schema (`data_file.count`, `.wait_s`,
  `.read_bytes`, `.write_bytes`, ...).
* PostgreSQL-only options are refused on MariaDB before anything runs:
  `vacuum` (purge is always waited for), `sample_ms` and `sample_nice` (the
  profile is measured, not sampled). `sample = false` still turns the profile
  off (its latch instruments cost a little).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar

from ...errors import SpecError
from ..base import DialectBase
from .dsn import DATABASE
from .waits import SessionWaitProfiler, wait_for_purge

if TYPE_CHECKING:
    from . import MariadbEngine
    from .session import MariadbSession

REFUSED_OPTIONS = {
    "vacuum": "PostgreSQL's VACUUM before each cell; on MariaDB InnoDB's purge of the previous cell's undo is always "
    "waited for before each cell",
    "sample_ms": "the PostgreSQL wait sampler's interval; on MariaDB the time profile is measured by performance_schema, "
    "not sampled",
    "sample_nice": "the PostgreSQL wait sampler's nice value; on MariaDB the time profile is measured by "
    "performance_schema, not sampled",
}




class UpdateTables(DialectBase):
    refused_options: ClassVar[dict[str, str]] = REFUSED_OPTIONS

    def __init__(self, engine: MariadbEngine):
        self.engine = engine

    def build_update_table(self, table: str, rows: int, fillfactor: int, pad: int, fingerprint: str) -> None:
        check_fill_factor_allowed(self.engine, fillfactor)  # before the table is dropped
        build_update_table(self.engine, table, rows, fillfactor, pad, fingerprint)

    def ready_update(self, table: str, vacuum: bool) -> dict[str, float]:
        """InnoDB's purge of the previous cell's undo, waited for (untimed); `purge_waited` says it completed."""
        return {"purge_waited": 1.0 if _wait_for_purge(self.engine) else 0.0}

    def update_session(self) -> MariadbSession:
        # autocommit: each UPDATE is its own transaction, committed at the statement's end as on
        # PostgreSQL (no COMMIT round trip for the client's threads to delay under the GIL)
        return self.engine.connect()

    def update_range(self, session: MariadbSession, table: str, lo: int, hi: int) -> int:
        with session.conn.cursor() as cur:
            return int(cur.execute(f"UPDATE `{table}` SET val = val + 1 WHERE id BETWEEN %s AND %s", (lo, hi)))

    def profiler(self, sample_ms: float, sample_nice: int | None) -> SessionWaitProfiler:
        return SessionWaitProfiler(self.engine)  # measured by performance_schema: no interval, no nice

    def table_window(self, table: str) -> TableFiles:
        return TableFiles(self.engine, table)


class TableFiles:
    """The table's tablespace and the buffer pool around a point: InnoDB updates
    `val = val + 1` in place (the old version goes to the undo log), so the file
    never grows (`table_growth_bytes`)."""

    def __init__(self, engine: MariadbEngine, table: str):
        self.engine = engine
        self.table = table

    def __enter__(self) -> TableFiles:
        self.file0 = _tablespace_bytes(self.engine, self.table)
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.file1 = _tablespace_bytes(self.engine, self.table)

    def metrics(self, touched_share: float) -> dict[str, float]:
        pool = int(self.engine.query("SELECT @@innodb_buffer_pool_size")[0][0])
        table_bytes = self.engine.relation_bytes(self.table)  # pages in use, from the build's ANALYZE
        touched = table_bytes * touched_share
        return {
            "table_bytes": float(table_bytes),
            "table_growth_bytes": float(self.file1 - self.file0),
            "buffer_pool_bytes": float(pool),
            "touched_bytes": touched,
            "cache_ratio": touched / pool if pool else 0.0,
        }


def _wait_for_purge(engine: MariadbEngine) -> bool:
    """Block until InnoDB has purged every committed transaction's undo (the
    previous cell's old versions), at most PURGE_WAIT_S. False when the wait
    was refused (a DSN user without the privilege) or timed out; a lost
    connection is raised."""
    with engine.sql_connect(session=False) as conn, conn.cursor() as cur:
        return wait_for_purge(cur)


def _tablespace_bytes(engine: MariadbEngine, table: str) -> int:
    """The size of the table's .ibd file. On the private instance from the file
    itself: after a restart InnoDB opens a tablespace (and reports its size in
    INNODB_SYS_TABLESPACES) only when it is first read."""
    if engine.mode == "embedded":
        path = engine.datadir / DATABASE / f"{table}.ibd"
        if path.exists():
            return path.stat().st_size
    return engine.file_bytes(table)


def build_update_table(engine: MariadbEngine, table: str, rows: int, fillfactor: int, pad: int, fingerprint: str) -> float:
    """The update table in InnoDB, server-side: loaded from seq_1_to_N in key
    order, rebuilt with innodb_fill_factor = fillfactor (a sorted index build
    that leaves that share of each page filled), analysed, updated once in full
    (the undo space a cell needs, as a steady state), its undo purged; the
    fingerprint comment goes on last (the table is complete only then).
    Returns the seconds."""
    t0 = time.perf_counter()
    quoted = f"`{table}`"
    with engine.sql_connect(session=False) as conn, conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {quoted}")
        cur.execute(
            f"CREATE TABLE {quoted} (id INT NOT NULL, val INT NOT NULL, name VARCHAR(100), pad VARCHAR({max(int(pad), 1)}), "
            "PRIMARY KEY (id)) ENGINE=InnoDB STATS_PERSISTENT=1 STATS_AUTO_RECALC=0"
        )
        cur.execute(
            f"INSERT INTO {quoted} SELECT seq, 0, CONCAT('blabla ', seq), REPEAT('x', {int(pad)}) FROM seq_1_to_{int(rows)}"
        )
        cur.execute("COMMIT")
        with _global_fill_factor(engine, fillfactor):
            cur.execute(f"ALTER TABLE {quoted} FORCE")
    engine.analyze(table)
    with engine.sql_connect(session=False, autocommit=False) as conn, conn.cursor() as cur:
        cur.execute(f"UPDATE {quoted} SET val = val + 1")
        conn.commit()
    _wait_for_purge(engine)  # best effort: each cell's prepare waits again and records it
    with engine.sql_connect(session=False) as conn, conn.cursor() as cur:
        cur.execute(f"ALTER TABLE {quoted} COMMENT = %s", (fingerprint,))
    return time.perf_counter() - t0


FILL_FACTOR = "innodb_fill_factor"


def _may_change_server(engine: MariadbEngine) -> bool:
    return engine.mode == "embedded" or engine.allow_server_changes


def check_fill_factor_allowed(engine: MariadbEngine, fillfactor: int) -> None:
    """A SpecError when the rebuild would need SET GLOBAL innodb_fill_factor on a
    server given by DSN without allow_server_changes (checked before the table
    is dropped)."""
    if _may_change_server(engine):
        return
    original = int(engine.query(f"SELECT @@GLOBAL.{FILL_FACTOR}")[0][0])
    if original != fillfactor:
        raise SpecError(
            f"workload.fillfactor = {fillfactor} needs SET GLOBAL {FILL_FACTOR} for the table's rebuild on this "
            f"server (it has {original}); pass --allow-server-changes, or set workload.fillfactor = {original}"
        )


@contextlib.contextmanager
def _global_fill_factor(engine: MariadbEngine, fillfactor: int) -> Iterator[None]:
    """innodb_fill_factor (a global variable) set for one rebuild and put back,
    from a connection of its own (the rebuild's may be broken). On a server
    given by DSN (only with allow_server_changes, see check_fill_factor_allowed)
    the original is also recorded with the engine's other changed variables,
    so that its stop() restores it should the put-back here fail."""
    original = int(engine.query(f"SELECT @@GLOBAL.{FILL_FACTOR}")[0][0])
    if original == fillfactor:
        yield
        return
    check_fill_factor_allowed(engine, fillfactor)
    dsn = engine.mode != "embedded"
    recorded_here = dsn and FILL_FACTOR not in engine._dsn_originals
    engine._set_global({FILL_FACTOR: str(int(fillfactor))}, record_originals=dsn)
    try:
        yield
    finally:
        engine._set_global({FILL_FACTOR: str(original)})
        if recorded_here:  # put back: nothing left for stop() to restore
            engine._dsn_originals.pop(FILL_FACTOR, None)
