"""The `slob` workload's MariaDB/InnoDB side: its tables, its loop, one timed run.

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
result set. Metrics come from the instance's cumulative counters around the
run (engine.io_counters: performance_schema file I/O on the InnoDB data files,
with times, and SHOW GLOBAL STATUS), so the page cleaner's writes are counted
as the writes of the point, as PostgreSQL's checkpointer/bgwriter writes are.
"""

from __future__ import annotations

import json
from typing import Any

from ..spec import SpecError
from .slob import HostCounters, point_metrics, run_sessions

FILLER_BYTES = 1000  # always full length, stored inline (it fits a 4 kB page three times)
PROCEDURE = "blocklab_slob_run"
BUILD_VERSION = 1
LOAD_SEED = 3  # RAND(seed) for the key permutation: the same table every build


def fingerprint(rows: int) -> str:
    return json.dumps({"blocklab_dataset": "slob-innodb", "build": BUILD_VERSION, "rows": rows, "filler": FILLER_BYTES})


def table_comment(engine: Any, table: str) -> str | None:
    rows = engine.query(
        "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s", (table,)
    )
    return rows[0][0] if rows else None


def prepare(engine: Any, tables: list[str], rows: int) -> None:
    """Build missing or stale tables (this cell's only) and (re)create the procedure."""
    fp = fingerprint(rows)
    for table in dict.fromkeys(tables):
        if table_comment(engine, table) != fp:
            build_table(engine, table, rows, fp)
    create_procedure(engine)


def build_table(engine: Any, table: str, rows: int, fp: str) -> None:
    """One SLOB table: clustered on pk 1..N, `id` a random permutation of 1..N
    with a unique index (built after the load: a sorted build, not N random
    inserts), analysed; the fingerprint comment is written last, so a build cut
    off half-way is rebuilt next time."""
    q = f"`{table}`"
    with engine.connect(session=False) as conn, conn.cursor() as cur:
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
        count, distinct, lo, hi = cur.fetchone()
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


def create_procedure(engine: Any) -> None:
    with engine.connect(session=False) as conn, conn.cursor() as cur:
        cur.execute(_PROCEDURE_SQL)


def run(engine: Any, tables: list[str], scale: int, o: Any) -> dict[str, float]:
    """One point: every session's loop at once; the instance's counters around the whole of it."""
    conns: list[Any] = []
    sql = f"CALL `{PROCEDURE}`(%s, %s, %s, %s, %s, %s)"
    args = (scale, o.work_unit, float(o.update_pct), float(o.run_time_s), float(o.think_time_ms))

    def call(i: int) -> tuple:
        with conns[i].cursor() as cur:
            cur.execute(sql, (tables[i], *args))
            row = cur.fetchone()
            while cur.nextset():  # the CALL's own status result
                pass
        return row

    def cancel(i: int) -> None:  # KILL QUERY from a connection of its own: the session's is busy
        with engine.connect(session=False) as admin, admin.cursor() as cur:
            cur.execute(f"KILL QUERY {int(conns[i].thread_id())}")

    try:
        for _ in range(o.sessions):  # one by one, inside the try: a refused connection leaks none
            conns.append(engine.connect())
        io0 = engine.io_counters()
        with HostCounters(engine) as host:
            sessions = run_sessions(len(conns), call, cancel)
        io1 = engine.io_counters()
    finally:
        for conn in conns:
            conn.close()
    io = {k: io1[k] - io0.get(k, 0.0) for k in io1}
    m = point_metrics(o, sessions, engine.block_size(), host, io.get("reads", 0.0), io.get("writes", 0.0),
                      io.get("read_bytes", 0.0), io.get("write_bytes", 0.0), io.get("read_time_ms", 0.0))
    requests = io.get("Innodb_buffer_pool_read_requests", 0.0)
    m["buffer_pool_hit_pct"] = 100.0 * io.get("hits", 0.0) / requests if requests else 0.0
    m.update(_counter_metrics(io))
    return m


def _counter_metrics(io: dict[str, float]) -> dict[str, float]:
    """The raw deltas under the names the update workload uses for the same
    counters: innodb.<status counter> (Innodb_pages_read -> innodb.pages_read)
    and data_file.* for performance_schema's data-file I/O (seconds, bytes)."""
    out = {"innodb." + k.removeprefix("Innodb_").lower(): v for k, v in io.items() if k.startswith("Innodb_")}
    for pfs, name, scale in (("pfs_data_reads", "reads", 1.0), ("pfs_data_read_ms", "read_s", 1e-3),
                             ("pfs_data_read_bytes", "read_bytes", 1.0), ("pfs_data_writes", "writes", 1.0),
                             ("pfs_data_write_ms", "write_s", 1e-3), ("pfs_data_write_bytes", "write_bytes", 1.0),
                             ("pfs_data_misc", "misc", 1.0), ("pfs_data_misc_ms", "misc_s", 1e-3)):
        if pfs in io:
            out[f"data_file.{name}"] = io[pfs] * scale
    return out


def rows_per_page(engine: Any, table: str) -> dict[str, float]:
    """Rows (counted), clustered-index pages (InnoDB's persistent statistics,
    exact after the build's ANALYZE) and rows per page: for tests and the docs."""
    count = engine.query(f"SELECT COUNT(*) FROM `{table}`")[0][0]
    stats = engine.query(
        "SELECT clustered_index_size FROM mysql.innodb_table_stats WHERE database_name = DATABASE() AND table_name = %s",
        (table,),
    )
    pages = int(stats[0][0]) if stats else 0
    return {"rows": int(count), "pages": pages, "rows_per_page": count / pages if pages else 0.0}
