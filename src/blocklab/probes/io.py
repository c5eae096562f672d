"""Measure around one timed execution: engine I/O counters, the device, server CPU.

    with IoProbe(engine, conn) as probe:
        run the statement
    probe.deltas -> {"reads": ..., "device_read_bytes": ..., "server_cpu_s": ...}
"""

from __future__ import annotations

import time
from typing import Any

from .os_stats import device_of, disk_counters, process_cpu_seconds


class IoProbe:
    def __init__(self, engine: Any, conn: Any = None):
        self.engine = engine
        self.conn = conn
        self.deltas: dict[str, float] = {}
        data_dir = engine.data_dir()
        self.device = device_of(data_dir).name if data_dir else None
        self.pids: list[int] = engine.server_pids() if hasattr(engine, "server_pids") else []

    def __enter__(self) -> "IoProbe":
        self._io = self.engine.io_counters(self.conn)
        self._disk = disk_counters(self.device) if self.device else None
        self._cpu = process_cpu_seconds(self.pids)
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.elapsed = time.perf_counter() - self._t0
        if exc[0] is not None:
            return
        cpu = process_cpu_seconds(self.pids)
        disk = disk_counters(self.device) if self.device else None
        io = self.engine.io_counters(self.conn)
        self.deltas = {k: io[k] - self._io.get(k, 0.0) for k in io}
        self.deltas["server_cpu_s"] = cpu - self._cpu
        if disk is not None and self._disk is not None:
            d = disk.minus(self._disk)
            self.deltas.update(
                device_reads=d.reads, device_read_bytes=d.read_bytes, device_writes=d.writes, device_write_bytes=d.write_bytes
            )


def cold_proof(relation_bytes: float, engine_read_bytes: float, device_read_bytes: float | None, direct_io: bool) -> dict[str, float]:
    """Was the scan really cold? The bytes physically read must be close to the
    relation's size. With direct I/O every engine read is physical; without it,
    only the device counters say whether the OS cache answered."""
    physical = engine_read_bytes if direct_io or device_read_bytes is None else min(engine_read_bytes, device_read_bytes)
    ratio = physical / relation_bytes if relation_bytes else 0.0
    proven = ratio >= 0.9 and (direct_io or device_read_bytes is not None)
    return {"cold_ratio": round(ratio, 4), "cold_proven": 1.0 if proven else 0.0}
