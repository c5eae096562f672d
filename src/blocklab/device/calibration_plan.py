"""What a device calibration measures: the presets (full, quick), the grid of
block sizes and queue depths, and the checks of each value a user may give.
device/calibrate.py runs the plan with fio."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..units import parse_size, short_size
from .fio import describe

if TYPE_CHECKING:
    from ..spec import Scalar

KiB, MiB, GiB = 1024, 1024**2, 1024**3
SECTOR = 512  # direct I/O needs sector-aligned sizes
FIO_OVERHEAD_S = 0.35  # fio start-up and JSON per point, measured on a 2-core VM

PRESETS: dict[str, dict[str, object]] = {
    "full": {
        "block_sizes": ("4k", "8k", "16k", "32k", "128k", "1M"),
        "iodepths": (1, 2, 4, 8, 16, 32, 64),
        "seq_block_sizes": ("128k", "1M"),
        # qd1: one synchronous scanner (the engine's multiblock read time);
        # qd16: a reader that prefetches, what the device can stream
        "seq_iodepths": (1, 16),
        "runtime_s": 3.0,
        "ramp_s": 0.5,
        "file_size": GiB,
    },
    "quick": {
        "block_sizes": ("8k", "1M"),
        "iodepths": (1, 4, 16, 32),
        "seq_block_sizes": ("1M",),
        "seq_iodepths": (1,),
        "runtime_s": 1.0,
        "ramp_s": 0.2,
        "file_size": 256 * MiB,
    },
}


@dataclass(frozen=True)
class PlannedPoint:
    pattern: str  # "rand" or "seq"
    block_size: int
    iodepth: int

    @property
    def description(self) -> str:
        return describe(self.pattern, self.block_size, self.iodepth)

    def settings(self) -> dict[str, Scalar]:
        return {"pattern": self.pattern, "block_size": self.block_size, "iodepth": self.iodepth}


@dataclass(frozen=True)
class CalibrationPlan:
    points: tuple[PlannedPoint, ...]
    runtime_s: float
    ramp_s: float
    file_size: int
    preset: str = "custom"

    def estimate_seconds(self) -> float:
        """Wall time of the points (the layout of the file comes on top)."""
        return len(self.points) * (self.runtime_s + self.ramp_s + FIO_OVERHEAD_S)

    def to_dict(self) -> dict[str, object]:
        return {
            "preset": self.preset,
            "runtime_s": self.runtime_s,
            "ramp_s": self.ramp_s,
            "file_size": self.file_size,
            "points": [p.settings() for p in self.points],
        }


def make_plan(
    preset: str = "full",
    *,
    block_sizes: Sequence[int | str] | None = None,
    iodepths: Sequence[int] | None = None,
    seq_block_sizes: Sequence[int | str] | None = None,
    seq_iodepths: Sequence[int] | None = None,
    runtime_s: float | None = None,
    ramp_s: float | None = None,
    file_size: int | str | None = None,
) -> CalibrationPlan:
    """A preset ("full" or "quick") with any of its values overridden; ValueError on bad values."""
    if preset not in PRESETS:
        raise ValueError(f"preset: {preset!r} is not known; accepted: {', '.join(PRESETS)}")
    given = {
        "block_sizes": block_sizes,
        "iodepths": iodepths,
        "seq_block_sizes": seq_block_sizes,
        "seq_iodepths": seq_iodepths,
        "runtime_s": runtime_s,
        "ramp_s": ramp_s,
        "file_size": file_size,
    }
    v: dict[str, Any] = {k: PRESETS[preset][k] if value is None else value for k, value in given.items()}
    points = _points("rand", _block_sizes(v["block_sizes"], "block_sizes"), _iodepths(v["iodepths"], "iodepths"))
    points += _points(
        "seq", _block_sizes(v["seq_block_sizes"], "seq_block_sizes"), _iodepths(v["seq_iodepths"], "seq_iodepths")
    )
    if not points:
        raise ValueError("block_sizes, seq_block_sizes: the plan has no points; give at least one block size")
    size = _file_size(v["file_size"], max(p.block_size for p in points))
    runtime, ramp = _seconds(v["runtime_s"], "runtime_s", 0.0), _seconds(v["ramp_s"], "ramp_s", None)
    custom = any(value is not None for value in given.values())
    return CalibrationPlan(tuple(points), runtime, ramp, size, f"{preset}+custom" if custom else preset)


def _points(pattern: str, sizes: list[int], depths: list[int]) -> list[PlannedPoint]:
    return [PlannedPoint(pattern, bs, qd) for bs in sizes for qd in depths]


def _seconds(value: Any, name: str, above: float | None) -> float:
    """Seconds > `above` (or >= 0 when `above` is None)."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = float("nan")
    ok = seconds > above if above is not None else seconds >= 0
    if not ok:
        bound = f"> {above:g}" if above is not None else ">= 0"
        raise ValueError(f"{name}: {value!r} is not accepted; give seconds {bound} (e.g. 3)")
    return seconds


def _block_sizes(values: Iterable[int | str], name: str) -> list[int]:
    sizes = []
    for value in values:
        size = parse_size(value, name, positive=True)
        if size % SECTOR:
            raise ValueError(
                f"{name}: {value!r} is not accepted; direct I/O needs a multiple of {SECTOR} bytes (e.g. 4k, 8k, 1M)"
            )
        sizes.append(size)
    return sorted(set(sizes))


def _iodepths(values: Iterable[int], name: str) -> list[int]:
    depths = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: {value!r} is not accepted; queue depths are whole numbers >= 1 (e.g. 1, 16, 64)")
        depths.append(value)
    return sorted(set(depths))


def _file_size(value: int | str, largest_block: int) -> int:
    size = parse_size(value, "file_size", positive=True)
    if size < largest_block or size % SECTOR:
        raise ValueError(
            f"file_size: {value!r} is not accepted; give a multiple of {SECTOR} bytes at least as large "
            f"as the largest block size ({short_size(largest_block)}), e.g. 1G"
        )
    return size
