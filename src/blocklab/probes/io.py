"""Measure around any timed run: the engine's I/O counters, the data device,
the server's CPU and the machine's CPU. Every workload uses this one probe.

    with RunProbe(engine, session) as probe:
        run the statement(s)
    probe.deltas   -> {"reads": ..., "read_bytes": ..., "device_read_bytes": ..., "server_cpu_s": ...}
    probe.metrics(seconds) -> the host's figures per second too (device IOPS, MB/s, CPU busy %)
    probe.pattern(seconds, ...) -> the I/O pattern of the run, `pattern.*` (request sizes,
                                   queue depth, read/write mix, direct or buffered, order),
                                   what the device twin replays with fio (device/twin.py)

The engine's counters are its own account of what it read and wrote; the
device's (/proc/diskstats) and the CPU's are the machine's, whatever the engine
says. Both are only read on this host: for a server elsewhere `data_dir()` and
`server_pids()` say nothing and the host figures are left out.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence

from ..engines.base import Engine, IoWindow, Session
from .cpu_profile import active_windows
from .os_stats import DiskCounters, device_of, disk_counters, process_cpu_seconds, system_cpu_times
from .page_cache import process_read_bytes
from .seconds import PerSecond

IO_COST_BYTES = 32 * 1024  # what one request costs the disk beyond its bytes (device_pattern)


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
        self.window_s = 0.0  # wall time between enter and exit: the diskstats times are over it

    def __enter__(self) -> HostWindow:
        self._t0 = time.monotonic()
        if self.seconds is not None:
            self.seconds.__enter__()
        self._disk0 = disk_counters(self.device) if self.device else None
        self._proc0 = process_read_bytes(self.pids)
        self._cpu0 = process_cpu_seconds(self.pids)
        self._sys0 = system_cpu_times()
        return self

    def __exit__(self, *exc: object) -> None:
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
        self.window_s = time.monotonic() - self._t0
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

    def device_pattern(self, own: tuple[float, float, float, float] | None = None,
                       bounds: tuple[float | None, float | None] = (None, None)) -> dict[str, float]:
        """The device's side of the I/O pattern over the window (/proc/diskstats):
        average request sizes as the disk saw them, its utilisation, and how many of
        the engine's I/Os were in flight. Empty when there is no device here; the
        times are left out on a kernel whose diskstats lack them (11 fields).

        The disk may be shared. `own` is the engine's (reads, read bytes, writes,
        write bytes). Of the disk's reads' time in flight the engine's share is its
        share of their work, each read counted as its bytes plus IO_COST_BYTES (what
        a request costs beyond its transfer: sizes against latencies measured here
        put it near 32 kB); the same for writes, apart, so that others' slow writes
        never pass for the depth of an engine that only reads. With nobody else on
        the disk the shares are 1 and the figures exact (Little's law).

        `bounds` (reads, writes; None: none) are the milliseconds the engine itself
        waited for them, where it times its I/O: an I/O the engine waits for cannot
        have been in flight longer than it was waited for, so the engine's share is
        never taken above that. It matters where others' I/O is slow (a neighbour
        throttled by its cgroup, say): a few of theirs, each waiting milliseconds,
        would otherwise pass for many of the engine's in flight."""
        d = self.disk
        if d is None or self.window_s <= 0:
            return {}
        device_bytes = d.read_bytes + d.write_bytes
        out = {"pattern.window_s": self.window_s,
               "pattern.device_iops": (d.reads + d.writes) / self.window_s,
               "pattern.device_mb_per_s": device_bytes / 1e6 / self.window_s}
        if d.reads:
            out["pattern.device_read_kb"] = d.read_bytes / d.reads / 1024
        if d.writes:
            out["pattern.device_write_kb"] = d.write_bytes / d.writes / 1024
        if d.io_ticks_ms or d.weighted_ms:
            ms = self.window_s * 1000.0
            read_share = write_share = 1.0
            if own is not None:
                read_share = _share(own[0], own[1], d.reads, d.read_bytes)
                write_share = _share(own[2], own[3], d.writes, d.write_bytes)
            # Time in flight of the reads and writes: the sum of each one's duration. Not the
            # weighted time (field 11), which since Linux 5.x also sums flushes and discards:
            # a flush (anyone's fsync) carries no data and would pass for queue depth here
            read_flight, write_flight = d.read_ms * read_share, d.write_ms * write_share
            if bounds[0]:
                read_flight = min(read_flight, bounds[0])
            if bounds[1]:
                write_flight = min(write_flight, bounds[1])
            flight = read_flight + write_flight
            total = d.read_ms + d.write_ms
            out["pattern.device_share"] = flight / total if total else 1.0
            out["pattern.read_flight_ms"] = read_flight
            out["pattern.write_flight_ms"] = write_flight
            out["pattern.busy_ms"] = float(d.io_ticks_ms)
            out["pattern.util_pct"] = min(100.0, 100.0 * d.io_ticks_ms / ms)
            # the engine's I/Os in flight on average over the window
            out["pattern.queue_depth"] = flight / ms
            if d.io_ticks_ms:
                # ... and while the disk was busy: what the twin replays. The idle gaps (the
                # engine's CPU, its locks) are what efficiency measures, so the twin does not
                # copy them. The busy time is the disk's (others' I/O lengthens it too), so on
                # a shared disk this leans low. io_ticks counts whole jiffies (4 ms at HZ=250)
                # in which an I/O was in flight: over a cell of tens of milliseconds it is rough,
                # which is why a setting's depth pools the cells' times (device/io_pattern.py)
                out["pattern.busy_queue_depth"] = flight / d.io_ticks_ms
        return out


