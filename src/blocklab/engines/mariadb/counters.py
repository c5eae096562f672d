"""InnoDB's I/O counters: SHOW GLOBAL STATUS (Innodb_*) and performance_schema's
file I/O on the InnoDB data files, read in one place for every use: the
engine's io_counters() (engines/base.py IO_KEYS), the I/O window around a
measurement and the metrics it leaves in a result row:

* innodb.<counter>: status counter deltas (Innodb_pages_read -> innodb.pages_read;
  innodb.buffer_pool_wait_free is InnoDB's "free buffer waits");
* data_file.*: performance_schema's data-file I/O (count, wait_s, reads,
  read_s, read_bytes, writes, write_s, write_bytes, misc, misc_s), and
  data_file.available (0: performance_schema off or not readable here);
* buffer_pool_hit_pct: page requests answered from the buffer pool.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

import pymysql

from ..base import CounterWindow
from .session import MariadbSession

if TYPE_CHECKING:
    from pymysql.cursors import Cursor

    from ..base import Session
    from . import MariadbEngine

DATA_FILE_EVENT = "wait/io/file/innodb/innodb_data_file"
PS_PER_S = 1e12  # performance_schema timers are in picoseconds
NOT_READABLE = (1142, 1146)  # SELECT command denied; no such table

# SHOW GLOBAL STATUS counters read around a measurement
STATUS_COUNTERS = (
    "Innodb_buffer_pool_reads",  # pages read from disk into the pool (synchronous + read-ahead)
    "Innodb_buffer_pool_read_requests",  # logical page reads
    "Innodb_buffer_pool_read_ahead",
    "Innodb_buffer_pool_read_ahead_evicted",
    "Innodb_buffer_pool_write_requests",
    "Innodb_buffer_pool_wait_free",  # waits for a free page: InnoDB's "free buffer waits"
    "Innodb_buffer_pool_pages_flushed",  # pages written by any flush
    "Innodb_buffer_pool_pages_lru_flushed",  # ... of which to free pages at the LRU tail
    "Innodb_pages_read",
    "Innodb_pages_written",
    "Innodb_data_reads",
    "Innodb_data_read",  # bytes
    "Innodb_data_writes",
    "Innodb_data_written",  # bytes
    "Innodb_data_fsyncs",
    "Innodb_log_waits",  # waits for room in the redo log buffer
)
_FILE_KEYS = ("count", "wait_ps", "reads", "read_ps", "read_bytes", "writes", "write_ps", "write_bytes", "misc", "misc_ps")


def read_global_status(cur: Cursor, names: Iterable[str] = STATUS_COUNTERS) -> dict[str, float]:
    """SHOW GLOBAL STATUS for `names`; a counter this server does not have is absent."""
    names = tuple(names)
    cur.execute("SHOW GLOBAL STATUS WHERE Variable_name IN (" + ", ".join(["%s"] * len(names)) + ")", names)
    found = {str(k).lower(): v for k, v in cur.fetchall()}
    out = {}
    for name in names:
        value = found.get(name.lower())
        if value is not None:
            with contextlib.suppress(TypeError, ValueError):
                out[name] = float(value)
    return out


def read_data_file_waits(cur: Cursor, event: str = DATA_FILE_EVENT) -> dict[str, float] | None:
    """performance_schema's cumulative file I/O on InnoDB data files (all threads):
    counts, picoseconds and bytes; None when performance_schema is off (its
    tables are then empty) or this user may not read it."""
    try:
        cur.execute(
            "SELECT COUNT_STAR, SUM_TIMER_WAIT, COUNT_READ, SUM_TIMER_READ, SUM_NUMBER_OF_BYTES_READ, "
            "COUNT_WRITE, SUM_TIMER_WRITE, SUM_NUMBER_OF_BYTES_WRITE, COUNT_MISC, SUM_TIMER_MISC "
            "FROM performance_schema.file_summary_by_event_name WHERE EVENT_NAME = %s",
            (event,),
        )
    except pymysql.err.MySQLError as err:
        if err.args and err.args[0] in NOT_READABLE:  # a DSN user without access to performance_schema
            return None
        raise
    row = cur.fetchone()
    if row is None:
        return None
    return {k: float(v or 0) for k, v in zip(_FILE_KEYS, row)}


def read_counters(cur: Cursor) -> dict[str, float]:
    """Cumulative counters: the status counters under their own names, the
    data-file I/O as file.<key>, and the keys every engine gives (IO_KEYS):
    reads/writes and bytes from performance_schema (with times), or InnoDB's own
    counters when it is off (no times); hits = page requests the pool answered."""
    out = read_global_status(cur)
    files = read_data_file_waits(cur)
    status = {name: out.get(name, 0.0) for name in STATUS_COUNTERS}
    if files is not None:
        out.update({f"file.{k}": v for k, v in files.items()})
        out.update(
            reads=files["reads"], read_bytes=files["read_bytes"], read_time_ms=files["read_ps"] / 1e9,
            writes=files["writes"], write_bytes=files["write_bytes"], write_time_ms=files["write_ps"] / 1e9,
        )
    else:  # performance_schema off (a server by DSN): InnoDB's own counters, no times
        out.update(
            reads=status["Innodb_data_reads"], read_bytes=status["Innodb_data_read"], read_time_ms=0.0,
            writes=status["Innodb_data_writes"], write_bytes=status["Innodb_data_written"], write_time_ms=0.0,
        )
    # Innodb_buffer_pool_reads counts read-ahead pages too: requests answered from
    # the pool are the requests less the synchronous (non read-ahead) reads
    sync_reads = status["Innodb_buffer_pool_reads"] - status["Innodb_buffer_pool_read_ahead"]
    out["hits"] = status["Innodb_buffer_pool_read_requests"] - max(sync_reads, 0.0)
    out["fsyncs"] = status["Innodb_data_fsyncs"]
    return out


def counter_metrics(d: dict[str, float]) -> dict[str, float]:
    """The metrics a window's deltas leave in a result row (see the module docstring)."""
    out = {"innodb." + k.removeprefix("Innodb_").lower(): v for k, v in d.items() if k.startswith("Innodb_")}
    if "file.count" in d:
        for key in _FILE_KEYS:
            name = key.replace("_ps", "_s")
            out[f"data_file.{name}"] = d[f"file.{key}"] / PS_PER_S if key.endswith("_ps") else d[f"file.{key}"]
        out["data_file.available"] = 1.0
    else:
        out["data_file.available"] = 0.0
    requests = d.get("Innodb_buffer_pool_read_requests", 0.0)
    out["buffer_pool_hit_pct"] = 100.0 * d.get("hits", 0.0) / requests if requests else 0.0
    return out


def innodb_window(engine: MariadbEngine, session: Session | None = None) -> CounterWindow:
    """The engine's I/O window (engines/base.py IoWindow): the counters before and
    after, read through the measuring session or a connection of its own."""

    def read() -> dict[str, float]:
        if session is not None:
            assert isinstance(session, MariadbSession), session  # the measuring session is one of ours
            with session.conn.cursor() as cur:
                return read_counters(cur)
        with engine.sql_connect(session=False) as conn, conn.cursor() as cur:
            return read_counters(cur)

    return CounterWindow(read, counter_metrics)
