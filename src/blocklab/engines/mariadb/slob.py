"""The slob workload on MariaDB/InnoDB (workloads/slob.py SlobDialect).

InnoDB stores a table in its clustered (primary key) index, so SLOB's "keys
loaded in random order, one row per block" becomes: rows clustered on `pk`
(1..N, in load order) and the key the sessions query, `id`, a random
permutation of 1..N with a unique secondary index. A range of `work_unit` ids
is one leaf of the secondary index (cached: it is small) and `work_unit`
lookups into far-apart leaves of the clustered index: `work_unit` random
single-page reads, InnoDB's equivalent of "db file sequential read".

InnoDB cannot hold one row per page (a page must have room for two records),
so the row has a fixed size instead (FILLER_BYTES, inline): a 4 kB page holds
3 rows, 32 kB about 30, and a table of N rows has about the same bytes at every
page size. That is the seed's point about block size: each random read brings
a whole page for one useful row; bigger pages move more MB/s for the same IOPS
and the rest of the page is waste.

The loop is a stored procedure (`blocklab_slob_run`), the same loop as the
PL/pgSQL one: pick a random range, read it through the index, with probability
update_pct % update it and commit, optional sleep; it returns its counts as a
result set. The point's I/O comes from the instance's counters around the run
(counters.py: performance_schema file I/O on the InnoDB data files, with
times, and SHOW GLOBAL STATUS), so the page cleaner's writes are counted as
the writes of the point, as PostgreSQL's checkpointer/bgwriter writes are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ...errors import SpecError
from ...workloads.slob import open_sessions
from ..base import DialectBase

if TYPE_CHECKING:
    from ..base import Session
    from . import MariadbEngine
    from .session import MariadbSession

FILLER_BYTES = 1000  # always full length, stored inline (it fits a 4 kB page three times)
PROCEDURE = "blocklab_slob_run"
BUILD_VERSION = 1
LOAD_SEED = 3  # RAND(seed) for the key permutation: the same table every build


class SlobTables(DialectBase):
    table_shape: ClassVar[dict[str, object]] = {"layout": "innodb", "build": BUILD_VERSION, "filler": FILLER_BYTES}
    bytes_per_row: ClassVar[float] = 1700  # 1 kB rows and the id index: a 96 MB .ibd for 60,000 rows at 4k pages here

    def __init__(self, engine: MariadbEngine):
        self.engine = engine

    def build_slob_table(self, table: str, rows: int, fingerprint: str) -> None:
        build_slob_table(self.engine, table, rows, fingerprint)

    def prepare_slob(self) -> None:
        with self.engine.sql_connect(session=False) as conn, conn.cursor() as cur:
            cur.execute(_PROCEDURE_SQL)

    def slob_sessions(self, count: int) -> list[Session]:
        return open_sessions(count, self.slob_session)  # a connection per SLOB session

    def slob_session(self) -> MariadbSession:
        return self.engine.connect()

    def slob_loop(self, session: MariadbSession, table: str, scale: int, work_unit: int, update_pct: float,
                  run_time_s: float, think_ms: float) -> tuple[int, int, float]:
        row = session.execute(f"CALL `{PROCEDURE}`(%s, %s, %s, %s, %s, %s)",
                              (table, scale, work_unit, update_pct, run_time_s, think_ms))[0]
        return int(row[0]), int(row[1]), float(row[2])


def build_slob_table(engine: MariadbEngine, table: str, rows: int, fp: str) -> None:
    """One SLOB table: clustered on pk 1..N, `id` a random permutation of 1..N
    with a unique index (built after the load: a sorted build, not N random
    inserts), analysed; the fingerprint comment is written last, so a build cut
    off half-way is rebuilt next time."""
    q = f"`{table}`"
    with engine.sql_connect(session=False) as conn, conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {q}")
        cur.execute(
            f"CREATE TABLE {q} (pk INT NOT NULL PRIMARY KEY, id INT NOT NULL, val INT NOT NULL, "
            f"filler VARBINARY({FILLER_BYTES}) NOT NULL) ENGINE=InnoDB COMMENT='building'"
        )
        cur.execute(
            f"INSERT INTO {q} (pk, id, val, filler) "
            f"SELECT seq, ROW_NUMBER() OVER (ORDER BY RAND({LOAD_SEED})), 0, REPEAT('x', {FILLER_BYTES}) "
            f"FROM seq_1_to_{int(rows)} ORDER BY seq"
        )
        cur.execute(f"ALTER TABLE {q} ADD UNIQUE KEY id_key (id)")
        cur.execute(f"ANALYZE TABLE {q}")
        cur.fetchall()
        cur.execute(f"SELECT COUNT(*), COUNT(DISTINCT id), MIN(id), MAX(id) FROM {q}")
        count, distinct, lo, hi = cur.fetchall()[0]
        if (count, distinct, lo, hi) != (rows, rows, 1, rows):
            raise SpecError(f"workload slob: table {table} was built with {count:,} rows and ids {lo}..{hi}; expected 1..{rows:,} once each")
        cur.execute(f"ALTER TABLE {q} COMMENT = %s", (fp,))


# Dynamic SQL for the table name (one procedure serves every table); EXECUTE
# ... USING takes the procedure's own variables (MariaDB 10.2+). SYSDATE(6),
# not NOW(6): NOW() is frozen at the start of the CALL.
_PROCEDURE_SQL = f"""
CREATE OR REPLACE PROCEDURE `{PROCEDURE}`(
    IN p_table VARCHAR(64), IN p_scale INT, IN p_work_unit INT,
    IN p_update_pct DOUBLE, IN p_run_time_s DOUBLE, IN p_think_ms DOUBLE)
