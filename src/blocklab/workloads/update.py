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
import threading
import time
from typing import Any

from pydantic import Field

from ..probes.os_stats import device_of, disk_counters, process_cpu_seconds
from ..probes.stat_io import StatIoProbe, flush_own_stats
from ..probes.waits import WaitSampler
from ..spec import DatasetSpec, SpecError
from .base import Options


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
    engines = ("postgres",)
    Options = UpdateOptions

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
        if _table_comment(engine, self.table) != self.fingerprint():
            build_update_table(engine, self.table, self.dataset.rows, o.fillfactor, o.pad_bytes, self.fingerprint())
        if o.vacuum:
            with engine.connect(session=False) as conn:
                conn.execute(f'VACUUM "{self.table}"')  # the previous cell's old versions: gone, untimed

    # ------------------------------------------------------------------ timed run
    def run(self, engine: Any) -> dict[str, float]:
        o = self.options
        table = self.table
        conns = [engine.connect() for _ in range(o.sessions)]
        try:
            for conn in conns:
                conn.execute("SET enable_seqscan = off")  # the pages go through shared buffers, not a scan ring
                conn.execute("SET application_name = 'blocklab update'")
            pids = [c.info.backend_pid for c in conns]
            before = _table_stats(engine, table)
            shared_buffers = _shared_buffers_bytes(engine)
            data_dir = engine.data_dir()
            device = device_of(data_dir).name if data_dir else None
            server_pids = engine.server_pids()
            disk0 = disk_counters(device) if device else None
            cpu0 = process_cpu_seconds(server_pids)
            sampler = WaitSampler(engine, pids, interval=o.sample_ms / 1000, nice=o.sample_nice) if o.sample else None
            with StatIoProbe(engine) as io:
                with sampler if sampler is not None else contextlib.nullcontext():
                    sessions = _run_sessions(conns, pids, table, self.ranges(), sampler)
                for conn in conns:
                    flush_own_stats(conn)  # before the probe's closing read
            cpu1 = process_cpu_seconds(server_pids)
            disk1 = disk_counters(device) if device else None
        finally:
            for conn in conns:
                conn.close()
        after = _table_stats(engine, table)

        elapsed = [t1 - t0 for t0, t1, _ in sessions]
        rows = sum(n for _, _, n in sessions)
        slowest = max(elapsed)
        upd = after["n_tup_upd"] - before["n_tup_upd"]
        hot = after["n_tup_hot_upd"] - before["n_tup_hot_upd"]
        metrics: dict[str, float] = {
            "elapsed_s": slowest,
            "wall_s": max(t1 for _, t1, _ in sessions) - min(t0 for t0, _, _ in sessions),
            "fastest_s": min(elapsed),
            "mean_session_s": sum(elapsed) / len(elapsed),
            "sessions": float(o.sessions),
            "rows": float(rows),
            "rows_per_s": rows / slowest if slowest > 0 else 0.0,
            "table_bytes": float(after["bytes"]),
            "table_growth_bytes": float(after["bytes"] - before["bytes"]),
            "hot_share": hot / upd if upd else 0.0,
            "shared_buffers_bytes": float(shared_buffers),
            "touched_bytes": after["bytes"] * rows / self.dataset.rows,
            "server_cpu_s": cpu1 - cpu0,
        }
        metrics["cache_ratio"] = metrics["touched_bytes"] / shared_buffers if shared_buffers else 0.0
        if disk0 is not None and disk1 is not None:
            d = disk1.minus(disk0)
            metrics.update(device_reads=float(d.reads), device_read_bytes=float(d.read_bytes),
                           device_writes=float(d.writes), device_write_bytes=float(d.write_bytes))
        metrics.update(io.metrics())
        if sampler is not None:
            metrics.update(sampler.profile().metrics("profile"))
        return metrics

    def describe(self, m: dict[str, float]) -> str:
        text = (
            f"{m['elapsed_s']:.2f} s (slowest of {m['sessions']:.0f}), {m['rows_per_s']:,.0f} rows/s, "
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


def _run_sessions(
    conns: list[Any], pids: list[int], table: str, ranges: list[tuple[int, int]], sampler: WaitSampler | None
) -> list[tuple[float, float, int]]:
    """Run every session's UPDATE in its own thread, released together;
    (start, end, rows) per session."""
    barrier = threading.Barrier(len(conns))
    out: list[tuple[float, float, int] | None] = [None] * len(conns)
    errors: list[BaseException] = []
    sql = f'UPDATE "{table}" SET val = val + 1 WHERE id BETWEEN %s AND %s'

    def session(i: int) -> None:
        conn, pid, (lo, hi) = conns[i], pids[i], ranges[i]
        try:
            barrier.wait(timeout=60)
            t0 = time.perf_counter()
            if sampler is not None:
                sampler.begin(pid, t0)
            cur = conn.execute(sql, (lo, hi))
            t1 = time.perf_counter()
            if sampler is not None:
                sampler.end(pid, t1)
            out[i] = (t0, t1, cur.rowcount)
        except BaseException as err:
            errors.append(err)
            barrier.abort()

    threads = [threading.Thread(target=session, args=(i,), name=f"blocklab-update-{i}") for i in range(len(conns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if real or errors:
        raise (real or errors)[0]
    return [x for x in out if x is not None]


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
