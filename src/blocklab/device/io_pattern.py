"""The engine's I/O pattern as a twin replays it: quantised, one per setting.

During every cell the probe records the I/O pattern the engine issued
(`pattern.*` metrics, probes/io.py): its request sizes and its reads and writes
(the engine's own counters), how many of its I/Os were in flight while the disk
was busy (/proc/diskstats), direct or buffered, sequential or random (the
workload says), and the bytes of data it ranged over. This module turns those
metrics into a Pattern, the thing fio replays (device/replay.py):

    pattern_of(metrics)        one cell's (or a setting's pooled) metrics -> Pattern, or why none
    setting_patterns(rows)     setting label -> Pattern, or why none

The kind of I/O the engine did most of (reads, or writes) is replayed as fast
as the disk takes it with the engine's number in flight; the other kind, when it
is more than a trace, beside it at the engine's own rate (see Pattern). A
pattern is quantised so that nearby cells share one twin and one cache entry:
sizes and depths to a grid of powers of two and the halves between them (8k,
12k, 16k, 24k ...; 1, 2, 3, 4, 6, 8 ...), the background rate likewise, the file
to the nearest power of two (at least 16 MiB).

Units: bytes, MB/s = 1e6 bytes/s, milliseconds, as in the rest of blocklab.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..results import ResultRow
from ..units import fmt_bytes, label_of, short_size

KiB, MiB, GiB = 1024, 1024**2, 1024**3
MIN_IOS = 16  # a setting whose cells did fewer I/Os has no pattern worth replaying (sizes are exact, depth rough)
MIN_FILE = 16 * MiB  # smaller files would be read in a few milliseconds
SMALL_IO = 32 * KiB  # up to here a disk is counted in IOPS, above it in MB/s (as calibrate's small I/O)
MAX_DEPTH = 256


# ====================================================================== quantising
def _sizes() -> list[int]:
    """Powers of two from 512 B to 64 MiB and, from 12 kB on, the halves between
    them (12k, 24k, 48k ...): multiples of 4096, as direct I/O on a 4k-sector disk needs."""
    powers = [512 * 2**i for i in range(18)]
    return sorted(powers + [3 * p // 2 for p in powers if 3 * p // 2 >= 12 * KiB])


SIZE_GRID = _sizes()
# I/Os in flight: 1, 2, 3, 4, 6, 8, 12, 16, 24 ... 256
DEPTH_GRID = sorted({1, 2, 3} | {d for p in range(2, 9) for d in (2**p, 3 * 2**p // 2) if d <= MAX_DEPTH})
# a background kind's I/Os a second: 8, 12, 16, 24 ... about a million
RATE_GRID = sorted({d for p in range(3, 21) for d in (2**p, 3 * 2**p // 2)})


def nearest(value: float, grid: Sequence[int]) -> int:
    """The grid value nearest to `value` on a log scale (a ratio off, not a difference)."""
    if not value or value <= 0 or not math.isfinite(value):
        return grid[0]
    return min(grid, key=lambda g: (abs(math.log(g / value)), g))


def file_size_for(data_bytes: float) -> int:
    """The twin's file: the nearest power of two to the data's bytes, at least MIN_FILE."""
    if not data_bytes or data_bytes <= MIN_FILE:
        return MIN_FILE
    return max(MIN_FILE, 2 ** round(math.log2(data_bytes)))


# ====================================================================== the pattern
@dataclass(frozen=True)
class Pattern:
    """One I/O pattern, quantised: what a twin replays.

    The kind the engine did most of (reads, or writes) is its foreground: fio runs
    it as fast as it can with the engine's number of them in flight. The other
    kind, if any, ran beside it (a checkpointer's writes beside a SLOB session's
    reads, a scan's reads beside an insert's writes): fio replays it at the rate
    the engine did it, so it loads the disk as it did without a race to win."""

    sequential: bool
    direct: bool
    file_size: int  # bytes
    main: str  # "read" or "write": the foreground
    read_bs: int = 0  # bytes per read; 0: no reads
    read_depth: int = 0  # reads in flight (for the background kind: enough for its rate)
    write_bs: int = 0
    write_depth: int = 0
    background_iops: int = 0  # the background kind's rate (0: none)

    @property
    def main_bs(self) -> int:
        return self.read_bs if self.main == "read" else self.write_bs

    @property
    def main_depth(self) -> int:
        return self.read_depth if self.main == "read" else self.write_depth

    @property
    def background(self) -> str:
        """'write', 'read' or '' (none)."""
        if not self.background_iops:
            return ""
        return "write" if self.main == "read" else "read"

    @property
    def background_bs(self) -> int:
        return {"read": self.read_bs, "write": self.write_bs}.get(self.background, 0)

    @property
    def key(self) -> str:
        """'seq r128k qd3 direct 64M', 'rand r8k qd8 + w8k@2048/s direct 1G': the cache key."""
        order = "seq" if self.sequential else "rand"
        text = f"{order} {self.main[0]}{short_size(self.main_bs)} qd{self.main_depth}"
        if self.background:
            bg_depth = self.read_depth if self.background == "read" else self.write_depth
            text += f" + {self.background[0]}{short_size(self.background_bs)}@{self.background_iops}/s qd{bg_depth}"
        return f"{text} {'direct' if self.direct else 'buffered'} {short_size(self.file_size)}"

    @property
    def unit(self) -> str:
        """How the disk is counted for this pattern: IOPS for small I/O, MB/s for large."""
        return "IOPS" if self.main_bs <= SMALL_IO else "MB/s"

    @property
    def kind(self) -> str:
        """'sequential reads', 'random writes' ...: the foreground."""
        return f"{'sequential' if self.sequential else 'random'} {self.main}s"

    def describe(self) -> str:
        """'8 kB random reads, 8 in flight, with 8 kB writes at 2,048/s beside them, direct I/O, 1 GB file'."""
        text = f"{_kb(self.main_bs)} {self.kind}, {self.main_depth} in flight"
        if self.background:
            text += f", with {_kb(self.background_bs)} {self.background}s at {self.background_iops:,}/s beside them"
        return f"{text}, {'direct I/O' if self.direct else 'buffered'}, {fmt_bytes(self.file_size)} file"

    def compact(self) -> str:
        """'seq 128k reads qd3, direct' ('rand 8k reads qd8 + 8k writes 3,072/s, direct'): a table's cell."""
        text = f"{'seq' if self.sequential else 'rand'} {short_size(self.main_bs)} {self.main}s qd{self.main_depth}"
        if self.background:
            text += f" + {short_size(self.background_bs)} {self.background}s {self.background_iops:,}/s"
        return f"{text}, {'direct' if self.direct else 'buffered'}"

    def short(self) -> str:
        """'128 kB reads': how a sentence names it."""
        return f"{_kb(self.main_bs)} {self.main}s"

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Pattern:
        return cls(
            sequential=bool(d["sequential"]), direct=bool(d["direct"]), file_size=int(d["file_size"]), main=str(d["main"]),
            read_bs=int(d.get("read_bs", 0)), read_depth=int(d.get("read_depth", 0)), write_bs=int(d.get("write_bs", 0)),
            write_depth=int(d.get("write_depth", 0)), background_iops=int(d.get("background_iops", 0)),
        )