BEGIN
    DECLARE t_start DOUBLE DEFAULT UNIX_TIMESTAMP(SYSDATE(6));
    DECLARE t_end DOUBLE DEFAULT t_start + p_run_time_s;
    DECLARE v_lo INT;
    DECLARE v_hi INT;
    DECLARE v_iterations BIGINT DEFAULT 0;
    DECLARE v_updates BIGINT DEFAULT 0;
    SET @blocklab_slob_sel = CONCAT('SELECT COUNT(filler) INTO @blocklab_slob_n FROM `', p_table,
                                    '` FORCE INDEX (id_key) WHERE id BETWEEN ? AND ?');
    SET @blocklab_slob_upd = CONCAT('UPDATE `', p_table, '` SET val = val + 1 WHERE id BETWEEN ? AND ?');
    PREPARE sel FROM @blocklab_slob_sel;
    PREPARE upd FROM @blocklab_slob_upd;
    WHILE UNIX_TIMESTAMP(SYSDATE(6)) < t_end DO
        SET v_lo = 1 + FLOOR(RAND() * (p_scale - p_work_unit + 1));
        SET v_hi = v_lo + p_work_unit - 1;
        EXECUTE sel USING v_lo, v_hi;
        IF RAND() * 100 < p_update_pct THEN
            EXECUTE upd USING v_lo, v_hi;
            COMMIT;
            SET v_updates = v_updates + 1;
        END IF;
        SET v_iterations = v_iterations + 1;
        IF p_think_ms > 0 THEN
            DO SLEEP(p_think_ms / 1000);
        END IF;
    END WHILE;
    DEALLOCATE PREPARE sel;
    DEALLOCATE PREPARE upd;
    SELECT v_iterations, v_updates, UNIX_TIMESTAMP(SYSDATE(6)) - t_start;
END
"""


def rows_per_page(engine: MariadbEngine, table: str) -> dict[str, float]:
    """Rows (counted), clustered-index pages (InnoDB's persistent statistics,
    exact after the build's ANALYZE) and rows per page: for tests and the docs."""
    count = engine.query(f"SELECT COUNT(*) FROM `{table}`")[0][0]
    stats = engine.query(
        "SELECT clustered_index_size FROM mysql.innodb_table_stats WHERE database_name = DATABASE() AND table_name = %s",
        (table,),
    )
    pages = int(stats[0][0]) if stats else 0
    return {"rows": int(count), "pages": pages, "rows_per_page": count / pages if pages else 0.0}
