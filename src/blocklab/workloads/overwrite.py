"""Workload `overwrite`: `threads` writers released together overwrite random
keys of a data set built once, `writes` in all; timed. The key-value form of
seed 002's question (concurrent writers against a cache far smaller than what
they change: who keeps up, and where the time goes) on an engine whose
writes go to a memtable and a log and reach the data files in the
background (flushes and compactions): when the background falls behind, the
writers are stalled, and the stall time is the engine's "free buffer waits".

Every cell starts from the same data set: before it, untimed, the engine's
dialect puts the table back as it was built (RocksDB: a fresh working copy
of the built files), so a cell never inherits the previous one's writes.

Metrics: elapsed_s (the writes, as the engine timed them), writes_done and
writes_per_s, stall_s and stall_share (the share of the elapsed time the
writers were held back), write_amplification (bytes flushed and compacted
per byte written), the engine's I/O counters and its own figures.
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


class OverwriteDialect(Protocol):
    """What concurrent random overwrites need from an engine."""

    def build_overwrite_table(self, table: str, rows: int, fingerprint: str) -> None:
        """A data set of `rows` keys, its fingerprint stored last."""

    def ready_overwrite(self, table: str) -> dict[str, float]:
        """Untimed, before each cell: the table as it was built, nothing of an earlier
        cell's writes left (pending in memory or on disk). Returns notes kept as metrics."""

    def overwrite_session(self, threads: int) -> Session:
        """The session that runs `threads` writer threads together."""

    def overwrite(self, session: Session, table: str, rows: int, writes: int) -> tuple[int, float]:
        """The timed run: `writes` overwrites of keys drawn uniformly from the `rows`
        keys, split over the session's threads. Returns (writes done, seconds as the
        engine timed them)."""


class OverwriteOptions(Options):
    threads: int = Field(default=4, ge=1, le=256, description="writer threads, released together")
    writes: int | None = Field(default=None, ge=1, le=10_000_000_000,
                               description="overwrites per run over all threads (default: dataset.rows)")


class Overwrite:
    name: ClassVar[str] = "overwrite"
    default_metric: ClassVar[str] = "elapsed_s"
    work: ClassVar[tuple[str, str]] = ("writes_done", "write")  # the metric counting its work, and its unit (CPU per unit)
    # the figures every run reports: what measure.metric may name (checked before anything runs)
    metrics: ClassVar[tuple[str, ...]] = ('writes_per_s', 'write_mb_per_s', 'elapsed_s', 'wall_s', 'stall_s', 'stall_share', 'writes_done', 'write_bytes', 'reads', 'read_bytes', 'server_cpu_s')
    rows_option: ClassVar[str | None] = None  # --rows sizes dataset.rows
    default_goal: ClassVar[str] = "min"
    LOAD_AXES: ClassVar[tuple[str, ...]] = ("threads",)  # the load, never ranked (analysis/load.py)
    Dialect: ClassVar[type] = OverwriteDialect
    needs: ClassVar[str] = "a keyed data set put back before each cell and timed random overwrites by threads"
    Options = OverwriteOptions
    dialect_class: type[DialectBase] = DialectBase
    capabilities: Capabilities = Capabilities()  # the engine's: set by make_workload

    def __init__(self, options: OverwriteOptions, dataset: DatasetSpec):
        self.options = options
        self.dataset = dataset
        self.writes = options.writes or dataset.rows
        self.notes: dict[str, float] = {}

    def relations(self) -> list[str]:
        return [self.dataset.table]

    def fingerprint(self) -> str:
        return json.dumps({"blocklab_dataset": "overwrite", "build": 1, "rows": self.dataset.rows})

    def prepare(self, engine: Engine) -> None:
        dialect = cast(OverwriteDialect, engine.dialect(self.name))
        if not table_is_current(engine, self.dataset.table, self.fingerprint()):
            dialect.build_overwrite_table(self.dataset.table, self.dataset.rows, self.fingerprint())
        self.notes = dialect.ready_overwrite(self.dataset.table)

    def run(self, engine: Engine) -> dict[str, float]:
        o = self.options
        dialect = cast(OverwriteDialect, engine.dialect(self.name))
        with dialect.overwrite_session(o.threads) as session, RunProbe(engine, session) as probe:
            t0 = time.perf_counter()
            done, elapsed = dialect.overwrite(session, self.dataset.table, self.dataset.rows, self.writes)
            wall = time.perf_counter() - t0
        if done < self.writes:
            raise RuntimeError(f"overwrite: {done:,} writes done, not the {self.writes:,} asked")
        d = probe.deltas
        engine_metrics = probe.engine_metrics()
        secs = elapsed if elapsed > 0 else 1e-9
        stall = engine_metrics.get("stall_s", 0.0)
        metrics = {
            "elapsed_s": elapsed,
            "wall_s": wall,
            "writes_done": float(done),
            "writes_per_s": done / secs,
            "threads": float(o.threads),
            "stall_s": stall,
            "stall_share": stall / secs,
            "write_bytes": d.get("write_bytes", 0.0),
            "write_mb_per_s": d.get("write_bytes", 0.0) / 1e6 / secs,
            "reads": d.get("reads", 0.0),
            "read_bytes": d.get("read_bytes", 0.0),
            "server_cpu_s": d.get("server_cpu_s", 0.0),
            **self.notes,
            **probe.host.deltas(),
            **probe.host.rates(secs),
        }
        metrics.update({k: v for k, v in engine_metrics.items() if k not in metrics})
        return metrics

    def describe(self, m: dict[str, float]) -> str:
        text = (f"{m['elapsed_s']:.2f} s, {m['writes_done']:,.0f} writes by {m['threads']:.0f} thread(s): "
                f"{m['writes_per_s']:,.0f}/s; stalled {m['stall_s']:.2f} s ({m['stall_share']:.0%})")
        if "write_amplification" in m:
            text += f", write amplification {m['write_amplification']:.1f}"
        return text

    def disk_bytes(self) -> float:
        # the built data set, its working copy's new files and the compactions' output beside their input
        return 3 * self.dataset.rows * dialect_bytes_per_row(self.dialect_class, 600.0)

    def estimate_seconds(self) -> float:
        # ~100,000 overwrites/s on 2 cores with compactions behind them, plus the copy and a process start
        return self.writes / 100_000 + 1.0


WORKLOAD = Overwrite
