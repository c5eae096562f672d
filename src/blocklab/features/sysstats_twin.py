"""The device twin of `blocklab sysstats` (issue 19): SREADTIM and MREADTIM beside
what the disk itself takes for the same reads.

Both are measured one read at a time by construction (random single-block
fetches; cold scans with effective_io_concurrency = 0), so their twins need no
queue depth from /proc/diskstats: fio reads the same sizes one at a time, in the
same order (random single blocks; sequential multiblock reads of MBRC blocks),
direct or buffered as the engine read, on a file as large as the table on the
same file system (device/replay.py, cached per device like a run's twins). Its
mean completion latency is the disk's part of the engine's read time; the rest
is the engine's (buffer lookup, checksums, the system call, waiting for a CPU).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..device.io_pattern import SIZE_GRID, Pattern, file_size_for, nearest
from ..device.replay import OnPhase, TwinCache, measure, twin_directory
from ..device.twin import why_not
from ..probes.os_stats import device_of
from .system_stats import SystemStats


@dataclass(frozen=True)
class ReadTwin:
    """One of the statistics against the disk's own time for the same read."""

    name: str  # SREADTIM | MREADTIM
    engine_ms: float
    device_ms: float
    pattern: Pattern
    command: str
    fio_version: str
    measured: str

    @property
    def disk_share(self) -> float:
        return self.device_ms / self.engine_ms if self.engine_ms > 0 else math.nan

    def line(self) -> str:
        """'SREADTIM 0.210 ms: the disk alone takes 0.085 ms for the same read (...): 40% disk, 0.125 ms the engine'."""
        return (f"{self.name} {self.engine_ms:.3f} ms: the disk alone takes {self.device_ms:.3f} ms for the same read "
                f"(fio: {self.pattern.describe()}), {self.disk_share:.0%} of it; the engine adds "
                f"{self.engine_ms - self.device_ms:.3f} ms")

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "engine_ms": self.engine_ms, "device_ms": self.device_ms,
                "disk_share": self.disk_share if math.isfinite(self.disk_share) else None, "pattern": self.pattern.key,
                "pattern_text": self.pattern.describe(), "command": self.command, "fio_version": self.fio_version,
                "measured": self.measured}


def patterns(stats: SystemStats) -> dict[str, Pattern]:
    """The reads SREADTIM and MREADTIM timed, as twin patterns (one in flight each)."""
    size = file_size_for(stats.relation_bytes)
    out = {"SREADTIM": Pattern(False, stats.direct_io, size, "read", read_bs=stats.block_size, read_depth=1)}
    if math.isfinite(stats.mbrc) and stats.mbrc > 0:
        mbrc_bytes = nearest(stats.mbrc * stats.block_size, SIZE_GRID)
        out["MREADTIM"] = Pattern(True, stats.direct_io, size, "read", read_bs=mbrc_bytes, read_depth=1)
    return out


def measure_stats(stats: SystemStats, data_dir: str | None, *, cache_root: Path | None = None,
                  on_phase: OnPhase | None = None) -> tuple[list[ReadTwin], str]:
    """The twins of SREADTIM and MREADTIM, or ([], why there are none)."""
    from ..paths import cache_root as default_cache_root

    if (reason := why_not(data_dir)) is not None:
        return [], reason
    assert data_dir is not None
    wanted = patterns(stats)
    cache = TwinCache(cache_root or default_cache_root(), device_of(data_dir).name)
    got = measure(wanted.values(), twin_directory(data_dir), cache, on_phase=on_phase)
    engine_ms = {"SREADTIM": stats.sreadtim_ms, "MREADTIM": stats.mreadtim_ms}
    out = []
    for name, p in wanted.items():
        t = got.twins.get(p.key)
        if t is not None and math.isfinite(t.read_lat_ms):
            out.append(ReadTwin(name, engine_ms[name], t.read_lat_ms, p, t.command, t.fio_version, t.measured))
    failed = "; ".join(f"{k}: {v}" for k, v in got.failures.items())
    return out, (f"fio failed: {failed}" if failed and not out else "")


__all__ = ["ReadTwin", "measure_stats", "patterns"]
