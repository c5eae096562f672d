"""Measure around any timed run: the engine's I/O counters, the data device,
the server's CPU and the machine's CPU. Every workload uses this one probe.

    with RunProbe(engine, session) as probe:
        run the statement(s)
    probe.deltas   -> {"reads": ..., "read_bytes": ..., "device_read_bytes": ..., "server_cpu_s": ...}
    probe.metrics(seconds) -> the host's figures per second too (device IOPS, MB/s, CPU busy %)

The engine's counters are its own account of what it read and wrote; the
device's (/proc/diskstats) and the CPU's are the machine's, whatever the engine
says. Both are only read on this host: for a server elsewhere `data_dir()` and
`server_pids()` say nothing and the host figures are left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..engines.base import Engine, IoWindow, Session
from .os_stats import DiskCounters, device_of, disk_counters, process_cpu_seconds, system_cpu_times
from .page_cache import process_read_bytes
from .seconds import PerSecond


class HostWindow:
    """The data device's I/O, the server processes' CPU seconds and all CPUs'
    busy share over a window (on this host only)."""

    def __init__(self, engine: Engine, *, per_second: bool = False):
        data_dir = engine.data_dir()
        self.device = device_of(data_dir).name if data_dir else None
        self.pids = engine.server_pids()
        self.disk: DiskCounters | None = None
        self.proc_read_bytes: float | None = None  # the server processes' own storage reads
        self.server_cpu_s = 0.0
        self.cpu_busy_pct = 0.0
        # a timed run's device I/O and CPU second by second (probes/seconds.py)
        self.seconds = PerSecond(self.device) if per_second else None

    def __enter__(self) -> HostWindow:
        if self.seconds is not None:
            self.seconds.__enter__()
        self._disk0 = disk_counters(self.device) if self.device else None
        self._proc0 = process_read_bytes(self.pids)
        self._cpu0 = process_cpu_seconds(self.pids)
        self._sys0 = system_cpu_times()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.seconds is not None:
            self.seconds.__exit__(*exc)
        sys1 = system_cpu_times()
        self.server_cpu_s = process_cpu_seconds(self.pids) - self._cpu0
        proc1 = process_read_bytes(self.pids)
        if proc1 is not None and self._proc0 is not None:
            self.proc_read_bytes = float(proc1 - self._proc0)
        disk1 = disk_counters(self.device) if self.device else None
        if disk1 is not None and self._disk0 is not None:
            self.disk = disk1.minus(self._disk0)
        busy, total = sys1[0] - self._sys0[0], sys1[1] - self._sys0[1]
        self.cpu_busy_pct = 100.0 * busy / total if total > 0 else 0.0

    def series(self) -> dict[str, list[float]]:
        """The per-second series of a window opened with per_second=True, else {}."""
        return self.seconds.series() if self.seconds is not None else {}

    def deltas(self) -> dict[str, float]:
        out = {"server_cpu_s": self.server_cpu_s}
        if self.proc_read_bytes is not None:
            out["proc_read_bytes"] = self.proc_read_bytes
        if self.disk is not None:
            d = self.disk
            out.update(device_reads=float(d.reads), device_read_bytes=float(d.read_bytes),
                       device_writes=float(d.writes), device_write_bytes=float(d.write_bytes))
        return out

    def rates(self, seconds: float) -> dict[str, float]:
        """Per-second figures over `seconds` (a point's run time)."""
        out = {"cpu_busy_pct": self.cpu_busy_pct}
        if self.disk is not None and seconds > 0:
            d = self.disk
            out.update(device_read_iops=d.reads / seconds, device_write_iops=d.writes / seconds,
                       device_mb_per_s=(d.read_bytes + d.write_bytes) / 1e6 / seconds)
        return out


class RunProbe:
    """The engine's I/O window and the host window around one run."""

    def __init__(
        self, engine: Engine, session: Session | None = None, *, settle: bool = False, sessions: Sequence[Session] = (),
        per_second: bool = False,
    ):
        self.host = HostWindow(engine, per_second=per_second)
        self.io: IoWindow = engine.io_window(session, settle=settle, sessions=sessions)
        self.deltas: dict[str, float] = {}

    def __enter__(self) -> RunProbe:
        self.io.__enter__()
        self.host.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.host.__exit__(*exc)
        self.io.__exit__(*exc)
        if exc[0] is None:
            self.deltas = {**self.io.deltas, **self.host.deltas()}

    def engine_metrics(self) -> dict[str, float]:
        """The engine's own figures (per process type, status counters ...)."""
        return self.io.metrics()


def cold_proof(relation_bytes: float, engine_read_bytes: float, physical_read_bytes: float | None, direct_io: bool) -> dict[str, float]:
    """Was the scan really cold? The bytes physically read must be close to the
    relation's size. With direct I/O every engine read is physical; without it,
    only a physical count (the engine processes' storage reads, /proc/<pid>/io,
    or the device's) says whether the OS cache answered."""
    physical = engine_read_bytes if direct_io or physical_read_bytes is None else min(engine_read_bytes, physical_read_bytes)
    ratio = physical / relation_bytes if relation_bytes else 0.0
    proven = ratio >= 0.9 and (direct_io or physical_read_bytes is not None)
    return {"cold_ratio": round(ratio, 4), "cold_proven": 1.0 if proven else 0.0}
