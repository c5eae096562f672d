"""The workloads on RocksDB: each one a db_bench benchmark on a data set built once.

Every data set is `fillseq,compact` of `rows` keys (engine.build): the keys
written once in order, then one full compaction, so every setting reads the
same shape. A measured run is one db_bench process (a session) running one
benchmark with the cell's flags:

  full_scan    readseq: one iterator over every key (a cold full scan; the
               multiblock read is --readahead_size)
  slob         readrandom for run_time_s, --threads = sessions, one process for
               the point; each lookup of a key whose block is not cached is one
               random block read (SLOB's "db file sequential read")
  point_read   readrandom, a fixed number of lookups split over --threads
  overwrite    overwrite on a working copy of the data set (put back before
               every cell), --writes split over --threads
  reload       compact on a working copy of the data set: every block read and
               verified, then written again with a new checksum (RocksDB's
               form of "delete all and insert it again")

A read workload must leave the data set's SST files as the build made them
(checked after each run: a change fails the cell and the data set is rebuilt
before the next). Write workloads run on a copy: SST files hard-linked (never
rewritten, only deleted), the rest copied.
"""

from __future__ import annotations

import math
import re
import time
from typing import TYPE_CHECKING, ClassVar

from ..base import DialectBase, EngineError
from . import files
from .cpu_profile import ProfileProcesses

if TYPE_CHECKING:
    from . import RocksDbEngine, RocksDbSession

_COMPACTION_FINISHED = re.compile(r'"event": "compaction_finished".*?"num_output_records": (\d+)')


class _Dialect(DialectBase):
    # a key of 16 bytes and a value of 400 (the recipes' value_size), no compression, plus
    # index and filter blocks; write workloads may hold a compaction's output beside its input
    bytes_per_row = 600.0

    def __init__(self, engine: RocksDbEngine):
        self.engine = engine

    def _rows(self, table: str) -> int:
        record = self.engine.record(table)
        if record is None:
            raise EngineError(f"the data set {table} has not been built under the current build flags")
        return int(record["rows"])

    def _unchanged(self, table: str) -> None:
        """A read workload left the data set's SST files as the build made them."""
        record = self.engine.record(table)
        now = files.manifest(self.engine.table_dir(table))
        if record is not None and now != record.get("manifest"):
            raise EngineError(f"the SST files of the data set {table} changed during a read-only run "
                              f"(built: {len(record.get('manifest', []))} files, now {len(now)}); it is rebuilt before the next cell")

    def _working_copy(self, table: str, source: str) -> dict[str, float]:
        """`table` becomes a fresh copy of the built `source` for this cell (untimed)."""
        t0 = time.perf_counter()
        work = self.engine.root / "work" / table
        files.copy_db(self.engine.root / "data" / self.engine.build_key / source, work)
        self.engine.relation_dirs[table] = work
        return {"copy_s": time.perf_counter() - t0}


class Scan(_Dialect):
    """full_scan: readseq over the whole data set in one thread."""

    refused_options: ClassVar[dict[str, str]] = {"parallel": "db_bench's readseq is one iterator in one thread"}

    def build_scan_table(self, table: str, rows: int, fingerprint: str) -> None:
        self.engine.build(table, rows, fingerprint)

    def scan_session(self, parallel: bool) -> RocksDbSession:
        return self.engine.session(threads=1)

    def count_rows(self, session: RocksDbSession, table: str) -> int:
        result = self.engine.run(session, table, "readseq", self._rows(table))
        self._unchanged(table)
        return result.operations


