"""Workload `reload` (seed 004): empty a keyed table and fill it again from a
source table, in one transaction:

    DELETE FROM target;  INSERT INTO target SELECT * FROM source;  COMMIT

The source (`dataset.rows` rows of (id, 'blabla ' || id)) is built once and
reused while its fingerprint matches (a comment on PostgreSQL, a row in a
`blocklab_meta` table on SQLite, which disappears with the file when a
block size or checksum change makes a new one). The target has a primary key
(on SQLite declared `pk INT PRIMARY KEY`, not INTEGER, so it is a separate
index as in the seed and not the rowid). The target starts each cell holding
the source's rows:

* PostgreSQL: the previous cell left them; VACUUM (untimed) before each cell
  removes the previous cell's dead versions, so every cell deletes the same
  live rows into the same free space: a steady state.
* SQLite: the target is loaded when it is missing or short (untimed); the
  previous cell's rows are otherwise what this cell deletes.

Metrics: elapsed_s (delete + insert + commit), rows_per_s (rows inserted per
second of the whole), I/O counter deltas.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..probes.io import IoProbe
from ..spec import DatasetSpec
from .base import Options
from .row_insert import io_metrics

SOURCE = "blocklab_reload_src"
TARGET = "blocklab_reload_dst"
META = "blocklab_meta"


class ReloadOptions(Options):
    pass


class Reload:
    name = "reload"
    default_metric = "elapsed_s"
    default_goal = "min"
    engines = ("postgres", "sqlite")
    Options = ReloadOptions

    def __init__(self, options: ReloadOptions, dataset: DatasetSpec):
        self.options = options
        self.dataset = dataset

    def relations(self) -> list[str]:
        return [SOURCE, TARGET]

    def fingerprint(self) -> str:
        return json.dumps({"blocklab_dataset": "reload", "build": 1, "rows": self.dataset.rows})

    # ------------------------------------------------------------------ data set
    def prepare(self, engine: Any) -> None:
        rows = self.dataset.rows
        if engine.name == "sqlite":
            conn = engine.connect()
            try:
                conn.execute(f'CREATE TABLE IF NOT EXISTS "{META}" (name TEXT PRIMARY KEY, fingerprint TEXT)')
                got = conn.execute(f'SELECT fingerprint FROM "{META}" WHERE name = ?', (SOURCE,)).fetchall()
                if not got or got[0][0] != self.fingerprint():
                    with conn:  # one transaction
                        for t in (SOURCE, TARGET):
                            conn.execute(f'DROP TABLE IF EXISTS "{t}"')
                        conn.execute(f'CREATE TABLE "{SOURCE}" (pk INT NOT NULL, name TEXT)')
                        conn.execute(
                            f'INSERT INTO "{SOURCE}" WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s '
                            f"WHERE i < {int(rows)}) SELECT i, 'blabla ' || i FROM s"
                        )
                        conn.execute(f'CREATE TABLE "{TARGET}" (pk INT PRIMARY KEY, name TEXT)')
                        conn.execute(f'INSERT OR REPLACE INTO "{META}" VALUES (?, ?)', (SOURCE, self.fingerprint()))
                if conn.execute(f'SELECT count(*) FROM "{TARGET}"').fetchall()[0][0] != rows:
                    with conn:
                        conn.execute(f'DELETE FROM "{TARGET}"')
                        conn.execute(f'INSERT INTO "{TARGET}" SELECT * FROM "{SOURCE}"')
            finally:
                conn.close()
            return
        if _pg_comment(engine, SOURCE) != self.fingerprint():
            with engine.connect(session=False, autocommit=False) as conn:
                for t in (SOURCE, TARGET):
                    conn.execute(f'DROP TABLE IF EXISTS "{t}"')
                conn.execute(f'CREATE TABLE "{SOURCE}" (pk integer NOT NULL, name text)')
                conn.execute(
                    f"INSERT INTO \"{SOURCE}\" SELECT i, 'blabla ' || i FROM generate_series(1, %s) AS i", (rows,)
                )
                conn.execute(
                    f'CREATE TABLE "{TARGET}" (pk integer PRIMARY KEY, name text) WITH (autovacuum_enabled = false)'
                )
                conn.execute(f'INSERT INTO "{TARGET}" SELECT * FROM "{SOURCE}"')
                conn.execute(f"COMMENT ON TABLE \"{SOURCE}\" IS '{self.fingerprint()}'")
                conn.commit()
        with engine.connect(session=False) as conn:
            conn.execute(f'VACUUM ANALYZE "{SOURCE}"')
            conn.execute(f'VACUUM "{TARGET}"')  # the previous cell's dead versions: gone, untimed
            conn.execute("CHECKPOINT")

    # ------------------------------------------------------------------ timed run
    def run(self, engine: Any) -> dict[str, float]:
        if engine.name == "sqlite":
            conn = engine.connect()
            try:
                with IoProbe(engine, conn) as probe:
                    t0 = time.perf_counter()
                    conn.execute("BEGIN")
                    conn.execute(f'DELETE FROM "{TARGET}"')
                    conn.execute(f'INSERT INTO "{TARGET}" SELECT * FROM "{SOURCE}"')
                    inserted = conn.changes()
                    conn.execute("COMMIT")
                    elapsed = time.perf_counter() - t0
            finally:
                conn.close()
        else:
            with engine.connect(autocommit=False) as conn:
                with IoProbe(engine, conn) as probe:
                    t0 = time.perf_counter()
                    conn.execute(f'DELETE FROM "{TARGET}"')
                    inserted = conn.execute(f'INSERT INTO "{TARGET}" SELECT * FROM "{SOURCE}"').rowcount
                    conn.commit()
                    elapsed = time.perf_counter() - t0
        if inserted != self.dataset.rows:
            raise RuntimeError(f"reload: inserted {inserted:,} rows, not the source's {self.dataset.rows:,}")
        metrics = {
            "elapsed_s": elapsed,
            "rows": float(inserted),
            "rows_per_s": inserted / elapsed if elapsed > 0 else 0.0,
            "table_bytes": float(engine.relation_bytes(TARGET)),
        }
        metrics.update(io_metrics(probe.deltas))
        return metrics

    def describe(self, m: dict[str, float]) -> str:
        text = f"{m['elapsed_s']:.3f} s, delete + insert of {m['rows']:,.0f} rows, {m['rows_per_s']:,.0f} rows/s"
        if "write_bytes" in m:
            text += f", wrote {m['write_bytes'] / 1e6:,.1f} MB"
        return text

    def estimate_seconds(self) -> float:
        return self.dataset.rows / 200_000 + 0.3


WORKLOAD = Reload


def _pg_comment(engine: Any, table: str) -> str | None:
    rows = engine.query(
        "SELECT obj_description(c.oid, 'pg_class') FROM pg_class c "
        "WHERE c.relname = %s AND c.relnamespace = 'public'::regnamespace",
        (table,),
    )
    return rows[0][0] if rows else None
