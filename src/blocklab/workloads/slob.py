"""Workload `slob`: SLOB-style random single-block physical I/O (seed 003).

Each session owns a table (SLOB's one schema per user) of `scale` rows laid
out so that a range of `work_unit` keys read through an index costs
`work_unit` random single-page reads: neighbouring keys live in far-apart
pages. A loop runs server-side, per session, for `run_time_s`:

    pick a random range of work_unit keys; read them through the index;
    with probability update_pct %: update the same range and COMMIT;
    optional sleep for think_time_ms

and returns its iteration and update counts. Sessions are threads with their
own connection, released together by a barrier. How the tables are laid out
and the loop written is the engine's `slob` dialect (engines/<name>/slob.py):
PostgreSQL keeps one row per heap page, InnoDB (which clusters rows on the
primary key and cannot hold one row per page) a fixed row size, so every page
size holds the same bytes.

Metrics per point (per second of the slowest session's run): read_iops /
write_iops and mb_per_s from the engine's own I/O counters (all its
processes), read_latency_ms (its read time / reads), ops_per_s (iterations),
update_share (updates / iterations), cpu_busy_pct (/proc/stat, all CPUs),
device_read_iops and device_mb_per_s (/proc/diskstats of the data
directory's disk), and the engine's own figures beside them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import ClassVar, Protocol, cast

from pydantic import Field

from ..engines.base import Capabilities, DialectBase, Engine, Session, table_is_current
from ..probes.io import HostWindow, RunProbe
from ..spec import DatasetSpec, SpecError
from .base import Options, dialect_bytes_per_row
from .together import run_together


class SlobDialect(Protocol):
    """What a SLOB point needs from an engine."""

    table_shape: ClassVar[dict[str, object]]  # the layout's parameters, part of the tables' fingerprint

    def build_slob_table(self, table: str, rows: int, fingerprint: str) -> None:
        """One session's table of `rows` rows, keys in random page order, an index
        on the key, its fingerprint stored last (a build cut off is rebuilt)."""

    def prepare_slob(self) -> None:
        """The server-side loop (a stored procedure), created or replaced."""

    def slob_sessions(self, count: int) -> list[Session]:
        """The point's sessions, open and set up to read through the index one page at a
        time: `count` of them on a server (one connection per SLOB session, see
        open_sessions), or fewer where one session runs several SLOB sessions as threads
        of one process (RocksDB: one db_bench process with `count` threads). Opened one by
        one; if one fails, those already open are closed."""

    def slob_loop(self, session: Session, table: str, scale: int, work_unit: int, update_pct: float,
                  run_time_s: float, think_ms: float) -> tuple[int, int, float]:
        """One session's whole loop: (iterations, updates, elapsed seconds as the
        server measured them), summed over its threads when it runs several."""


class SlobOptions(Options):
    sessions: int = Field(default=4, ge=1, le=256, description="concurrent sessions (SLOB: 1..64)")
    update_pct: float = Field(default=0, ge=0, le=100, description="percent of iterations that also update their range and commit")
    scale: int | None = Field(default=None, ge=1, description="rows (= heap pages) per table (default: dataset.rows)")
    work_unit: int = Field(default=16, ge=1, le=10_000, description="keys read (and updated) per iteration")
    run_time_s: float = Field(default=30.0, gt=0, le=86_400, description="seconds each session runs")
    think_time_ms: float = Field(default=0.0, ge=0, le=60_000, description="sleep after each iteration")
    shared_table: bool = Field(default=False, description="all sessions share one table (default: one table per session)")


class Slob:
    name: ClassVar[str] = "slob"
    default_metric: ClassVar[str] = "read_iops"
    work: ClassVar[tuple[str, str]] = ("iterations", "operation")  # the metric counting its work, and its unit (CPU per unit)
    # the figures every run reports: what measure.metric may name (checked before anything runs)
    metrics: ClassVar[tuple[str, ...]] = ('read_iops', 'write_iops', 'mb_per_s', 'read_mb_per_s', 'read_latency_ms', 'ops_per_s', 'iterations', 'updates', 'update_share', 'elapsed_s', 'wall_s', 'reads', 'writes', 'reads_per_iteration')
    rows_option: ClassVar[str | None] = None  # --rows sizes dataset.rows
    default_goal: ClassVar[str] = "max"
    steady_series: ClassVar[str] = "device_read_iops"  # judged second by second (workloads/base.py timed_series)
    # the load, not settings to choose: the x axis of the saturation curve and its series (analysis/load.py)
    LOAD_AXES: ClassVar[tuple[str, ...]] = ("sessions", "update_pct")
    Dialect: ClassVar[type] = SlobDialect
    needs: ClassVar[str] = "SLOB's tables (one random page per key) and its server-side loop"
    Options = SlobOptions
    dialect_class: type[DialectBase] = DialectBase
    capabilities: Capabilities = Capabilities()  # the engine's: set by make_workload

    def __init__(self, options: SlobOptions, dataset: DatasetSpec):
        self.options = options
        self.dataset = dataset
        self.series: dict[str, list[float]] = {}  # the last run's, second by second
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

    def fingerprint(self, dialect: SlobDialect) -> str:
        return json.dumps({"blocklab_dataset": "slob", "rows": self.scale, **dialect.table_shape})

    def prepare(self, engine: Engine) -> None:
        """Build missing or stale tables (only the ones this cell's sessions use) and the loop."""
        dialect = cast(SlobDialect, engine.dialect(self.name))
        fp = self.fingerprint(dialect)
        for table in dict.fromkeys(self.tables()):
            if not table_is_current(engine, table, fp):
                dialect.build_slob_table(table, self.scale, fp)
        dialect.prepare_slob()

    # ------------------------------------------------------------------ timed run
    def run(self, engine: Engine) -> dict[str, float]:
        o = self.options
        dialect = cast(SlobDialect, engine.dialect(self.name))
        tables = self.tables()
        direct = engine.direct_io_active()  # asked before the window: it is a query
        sessions: list[Session] = []
        self.series = {}
        try:
            sessions = dialect.slob_sessions(o.sessions)  # as many as the engine runs the point with
            if len(sessions) != o.sessions and not o.shared_table:  # threads of one session share its table
                raise RuntimeError(f"workload slob: {len(sessions)} sessions run {o.sessions} SLOB sessions, "
                                   "but each SLOB session has its own table (shared_table = false)")

            def call(i: int) -> tuple[int, int, float]:
                return dialect.slob_loop(sessions[i], tables[i], self.scale, o.work_unit, float(o.update_pct),
                                         float(o.run_time_s), float(o.think_time_ms))

            with RunProbe(engine, settle=True, sessions=sessions, per_second=True) as probe:
                points = run_sessions(len(sessions), call, cancel=lambda i: sessions[i].cancel())
            self.series = probe.host.series()
        finally:
            for session in sessions:
                session.close()
        d = probe.deltas
        m = point_metrics(o, points, engine.block_size(), probe.host, d.get("reads", 0.0), d.get("writes", 0.0),
                          d.get("read_bytes", 0.0), d.get("write_bytes", 0.0), d.get("read_time_ms", 0.0))
        m.update({k: v for k, v in probe.engine_metrics().items() if not k.startswith(("io.", "wal."))})
        # random single-page reads over every session's table: the twin's file is their size
        data = float(sum(engine.relation_bytes(r) for r in self.relations()))
        m.update(probe.pattern(m["elapsed_s"], sequential=False, direct=direct, data_bytes=data, sessions=o.sessions))
        return m

    def describe(self, m: dict[str, float]) -> str:
        return (
            f"{m['sessions']:.0f} sessions, {m['update_pct']:.0f}% updates: {m['read_iops']:,.0f} read IOPS, "
            f"{m['mb_per_s']:,.0f} MB/s, {m['read_latency_ms']:.2f} ms read latency "
            f"({m['ops_per_s']:,.0f} ops/s, CPU {m['cpu_busy_pct']:.0f}% busy)"
        )

    def disk_bytes(self) -> float:
        tables = len(dict.fromkeys(self.tables()))
        return tables * self.scale * dialect_bytes_per_row(self.dialect_class, 8400.0)

    def estimate_seconds(self) -> float:
        return self.options.run_time_s + 2.5  # + connecting and the counters' settle


WORKLOAD = Slob


def point_metrics(o: SlobOptions, sessions: list[dict[str, float]], block: int, host: HostWindow,
                  reads: float, writes: float, read_bytes: float, write_bytes: float, read_time_ms: float) -> dict[str, float]:
    """The metrics of one point from the engine's I/O totals over it, per second
    of the slowest session's loop."""
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
        **host.rates(secs),
    }


def open_sessions(count: int, open_one: Callable[[], Session]) -> list[Session]:
    """`count` sessions of `open_one()`, one by one; a failure closes those opened (a
    server's slob_sessions: one connection per SLOB session)."""
    sessions: list[Session] = []
    try:
        for _ in range(count):
            sessions.append(open_one())
    except BaseException:
        for session in sessions:
            session.close()
        raise
    return sessions


def run_sessions(
    count: int, call: Callable[[int], tuple[int, int, float]], cancel: Callable[[int], None] | None = None
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