class Slob(_Dialect):
    """slob: one db_bench readrandom process per point, its threads the sessions, all on one data set."""

    table_shape: ClassVar[dict[str, object]] = {"layout": "lsm", "build": 1}
    refused_options: ClassVar[dict[str, str]] = {
        "update_pct": "the RocksDB point is db_bench readrandom, reads only; write physics: the writers recipe",
        "think_time_ms": "db_bench's readrandom threads do not pause between lookups",
    }
    required_options: ClassVar[dict[str, tuple[object, str]]] = {
        "work_unit": (1, "a db_bench lookup reads one key: one random block read when its block is not cached"),
        "shared_table": (True, "one db_bench process runs the sessions as threads on one database"),
    }

    def build_slob_table(self, table: str, rows: int, fingerprint: str) -> None:
        self.engine.build(table, rows, fingerprint)

    def prepare_slob(self) -> None:
        pass  # no server-side loop to create: the loop is db_bench's readrandom

    def slob_sessions(self, count: int) -> list[RocksDbSession]:
        return [self.engine.session(threads=count)]

    def slob_loop(self, session: RocksDbSession, table: str, scale: int, work_unit: int, update_pct: float,
                  run_time_s: float, think_ms: float) -> tuple[int, int, float]:
        # --duration is whole seconds in db_bench (the command in the cell's notes says which)
        result = self.engine.run(session, table, "readrandom", scale, duration=max(1, math.ceil(run_time_s)))
        self._unchanged(table)
        return result.operations, 0, result.seconds


class PointRead(_Dialect):
    """point_read: readrandom, --reads per thread."""

    def build_point_table(self, table: str, rows: int, fingerprint: str) -> None:
        self.engine.build(table, rows, fingerprint)

    def point_session(self, threads: int) -> RocksDbSession:
        return self.engine.session(threads=threads)

    def point_reads(self, session: RocksDbSession, table: str, rows: int, reads: int) -> tuple[int, float]:
        per_thread = math.ceil(reads / session.threads)
        result = self.engine.run(session, table, "readrandom", rows, reads=per_thread)
        self._unchanged(table)
        return result.operations, result.seconds


class Overwrite(_Dialect):
    """overwrite: db_bench overwrite on a working copy, --writes per thread."""

    def build_overwrite_table(self, table: str, rows: int, fingerprint: str) -> None:
        self.engine.build(table, rows, fingerprint)

    def ready_overwrite(self, table: str) -> dict[str, float]:
        return self._working_copy(table, table)

    def overwrite_session(self, threads: int) -> RocksDbSession:
        return self.engine.session(threads=threads)

    def overwrite(self, session: RocksDbSession, table: str, rows: int, writes: int) -> tuple[int, float]:
        per_thread = math.ceil(writes / session.threads)
        result = self.engine.run(session, table, "overwrite", rows, writes=per_thread)
        return result.operations, result.seconds


class Reload(_Dialect):
    """reload: the source is the built data set, the target a working copy of it, rewritten
    by one full compaction (db_bench compact) per cell."""

    def build_reload_tables(self, source: str, target: str, rows: int, fingerprint: str) -> None:
        self.engine.build(source, rows, fingerprint)
        self.engine.record_copy(target, source, fingerprint)

    def ready_reload(self, source: str, target: str, rows: int) -> dict[str, float]:
        return self._working_copy(target, source)

    def reload_session(self) -> RocksDbSession:
        return self.engine.session(threads=1)

    def delete_and_insert(self, session: RocksDbSession, source: str, target: str) -> int:
        self.engine.run(session, target, "compact", self._rows(source))
        # the rows written: the compaction's own count (its LOG event), not a re-read of the files
        log = (self.engine.table_dir(target) / "LOG").read_text(errors="replace")
        counts = [int(n) for n in _COMPACTION_FINISHED.findall(log)]
        return sum(counts)

    def flush_table(self, session: RocksDbSession, table: str) -> None:
        pass  # compact returns once its output files are written and synced: nothing is left to flush

    def after_run(self, table: str) -> None:
        pass


DIALECTS: dict[str, type] = {
    "full_scan": Scan,
    "slob": Slob,
    "point_read": PointRead,
    "overwrite": Overwrite,
    "reload": Reload,
    "cpu_profile": ProfileProcesses,
}
__all__ = ["DIALECTS"]
