"""Workload `update`: K sessions each update their own key range in one
statement, all started together, with a buffer cache much smaller than the
rows they change (seed 002: 15 concurrent updates of a million rows each).

Every session has its own connection and thread; a barrier releases them
together, and each runs

    UPDATE <table> SET val = val + 1 WHERE id BETWEEN <lo> AND <hi>

over its own M rows (a range of the primary key, so the pages go through the
buffer pool). The cell's elapsed time is the slowest session's. Around it:

* the engine's session profiler (PostgreSQL: a wait sampler over
  pg_stat_activity; MariaDB: performance_schema per server thread) gives each
  session's time profile, kept for the slowest session and summed over all
  (`profile.slowest.*`, `profile.total.*`);
* the engine's I/O window: who wrote the pages (PostgreSQL's `backend_writes`,
  pages the sessions had to write themselves to get a free buffer; InnoDB's
  free-page waits): the engines' versions of Oracle's free buffer waits, which
  each engine names in its capabilities (`page_writers`);
* the host's CPU and device counters.

Keeping cells comparable: every cell must find the table in the same state.
`val = val + 1` keeps every row the same size; the table is built with a low
fillfactor (default 45) and updated once in full after the build (untimed),
so from the first cell on each page holds the previous version of each of its
rows and the table does not grow (`table_growth_bytes`, the proof). Before each
cell the engine's dialect brings the table back to that steady state, untimed
(PostgreSQL: nothing, or VACUUM with `vacuum = true`; InnoDB: its purge of the
previous cell's undo is waited for, `purge_waited`). How each engine builds
the table, updates a range and profiles its sessions is its `update` dialect
(engines/<name>/update.py); options an engine has no use for are refused
before anything runs (the dialect's `refused_options`).

With `measure.cache = "cold"` the runner evicts the table from the engine's
cache and the OS cache before each cell: nothing cached at the start.
"""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from typing import ClassVar, Protocol, cast

from pydantic import Field

from ..engines.base import Capabilities, DialectBase, Engine, Session, SessionProfiler, table_is_current
from ..probes.io import RunProbe
from ..spec import DatasetSpec, SpecError
from .base import Options, dialect_bytes_per_row
from .together import run_together


class TableWindow(Protocol):
    """The table's state around a point (its size, how its rows were updated)."""

    def __enter__(self) -> TableWindow: ...

    def __exit__(self, *exc: object) -> None: ...

    def metrics(self, touched_share: float) -> dict[str, float]:
        """table_bytes, table_growth_bytes, the cache's bytes, touched_bytes and
        cache_ratio (touched / cache), and the engine's own proofs (hot_share)."""


class UpdateDialect(Protocol):
    """What concurrent range updates need from an engine."""

    refused_options: ClassVar[dict[str, str]]  # options of this workload the engine has no use for -> why

    def build_update_table(self, table: str, rows: int, fillfactor: int, pad: int, fingerprint: str) -> None:
        """The keyed table (id, val, name, pad) of `rows` rows at `fillfactor`,
        updated once in full (the steady state), its fingerprint stored last."""

    def ready_update(self, table: str, vacuum: bool) -> dict[str, float]:
        """Untimed, before each cell: the steady state back. Returns notes kept as metrics."""

    def update_session(self) -> Session:
        """One updating session (session knobs applied, pages through the buffer pool)."""

    def update_range(self, session: Session, table: str, lo: int, hi: int) -> int:
        """The timed statement: UPDATE val = val + 1 for ids lo..hi, committed; rows updated."""

    def profiler(self, sample_ms: float, sample_nice: int | None) -> SessionProfiler:
        """The engine's profiler of where each session's time went."""

    def table_window(self, table: str) -> TableWindow:
        """The table's state before and after a point."""


class UpdateOptions(Options):
    sessions: int = Field(default=15, ge=1, le=256, description="concurrent updating sessions (the seed: 15)")
    rows_per_session: int | None = Field(
        default=None, ge=1, description="rows each session updates (default: the table's rows divided among the sessions)"
    )
    fillfactor: int = Field(default=45, ge=10, le=100, description="table fillfactor: room in each page for HOT updates")
    pad_bytes: int = Field(default=100, ge=0, le=1000, description="filler per row, so a page holds seed-like row counts")
    sample_ms: float = Field(default=10.0, gt=0, le=1000, description="wait sampler interval; 0 is not allowed")
    sample: bool = Field(default=True, description="run the session profiler (off: for measuring its overhead)")
    sample_nice: int | None = Field(default=19, ge=-20, le=19, description="nice value of the sampler's thread and backend (19: it yields to the sessions)")
    vacuum: bool = Field(default=False, description="VACUUM before each cell (pages start all-visible) instead of the steady state")


