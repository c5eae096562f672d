"""Who did the I/O: pg_stat_io deltas per process type (PostgreSQL 16+), and
the engine's I/O window (engines/base.py IoWindow) built on them.

    with StatIoWindow(engine, sessions=point_sessions, settle=True) as w:
        run the workload
    w.deltas (relation I/O summed over process types: reads, read_bytes, ...),
    w.by_type["client backend"]["writes"], w.metrics()

Relation I/O (tables and indexes) and WAL I/O are kept apart: WAL is always
written by whoever commits, while a relation page written by a *client
backend* is a dirty buffer the session had to clean itself to get a free one.
That is PostgreSQL's version of Oracle's "free buffer waits": the background
writer and the checkpointer did not keep ahead of the sessions. It is reported
first, as `backend_writes`.

Statistics are flushed lazily: client backends when they go idle (forced with
pg_stat_force_next_flush()), the background writer every bgwriter_delay, I/O
workers and the checkpointer on their own schedule. The probe's exit waits
until two reads a short while apart agree (at most `settle_s`), so late
flushes are counted.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .session import PgSession

if TYPE_CHECKING:
    from psycopg import Connection

    from ..base import Session
    from . import PostgresEngine

COLUMNS = (
    "reads",
    "read_bytes",
    "read_time",
    "writes",
    "write_bytes",
    "write_time",
    "writebacks",
    "writeback_time",
    "extends",
    "extend_bytes",
    "hits",
    "evictions",
    "reuses",
    "fsyncs",
    "fsync_time",
)
# metric names: *_time columns are milliseconds
_METRIC = {c: (c.replace("_time", "_time_ms") if c.endswith("_time") else c) for c in COLUMNS}

# the types the issue asks about; others (autovacuum, walwriter, startup...) are kept too
MAIN_TYPES = ("client backend", "io worker", "background writer", "checkpointer")

_SQL = (
    "SELECT backend_type, CASE WHEN object = 'wal' THEN 'wal' ELSE 'relation' END, "
    + ", ".join(f"coalesce(sum({c}), 0)" for c in COLUMNS)
    + " FROM pg_stat_io GROUP BY 1, 2"
)
# PostgreSQL 16 and 17 count I/O in operations of op_bytes each (18 added the *_bytes columns)
_BYTES_16 = {"read_bytes": "reads * op_bytes", "write_bytes": "writes * op_bytes", "extend_bytes": "extends * op_bytes"}
_SQL_16 = (
    "SELECT backend_type, CASE WHEN object = 'wal' THEN 'wal' ELSE 'relation' END, "
    + ", ".join(f"coalesce(sum({_BYTES_16.get(c, c)}), 0)" for c in COLUMNS)
    + " FROM pg_stat_io GROUP BY 1, 2"
)
# Before 16 there is no pg_stat_io: the same figures, coarser, from the views that exist.
# Relation reads and hits of this database (pg_statio_all_tables: heap, index, TOAST), read
# and write time of this database (pg_stat_database, with track_io_timing), and the pages
# written per writer (pg_stat_bgwriter: checkpointer, background writer, backends), as if
# the client backends had done every read: PostgreSQL 15 does not say who read.
_SQL_15 = """
SELECT (SELECT coalesce(sum(coalesce(heap_blks_read, 0) + coalesce(idx_blks_read, 0) + coalesce(toast_blks_read, 0)
                            + coalesce(tidx_blks_read, 0)), 0) FROM pg_statio_all_tables),
       (SELECT coalesce(sum(coalesce(heap_blks_hit, 0) + coalesce(idx_blks_hit, 0) + coalesce(toast_blks_hit, 0)
                            + coalesce(tidx_blks_hit, 0)), 0) FROM pg_statio_all_tables),
       d.blk_read_time, d.blk_write_time,
       b.buffers_checkpoint, b.buffers_clean, b.buffers_backend, b.buffers_backend_fsync,
       current_setting('block_size')::bigint
