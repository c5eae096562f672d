"""Second by second during a timed run: the data device's I/O and the CPUs' busy
share, sampled by a thread from /proc/diskstats and /proc/stat.

Why the device and not the engine: an engine's own counters are not seen
second by second while its sessions run (PostgreSQL's backends publish their
statistics when a statement ends, and a SLOB loop is one long statement), but
the kernel's are. With direct I/O the device's reads are the engine's; without
it the series still shows whether the load settled, which is what it is for
(analysis/series.py: the warm-up and the drift of a point).
"""

from __future__ import annotations

import threading
import time

from .os_stats import DiskCounters, disk_counters, system_cpu_times

INTERVAL_S = 1.0
# The series a timed workload's steadiness is judged on (the workloads name one).
SERIES_KEYS = ("device_read_iops", "device_write_iops", "device_mb_per_s", "device_read_latency_ms", "cpu_busy_pct")


class PerSecond:
    """Samples once a second between __enter__ and __exit__; series() gives the
    rates of each interval, 't' being the interval's end in seconds from the start.
    A trailing interval shorter than half a second is dropped (its rates would
    be mostly noise)."""

    def __init__(self, device: str | None, interval_s: float = INTERVAL_S):
        self.device = device
        self.interval_s = interval_s
        self._samples: list[tuple[float, DiskCounters | None, tuple[float, float]]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        disk = disk_counters(self.device) if self.device else None
        self._samples.append((time.monotonic(), disk, system_cpu_times()))

    def _loop(self) -> None:
        next_at = time.monotonic() + self.interval_s
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            self._sample()
            # a thread held up past its turn (a loaded machine) starts afresh rather than
            # catching up with samples microseconds apart, whose rates would be noise
            next_at = max(next_at + self.interval_s, time.monotonic() + self.interval_s / 2)

    def __enter__(self) -> PerSecond:
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="blocklab-per-second", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._samples and time.monotonic() - self._samples[-1][0] >= self.interval_s / 2:
            self._sample()

    def series(self) -> dict[str, list[float]]:
        """{'t': [...], 'device_read_iops': [...], ...}; empty when fewer than two samples."""
        if len(self._samples) < 2:
            return {}
        t0 = self._samples[0][0]
        kept = [self._samples[0]]
        for sample in self._samples[1:]:  # intervals under half a second are merged into the next
            if sample[0] - kept[-1][0] >= self.interval_s / 2:
                kept.append(sample)
        out: dict[str, list[float]] = {"t": [], "cpu_busy_pct": []}
        for (ta, da, ca), (tb, db, cb) in zip(kept, kept[1:]):
            dt = tb - ta
            if dt <= 0:
                continue
            out["t"].append(round(tb - t0, 3))
            busy, total = cb[0] - ca[0], cb[1] - ca[1]
            out["cpu_busy_pct"].append(round(100.0 * busy / total, 2) if total > 0 else 0.0)
            if da is not None and db is not None:
                d = db.minus(da)
                out.setdefault("device_read_iops", []).append(round(d.reads / dt, 2))
                out.setdefault("device_write_iops", []).append(round(d.writes / dt, 2))
                out.setdefault("device_mb_per_s", []).append(round((d.read_bytes + d.write_bytes) / 1e6 / dt, 3))
                out.setdefault("device_read_latency_ms", []).append(round(d.read_ms / d.reads, 4) if d.reads else 0.0)
        return out