def _kb(size: int) -> str:
    return f"{size // KiB} kB" if size >= KiB and size % KiB == 0 else f"{size} B"


def pattern_of(m: Mapping[str, float]) -> Pattern | str:
    """A cell's `pattern.*` metrics (or a setting's, pooled) -> its Pattern, or why it has none."""
    if "pattern.seconds" not in m:
        return "no I/O pattern recorded (a run from before the twin, or imported)"
    reads, writes = m.get("pattern.reads", 0.0), m.get("pattern.writes", 0.0)
    if reads + writes < MIN_IOS:
        return f"the engine did {reads + writes:,.0f} I/Os: too few to replay"
    busy = m.get("pattern.busy_ms", 0.0)
    if not busy or "pattern.read_flight_ms" not in m:
        return "queue depth not measured (no /proc/diskstats times for the disk)"
    main = "read" if reads >= writes else "write"
    minor = writes if main == "read" else reads
    seconds = m["pattern.seconds"]
    # the background kind when it is more than a trace: 1% of the I/Os and 10 a second
    rate = minor / seconds if seconds > 0 else 0.0
    background = minor >= 0.01 * (reads + writes) and rate >= 10
    sizes = {kind: nearest(m.get(f"pattern.{kind}_kb", 0.0) * KiB, SIZE_GRID) for kind in ("read", "write")}
    in_flight = {kind: m.get(f"pattern.{kind}_flight_ms", 0.0) / busy for kind in ("read", "write")}
    if not m.get("pattern.sequential", 0.0) and m.get("pattern.sessions"):
        # random reads are waited for one by one by the session that needs them: no more can be
        # in flight than there are sessions (a shared disk's or a busy CPU's estimate can say more)
        in_flight["read"] = min(in_flight["read"], m["pattern.sessions"])
    depths = {kind: nearest(max(1.0, d), DEPTH_GRID) for kind, d in in_flight.items()}
    kinds = {main} | ({"write" if main == "read" else "read"} if background else set())
    return Pattern(
        sequential=bool(m.get("pattern.sequential", 0.0)),
        direct=bool(m.get("pattern.direct", 0.0)),
        file_size=file_size_for(m.get("pattern.data_bytes", 0.0)),
        main=main,
        read_bs=sizes["read"] if "read" in kinds else 0,
        read_depth=depths["read"] if "read" in kinds else 0,
        write_bs=sizes["write"] if "write" in kinds else 0,
        write_depth=depths["write"] if "write" in kinds else 0,
        background_iops=nearest(rate, RATE_GRID) if background else 0,
    )


# the times a setting adds up over its cells: its depth is their ratio, steadier than a median of
# ratios whose denominators count in 4 ms jiffies; every other figure is the cells' median
_POOLED = ("pattern.read_flight_ms", "pattern.write_flight_ms", "pattern.busy_ms")


def setting_patterns(rows: Iterable[ResultRow]) -> dict[str, Pattern | str]:
    """Setting label -> the pattern of its ok cells (one twin per setting however its
    repeats scatter), or why it has none."""
    groups: dict[str, list[dict[str, float]]] = {}
    for row in rows:
        if row.ok:
            groups.setdefault(label_of(row.settings), []).append(row.metrics)
    out: dict[str, Pattern | str] = {}
    for label, ms in groups.items():
        keys = {k for m in ms for k in m if k.startswith("pattern.")}
        merged = {k: statistics.median(m[k] for m in ms if k in m) for k in keys}
        if all("pattern.busy_ms" in m for m in ms):
            merged.update({k: sum(m.get(k, 0.0) for m in ms) for k in _POOLED if k in keys})
        out[label] = pattern_of(merged)
    return out


__all__ = [
    "DEPTH_GRID",
    "RATE_GRID",
    "SIZE_GRID",
    "Pattern",
    "file_size_for",
    "nearest",
    "pattern_of",
    "setting_patterns",
]