FROM pg_stat_database d, pg_stat_bgwriter b WHERE d.datname = current_database()
"""

Counters = dict[tuple[str, str], dict[str, float]]  # (backend_type, relation|wal) -> column -> value


def flush_own_stats(conn: Connection) -> None:
    """Make this session publish its pending I/O statistics now."""
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT 1")  # the flush happens as the backend goes idle after the previous statement


def read_counters(conn: Connection, major: int = 18) -> Counters:
    """The I/O counters by (process type, relation|wal) on a server of this major version."""
    flush_own_stats(conn)
    if major < 16:
        return _legacy_counters(conn)
    out: Counters = {}
    for row in conn.execute(_SQL if major >= 18 else _SQL_16).fetchall():
        out[(row[0], row[1])] = {c: float(v) for c, v in zip(COLUMNS, row[2:])}
    return out


def _legacy_counters(conn: Connection) -> Counters:
    found = conn.execute(_SQL_15).fetchone()
    assert found is not None  # one row of sums
    reads, hits, read_ms, write_ms, checkpoint, clean, backend, backend_fsync, block = found

    def row(**values: float) -> dict[str, float]:
        return {c: float(values.get(c, 0.0) or 0.0) for c in COLUMNS}

    return {
        ("client backend", "relation"): row(reads=reads, read_bytes=reads * block, read_time=read_ms, hits=hits,
                                            writes=backend, write_bytes=backend * block, write_time=write_ms,
                                            fsyncs=backend_fsync),
        ("background writer", "relation"): row(writes=clean, write_bytes=clean * block),
        ("checkpointer", "relation"): row(writes=checkpoint, write_bytes=checkpoint * block),
    }


def diff(after: Counters, before: Counters) -> Counters:
    out: Counters = {}
    for key, values in after.items():
        base = before.get(key, {})
        out[key] = {c: values[c] - base.get(c, 0.0) for c in COLUMNS}
    return out


def short(backend_type: str) -> str:
    """'client backend' -> 'client_backend' (for metric names)."""
    return backend_type.replace(" ", "_")


def relation_totals(counters: Counters) -> dict[str, float]:
    """Relation I/O (tables and indexes) summed over process types, in the keys
    every engine gives (engines/base.py IO_KEYS) plus evictions."""
    rel = [v for (_, obj), v in counters.items() if obj == "relation"]
    total = {c: sum(v[c] for v in rel) for c in COLUMNS}
    return {
        "reads": total["reads"], "read_bytes": total["read_bytes"], "read_time_ms": total["read_time"],
        "writes": total["writes"], "write_bytes": total["write_bytes"], "write_time_ms": total["write_time"],
        "hits": total["hits"], "fsyncs": total["fsyncs"], "evictions": total["evictions"],
    }


def _pg(session: Session) -> PgSession:
    """A session given to the window: always one of this engine's own."""
    assert isinstance(session, PgSession), session
    return session


