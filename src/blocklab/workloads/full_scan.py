"""Workload `full_scan`: SELECT count(*) as one serial sequential scan (the seed's
FULL + NOPARALLEL hints), timed, with the I/O it caused.

The data set is the seed's test table: (id, 'blabla ' || id), built server-side
by the engine's dialect and reused while its fingerprint (rows, shape) matches.
"""

from __future__ import annotations

import json
import os
import time
from typing import ClassVar, Protocol, cast

from pydantic import Field

from ..engines.base import Capabilities, DialectBase, Engine, Session, table_is_current
from ..probes.io import RunProbe, cold_proof
from ..spec import DatasetSpec
from .base import Options, dialect_bytes_per_row


class ScanDialect(Protocol):
    """What a cold full scan needs from an engine."""

    def build_scan_table(self, table: str, rows: int, fingerprint: str) -> None:
        """(Re)create the seed's table of `rows` rows with `fingerprint` stored
        (the engine's table_fingerprint() reads it back), ready to be scanned:
        no maintenance left that a later scan would pay for."""

    def scan_session(self, parallel: bool) -> Session:
        """A session set for one serial scan (or a parallel one when allowed)."""

    def count_rows(self, session: Session, table: str) -> int:
        """The timed statement: count the table's rows with one full scan."""


class FullScanOptions(Options):
    parallel: bool = Field(default=False, description="allow parallel workers (the seed forbids them)")


class FullScan:
    name: ClassVar[str] = "full_scan"
    default_metric: ClassVar[str] = "rows_per_s"
    work: ClassVar[tuple[str, str]] = ("rows", "row scanned")  # the metric counting its work, and its unit (CPU per unit)
    # the figures every run reports: what measure.metric may name (checked before anything runs)
    metrics: ClassVar[tuple[str, ...]] = ('rows_per_s', 'mb_per_s', 'scan_mb_per_s', 'elapsed_s', 'rows', 'reads', 'read_bytes', 'read_time_ms', 'hits', 'server_cpu_s')
    rows_option: ClassVar[str | None] = None  # --rows sizes dataset.rows
    default_goal: ClassVar[str] = "max"
    Dialect: ClassVar[type] = ScanDialect
    needs: ClassVar[str] = "how to build the scan table and count its rows with one full scan"
    Options = FullScanOptions
    dialect_class: type[DialectBase] = DialectBase
    capabilities: Capabilities = Capabilities()  # the engine's: set by make_workload

    def __init__(self, options: FullScanOptions, dataset: DatasetSpec):
        self.options = options
        self.dataset = dataset

    def relations(self) -> list[str]:
        return [self.dataset.table]

    # ------------------------------------------------------------------ data set
    def fingerprint(self) -> str:
        return json.dumps({"blocklab_dataset": "scan", "rows": self.dataset.rows, "shape": self.dataset.shape})

    def prepare(self, engine: Engine) -> None:
        if not table_is_current(engine, self.dataset.table, self.fingerprint()):
            dialect = cast(ScanDialect, engine.dialect(self.name))
            dialect.build_scan_table(self.dataset.table, self.dataset.rows, self.fingerprint())

    # ------------------------------------------------------------------ timed run
    def run(self, engine: Engine) -> dict[str, float]:
        dialect = cast(ScanDialect, engine.dialect(self.name))
        table = self.dataset.table
        relation_bytes = engine.relation_bytes(table)
        direct = engine.direct_io_active()
        with dialect.scan_session(self.options.parallel) as session, RunProbe(engine, session) as probe:
            t0 = time.perf_counter()
            rows = dialect.count_rows(session, table)
            elapsed = time.perf_counter() - t0
        d = probe.deltas
        metrics = {
            "elapsed_s": elapsed,
            "rows": float(rows),
            "rows_per_s": rows / elapsed,
            # MB/s of what was read from the engine's storage (the disk's side), and of the table scanned
            "mb_per_s": d.get("read_bytes", 0.0) / elapsed / 1e6,
            "scan_mb_per_s": relation_bytes / elapsed / 1e6,
            "relation_bytes": float(relation_bytes),
            "reads": d.get("reads", 0.0),
            "read_bytes": d.get("read_bytes", 0.0),
            # an engine whose read count is of blocks, not of read calls (PostgreSQL 17), cannot say it
            **({} if d.get("reads_count_blocks") else
               {"avg_read_kb": d["read_bytes"] / d["reads"] / 1024 if d.get("reads") else 0.0}),
            "read_time_ms": d.get("read_time_ms", 0.0),
            "hits": d.get("hits", 0.0),
            "server_cpu_s": d.get("server_cpu_s", 0.0),
            "direct_io": 1.0 if direct else 0.0,
        }
        # parallel workers come and go within the scan: the processes listed before it hold
        # only part of its reads, so their /proc count would make a cold scan look warm
        own = () if self.options.parallel else ("proc_read_bytes",)
        for key in ("device_reads", "device_read_bytes", *own):
            if key in d:
                metrics[key] = d[key]
        # one serial scan reads its table in order (a parallel one: as many workers as cores)
        sessions = 1 if not self.options.parallel else len(os.sched_getaffinity(0))
        metrics.update(probe.pattern(elapsed, sequential=True, direct=direct, data_bytes=relation_bytes, sessions=sessions))
        # the engine processes' own storage reads when /proc tells them (nobody else's I/O in
        # them), else the device's (whole-disk: another reader could make a cached scan look cold)
        physical = metrics.get("proc_read_bytes", d.get("device_read_bytes"))
        metrics.update(cold_proof(relation_bytes, metrics["read_bytes"], physical, direct))
        return metrics

    def describe(self, m: dict[str, float]) -> str:
        return (
            f"{m['elapsed_s']:.2f} s, {m['rows']:,.0f} rows, {m['rows_per_s']:,.0f} rows/s, "
            f"{m['mb_per_s']:,.0f} MB/s read" + (f", avg I/O {m['avg_read_kb']:.0f} kB" if "avg_read_kb" in m else "")
        )

    def disk_bytes(self) -> float:
        return self.dataset.rows * dialect_bytes_per_row(self.dialect_class, 130.0)

    def estimate_seconds(self) -> float:
        # ~50 bytes a row; a cold scan runs at a few hundred MB/s on an SSD
        return self.dataset.rows * 52 / 400e6 + 0.3


WORKLOAD = FullScan