class Update:
    name: ClassVar[str] = "update"
    default_metric: ClassVar[str] = "elapsed_s"
    work: ClassVar[tuple[str, str]] = ("rows", "row updated")  # the metric counting its work, and its unit (CPU per unit)
    # the figures every run reports: what measure.metric may name (checked before anything runs)
    metrics: ClassVar[tuple[str, ...]] = ('elapsed_s', 'wall_s', 'fastest_s', 'mean_session_s', 'rows', 'rows_per_s')
    rows_option: ClassVar[str | None] = None  # --rows sizes dataset.rows
    default_goal: ClassVar[str] = "min"
    LOAD_AXES: ClassVar[tuple[str, ...]] = ("sessions",)  # the load, never ranked (analysis/load.py)
    steady_series: ClassVar[str] = "device_mb_per_s"  # reads and writes, second by second (workloads/base.py timed_series)
    Dialect: ClassVar[type] = UpdateDialect
    needs: ClassVar[str] = "the keyed update table, a range update, a session profiler"
    Options = UpdateOptions
    dialect_class: type[DialectBase] = DialectBase
    capabilities: Capabilities = Capabilities()  # the engine's: set by make_workload

    def __init__(self, options: UpdateOptions, dataset: DatasetSpec):
        self.options = options
        self.dataset = dataset
        self.series: dict[str, list[float]] = {}  # the last run's, second by second
        per = options.rows_per_session or dataset.rows // options.sessions
        if per < 1:
            raise SpecError(
                f"workload update: {options.sessions} sessions need at least {options.sessions} rows "
                f"(dataset.rows = {dataset.rows})"
            )
        if per * options.sessions > dataset.rows:
            raise SpecError(
                f"workload update: {options.sessions} sessions x rows_per_session {per:,} = "
                f"{per * options.sessions:,} rows, more than the table's dataset.rows = {dataset.rows:,}"
            )
        self.rows_per_session = per
        self.notes: dict[str, float] = {}  # the last prepare's, kept as metrics

    @property
    def table(self) -> str:
        return self.dataset.table

    def relations(self) -> list[str]:
        return [self.table, f"{self.table}_pkey"]

    def ranges(self) -> list[tuple[int, int]]:
        """Each session's ids: contiguous, disjoint, from 1 up."""
        m = self.rows_per_session
        return [(i * m + 1, (i + 1) * m) for i in range(self.options.sessions)]

    # ------------------------------------------------------------------ data set
    def fingerprint(self) -> str:
        o = self.options
        return json.dumps(
            {"blocklab_dataset": "update", "build": 1, "rows": self.dataset.rows, "fillfactor": o.fillfactor, "pad": o.pad_bytes}
        )

    def prepare(self, engine: Engine) -> None:
        o = self.options
        dialect = cast(UpdateDialect, engine.dialect(self.name))
        if not table_is_current(engine, self.table, self.fingerprint()):
            dialect.build_update_table(self.table, self.dataset.rows, o.fillfactor, o.pad_bytes, self.fingerprint())
        self.notes = dialect.ready_update(self.table, o.vacuum)

    # ------------------------------------------------------------------ timed run
    def run(self, engine: Engine) -> dict[str, float]:
        o = self.options
        dialect = cast(UpdateDialect, engine.dialect(self.name))
        sessions: list[Session] = []
        self.series = {}
        profiler = dialect.profiler(o.sample_ms, o.sample_nice) if o.sample else None
        try:
            for _ in range(o.sessions):  # one by one inside the try: a failed connect closes the ones opened
                sessions.append(dialect.update_session())
            for session in sessions:
                if profiler is not None:
                    profiler.register(session)
            with (
                profiler if profiler is not None else nullcontext(),
                dialect.table_window(self.table) as table,
                RunProbe(engine, settle=True, sessions=sessions, per_second=True) as probe,
            ):
                timings = run_updates(dialect, sessions, self.table, self.ranges(), profiler)
            self.series = probe.host.series()
        finally:
            for session in sessions:
                session.close()
        metrics = session_metrics(timings, o.sessions)
        metrics.update(self.notes)
        metrics.update(table.metrics(metrics["rows"] / self.dataset.rows))
        metrics.update(probe.host.deltas())
        metrics.update(probe.engine_metrics())
        # each session updates its own contiguous range of ids, laid out in id order: its
        # reads go through the table in order; the data is the table and its key
        data = float(sum(engine.relation_bytes(r) for r in self.relations()))
        metrics.update(probe.pattern(metrics["elapsed_s"], sequential=True, direct=engine.direct_io_active(),
                                     data_bytes=data, sessions=o.sessions))
        if profiler is not None:
            metrics.update(profiler.metrics("profile"))
        return metrics

    def describe(self, m: dict[str, float]) -> str:
        text = f"{m['elapsed_s']:.2f} s (slowest of {m['sessions']:.0f}), {m['rows_per_s']:,.0f} rows/s"
        writers = self.capabilities.page_writer_text(m)  # the engine's own counters of who wrote the pages
        if writers:
            text += f", {writers}"
        profile = self.capabilities.time_profile
        if profile and profile.off and m.get("profile.available") == 0.0:
            text += f"; {profile.off}"
        total = m.get("profile.slowest.total_s")
        if total:
            prefix = "profile.slowest.wait."
            waits = sorted(((k[len(prefix):-2], v) for k, v in m.items() if k.startswith(prefix)), key=lambda kv: -kv[1])
            parts = [f"{name} {v / total:.0%}" for name, v in waits[:2]]
            parts.append(f"CPU {m.get('profile.slowest.cpu_s', 0) / total:.0%}")
            parts.append(f"unaccounted {m.get('profile.slowest.unaccounted_s', 0) / total:.0%}")
            text += "; slowest: " + ", ".join(parts)
        if m.get("hot_share", 1.0) < 0.99:
            text += f" (only {m['hot_share']:.0%} HOT: the table changes between cells)"
        return text

    def disk_bytes(self) -> float:
        row = dialect_bytes_per_row(self.dialect_class, 200.0) + self.options.pad_bytes
        return self.dataset.rows * row * 100 / self.options.fillfactor

    def estimate_seconds(self) -> float:
        # ~0.2 M rows/s on 2 cores with a small cache, plus VACUUM and eviction between cells
        rows = self.rows_per_session * self.options.sessions
        return rows / 200_000 + self.dataset.rows / 2_000_000 + 0.5


