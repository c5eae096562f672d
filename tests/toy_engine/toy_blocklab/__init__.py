"""A toy engine for blocklab, written outside blocklab (CONTRIBUTING.md, "Adding an
engine"): its tables are flat files of 8 kB pages on the real disk, read with
pread(2), with O_DIRECT when direct_io is on. It joins blocklab through the entry
point group `blocklab.engines` (tests/test_add_an_engine.py installs it that way)
and runs the full_scan workload, so `blocklab run mbrc --engine toy` sweeps its
multiblock read size.

A page is an 8-byte row count and up to 127 rows of 64 bytes; block 0 holds the
table's fingerprint. The engine counts its own reads, bytes and read time, as a
real engine's statistics would.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from blocklab.engines.base import (
    IO_KEYS,
    ApplyClass,
    Capabilities,
    CounterWindow,
    DialectBase,
    EngineBase,
    EngineError,
    EngineInfo,
    KnobError,
    KnobInfo,
    ServerKind,
    SessionBase,
)
from blocklab.engines.host import drop_os_cache
from blocklab.paths import cache_root

BLOCK = 8192
ROW = 64
ROWS_PER_PAGE = (BLOCK - 8) // ROW  # 127
PAGE_HEADER = struct.Struct("<Q")


class ToySession(SessionBase):
    """The toy speaks no SQL: a session is the scan's settings, taken when it opens."""

    def __init__(self, engine: ToyEngine):
        self.backend_id = os.getpid()  # the toy reads in blocklab's own process
        self.read_blocks = int(engine.current["toy.read_blocks"])
        self.direct = bool(engine.current["toy.direct"])

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        raise EngineError(f"the toy engine runs no SQL: {sql!r}")

    def cancel(self) -> None:
        pass  # a scan of a few MB ends on its own

    def close(self) -> None:
        pass


