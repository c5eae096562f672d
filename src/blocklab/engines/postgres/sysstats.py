"""`blocklab sysstats` on PostgreSQL: the reads that system statistics are
measured with (features/sysstats.py SysstatsDialect), and the planner costs
they imply and are applied to: costs relative to a sequential page
(seq_page_cost = 1), random_page_cost = SREADTIM / (MREADTIM / MBRC), set with
ALTER SYSTEM and pg_reload_conf().

* single-block reads: one server-side loop of TID fetches, one heap block
  each, in the given order (a TID list in one query would be sorted; a query
  per block would time the network), with effective_io_concurrency = 0;
* a serial scan: SELECT count(*) with no parallel workers; without read-ahead
  (effective_io_concurrency = 0) the read stream still combines blocks up to
  io_combine_limit but has one read in flight at a time, so pg_stat_io's
  read_time is each multiblock read's whole latency (like Oracle's
  synchronous 'db file scattered read');
* concurrent scans: one TID range scan per session over its own slice of the
  table (so no session finds another's pages in shared buffers).

Every measuring session has I/O timing on (read_time in pg_stat_io) and its
statistics flushed before a read of the counters. Errors of the server come
out as EngineError.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import psycopg
from psycopg import sql

from ..base import DialectBase, EngineError, Reading
from .counters import flush_own_stats, read_counters, relation_totals

if TYPE_CHECKING:
    from ...probes.os_stats import DeviceReads
    from . import PostgresEngine


@contextlib.contextmanager
def _server_errors() -> Iterator[None]:
    try:
        yield
    except psycopg.Error as err:
        raise EngineError(f"PostgreSQL: {str(err).strip()}") from None


class _Session:
    """A measuring connection: no parallel workers, I/O timing on, stats flushed on demand;
    `effective_io_concurrency` 0 makes a scan read one block range at a time, no read-ahead."""

    def __init__(self, engine: PostgresEngine, effective_io_concurrency: int | None = None):
        self.major = engine.major
        self.conn = engine.pg_connect()
        try:
            self.conn.execute("SET max_parallel_workers_per_gather = 0")
            if effective_io_concurrency is not None:
                self.conn.execute(sql.SQL("SET effective_io_concurrency = {}").format(sql.Literal(int(effective_io_concurrency))))
            row = self.conn.execute("SHOW track_io_timing").fetchone()
            if not row or row[0] != "on":
                try:
                    self.conn.execute("SET track_io_timing = on")
                except psycopg.Error:
                    raise EngineError(
                        "track_io_timing is off and this role may not turn it on for its session, so "
                        "pg_stat_io has no read times; connect as a superuser, or have it enabled "
                        "(ALTER SYSTEM SET track_io_timing = on; SELECT pg_reload_conf();)"
                    ) from None
        except BaseException:
            self.conn.close()
            raise

    def flush(self) -> None:
        flush_own_stats(self.conn)

    def counters(self) -> dict[str, float]:
        return relation_totals(read_counters(self.conn, self.major))

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> _Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _reads_statement(table: str, blocks: Sequence[int]) -> sql.Composed:
    array = "{" + ",".join(str(int(b)) for b in blocks) + "}"
    body = sql.SQL(
        "DECLARE b int; BEGIN FOREACH b IN ARRAY {}::int[] LOOP "
        "PERFORM 1 FROM {} WHERE ctid = ('(' || b || ',1)')::tid; END LOOP; END"
    ).format(sql.Literal(array), sql.Identifier(table))
    return sql.SQL("DO $blocklab$ {} $blocklab$").format(body)


def random_page_cost(sreadtim_ms: float, mreadtim_ms: float, mbrc: float) -> float:
    """A random page relative to a sequential one: the single-block read time
    over the time per block of a multiblock read."""
    for name, value in (("SREADTIM", sreadtim_ms), ("MREADTIM", mreadtim_ms), ("MBRC", mbrc)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive number, not {value!r}")
    return sreadtim_ms / (mreadtim_ms / mbrc)


def alter_system_sql(costs: dict[str, float]) -> list[str]:
    """The statements that set the costs server-wide, as a superuser types them."""
    lines = [f"ALTER SYSTEM SET {name} = {_typed(value)};" for name, value in costs.items()]
    lines.append("SELECT pg_reload_conf();")
    return lines


def _typed(value: float) -> str:
    """1.0 -> '1', 16.05 -> '16.05' (as a person types it)."""
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)


class SysstatsReads(DialectBase):
    def __init__(self, engine: PostgresEngine):
        self.engine = engine

    def read_settings(self) -> dict[str, str]:
        """The settings the statistics are measured under (before 17 a scan reads one
        block per call and before 18 every read is synchronous: those are their values)."""
        with _server_errors(), _Session(self.engine) as s:
            rows = s.conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN ('io_combine_limit', 'io_method', 'effective_io_concurrency')"
            ).fetchall()
        source = ("pg_stat_io read_time / reads" if self.engine.major >= 16 else
                  "pg_stat_database blk_read_time / pg_statio_all_tables heap_blks_read")
        return {"io_combine_limit": "1", "io_method": "sync", **{str(k): str(v) for k, v in rows}, "read_time_source": source}

    def evicts_blocks(self) -> bool:
        with _server_errors():
            return self.engine._eviction() in ("relation", "buffer", "rewrite")

    def cached_blocks(self, table: str) -> set[int]:
        with _server_errors():
            self.engine._eviction()  # makes sure pg_buffercache exists
            rows = self.engine.query(
                "SELECT relblocknumber FROM pg_buffercache WHERE relfilenode = pg_relation_filenode(%s::regclass) "
                "AND reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())",
                (table,),
            )
        return {int(r[0]) for r in rows}

    def adaptations(self) -> list[str]:
        major, version = self.engine.major, self.engine.version
        out = []
        if major < 17:
            out.append(f"PostgreSQL {version} has no io_combine_limit: a scan asks for one 8 kB block per call "
                       "and the OS read-ahead makes the large reads (MBRC counts PostgreSQL's calls)")
        if major < 16:
            out.append("no pg_stat_io before PostgreSQL 16: reads, hits and read times come from pg_statio_all_tables "
                       "and pg_stat_database")
        if not self.evicts_blocks():
            out.append("shared buffers cannot be emptied of a table before PostgreSQL 17 (pg_buffercache_evict): the "
                       "single-block sample avoids the blocks they hold, and MAXTHR is measured with one session only "
                       "(concurrent TID range scans would fill them)")
        return out

    def single_block_reads(self, table: str, blocks: Sequence[int], warmup_block: int, disk: DeviceReads) -> Reading:
        """Cold random single-block reads of `blocks` (distinct). One block outside
        the sample is read first so the loop's plan and catalogs are warm."""
        with _server_errors():
            self.engine.evict([table])
            with _Session(self.engine, 0) as s:
                s.conn.execute(_reads_statement(table, [warmup_block]))
                before = s.counters()
                d0 = disk.read_bytes()
                t0 = time.perf_counter()
                s.conn.execute(_reads_statement(table, blocks))
                wall = time.perf_counter() - t0
                d1 = disk.read_bytes()
                after = s.counters()
        return Reading(before, after, wall, d0, d1)

    def serial_scan(self, table: str, disk: DeviceReads, *, read_ahead: bool) -> Reading:
        """One cold serial full scan (SELECT count(*), no parallel workers)."""
        with _server_errors():
            self.engine.evict([table])
            with _Session(self.engine, None if read_ahead else 0) as s:
                before = s.counters()
                d0 = disk.read_bytes()
                t0 = time.perf_counter()
                s.conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))).fetchone()
                wall = time.perf_counter() - t0
                d1 = disk.read_bytes()
                after = s.counters()
        return Reading(before, after, wall, d0, d1, (wall,))

    def concurrent_scan(self, table: str, slices: Sequence[tuple[int, int]], disk: DeviceReads) -> Reading:
        """One cold TID range scan per slice (of blocks), all at once. Wall time
        from the common start to the last finish."""
        with _server_errors():
            return self._concurrent_scan(table, slices, disk)

    def _concurrent_scan(self, table: str, slices: Sequence[tuple[int, int]], disk: DeviceReads) -> Reading:
        sessions = len(slices)
        self.engine.evict([table])
        opened: list[_Session] = []
        try:
            for _ in range(sessions):
                s = _Session(self.engine)
                opened.append(s)
                s.conn.execute("SET enable_seqscan = off")  # a TID range scan of the slice, never the whole table
            before = opened[0].counters()
            d0 = disk.read_bytes()
            barrier = threading.Barrier(sessions + 1)
            walls = [0.0] * sessions
            errors: list[BaseException] = []

            def scan(i: int) -> None:
                lo, hi = slices[i]
                statement = sql.SQL("SELECT count(*) FROM {} WHERE ctid >= {}::tid AND ctid < {}::tid").format(
                    sql.Identifier(table), sql.Literal(f"({lo},0)"), sql.Literal(f"({hi},0)")
                )
                try:
                    barrier.wait()
                    t = time.perf_counter()
                    opened[i].conn.execute(statement).fetchone()
                    walls[i] = time.perf_counter() - t
                except BaseException as err:  # reported after the join
                    errors.append(err)
                    barrier.abort()

            threads = [threading.Thread(target=scan, args=(i,), daemon=True) for i in range(sessions)]
            for t in threads:
                t.start()
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait()
            t0 = time.perf_counter()
            for t in threads:
                t.join()
            wall = time.perf_counter() - t0
            if errors:
                raise EngineError(f"a concurrent scan failed: {errors[0]}")
            d1 = disk.read_bytes()
            for s in opened[1:]:
                s.flush()
            after = opened[0].counters()
        finally:
            for s in opened:
                s.close()
        return Reading(before, after, wall, d0, d1, tuple(walls))

    def read_costs(self, names: Sequence[str]) -> dict[str, str]:
        """The values a new session sees."""
        with _server_errors(), self.engine.pg_connect(session=False) as conn:
            out = {}
            for n in names:
                row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(n))).fetchone()
                out[n] = str(row[0]) if row else ""
            return out

    def implied_costs(self, sreadtim_ms: float, mreadtim_ms: float, mbrc: float) -> tuple[dict[str, float], str]:
        cost = random_page_cost(sreadtim_ms, mreadtim_ms, mbrc)
        formula = (f"random_page_cost = SREADTIM / (MREADTIM / MBRC) = {sreadtim_ms:.4g} / "
                   f"({mreadtim_ms:.4g} / {mbrc:.4g}) = {cost:.2f}")
        return {"seq_page_cost": 1.0, "random_page_cost": round(cost, 2)}, formula

    def cost_statements(self, costs: dict[str, float]) -> list[str]:
        return alter_system_sql(costs)

    def undo_statements(self, costs: dict[str, float]) -> list[str]:
        return [*(f"ALTER SYSTEM RESET {name};" for name in costs), "SELECT pg_reload_conf();"]

    def set_costs(self, costs: dict[str, str]) -> None:
        """ALTER SYSTEM SET each cost and reload (the reload is asynchronous)."""
        with _server_errors(), self.engine.pg_connect(session=False) as conn:
            for name, value in costs.items():
                conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value)))
            conn.execute("SELECT pg_reload_conf()")
