"""Workload `point_read`: a fixed number of random point reads by key (one
lookup each) from a data set built once, by `threads` threads together;
timed, with every block read counted.

Where the blocks come from is the cell's cache state: cold (evicted, a new
block cache) they come from the device; warm, from the OS page cache, so each
lookup's cost is the CPU's: finding the block, decompressing it and verifying
its checksum. That makes it the key-value form of seeds 001/004's question,
what page checksums and checking cost, measured where they cost most: at
high read IOPS (`blocklab run checksum --engine rocksdb`).

The data set: `dataset.rows` keys, written once in key order and compacted
(the engine's dialect builds it and keeps it while its fingerprint holds).

Metrics: elapsed_s (the reads, as the engine timed them), reads_done and
reads_per_s, the engine's block reads (`reads`, `read_bytes`,
`block_reads_per_s`, `block_mb_per_s`: from the page cache or the device) and its own figures (latency percentiles, block cache hits, checksums
computed), and `wall_s` as blocklab timed the whole (a new process included).
"""

from __future__ import annotations

import json
import time
from typing import ClassVar, Protocol, cast

from pydantic import Field

from ..engines.base import Capabilities, DialectBase, Engine, Session, table_is_current
from ..probes.io import RunProbe
from ..spec import DatasetSpec
from .base import Options, dialect_bytes_per_row


class PointReadDialect(Protocol):
    """What random point reads need from an engine."""

    def build_point_table(self, table: str, rows: int, fingerprint: str) -> None:
        """A data set of `rows` keys (values of the engine's configured size), compacted,
        its fingerprint stored last (the engine's table_fingerprint() reads it back)."""

    def point_session(self, threads: int) -> Session:
        """The session that runs `threads` reader threads together."""

    def point_reads(self, session: Session, table: str, rows: int, reads: int) -> tuple[int, float]:
        """The timed run: `reads` lookups of keys drawn uniformly from the `rows` keys,
        split over the session's threads. Returns (lookups done, seconds as the
        engine timed them)."""


class PointReadOptions(Options):
    reads: int = Field(default=1_000_000, ge=1, le=10_000_000_000, description="lookups per run, over all threads")
    threads: int = Field(default=1, ge=1, le=256, description="reader threads, released together")


class PointRead:
    name: ClassVar[str] = "point_read"
    default_metric: ClassVar[str] = "elapsed_s"
    work: ClassVar[tuple[str, str]] = ("reads_done", "read")  # the metric counting its work, and its unit (CPU per unit)
    # the figures every run reports: what measure.metric may name (checked before anything runs)
    metrics: ClassVar[tuple[str, ...]] = ('elapsed_s', 'reads_per_s', 'block_reads_per_s', 'block_mb_per_s', 'read_latency_ms', 'wall_s', 'reads_done', 'reads', 'read_bytes', 'hits', 'server_cpu_s')
    rows_option: ClassVar[str | None] = None  # --rows sizes dataset.rows
    default_goal: ClassVar[str] = "min"
    LOAD_AXES: ClassVar[tuple[str, ...]] = ("threads",)  # the load, never ranked (analysis/load.py)
    Dialect: ClassVar[type] = PointReadDialect
    needs: ClassVar[str] = "a keyed data set and timed random lookups by threads"
    Options = PointReadOptions
    dialect_class: type[DialectBase] = DialectBase
    capabilities: Capabilities = Capabilities()  # the engine's: set by make_workload

    def __init__(self, options: PointReadOptions, dataset: DatasetSpec):
        self.options = options
        self.dataset = dataset

    def relations(self) -> list[str]:
        return [self.dataset.table]

    def fingerprint(self) -> str:
        return json.dumps({"blocklab_dataset": "point_read", "build": 1, "rows": self.dataset.rows})

    def prepare(self, engine: Engine) -> None:
        if not table_is_current(engine, self.dataset.table, self.fingerprint()):
            dialect = cast(PointReadDialect, engine.dialect(self.name))
            dialect.build_point_table(self.dataset.table, self.dataset.rows, self.fingerprint())

    def run(self, engine: Engine) -> dict[str, float]:
        o = self.options
        dialect = cast(PointReadDialect, engine.dialect(self.name))
        with dialect.point_session(o.threads) as session, RunProbe(engine, session) as probe:
            t0 = time.perf_counter()
            done, elapsed = dialect.point_reads(session, self.dataset.table, self.dataset.rows, o.reads)
            wall = time.perf_counter() - t0
        if done < o.reads:
            raise RuntimeError(f"point_read: {done:,} lookups done, not the {o.reads:,} asked")
        d = probe.deltas
        secs = elapsed if elapsed > 0 else 1e-9
        metrics = {
            "elapsed_s": elapsed,
            "wall_s": wall,
            "reads_done": float(done),
            "reads_per_s": done / secs,
            "threads": float(o.threads),
            "block_size": float(engine.block_size()),
            "reads": d.get("reads", 0.0),
            "read_bytes": d.get("read_bytes", 0.0),
            # the engine's block reads, from the page cache or the device (a warm cell's do not reach
            # the device: not "read_iops", which the claims compare with the device's)
            "block_reads_per_s": d.get("reads", 0.0) / secs,
            "block_mb_per_s": d.get("read_bytes", 0.0) / 1e6 / secs,
            "read_latency_ms": d["read_time_ms"] / d["reads"] if d.get("reads") else 0.0,
            "hits": d.get("hits", 0.0),
            "server_cpu_s": d.get("server_cpu_s", 0.0),
            **probe.host.rates(secs),
        }
        for key in ("proc_read_bytes", "device_read_bytes", "device_reads"):
            if key in d:
                metrics[key] = d[key]
        metrics.update(probe.engine_metrics())
        return metrics

    def describe(self, m: dict[str, float]) -> str:
        return (
            f"{m['elapsed_s']:.3f} s, {m['reads_done']:,.0f} lookups by {m['threads']:.0f} thread(s): "
            f"{m['reads_per_s']:,.0f}/s, {m['block_reads_per_s']:,.0f} block reads/s ({m['block_mb_per_s']:,.0f} MB/s)"
        )

    def disk_bytes(self) -> float:
        return self.dataset.rows * dialect_bytes_per_row(self.dialect_class, 600.0)

    def estimate_seconds(self) -> float:
        # ~100,000 lookups/s a thread from the page cache on 2 cores, plus a process start
        return self.options.reads / (100_000 * min(self.options.threads, 2)) + 0.3


WORKLOAD = PointRead