WORKLOAD = Update


def session_metrics(sessions: list[tuple[float, float, int]], count: int) -> dict[str, float]:
    """The timing metrics from (start, end, rows) per session."""
    elapsed = [t1 - t0 for t0, t1, _ in sessions]
    rows = sum(n for _, _, n in sessions)
    slowest = max(elapsed)
    return {
        "elapsed_s": slowest,
        "wall_s": max(t1 for _, t1, _ in sessions) - min(t0 for t0, _, _ in sessions),
        "fastest_s": min(elapsed),
        "mean_session_s": sum(elapsed) / len(elapsed),
        "sessions": float(count),
        "rows": float(rows),
        "rows_per_s": rows / slowest if slowest > 0 else 0.0,
    }


def run_updates(
    dialect: UpdateDialect, sessions: list[Session], table: str, ranges: list[tuple[int, int]],
    profiler: SessionProfiler | None,
) -> list[tuple[float, float, int]]:
    """Every session's UPDATE in its own thread, released together; (start,
    end, rows) per session, the profiler's begin and end just outside each
    statement. Interrupted, each running session's statement is cancelled on
    the server (a session interrupted during the profiler's snapshot never
    starts its UPDATE)."""
    cancelled = [False] * len(sessions)

    def one(i: int) -> tuple[float, float, int]:
        session, (lo, hi) = sessions[i], ranges[i]
        t0 = profiler.begin(session) if profiler is not None else time.perf_counter()
        if cancelled[i]:
            raise KeyboardInterrupt
        rows = dialect.update_range(session, table, lo, hi)
        t1 = profiler.end(session) if profiler is not None else time.perf_counter()
        return (t0, t1, rows)

    def cancel(i: int) -> None:
        cancelled[i] = True
        sessions[i].cancel()

    return run_together(len(sessions), one, "blocklab-update", cancel)