def _share(own_ios: float, own_bytes: float, ios: float, nbytes: float) -> float:
    """The engine's share of the disk's work of one kind (reads or writes), at most 1."""
    work = ios * IO_COST_BYTES + nbytes
    if work <= 0:
        return 1.0
    return min(1.0, (own_ios * IO_COST_BYTES + own_bytes) / work)


class RunProbe:
    """The engine's I/O window and the host window around one run."""

    def __init__(
        self, engine: Engine, session: Session | None = None, *, settle: bool = False, sessions: Sequence[Session] = (),
        per_second: bool = False,
    ):
        self.host = HostWindow(engine, per_second=per_second)
        self.io: IoWindow = engine.io_window(session, settle=settle, sessions=sessions)
        self.deltas: dict[str, float] = {}
        # a cell being profiled (runner: measure.cpu_profile / trace_function): the engine's
        # stacks are sampled, its function traced, over exactly this window
        self.observers = active_windows()

    def __enter__(self) -> RunProbe:
        spawned, opened = 0, []  # what must be stopped if a later part fails to start
        try:
            for observer in self.observers:  # spawned first: their start-up is outside what the probes count
                observer.start()
                spawned += 1
            self.io.__enter__()
            opened.append(self.io.__exit__)
            self.host.__enter__()
            opened.append(self.host.__exit__)
            for observer in self.observers:  # and switched on last
                observer.__enter__()
        except BaseException as err:
            # a perf already recording must not outlive the cell when bpftrace then fails to attach
            for observer in self.observers[:spawned]:
                with contextlib.suppress(Exception):
                    observer.pause()
                    observer.__exit__(type(err), err, None)
            for close in reversed(opened):
                with contextlib.suppress(Exception):
                    close(type(err), err, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            for observer in self.observers:  # stopped first: the settle below is not the run's ...
                observer.pause()
            try:
                self.host.__exit__(*exc)
            finally:
                self.io.__exit__(*exc)
        finally:
            for observer in reversed(self.observers):  # ... and read after: folding the stacks is not the engine's CPU
                observer.__exit__(*exc)
        if exc[0] is None:
            self.deltas = {**self.io.deltas, **self.host.deltas()}

    def engine_metrics(self) -> dict[str, float]:
        """The engine's own figures (per process type, status counters ...)."""
        return self.io.metrics()

    def pattern(self, seconds: float, *, sequential: bool, direct: bool, data_bytes: float, sessions: int) -> dict[str, float]:
        """The I/O pattern the engine issued during the run, as `pattern.*` metrics: the
        request sizes and the read/write mix from the engine's own counters (what it
        asked of the file system), the queue depth and utilisation from the device's
        (device_pattern). The workload says what the counters cannot: the order of its
        reads (`sequential`), whether they bypass the page cache (`direct`), the bytes
        of data they range over (`data_bytes`: the twin's file is that big) and how many
        sessions run at once (`sessions`: the cores the engine could use). `seconds` is
        the workload's own timed span, the rates' denominator."""
        d = self.deltas
        reads, writes = d.get("reads", 0.0), d.get("writes", 0.0)
        read_bytes, write_bytes = d.get("read_bytes", 0.0), d.get("write_bytes", 0.0)
        out = {
            "pattern.seconds": seconds,
            "pattern.reads": reads,
            "pattern.writes": writes,
            "pattern.sequential": 1.0 if sequential else 0.0,
            "pattern.direct": 1.0 if direct else 0.0,
            "pattern.data_bytes": float(data_bytes),
            "pattern.sessions": float(sessions),
            "pattern.cores": float(len(os.sched_getaffinity(0))),
            "pattern.cpu_busy_pct": self.host.cpu_busy_pct,
        }
        if reads:
            out["pattern.read_kb"] = read_bytes / reads / 1024
        if writes:
            out["pattern.write_kb"] = write_bytes / writes / 1024
        if reads + writes:
            out["pattern.read_share"] = reads / (reads + writes)
        if seconds > 0:
            out["pattern.iops"] = (reads + writes) / seconds
            out["pattern.mb_per_s"] = (read_bytes + write_bytes) / 1e6 / seconds
            out["pattern.read_iops"] = reads / seconds
            out["pattern.write_iops"] = writes / seconds
            out["pattern.read_mb_per_s"] = read_bytes / 1e6 / seconds
            out["pattern.write_mb_per_s"] = write_bytes / 1e6 / seconds
            # each a wait for the disk's cache flush, which the twin does not replay: the verdict names them
            out["pattern.fsyncs_per_s"] = d.get("fsyncs", 0.0) / seconds
            if self.host.pids:  # the engine's processes are on this host
                out["pattern.server_cores"] = self.host.server_cpu_s / seconds
        # what the engine itself moved to and from storage: its processes' storage reads
        # (/proc/<pid>/io) where this host shows them, else its own count; its writes
        own_reads = self.host.proc_read_bytes if self.host.proc_read_bytes is not None else read_bytes
        # its requests as the disk saw them: a direct read is one request; a buffered one is
        # merged by the page cache, so what it read from storage in the disk's average request
        disk = self.host.disk
        own_read_ios = reads
        if not direct and disk is not None and disk.reads and own_reads != read_bytes:
            own_read_ios = own_reads / (disk.read_bytes / disk.reads)
        # The engine's own time waiting for its I/O (where it times it) bounds the time in flight only
        # where it waited for each I/O it issued: random reads (no read-ahead can guess the next one,
        # the session waits for each); a sequential scan's may be read ahead asynchronously, and then
        # it waits less than they took. Writes: only direct and random (a buffered write returns once
        # it is in the page cache)
        read_wait, write_wait = d.get("read_time_ms", 0.0), d.get("write_time_ms", 0.0)
        bounds = (read_wait if read_wait > 0 and not sequential else None,
                  write_wait if write_wait > 0 and direct and not sequential else None)
        out.update(self.host.device_pattern((own_read_ios, own_reads, writes, write_bytes), bounds))
        return out


def cold_proof(relation_bytes: float, engine_read_bytes: float, physical_read_bytes: float | None, direct_io: bool) -> dict[str, float]:
    """Was the scan really cold? The bytes physically read must be close to the
    relation's size. With direct I/O every engine read is physical; without it,
    only a physical count (the engine processes' storage reads, /proc/<pid>/io,
    or the device's) says whether the OS cache answered."""
    physical = engine_read_bytes if direct_io or physical_read_bytes is None else min(engine_read_bytes, physical_read_bytes)
    ratio = physical / relation_bytes if relation_bytes else 0.0
    proven = ratio >= 0.9 and (direct_io or physical_read_bytes is not None)
    return {"cold_ratio": round(ratio, 4), "cold_proven": 1.0 if proven else 0.0}
