"""The full_scan workload on PostgreSQL: the seed's scan table, built
server-side and frozen, and the timed count(*) (workloads/full_scan.py ScanDialect)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..base import DialectBase
from .session import PgSession

if TYPE_CHECKING:
    from . import PostgresEngine


class ScanTables(DialectBase):
    bytes_per_row = 52  # 3,000,000 rows = 149 MB (ENGINE-FACTS.md)

    def __init__(self, engine: PostgresEngine):
        self.engine = engine

    def build_scan_table(self, table: str, rows: int, fingerprint: str) -> None:
        build_scan_table(self.engine, table, rows, fingerprint)

    def scan_session(self, parallel: bool) -> PgSession:
        session = self.engine.connect()
        if not parallel:
            session.execute("SET max_parallel_workers_per_gather = 0")  # the seed's NOPARALLEL
        return session

    def count_rows(self, session: PgSession, table: str) -> int:
        return int(session.execute(f'SELECT count(*) FROM "{table}"')[0][0])


def build_scan_table(
    engine: PostgresEngine, table: str, rows: int, fingerprint: str, steps: dict[str, float] | None = None
) -> float:
    """Create the seed's table server-side, then freeze it so no later scan pays
    for hint bits. Returns the seconds it took; `steps`, if given, receives the
    seconds of each step (benchmarks/load.py reports them).

    The fast path is COPY ... FREEZE FROM PROGRAM (perl on the server host writes
    the rows; COPY batches them into pages, and FREEZE into a table created in
    the same transaction skips the WAL under wal_level = minimal, and writes the
    rows frozen with the pages marked all-visible and all-frozen in the
    visibility map). Servers that refuse programs (a DSN without superuser) get
    INSERT ... SELECT generate_series, which VACUUM (FREEZE) below then freezes.

    Measured at 5.2 M rows (270 MB) on the 2-core VM (BENCHMARKS.md): the COPY
    is ~80% of the time and is bound by the server backend's CPU per row (one
    core; perl uses ~0.25 s of the other); the commit's fsync of the new file
    (the price of skipping the WAL), made shorter by writing behind the COPY,
    ~5%; ANALYZE ~10%; the VACUUM and the CHECKPOINT 0.01-0.03 s each."""
    steps = {} if steps is None else steps
    t0 = time.perf_counter()
    try:
        _copy_from_program(engine, table, rows, fingerprint, steps)
    except Exception:  # psycopg.Error: no permission for programs, or no perl on the server
        steps.clear()
        _insert_select(engine, table, rows, fingerprint, steps)
    with engine.pg_connect(session=False) as conn:
        # After COPY FREEZE the freeze itself has nothing left to do (every page
        # is all-frozen in the visibility map, so the aggressive VACUUM skips
        # them), but the VACUUM is still needed: COPY's bulk extension leaves
        # empty pages at the end of the file (47 of 1,312 at 200,000 rows) that
        # it truncates, and it resets the inserts-since-vacuum count, so that
        # autovacuum does not visit the table during a later timed scan. The
        # ANALYZE is there for the same reason (autovacuum's auto-analyze) and
        # for parity with pgbench -i's vacuum step, which is VACUUM ANALYZE.
        # ANALYZE inside the creating transaction measured 4-7% faster, but the
        # truncation after it then re-estimates reltuples (192,835 for 200,000
        # rows), so it runs here, after the VACUUM, in the same statement.
        t = time.perf_counter()
        conn.execute(f'VACUUM (FREEZE, ANALYZE) "{table}"')
        steps["vacuum_analyze"] = time.perf_counter() - t
        # Not needed for cold scans (evict() checkpoints first) nor on the
        # embedded server (the commit already flushed and fsynced the table),
        # but on a DSN server with wal_level = replica the load's dirty buffers
        # would otherwise be written by a checkpoint inside a later warm-cache
        # measurement. It costs ~0.01 s here.
        t = time.perf_counter()
        conn.execute("CHECKPOINT")
        steps["checkpoint"] = time.perf_counter() - t
    return time.perf_counter() - t0


def _copy_from_program(engine: PostgresEngine, table: str, rows: int, fingerprint: str, steps: dict[str, float]) -> None:
    # perl (essential on Debian) writes the rows on the other core while the
    # backend, the bottleneck, parses and stores them (~1.3 s of its CPU for
    # 5.2 M rows). The generator's CPU and the hand-offs still count: on this
    # 2-core machine, shared with other work, they are taken from the backend.
    # - Rows are made in blocks of 4096 by a statement-modifier loop (no
    #   per-row length test, one print of ~64 kB per block): 0.24-0.27 s of
    #   CPU for 5.2 M rows against 0.38-0.44 s for a per-row loop, same bytes.
    # - The pipe is enlarged to 1 MB (fcntl F_SETPIPE_SZ = 1031, Linux; 1 MB is
    #   the default limit for an unprivileged user; where refused, fcntl just
    #   fails and the default pipe is used). With the default 64 kB pipe the
    #   backend drains one block per read and sleeps until perl writes the
    #   next: 15,000-22,000 context switches per build, 2,000-10,000 with 1 MB.
    # Together: builds 24% faster (median of 9, interleaved; BENCHMARKS.md).
    # Tried and no faster: awk (four times perl's time), perl map/join or a
    # sprintf per block (0.6-0.9 s of CPU), seq | paste or sed (1.6 s), binary
    # COPY (the same backend CPU as text, and perl's pack costs more), and two
    # COPY streams in parallel (FREEZE needs the creating transaction, so the
    # second stream is WAL-logged and VACUUM must then freeze every page:
    # 4.0-4.6 s against 2.5-3.9 s, and the ids interleave on disk).
    program = (
        "perl -e 'fcntl(STDOUT, 1031, 1048576); "
        "for ($i = 1; $i <= ROWS; $i += 4096) { $j = $i + 4095; $j = ROWS if $j > ROWS; "
        "$s = \"\"; $s .= \"$_\\tblabla $_\\n\" for $i..$j; print $s }'"
    ).replace("ROWS", str(int(rows)))  # perl's own braces keep str.format and f-strings out
    with engine.pg_connect(session=False, autocommit=False) as conn:
        t = time.perf_counter()
        # Without it the whole file stays dirty in the page cache until the
        # commit's fsync writes it while we wait (0.21-0.33 s at 271 MB); with
        # it the backend asks the kernel to write behind the COPY every 2 MB
        # (the maximum), and the commit takes 0.10-0.14 s: builds 7% and 14%
        # faster (medians of 7 and 9, interleaved). The pages are the same.
        conn.execute("SET LOCAL backend_flush_after = '2MB'")
        conn.execute(f'DROP TABLE IF EXISTS "{table}"')
        conn.execute(f'CREATE TABLE "{table}" (id integer, name text)')
        conn.execute(f'COPY "{table}" FROM PROGRAM {_literal(program)} WITH (FREEZE)')
        conn.execute(f"COMMENT ON TABLE \"{table}\" IS {_literal(fingerprint)}")
        steps["load"] = time.perf_counter() - t
        t = time.perf_counter()
        conn.commit()  # under wal_level = minimal: writes out and fsyncs the new file
        steps["commit"] = time.perf_counter() - t


def _insert_select(engine: PostgresEngine, table: str, rows: int, fingerprint: str, steps: dict[str, float]) -> None:
    with engine.pg_connect(session=False, autocommit=False) as conn:
        t = time.perf_counter()
        conn.execute(f'DROP TABLE IF EXISTS "{table}"')
        conn.execute(f'CREATE TABLE "{table}" (id integer, name text)')
        conn.execute(f"INSERT INTO \"{table}\" SELECT i, 'blabla ' || i FROM generate_series(1, %s) AS i", (rows,))
        conn.execute(f"COMMENT ON TABLE \"{table}\" IS {_literal(fingerprint)}")
        steps["load"] = time.perf_counter() - t
        t = time.perf_counter()
        conn.commit()
        steps["commit"] = time.perf_counter() - t


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
