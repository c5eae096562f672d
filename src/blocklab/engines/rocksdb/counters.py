"""db_bench's statistics as blocklab's I/O counters and metrics.

A db_bench process starts with every counter at 0 and prints them once, at
its end: a session's counters are 0 before its run and its statistics after.
So a window around a run (CounterWindow) takes the run's own figures.

IO_KEYS from RocksDB's statistics:
  reads, read_bytes   SST file reads (rocksdb.{non.,}last.level.read.{count,bytes}),
                      not rocksdb.bytes.read (value bytes returned to the caller)
  read_time_ms        rocksdb.sst.read.micros SUM
  writes, write_bytes SST blocks written (rocksdb.write.raw.block.micros COUNT), and
                      bytes flushed + compacted into SST files
  write_time_ms       rocksdb.write.raw.block.micros SUM
  hits                data blocks found in the block cache (rocksdb.block.cache.data.hit)
  fsyncs              table, WAL, MANIFEST and compaction output syncs
beside every nonzero `rocksdb.*` counter under its own name, and the process's
storage reads from the kernel (/proc/<pid>/io of the exited, unreaped process:
`db_bench.proc_read_bytes`), the second source of the cold claim.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..base import CounterWindow
from .output import series_metrics, sst_reads

if TYPE_CHECKING:
    from . import RocksDbSession

SYNC_HISTOGRAMS = ("rocksdb.table.sync.micros", "rocksdb.wal.file.sync.micros", "rocksdb.manifest.file.sync.micros",
                   "rocksdb.compaction.outfile.sync.micros")
USER_READS = ("readrandom", "readseq")  # benchmarks whose block reads are the workload's own
COLD_RATIO_MIN = 0.9  # physical bytes / bytes RocksDB read from SST files, for a cold (or direct) read


def proc_io(pid: int) -> dict[str, float]:
    """read_bytes and write_bytes of a process (an exited, unreaped one too); {} when unreadable."""
    try:
        text = Path(f"/proc/{pid}/io").read_text()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("read_bytes", "write_bytes"):
            out[f"db_bench.proc_{key}"] = float(value)
    return out


def session_counters(session: RocksDbSession) -> dict[str, float]:
    """The cumulative counters of one db_bench session (see the module's docstring)."""
    out: dict[str, float] = {}
    if session.process.alive:
        out.update(proc_io(session.process.pid))
    result = session.result
    if result is None:
        return out
    counters, histograms = result.counters, result.histograms
    reads, read_bytes = sst_reads(counters)
    raw = histograms.get("rocksdb.write.raw.block.micros", {})
    out.update(
        reads=float(reads),
        read_bytes=float(read_bytes),
        read_time_ms=histograms.get("rocksdb.sst.read.micros", {}).get("sum", 0.0) / 1000.0,
        writes=raw.get("count", 0.0),
        write_bytes=float(counters.get("rocksdb.flush.write.bytes", 0) + counters.get("rocksdb.compact.write.bytes", 0)),
        write_time_ms=raw.get("sum", 0.0) / 1000.0,
        hits=float(counters.get("rocksdb.block.cache.data.hit", 0)),
        fsyncs=sum(histograms.get(h, {}).get("count", 0.0) for h in SYNC_HISTOGRAMS),
    )
    out.update({name: float(value) for name, value in counters.items() if value})
    out.update({
        "db_bench.operations": float(result.operations),
        "db_bench.seconds": result.seconds,
        "db_bench.threads": float(session.threads),
    })
    return out


def window_metrics(deltas: dict[str, float], user_reads: bool = True) -> dict[str, float]:
    """The figures of a window worth a result row beyond the counters' deltas. `user_reads`:
    the window's reads are the workload's own (readrandom, readseq), so the cold claim is
    that each of them came from the device; a write workload's compactions read files it
    has just written, from the page cache, whatever the cell's state at its start."""
    out: dict[str, float] = {}
    ssts = deltas.get("read_bytes", 0.0)
    physical = deltas.get("db_bench.proc_read_bytes")
    if user_reads and ssts > 0 and physical is not None:
        # every block RocksDB read came from the device (direct I/O rounds reads out to
        # the logical block size, so a direct read reads a little more than asked)
        out["cold_ratio"] = round(physical / ssts, 4)
        out["cold_proven"] = 1.0 if physical >= COLD_RATIO_MIN * ssts else 0.0
    written = deltas.get("rocksdb.bytes.written", 0.0)
    if written:
        out["write_amplification"] = deltas.get("write_bytes", 0.0) / written
    if "rocksdb.stall.micros" in deltas or written:
        out["stall_s"] = deltas.get("rocksdb.stall.micros", 0.0) / 1e6
    if deltas.get("reads"):
        out["avg_sst_read_kb"] = deltas["read_bytes"] / deltas["reads"] / 1024
    misses = deltas.get("rocksdb.block.cache.data.miss", 0.0)
    if misses:
        out["checksums_per_miss"] = deltas.get("rocksdb.block.checksum.compute.count", 0.0) / misses
    return out


def result_metrics(session: RocksDbSession) -> dict[str, float]:
    """db_bench's own figures of one session's run: its RESULT line, --histogram percentiles
    (µs, all threads merged), statistics histograms' P99s and the per-second series' spread."""
    result = session.result
    if result is None:
        return {}
    out = {
        "db_bench.ops_per_s": result.ops_per_s,
        "db_bench.micros_per_op": result.micros_per_op,
        "db_bench.seconds": result.seconds,
        "db_bench.operations": float(result.operations),
        "db_bench.threads": float(session.threads),
    }
    if result.mb_per_s is not None:
        out["db_bench.payload_mib_per_s"] = result.mb_per_s
    for key, value in result.histogram.items():
        out[f"latency_us.{key}"] = value
    for name in ("rocksdb.db.get.micros", "rocksdb.sst.read.micros", "rocksdb.db.write.micros", "rocksdb.db.seek.micros"):
        h = result.histograms.get(name)
        if h and h["count"]:
            short = name.removeprefix("rocksdb.").replace(".micros", "_us")
            out[f"{short}.p50"], out[f"{short}.p99"] = h["p50"], h["p99"]
    out.update(series_metrics(result.series))
    return out


class BenchWindow(CounterWindow):
    """The window around db_bench sessions' runs: their counters' deltas, and with one
    session (one process for the whole point) its RESULT line, percentiles and series."""

    def __init__(self, read: Callable[[], dict[str, float]], sessions: list[RocksDbSession]):
        super().__init__(read, window_metrics)
        self.sessions = sessions

    def metrics(self) -> dict[str, float]:
        user_reads = all(s.process.benchmark in USER_READS for s in self.sessions)
        # RocksDB's statistics counters (block cache misses, SST and WAL bytes, stalls ...), nonzero ones
        out = {k: v for k, v in self.deltas.items() if k.startswith("rocksdb.") and v}
        out.update(window_metrics(self.deltas, user_reads))
        if len(self.sessions) == 1:
            out.update(result_metrics(self.sessions[0]))
        return out
