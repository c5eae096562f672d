"""Workload `update`: K sessions each update their own key range in one
statement, all started together, with a buffer cache much smaller than the
rows they change (seed 002: 15 concurrent updates of a million rows each).

Every session has its own connection and thread; a barrier releases them
together, and each runs

    UPDATE <table> SET val = val + 1 WHERE id BETWEEN <lo> AND <hi>

over its own M rows (index range scan on the primary key, so the pages go
through the shared buffer pool and not a small scan ring). The cell's elapsed
time is the slowest session's. Around it:

* a wait sampler (probes/waits.py) gives each session's time profile, kept for
  the slowest session and summed over all (`profile.slowest.*`,
  `profile.total.*`);
* pg_stat_io deltas per process type (probes/stat_io.py): `backend_writes`,
  relation pages the sessions had to write themselves to get a free buffer,
  PostgreSQL's version of Oracle's free buffer waits.

Keeping cells comparable: every cell must find the table in the same state.

* `val = val + 1` keeps every row the same size, and the table is built with
  a low fillfactor (default 45) so the new version of every row fits in its
  own page: every update is HOT (no index entry; the row stays in its page and
  in its session's page range) and the table does not grow. Each row records
  `hot_share` and `table_growth_bytes`, the proof.
* The table is built once, then updated once in full (untimed), so from the
  first cell on each page holds the previous version of each of its rows.
  A cell's update prunes those (on-access HOT pruning, inside the timed
  statement) and leaves its own for the next cell: the same work every cell,
  a steady state, and no preparation between cells. Autovacuum is off for
  the table so it never runs inside a cell.
* With `measure.cache = "cold"` the runner checkpoints and evicts the table
  from shared buffers and the OS cache before each cell: no dirty buffer and
  nothing cached at the start.

MariaDB (InnoDB), the same sessions and statement: one UPDATE per session over
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
* Probes (probes/waits_mariadb.py): each session's time profile, measured from
  performance_schema per server thread (waits timed, CPU bounded by the
  thread's schedstat, the rest unaccounted) in the same `profile.*` metrics;
  SHOW GLOBAL STATUS deltas (`innodb.buffer_pool_reads`, `.buffer_pool_wait_free`
  (waits for a free page: InnoDB's free buffer waits), `.pages_written`, ...)
  and the data-file waits of performance_schema (`data_file.count`, `.wait_s`,
  `.read_bytes`, `.write_bytes`, ...).
* PostgreSQL-only options are refused on MariaDB before anything runs:
  `vacuum` (purge is always waited for), `sample_ms` and `sample_nice` (the
  profile is measured, not sampled). `sample = false` still turns the profile
  off (its latch instruments cost a little).

`vacuum = true` runs VACUUM before each cell instead (a "freshly vacuumed
table": no old versions, every page all-visible). It costs a pass over the
table per cell (seconds with direct I/O), and every update then clears a
visibility-map bit: one VM page covers the whole table, so with more sessions
than cores they queue on it (LWLock:BufferContent) while its holder waits for
a CPU. Rebuilding the table per cell would also be clean but costs a full
load per cell.
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

from pydantic import Field

from ..probes.os_stats import device_of, disk_counters, process_cpu_seconds
from ..probes.stat_io import StatIoProbe, flush_own_stats
from ..probes.waits import WaitSampler
from ..probes.waits_mariadb import PURGE_WAIT_S, InnodbCounters, SessionWaitProfiler
from ..probes.waits_mariadb import wait_for_purge as _purge_wait
from ..spec import DatasetSpec, SpecError
from .base import Options
from .together import run_together


class UpdateOptions(Options):
    sessions: int = Field(default=15, ge=1, le=256, description="concurrent updating sessions (the seed: 15)")
    rows_per_session: int | None = Field(
        default=None, ge=1, description="rows each session updates (default: the table's rows divided among the sessions)"
    )
    fillfactor: int = Field(default=45, ge=10, le=100, description="table fillfactor: room in each page for HOT updates")
    pad_bytes: int = Field(default=100, ge=0, le=1000, description="filler per row, so a page holds seed-like row counts")
    sample_ms: float = Field(default=10.0, gt=0, le=1000, description="wait sampler interval; 0 is not allowed")
    sample: bool = Field(default=True, description="run the wait sampler (off: for measuring its overhead)")
    sample_nice: int | None = Field(default=19, ge=-20, le=19, description="nice value of the sampler's thread and backend (19: it yields to the sessions)")
    vacuum: bool = Field(default=False, description="VACUUM before each cell (pages start all-visible) instead of the steady state")


class Update:
    name = "update"
    default_metric = "elapsed_s"
    default_goal = "min"
    engines = ("postgres", "mariadb")
    Options = UpdateOptions

    @staticmethod
    def check_engine(options: UpdateOptions, engine_kind: str) -> None:
        """Refuse options the engine has no use for (called in validation, before anything runs)."""
        if engine_kind == "mariadb":
            check_mariadb_options(options)

    def __init__(self, options: UpdateOptions, dataset: DatasetSpec):
        self.options = options
        self.dataset = dataset
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
        self.purge_waited: bool | None = None  # MariaDB: the last prepare's wait for purge completed

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

    def prepare(self, engine: Any) -> None:
        o = self.options
        if engine.name == "mariadb":
            self.purge_waited = prepare_mariadb(engine, self.table, self.dataset.rows, o.fillfactor, o.pad_bytes, self.fingerprint())
            return
        if _table_comment(engine, self.table) != self.fingerprint():
            build_update_table(engine, self.table, self.dataset.rows, o.fillfactor, o.pad_bytes, self.fingerprint())
        if o.vacuum:
            with engine.connect(session=False) as conn:
                conn.execute(f'VACUUM "{self.table}"')  # the previous cell's old versions: gone, untimed

    # ------------------------------------------------------------------ timed run
    def run(self, engine: Any) -> dict[str, float]:
        if engine.name == "mariadb":
            return self._run_mariadb(engine)
        o = self.options
        table = self.table
        conns: list[Any] = []
        try:
            for _ in range(o.sessions):  # one by one inside the try: a failed connect closes the ones opened
                conns.append(engine.connect())
            for conn in conns:
                conn.execute("SET enable_seqscan = off")  # the pages go through shared buffers, not a scan ring
                conn.execute("SET application_name = 'blocklab update'")
            pids = [c.info.backend_pid for c in conns]
            before = _table_stats(engine, table)
            shared_buffers = _shared_buffers_bytes(engine)
            sampler = WaitSampler(engine, pids, interval=o.sample_ms / 1000, nice=o.sample_nice) if o.sample else None
            with _OsWindow(engine) as os_window, StatIoProbe(engine) as io:
                with sampler if sampler is not None else contextlib.nullcontext():
                    sessions = _run_sessions(conns, pids, table, self.ranges(), sampler)
                for conn in conns:
                    flush_own_stats(conn)  # before the probe's closing read
        finally:
            for conn in conns:
                conn.close()
        after = _table_stats(engine, table)

        metrics = _session_metrics(sessions, o.sessions)
        upd = after["n_tup_upd"] - before["n_tup_upd"]
        hot = after["n_tup_hot_upd"] - before["n_tup_hot_upd"]
        metrics.update(
            table_bytes=float(after["bytes"]),
            table_growth_bytes=float(after["bytes"] - before["bytes"]),
            hot_share=hot / upd if upd else 0.0,
            shared_buffers_bytes=float(shared_buffers),
            touched_bytes=after["bytes"] * metrics["rows"] / self.dataset.rows,
        )
        metrics["cache_ratio"] = metrics["touched_bytes"] / shared_buffers if shared_buffers else 0.0
        metrics.update(os_window.metrics())
        metrics.update(io.metrics())
        if sampler is not None:
            metrics.update(sampler.profile().metrics("profile"))
        return metrics

    def _run_mariadb(self, engine: Any) -> dict[str, float]:
        o = self.options
        table = self.table
        file0 = _tablespace_bytes(engine, table)
        # autocommit: each UPDATE is its own transaction, committed at the statement's end as on
        # PostgreSQL (no COMMIT round trip for the client's threads to delay under the GIL)
        conns: list[Any] = []
        profiler = SessionWaitProfiler(engine) if o.sample else None
        try:
            for _ in range(o.sessions):  # one by one inside the try: a failed connect closes the ones opened
                conns.append(engine.connect())
            with profiler if profiler is not None else contextlib.nullcontext():
                if profiler is not None:
                    for conn in conns:
                        profiler.register(conn)
                with _OsWindow(engine) as os_window, InnodbCounters(engine) as counters:
                    sessions = _run_sessions_mariadb(engine, conns, table, self.ranges(), profiler)
        finally:
            for conn in conns:
                conn.close()
        metrics = _session_metrics(sessions, o.sessions)
        if self.purge_waited is not None:
            metrics["purge_waited"] = 1.0 if self.purge_waited else 0.0
        pool = int(engine.query("SELECT @@innodb_buffer_pool_size")[0][0])
        table_bytes = engine.relation_bytes(table)  # pages in use, from the build's ANALYZE (in-place updates keep it)
        metrics.update(
            table_bytes=float(table_bytes),
            table_growth_bytes=float(_tablespace_bytes(engine, table) - file0),
            buffer_pool_bytes=float(pool),
            touched_bytes=table_bytes * metrics["rows"] / self.dataset.rows,
        )
        metrics["cache_ratio"] = metrics["touched_bytes"] / pool if pool else 0.0
        metrics.update(os_window.metrics())
        metrics.update(counters.metrics())
        if profiler is not None:
            metrics.update(profiler.metrics("profile"))
        return metrics

    def describe(self, m: dict[str, float]) -> str:
        text = f"{m['elapsed_s']:.2f} s (slowest of {m['sessions']:.0f}), {m['rows_per_s']:,.0f} rows/s, "
        if "innodb.buffer_pool_wait_free" in m:  # MariaDB
            text += (
                f"free-page waits {m['innodb.buffer_pool_wait_free']:,.0f}, "
                f"pages written {m.get('innodb.pages_written', 0):,.0f} "
                f"(LRU {m.get('innodb.buffer_pool_pages_lru_flushed', 0):,.0f})"
            )
            if m.get("profile.available") == 0.0:
                text += "; no time profile: performance_schema is off"
        else:
            text += (
                f"backend writes {m.get('backend_writes', 0):,.0f} ({m.get('backend_write_share', 0):.0%} of page writes; "
                f"bgwriter {m.get('bgwriter_writes', 0):,.0f})"
            )
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

    def estimate_seconds(self) -> float:
        # ~0.2 M rows/s on 2 cores with a small cache, plus VACUUM and eviction between cells
        rows = self.rows_per_session * self.options.sessions
        return rows / 200_000 + self.dataset.rows / 2_000_000 + 0.5


WORKLOAD = Update


def _session_metrics(sessions: list[tuple[float, float, int]], count: int) -> dict[str, float]:
    """The timing metrics both engines share, from (start, end, rows) per session."""
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


class _OsWindow:
    """The server's CPU seconds and the data device's I/O over a window (local servers only)."""

    def __init__(self, engine: Any):
        data_dir = engine.data_dir()
        self.device = device_of(data_dir).name if data_dir else None
        self.server_pids = engine.server_pids()

    def __enter__(self) -> "_OsWindow":
        self.disk0 = disk_counters(self.device) if self.device else None
        self.cpu0 = process_cpu_seconds(self.server_pids)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cpu1 = process_cpu_seconds(self.server_pids)
        self.disk1 = disk_counters(self.device) if self.device else None

    def metrics(self) -> dict[str, float]:
        out = {"server_cpu_s": self.cpu1 - self.cpu0}
        if self.disk0 is not None and self.disk1 is not None:
            d = self.disk1.minus(self.disk0)
            out.update(device_reads=float(d.reads), device_read_bytes=float(d.read_bytes),
                       device_writes=float(d.writes), device_write_bytes=float(d.write_bytes))
        return out


def _run_sessions(
    conns: list[Any], pids: list[int], table: str, ranges: list[tuple[int, int]], sampler: WaitSampler | None
) -> list[tuple[float, float, int]]:
    """Run every session's UPDATE in its own thread, released together;
    (start, end, rows) per session."""
    sql = f'UPDATE "{table}" SET val = val + 1 WHERE id BETWEEN %s AND %s'

    def session(i: int) -> tuple[float, float, int]:
        conn, pid, (lo, hi) = conns[i], pids[i], ranges[i]
        t0 = time.perf_counter()
        if sampler is not None:
            sampler.begin(pid, t0)
        cur = conn.execute(sql, (lo, hi))
        t1 = time.perf_counter()
        if sampler is not None:
            sampler.end(pid, t1)
        return (t0, t1, cur.rowcount)

    def cancel(i: int) -> None:  # psycopg 3: safe from another thread while the session's statement runs
        conns[i].cancel()

    return run_together(len(conns), session, "blocklab-update", cancel)


def _table_comment(engine: Any, table: str) -> str | None:
    rows = engine.query(
        "SELECT obj_description(c.oid, 'pg_class') FROM pg_class c "
        "WHERE c.relname = %s AND c.relnamespace = 'public'::regnamespace",
        (table,),
    )
    return rows[0][0] if rows else None


def _table_stats(engine: Any, table: str) -> dict[str, int]:
    row = engine.query(
        "SELECT pg_relation_size(c.oid), coalesce(s.n_tup_upd, 0), coalesce(s.n_tup_hot_upd, 0) "
        "FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid "
        "WHERE c.relname = %s AND c.relnamespace = 'public'::regnamespace",
        (table,),
    )[0]
    return {"bytes": int(row[0]), "n_tup_upd": int(row[1]), "n_tup_hot_upd": int(row[2])}


def _shared_buffers_bytes(engine: Any) -> int:
    setting, unit = engine.query("SELECT setting, unit FROM pg_settings WHERE name = 'shared_buffers'")[0]
    return int(setting) * {"8kB": 8192, "kB": 1024, "MB": 1024**2}.get(unit or "", 1)


def build_update_table(engine: Any, table: str, rows: int, fillfactor: int, pad: int, fingerprint: str) -> float:
    """The update table, server-side in one transaction (no WAL with
    wal_level=minimal), keyed, analysed, updated once in full (the steady
    state: each page holds one old version of each row) and checkpointed.
    Returns the seconds."""
    t0 = time.perf_counter()
    quoted = f'"{table}"'
    with engine.connect(session=False, autocommit=False) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {quoted}")
        conn.execute(
            f"CREATE TABLE {quoted} (id integer NOT NULL, val integer NOT NULL, name text, pad text) "
            f"WITH (fillfactor = {int(fillfactor)}, autovacuum_enabled = false)"
        )
        conn.execute(
            f"INSERT INTO {quoted} SELECT i, 0, 'blabla ' || i, repeat('x', {int(pad)}) FROM generate_series(1, %s) AS i",
            (rows,),
        )
        conn.execute(f'ALTER TABLE {quoted} ADD CONSTRAINT "{table}_pkey" PRIMARY KEY (id)')
        conn.commit()
    with engine.connect(session=False) as conn:
        conn.execute(f"ANALYZE {quoted}")
        conn.execute("SET enable_seqscan = off")  # as the sessions do
        conn.execute(f"UPDATE {quoted} SET val = val + 1")
        conn.execute(f"COMMENT ON TABLE {quoted} IS {_literal(fingerprint)}")  # complete only now
        conn.execute("CHECKPOINT")
    return time.perf_counter() - t0


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


# ---------------------------------------------------------------------- MariaDB (InnoDB)
DATABASE_DIR = "blocklab"  # the engine's database: a directory of the data directory
_PG_ONLY = {
    "vacuum": "PostgreSQL's VACUUM before each cell; on MariaDB InnoDB's purge of the previous cell's undo is always "
    "waited for before each cell",
    "sample_ms": "the PostgreSQL wait sampler's interval; on MariaDB the time profile is measured by performance_schema, "
    "not sampled",
    "sample_nice": "the PostgreSQL wait sampler's nice value; on MariaDB the time profile is measured by "
    "performance_schema, not sampled",
}


def check_mariadb_options(options: UpdateOptions) -> None:
    """PostgreSQL-only options set to anything but their default: a SpecError naming them."""
    fields = type(options).model_fields
    problems = []
    for name, why in _PG_ONLY.items():
        value, default = getattr(options, name), fields[name].default
        if value != default:
            problems.append(f"workload.{name} = {value!r} is not accepted on engine 'mariadb' ({why}); accepted: leave it out")
    if problems:
        raise SpecError("; ".join(problems))


def prepare_mariadb(engine: Any, table: str, rows: int, fillfactor: int, pad: int, fingerprint: str) -> bool:
    """Build the table when it is missing, stale, or in another tablespace format
    than new tables get now (the engine's `tables_must_be_rebuilt`, or a table
    another workload left); then wait for purge, untimed. Returns whether the
    wait for purge completed (metric `purge_waited`). A rebuild that would need
    innodb_fill_factor changed on a server given by DSN without
    allow_server_changes is refused before anything is dropped."""
    stale_format = engine.table_checksum(table) not in (None, engine.checksum_family())
    if getattr(engine, "tables_must_be_rebuilt", False) or stale_format or _mariadb_comment(engine, table) != fingerprint:
        check_fill_factor_allowed(engine, fillfactor)
        build_update_table_mariadb(engine, table, rows, fillfactor, pad, fingerprint)
        engine.tables_must_be_rebuilt = False
    return wait_for_purge(engine)


def wait_for_purge(engine: Any, timeout_s: float = PURGE_WAIT_S) -> bool:
    """Block until InnoDB has purged every committed transaction's undo (the
    previous cell's old versions), at most `timeout_s`. False when the wait
    was refused (a DSN user without the privilege: purge then runs when it
    runs) or timed out (a busy server's purge); a lost connection is raised."""
    with engine.connect(session=False) as conn, conn.cursor() as cur:
        return _purge_wait(cur, timeout_s)


def _tablespace_bytes(engine: Any, table: str) -> int:
    """The size of the table's .ibd file. On the private instance from the file
    itself: after a restart InnoDB opens a tablespace (and reports its size in
    INNODB_SYS_TABLESPACES) only when it is first read."""
    datadir = getattr(engine, "datadir", None) if getattr(engine, "mode", "") == "embedded" else None
    if datadir is not None:
        path = datadir / DATABASE_DIR / f"{table}.ibd"
        if path.exists():
            return path.stat().st_size
    return engine.file_bytes(table)


def _mariadb_comment(engine: Any, table: str) -> str | None:
    rows = engine.query(
        "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s", (table,)
    )
    return rows[0][0] if rows else None


def build_update_table_mariadb(engine: Any, table: str, rows: int, fillfactor: int, pad: int, fingerprint: str) -> float:
    """The update table in InnoDB, server-side: loaded from seq_1_to_N in key
    order, rebuilt with innodb_fill_factor = fillfactor (a sorted index build
    that leaves that share of each page filled), analysed, updated once in full
    (the undo space a cell needs, as a steady state), its undo purged; the
    fingerprint comment goes on last (the table is complete only then).
    Returns the seconds."""
    t0 = time.perf_counter()
    quoted = f"`{table}`"
    with engine.connect(session=False) as conn, conn.cursor() as cur:
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
    with engine.connect(session=False, autocommit=False) as conn, conn.cursor() as cur:
        cur.execute(f"UPDATE {quoted} SET val = val + 1")
        conn.commit()
    wait_for_purge(engine)  # best effort: each cell's prepare waits again and records it
    with engine.connect(session=False) as conn, conn.cursor() as cur:
        cur.execute(f"ALTER TABLE {quoted} COMMENT = %s", (fingerprint,))
    return time.perf_counter() - t0


FILL_FACTOR = "innodb_fill_factor"


def _may_change_server(engine: Any) -> bool:
    return getattr(engine, "mode", "embedded") == "embedded" or bool(getattr(engine, "allow_server_changes", False))


def check_fill_factor_allowed(engine: Any, fillfactor: int) -> None:
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
def _global_fill_factor(engine: Any, fillfactor: int) -> Any:
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
    dsn = getattr(engine, "mode", "embedded") != "embedded"
    recorded_here = dsn and FILL_FACTOR not in engine._dsn_originals
    engine._set_global({FILL_FACTOR: str(int(fillfactor))}, record_originals=dsn)
    try:
        yield
    finally:
        engine._set_global({FILL_FACTOR: str(original)})
        if recorded_here:  # put back: nothing left for stop() to restore
            engine._dsn_originals.pop(FILL_FACTOR, None)


def _run_sessions_mariadb(
    engine: Any, conns: list[Any], table: str, ranges: list[tuple[int, int]], profiler: SessionWaitProfiler | None
) -> list[tuple[float, float, int]]:
    """Every session's autocommitted UPDATE in its own thread, released together;
    (start, end, rows) per session. The profiler's snapshots of each session's
    thread are taken just outside its window, in its own connection.
    Interrupted, each running session's statement is killed on the server
    (KILL QUERY from a connection of its own: the session's is busy)."""
    sql = f"UPDATE `{table}` SET val = val + 1 WHERE id BETWEEN %s AND %s"
    server_ids = [int(conn.thread_id()) for conn in conns]
    cancelled = [False] * len(conns)

    def session(i: int) -> tuple[float, float, int]:
        conn, (lo, hi) = conns[i], ranges[i]
        t0 = profiler.begin(conn) if profiler is not None else time.perf_counter()
        if cancelled[i]:  # interrupted during the profiler's snapshot: the UPDATE is not started at all
            raise KeyboardInterrupt
        with conn.cursor() as cur:
            rows = cur.execute(sql, (lo, hi))  # autocommit: committed at the statement's end
        t1 = profiler.end(conn) if profiler is not None else time.perf_counter()
        return (t0, t1, int(rows))

    def cancel(i: int) -> None:
        cancelled[i] = True
        with engine.connect(session=False) as killer, killer.cursor() as cur:
            cur.execute(f"KILL QUERY {server_ids[i]}")

    return run_together(len(conns), session, "blocklab-update", cancel)