class ToyScan(DialectBase):
    """What full_scan needs: build the table file, count its rows with one scan."""

    bytes_per_row: ClassVar[float] = BLOCK / ROWS_PER_PAGE

    def __init__(self, engine: ToyEngine):
        self.engine = engine

    def build_scan_table(self, table: str, rows: int, fingerprint: str) -> None:
        path = self.engine.table_path(table)
        path.parent.mkdir(parents=True, exist_ok=True)
        header = json.dumps({"fingerprint": fingerprint, "rows": rows}).encode().ljust(BLOCK, b" ")
        with open(path.with_suffix(".tmp"), "wb") as f:
            f.write(header)
            for first in range(1, rows + 1, ROWS_PER_PAGE):
                ids = range(first, min(first + ROWS_PER_PAGE, rows + 1))
                body = b"".join(f"{i},blabla {i}".encode().ljust(ROW, b" ") for i in ids)
                f.write((PAGE_HEADER.pack(len(ids)) + body).ljust(BLOCK, b"\0"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(path.with_suffix(".tmp"), path)

    def scan_session(self, parallel: bool) -> ToySession:
        if parallel:
            raise KnobError("workload.parallel: the toy engine scans in one thread; accepted: false")
        return ToySession(self.engine)

    def count_rows(self, session: Any, table: str) -> int:
        return self.engine.scan(table, session.read_blocks, session.direct)


class ToyEngine(EngineBase):
    name: ClassVar[str] = "toy"
    display: ClassVar[str] = "Toy"
    native_prefix: ClassVar[str] = "toy."
    summary: ClassVar[str] = "a toy engine: tables in flat files of 8 kB pages, read with pread (CONTRIBUTING.md)"
    accepts_dsn: ClassVar[bool] = False
    dialects: ClassVar[dict[str, type]] = {"full_scan": ToyScan}
    install_bytes: ClassVar[float] = 0.0
    change_seconds: ClassVar[dict[ApplyClass, float]] = {}
    capabilities: ClassVar[Capabilities] = Capabilities(
        own_metrics=("toy.",),
        read_latency_source="the toy's own pread timer",
        servers=(ServerKind("Toy 1.0", (1, 0), False),),
        lacks={"slob": "the toy has no sessions of its own to update rows in"},
    )
    KNOBS: ClassVar[dict[str, KnobInfo]] = {
        "toy.read_blocks": KnobInfo("read_blocks", "multiblock_read", "integer", ApplyClass.SESSION, minimum=1,
                                    maximum=256, unit="blocks", unit_bytes=BLOCK, default=1,
                                    description="blocks per pread of a scan"),
        "toy.direct": KnobInfo("direct", "direct_io", "bool", ApplyClass.SESSION, default=False,
                               description="open the table files with O_DIRECT"),
    }

    def __init__(self, cache_dir: Path | None = None):
        self.dir = (cache_dir or cache_root()) / "toy"
        self.mode = "embedded"
        self.current: dict[str, Any] = {name: info.default for name, info in self.KNOBS.items()}
        self.counters: dict[str, float] = dict.fromkeys(IO_KEYS, 0.0)

    # lifecycle and settings ---------------------------------------------------
    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)

    def stop(self) -> None:
        pass  # nothing runs between scans

    def _native(self, name: str) -> str:
        if name in self.KNOBS:
            return name
        for native, info in self.KNOBS.items():
            if info.generic == name:
                return native
        raise KnobError(f"unknown knob {name!r} on engine toy; accepted: {', '.join(self.KNOBS)}, multiblock_read, direct_io")

    def knob(self, name: str) -> KnobInfo:
        return self.KNOBS[self._native(name)]

    def check_settings(self, settings: dict[str, Any], *, partial: bool = False) -> dict[str, Any]:
        return {name: self.knob(name).normalise(value, "toy", name) for name, value in settings.items()}

    def apply(self, settings: dict[str, Any]) -> dict[str, str]:
        for name, value in self.check_settings(settings).items():
            self.current[self._native(name)] = value
        return {name: str(self.current[self._native(name)]) for name in settings}

    def check_applied(self, settings: dict[str, Any]) -> list[str]:
        asked = self.check_settings(settings)
        return [f"{name}: asked {value}, have {self.current[self._native(name)]}"
                for name, value in asked.items() if self.current[self._native(name)] != value]

    def info(self) -> EngineInfo:
        return EngineInfo("toy", "1.0", self.mode, str(self.dir), settings={k: str(v) for k, v in self.current.items()})

    def version_tuple(self) -> tuple[int, ...]:
        return (1, 0)

    def connect(self, *, session: bool = True) -> ToySession:
        return ToySession(self)

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        raise EngineError(f"the toy engine runs no SQL: {sql!r}")

    # data and cache -----------------------------------------------------------
    def table_path(self, table: str) -> Path:
        return self.dir / f"{table}.tbl"

    def data_dir(self) -> str | None:
        return str(self.dir)

    def server_pids(self) -> list[int]:
        return [os.getpid()]

    def block_size(self) -> int:
        return BLOCK

    def relation_bytes(self, relation: str) -> int:
        path = self.table_path(relation)
        return path.stat().st_size if path.exists() else 0

    def relation_files(self, relation: str) -> list[Path]:
        path = self.table_path(relation)
        return [path] if path.exists() else []

    def table_fingerprint(self, table: str) -> str | None:
        path = self.table_path(table)
        if not path.exists():
            return None
        with open(path, "rb") as f:
            return str(json.loads(f.read(BLOCK))["fingerprint"])

    def needs_rebuild(self, table: str) -> bool:
        return False  # no setting of the toy changes its file format

    def direct_io_active(self) -> bool:
        return bool(self.current["toy.direct"])

    def cached_bytes(self, relations: Iterable[str]) -> float | None:
        return 0.0  # the toy keeps no cache of its own: every page comes from the file

    def cold_cache_problem(self) -> str | None:
        return None

    def evict(self, relations: Iterable[str]) -> dict[str, Any]:
        files = [f for r in relations for f in self.relation_files(r)]
        dropped = sum(1 for f in files if drop_os_cache(f))
        return {"os_dropped_files": dropped, "os_drop_possible": dropped == len(files)}

    # the scan itself ------------------------------------------------------------
    def scan(self, table: str, read_blocks: int, direct: bool) -> int:
        """Read the table file front to back, `read_blocks` pages a pread, and count its rows."""
        path = self.table_path(table)
        flags = os.O_RDONLY | (os.O_DIRECT if direct else 0)
        chunk = read_blocks * BLOCK
        buffer = mmap.mmap(-1, chunk)  # page-aligned, as O_DIRECT needs
        rows = 0
        fd = os.open(path, flags)
        try:
            size = os.fstat(fd).st_size
            for offset in range(0, size, chunk):
                with memoryview(buffer) as whole, whole[: min(chunk, size - offset)] as view:
                    t0 = time.perf_counter()
                    got = os.preadv(fd, [view], offset)
                self.counters["read_time_ms"] += (time.perf_counter() - t0) * 1000.0
                self.counters["reads"] += 1
                self.counters["read_bytes"] += got
                first = 1 if offset == 0 else 0  # block 0 is the header
                for page in range(first, got // BLOCK):
                    rows += PAGE_HEADER.unpack_from(buffer, page * BLOCK)[0]
        finally:
            os.close(fd)
            buffer.close()
        return rows

    def io_counters(self, session: Any = None) -> dict[str, float]:
        return dict(self.counters)

    def io_window(self, session: Any = None, *, settle: bool = False, sessions: Sequence[Any] = ()) -> CounterWindow:
        return CounterWindow(self.io_counters)

    # faults -----------------------------------------------------------------------
    def health(self) -> str | None:
        return None  # nothing runs that could die

    def recover(self) -> None:
        pass


ENGINE = ToyEngine