class StatIoWindow:
    """pg_stat_io before and after, per backend type, relation and WAL apart.

    Reads go through `session` (its own pending statistics are flushed first)
    or a connection of the window's own. At the end the `sessions` publish
    their pending statistics, and with `settle` the window reads until two
    reads a moment apart agree (background processes flush on their own
    schedule), at most `settle_s`."""

    def __init__(self, engine: PostgresEngine, session: Session | None = None, *, settle: bool = False, sessions: Sequence[Session] = (),
                 settle_s: float = 1.5):
        self.engine = engine
        self.major = int(engine.major or 18)
        self.conn = _pg(session).conn if session is not None else None
        self.sessions = [_pg(s) for s in sessions]
        self.settle_s = settle_s if settle else 0.0
        self.by_type_and_object: Counters = {}
        self.deltas: dict[str, float] = {}
        self._own: Connection | None = None

    def _conn(self) -> Connection:
        if self.conn is not None:
            return self.conn
        if self._own is None:
            self._own = self.engine.pg_connect(session=False)
        return self._own

    def __enter__(self) -> StatIoWindow:
        self._before = read_counters(self._conn(), self.major)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is None:
                for session in self.sessions:
                    flush_own_stats(session.conn)
                self.by_type_and_object = diff(self._settled(), self._before)
                self.deltas = relation_totals(self.by_type_and_object)
                if self.major == 17:  # 17 counts a combined read of N blocks as N reads (18 counts it once)
                    self.deltas["reads_count_blocks"] = 1.0
        finally:
            if self._own is not None:
                self._own.close()
                self._own = None

    def _settled(self) -> Counters:
        """Read until two reads 0.25 s apart agree, or settle_s has passed."""
        conn = self._conn()
        deadline = time.perf_counter() + self.settle_s
        last = read_counters(conn, self.major)
        while time.perf_counter() < deadline:
            time.sleep(0.25)
            now = read_counters(conn, self.major)
            if _same(now, last):
                return now
            last = now
        return last

    # -------------------------------------------------------------- views
    @property
    def by_type(self) -> dict[str, dict[str, float]]:
        """Relation I/O per backend type (the buffer pool's traffic)."""
        return {t: v for (t, obj), v in self.by_type_and_object.items() if obj == "relation"}

    @property
    def wal_by_type(self) -> dict[str, dict[str, float]]:
        return {t: v for (t, obj), v in self.by_type_and_object.items() if obj == "wal"}

    def metrics(self) -> dict[str, float]:
        return stat_io_metrics(self.by_type_and_object)


def stat_io_metrics(deltas: Counters) -> dict[str, float]:
    """Flat metrics: the headline figures first, then io.<type>.<column> for
    relation I/O and wal.<type>.<column> for WAL (only non-zero columns, and
    always the main types' reads and writes)."""
    rel = {t: v for (t, obj), v in deltas.items() if obj == "relation"}
    wal = {t: v for (t, obj), v in deltas.items() if obj == "wal"}
    zero = {c: 0.0 for c in COLUMNS}
    client = rel.get("client backend", zero)
    out: dict[str, float] = {
        "backend_writes": client["writes"],
        "backend_write_bytes": client["write_bytes"],
        "backend_write_time_ms": client["write_time"],
        "backend_fsyncs": client["fsyncs"],
        "backend_evictions": client["evictions"],
        "backend_reads": client["reads"],
        "bgwriter_writes": rel.get("background writer", zero)["writes"],
        "checkpointer_writes": rel.get("checkpointer", zero)["writes"],
        "io_worker_reads": rel.get("io worker", zero)["reads"],
        "relation_writes": sum(v["writes"] for v in rel.values()),
        "relation_reads": sum(v["reads"] for v in rel.values()),
        "wal_write_bytes": sum(v["write_bytes"] for v in wal.values()),
        "wal_fsyncs": sum(v["fsyncs"] for v in wal.values()),
    }
    out["backend_write_share"] = out["backend_writes"] / out["relation_writes"] if out["relation_writes"] else 0.0
    for prefix, table in (("io", rel), ("wal", wal)):
        for btype, values in sorted(table.items()):
            always = btype in MAIN_TYPES and prefix == "io"
            for column in COLUMNS:
                if values[column] or (always and column in ("reads", "writes")):
                    out[f"{prefix}.{short(btype)}.{_METRIC[column]}"] = values[column]
    return out


def _same(a: Counters, b: Counters) -> bool:
    """Equal but for buffer hits (reading pg_stat_io may itself hit the catalog)."""
    if a.keys() != b.keys():
        return False
    return all(a[k][c] == b[k][c] for k in a for c in COLUMNS if c != "hits")


__all__ = ["MAIN_TYPES", "StatIoWindow", "flush_own_stats", "read_counters", "relation_totals", "stat_io_metrics"]
