"""Workload `slob`: SLOB-style random single-block physical I/O (seed 003).

Each session owns a table (SLOB's one schema per user) of `scale` rows with
exactly one row per heap page: a 2,000-byte filler stored PLAIN (no
compression, no TOAST) and fillfactor 10, so a second row never fits in a page
at load time while up to three newer versions of it still do (HOT: the table
does not grow while pruning keeps up). Keys are loaded in random order, so neighbouring keys live in
far-apart pages and a range of `work_unit` keys read through the index costs
`work_unit` random single-page reads: PostgreSQL's "db file sequential read".
The build checks pages = rows and refuses otherwise.

A PL/pgSQL procedure runs the loop server-side, per session, for `run_time_s`:

    pick a random range of work_unit keys; read them through the index;
    with probability update_pct %: update the same range and COMMIT;
    optional pg_sleep(think_time_ms)

and returns its iteration and update counts (INOUT parameters). Sessions are
threads with their own connection, released together by a barrier. With a
small shared_buffers and direct I/O (the recipe), nearly every read is a
physical read; the index (a few dozen pages per table) stays cached.

Metrics per point (per second of the slowest session's run):
read_iops / write_iops (pg_stat_io relation I/O, all process types),
mb_per_s (read + write bytes), read_latency_ms (pg_stat_io read_time / reads;
the sessions SET track_io_timing = on), ops_per_s (iterations), update_share
(updates / iterations), cpu_busy_pct (/proc/stat, all CPUs), device_read_iops
and device_mb_per_s (/proc/diskstats of the data directory's disk).
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

from pydantic import Field

from ..probes.os_stats import device_of, disk_counters, system_cpu_times
from ..probes.stat_io import StatIoProbe, flush_own_stats
from ..spec import DatasetSpec, SpecError
from .base import Options
from .together import run_together

FILLER_BYTES = 2000  # fillfactor 10 keeps the 2nd row out at load; 3 more versions fit for HOT updates
FILLFACTOR = 10
PROCEDURE = "blocklab_slob_run"
BUILD_VERSION = 2


class SlobOptions(Options):
    sessions: int = Field(default=4, ge=1, le=256, description="concurrent sessions (SLOB: 1..64)")
    update_pct: float = Field(default=0, ge=0, le=100, description="percent of iterations that also update their range and commit")
    scale: int | None = Field(default=None, ge=1, description="rows (= heap pages) per table (default: dataset.rows)")
    work_unit: int = Field(default=16, ge=1, le=10_000, description="keys read (and updated) per iteration")
    run_time_s: float = Field(default=30.0, gt=0, le=86_400, description="seconds each session runs")
    think_time_ms: float = Field(default=0.0, ge=0, le=60_000, description="sleep after each iteration")
    shared_table: bool = Field(default=False, description="all sessions share one table (default: one table per session)")


class Slob:
    name = "slob"
    default_metric = "read_iops"
    default_goal = "max"
    engines = ("postgres", "mariadb")
    Options = SlobOptions

    def __init__(self, options: SlobOptions, dataset: DatasetSpec):
        self.options = options
        self.dataset = dataset
        self.scale = options.scale or dataset.rows
        if options.work_unit > self.scale:
            raise SpecError(
                f"workload slob: work_unit {options.work_unit:,} is larger than the table's scale {self.scale:,} rows"
            )
        if len(self.table_name(options.sessions - 1)) > 63:
            raise SpecError(f"workload slob: dataset.table {dataset.table!r} is too long for the per-session table names")

    # ------------------------------------------------------------------ tables
    def table_name(self, i: int) -> str:
        return f"{self.dataset.table}_{i + 1}"

    def tables(self) -> list[str]:
        """The table of each session, in session order (one name repeated with shared_table)."""
        n = self.options.sessions
        return [self.table_name(0)] * n if self.options.shared_table else [self.table_name(i) for i in range(n)]

    def relations(self) -> list[str]:
        out: list[str] = []
        for t in dict.fromkeys(self.tables()):
            out += [t, f"{t}_key"]
        return out

    def fingerprint(self) -> str:
        return json.dumps(
            {"blocklab_dataset": "slob", "build": BUILD_VERSION, "rows": self.scale, "filler": FILLER_BYTES, "fillfactor": FILLFACTOR}
        )

    def prepare(self, engine: Any) -> None:
        """Build missing or stale tables (only the ones this cell's sessions use) and the procedure."""
        if engine.name == "mariadb":
            from . import slob_mariadb

            return slob_mariadb.prepare(engine, self.tables(), self.scale)
        fp = self.fingerprint()
        for t in dict.fromkeys(self.tables()):
            if _table_comment(engine, t) != fp:
                build_slob_table(engine, t, self.scale, fp)
        create_procedure(engine)

    # ------------------------------------------------------------------ timed run
    def run(self, engine: Any) -> dict[str, float]:
        if engine.name == "mariadb":
            from . import slob_mariadb

            return slob_mariadb.run(engine, self.tables(), self.scale, self.options)
        o = self.options
        conns: list[Any] = []
        try:
            for _ in range(o.sessions):  # one by one, inside the try: a refused connection leaks none
                conns.append(engine.connect())
            for conn in conns:
                conn.execute("SET application_name = 'blocklab slob'")
                conn.execute("SET track_io_timing = on")  # read_time in pg_stat_io
                conn.execute("SET enable_seqscan = off")  # SLOB reads through the index, one page at a time:
                conn.execute("SET enable_bitmapscan = off")  # no bitmap heap scan (it prefetches)
            sql = f"CALL {PROCEDURE}(%s, %s, %s, %s, %s, %s, NULL, NULL, NULL)"
            args = (self.scale, o.work_unit, float(o.update_pct), float(o.run_time_s), float(o.think_time_ms))
            tables = self.tables()

            def call(i: int) -> tuple:
                return conns[i].execute(sql, (tables[i], *args)).fetchone()

            with HostCounters(engine) as host, StatIoProbe(engine) as io:
                sessions = run_sessions(len(conns), call, cancel=lambda i: conns[i].cancel())
                for conn in conns:
                    flush_own_stats(conn)
        finally:
            for conn in conns:
                conn.close()
        rel = io.by_type
        totals = {k: sum(v[k] for v in rel.values()) for k in ("reads", "writes", "read_bytes", "write_bytes", "read_time")}
        m = point_metrics(o, sessions, engine.block_size(), host, totals["reads"], totals["writes"],
                          totals["read_bytes"], totals["write_bytes"], totals["read_time"])
        m.update({k: v for k, v in io.metrics().items() if not k.startswith(("io.", "wal."))})
        return m

    def describe(self, m: dict[str, float]) -> str:
        return (
            f"{m['sessions']:.0f} sessions, {m['update_pct']:.0f}% updates: {m['read_iops']:,.0f} read IOPS, "
            f"{m['mb_per_s']:,.0f} MB/s, {m['read_latency_ms']:.2f} ms read latency "
            f"({m['ops_per_s']:,.0f} ops/s, CPU {m['cpu_busy_pct']:.0f}% busy)"
        )

    def estimate_seconds(self) -> float:
        return self.options.run_time_s + 2.5  # + connecting and the pg_stat_io settle


WORKLOAD = Slob


class HostCounters:
    """CPU (/proc/stat, all CPUs) and the data directory's disk (/proc/diskstats)
    around one point: what the machine did, whatever the engine says."""

    def __init__(self, engine: Any):
        data_dir = engine.data_dir()
        self.device = device_of(data_dir).name if data_dir else None

    def __enter__(self) -> "HostCounters":
        self.disk0 = disk_counters(self.device) if self.device else None
        self.cpu0 = system_cpu_times()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cpu1 = system_cpu_times()
        self.disk1 = disk_counters(self.device) if self.device else None

    def metrics(self, secs: float) -> dict[str, float]:
        busy, total = self.cpu1[0] - self.cpu0[0], self.cpu1[1] - self.cpu0[1]
        m = {"cpu_busy_pct": 100.0 * busy / total if total > 0 else 0.0}
        if self.disk0 is not None and self.disk1 is not None:
            d = self.disk1.minus(self.disk0)
            m["device_read_iops"] = d.reads / secs
            m["device_mb_per_s"] = (d.read_bytes + d.write_bytes) / 1e6 / secs
            m["device_write_iops"] = d.writes / secs
        return m


def point_metrics(o: SlobOptions, sessions: list[dict[str, float]], block: int, host: HostCounters,
                  reads: float, writes: float, read_bytes: float, write_bytes: float, read_time_ms: float) -> dict[str, float]:
    """The metrics of one point from the engine's I/O totals over it, per second
    of the slowest session's loop (the engines differ only in where the totals come from)."""
    iterations = sum(s["iterations"] for s in sessions)
    updates = sum(s["updates"] for s in sessions)
    elapsed = max(s["elapsed_s"] for s in sessions)
    secs = elapsed if elapsed > 0 else 1e-9
    return {
        "sessions": float(o.sessions),
        "update_pct": float(o.update_pct),
        "block_size": float(block),
        "read_iops": reads / secs,
        "write_iops": writes / secs,
        "mb_per_s": (read_bytes + write_bytes) / 1e6 / secs,
        "read_mb_per_s": read_bytes / 1e6 / secs,
        "read_latency_ms": read_time_ms / reads if reads else 0.0,
        "ops_per_s": iterations / secs,
        "iterations": float(iterations),
        "updates": float(updates),
        "update_share": updates / iterations if iterations else 0.0,
        "elapsed_s": elapsed,
        "wall_s": max(s["t1"] for s in sessions) - min(s["t0"] for s in sessions),
        "reads": reads,
        "writes": writes,
        "reads_per_iteration": reads / iterations if iterations else 0.0,
        **host.metrics(secs),
    }


def run_sessions(
    count: int, call: Callable[[int], tuple], cancel: Callable[[int], None] | None = None
) -> list[dict[str, float]]:
    """Run call(0..count-1) at once, released together; each call runs one
    session's whole loop and returns its (iterations, updates, elapsed seconds
    as the server measured them). `cancel(i)` stops session i's loop on the
    server when the run is interrupted."""

    def session(i: int) -> dict[str, float]:
        t0 = time.perf_counter()
        row = call(i)
        t1 = time.perf_counter()
        return {"iterations": int(row[0]), "updates": int(row[1]), "elapsed_s": float(row[2]), "t0": t0, "t1": t1}

    return run_together(count, session, "blocklab-slob", cancel)


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


def create_procedure(engine: Any) -> None:
    with engine.connect(session=False) as conn:
        conn.execute(_PROCEDURE_SQL)


def build_slob_table(engine: Any, table: str, rows: int, fingerprint: str) -> None:
    """One SLOB table: `rows` rows, one per heap page, keys in random order, an
    index on the key; built in one transaction (no WAL with wal_level=minimal),
    vacuumed, analysed and checkpointed. SpecError if pages != rows."""
    q = f'"{table}"'
    with engine.connect(session=False, autocommit=False) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {q}")
        conn.execute(
            f"CREATE TABLE {q} (id integer NOT NULL, val integer NOT NULL, filler text STORAGE PLAIN) "
            f"WITH (fillfactor = {FILLFACTOR}, autovacuum_enabled = false)"
        )
        conn.execute(
            f"INSERT INTO {q} SELECT i, 0, repeat('x', {FILLER_BYTES}) FROM generate_series(1, %s) AS i ORDER BY random()",
            (rows,),
        )
        conn.execute(f'CREATE UNIQUE INDEX "{table}_key" ON {q} (id)')
        conn.commit()
    with engine.connect(session=False) as conn:
        conn.execute(f"VACUUM ANALYZE {q}")
        pages = conn.execute("SELECT pg_relation_size(%s::regclass) / current_setting('block_size')::integer", (table,)).fetchone()[0]
        if int(pages) != rows:
            raise SpecError(f"workload slob: table {table} has {pages:,} pages for {rows:,} rows; expected one row per page")
        conn.execute(f"COMMENT ON TABLE {q} IS '{fingerprint}'")  # complete only now
        conn.execute("CHECKPOINT")


def _table_comment(engine: Any, table: str) -> str | None:
    rows = engine.query(
        "SELECT obj_description(c.oid, 'pg_class') FROM pg_class c "
        "WHERE c.relname = %s AND c.relnamespace = 'public'::regnamespace",
        (table,),
    )
    return rows[0][0] if rows else None


def rows_per_page(engine: Any, table: str) -> dict[str, int]:
    """Live rows and heap pages, and the largest number of rows in any page (for tests)."""
    pages = engine.query("SELECT pg_relation_size(%s::regclass) / current_setting('block_size')::integer", (table,))[0][0]
    rows, most = engine.query(
        f'SELECT count(*), coalesce(max(n), 0) FROM (SELECT (ctid::text::point)[0] AS page, count(*) AS n FROM "{table}" GROUP BY 1) s'
    )[0]
    return {"pages": int(pages), "pages_with_rows": int(rows), "max_rows_per_page": int(most)}
