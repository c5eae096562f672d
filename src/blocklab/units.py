"""The ground floor: how blocklab reads and writes quantities.

Pure functions and tables that import nothing of blocklab, so that every
other module may use them without pulling a floor above it in:

- labels: a setting as people read it ("multiblock_read=16, checksum=on");
- sizes: ONE grammar for a size, whether a person typed it (`--set
  block_size=8k`, a calibration's block sizes) or an engine reported it
  (PostgreSQL's "128kB"): `8192`, `8k`, `8K`, `8kB`, `8KB`, `8KiB`, `8 kB` are
  all 8192 bytes. k, M, G and T are powers of 1024, as engines and fio count
  them; a decimal point is fine when the result is whole bytes (`1.5M`);
- numbers: one convention for large figures: SI prefixes with a lower-case k
  (`14.5 k`, `25.9 M`), about three significant digits, four-digit numbers
  written out (`1,450`);
- metrics: the unit and meaning of each metric blocklab records.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping


class UnitError(ValueError):
    """A value that is not a number or a size in blocklab's grammar; the message
    names the value and says what is accepted."""


# ---------------------------------------------------------------------- labels
def value_text(value: object) -> str:
    """A knob value as a label shows it: True -> 'on', 16 -> '16'."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def label_of(settings: Mapping[str, object]) -> str:
    """A setting as one label: 'multiblock_read=16, checksum=on'; '(defaults)' when empty."""
    return ", ".join(f"{k}={value_text(v)}" for k, v in settings.items()) or "(defaults)"


# ---------------------------------------------------------------------- sizes
KIB, MIB, GIB, TIB = 1024, 1024**2, 1024**3, 1024**4
_SIZE_FACTORS = {"": 1, "k": KIB, "m": MIB, "g": GIB, "t": TIB}
# a number, then nothing, B, or a prefix with an optional B or iB: 8192, 8192B, 8k, 8kB, 8KiB, 8 kB
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:([kmgt])(?:i?b)?|b)?\s*$", re.IGNORECASE)
SIZE_SPELLINGS = "bytes or a number with k, M, G or T (e.g. 8192, 8k, 8kB, 8KiB, 1M; k is 1024 bytes)"


def size_bytes(value: object) -> int | None:
    """The bytes a size stands for in the one grammar ('8k', '8KiB', '1.5M', 8192),
    or None when `value` is not a size or not a whole number of bytes."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float):
        return int(value) if value >= 0 and value.is_integer() else None
    m = _SIZE.match(str(value))
    if not m:
        return None
    exact = float(m.group(1)) * _SIZE_FACTORS[(m.group(2) or "").lower()]
    return int(exact) if exact.is_integer() else None


def reported_size(text: object) -> int | None:
    """A size as an engine reports it, with its unit ('128kB', '8 kB'); None for a
    bare number, which counts something (blocks, pages) rather than bytes."""
    m = _SIZE.match(str(text))
    if not m or not str(text).strip()[len(m.group(1)):].strip():
        return None
    return size_bytes(text)


def parse_size(value: object, what: str = "size", *, positive: bool = False) -> int:
    """`size_bytes`, or UnitError naming `what` and the grammar. `positive`: 0 is refused too."""
    size = size_bytes(value)
    if size is None:
        raise UnitError(f"{what}: cannot read {value!r} as a size; give {SIZE_SPELLINGS}")
    if positive and size <= 0:
        raise UnitError(f"{what}: {value!r} must be more than 0 bytes")
    return size


def parse_count(value: object) -> int | None:
    """A whole number written as one (16, 16.0, '16'), or None. Sizes are not counts."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    text = str(value).strip().replace(" ", "")
    return int(text) if text.isdigit() else None


def fmt_bytes(n: float) -> str:
    """1048576 -> '1 MB', 131072 -> '128 kB', 1536 -> '1.5 kB' (binary multiples, as engines print them)."""
    for unit, size in (("TB", TIB), ("GB", GIB), ("MB", MIB), ("kB", KIB)):
        if n >= size:
            v = n / size
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{n:.0f} B"


def short_size(size: int) -> str:
    """4096 -> '4k', 1048576 -> '1M', 1536 -> '1536': the shortest spelling that
    parse_size reads back (fio's style, for job names and block-size lists)."""
    for suffix, unit in (("G", GIB), ("M", MIB), ("k", KIB)):
        if size and size % unit == 0:
            return f"{size // unit}{suffix}"
    return str(size)


def describe_size(value: object, size: int | None) -> str:
    """A knob value next to the bytes it stands for: the size alone when the value
    is already in bytes (16384 -> '16 kB'), both when it counts blocks
    (16 -> '16 (128 kB)'), the value as it is when it is not a size."""
    if isinstance(value, bool):
        return value_text(value)
    if size is None:
        return str(value)
    if str(size) == str(value):
        return fmt_bytes(size)
    return f"{value} ({fmt_bytes(size)})"


# ---------------------------------------------------------------------- numbers
# Large figures get an SI prefix from 10,000 on: 1,450 MB/s stays as it is, 14,500 -> 14.5 k.
_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_PREFIX_FROM = 1e4
MISSING = "–"  # a figure not measured (not 0)


def fmt_number(x: float) -> str:
    """An exact figure with thousands separators: 1048576 -> '1,048,576', 0.5 -> '0.5'."""
    return f"{int(x):,}" if float(x).is_integer() else f"{x:,}"


def scale_of(value: float) -> tuple[float, str]:
    """(factor, prefix) to write `value` with: (1e6, 'M') for 25,900,000; (1, '') below 10,000."""
    a = abs(value)
    if a >= _PREFIX_FROM:
        for factor, prefix in _PREFIXES:
            if a >= factor:
                return factor, prefix
    return 1.0, ""


def _decimals(scaled: float) -> int:
    """Decimals for about three significant digits."""
    a = abs(scaled)
    if a == 0 or not math.isfinite(a) or a >= 100:
        return 0
    return 2 - math.floor(math.log10(a))


def _tiny(value: float) -> bool:
    """Below 0.001 figures are written in scientific notation."""
    return 0 < abs(value) < 1e-3


def _with_unit(number: str, prefix: str, unit: str) -> str:
    return " ".join(part for part in (number, prefix, unit) if part)


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def human(value: float | None, unit: str = "") -> str:
    """About three significant digits, an SI prefix from 10,000 on:
    25_900_000 -> '25.9 M', (1234, 'MB/s') -> '1,234 MB/s', 0.01234 -> '0.0123',
    3.86e-8 -> '3.86e-08'; '–' for None and NaN (nothing measured)."""
    if value is None or not _finite(value):
        return MISSING
    if _tiny(value):
        return _with_unit(f"{value:.2e}", "", unit)
    factor, prefix = scale_of(value)
    scaled = value / factor
    return _with_unit(f"{scaled:,.{_decimals(scaled)}f}", prefix, unit)


def with_interval(value: float, low: float, high: float, unit: str = "") -> str:
    """'25.9 M rows/s [25.1, 26.4]': the interval on the value's scale, with
    enough decimals that bounds that differ from the value do not look equal."""
    if value is None or not _finite(value):
        return MISSING
    bounds = _finite(low) and _finite(high)
    if _tiny(value):
        text = _with_unit(f"{value:.2e}", "", unit)
        return text + (f" [{low:.2e}, {high:.2e}]" if bounds else "")
    factor, prefix = scale_of(value)
    v, lo, hi = value / factor, low / factor, high / factor
    d = _decimals(v)
    for _ in range(2):
        same_lo = f"{lo:.{d}f}" == f"{v:.{d}f}" and lo != v
        same_hi = f"{hi:.{d}f}" == f"{v:.{d}f}" and hi != v
        if not (same_lo or same_hi):
            break
        d += 1
    text = _with_unit(f"{v:,.{d}f}", prefix, unit)
    return text + (f" [{lo:,.{d}f}, {hi:,.{d}f}]" if bounds else "")


def fmt_factor(factor: float, low: float = math.nan, high: float = math.nan, word: str = "") -> str:
    """'3.6x slower [3.4, 3.8]' (the interval left out when undefined)."""
    d = (2 if factor < 2 else 1 if factor < 10 else 0) if math.isfinite(factor) else 0
    text = f"{factor:.{d}f}x" if math.isfinite(factor) else "?x"
    if word:
        text += f" {word}"
    if math.isfinite(low) and math.isfinite(high):
        text += f" [{low:.{d}f}, {high:.{d}f}]"
    return text


def tick_labels(values: list[float]) -> list[str]:
    """Axis tick labels on one scale, as few decimals as the ticks need: 0, 2.5 M, 5 M, 17.5 M."""
    top = max((abs(v) for v in values if math.isfinite(v)), default=0.0)
    factor, prefix = scale_of(top)
    out = []
    for v in values:
        scaled = v / factor
        text = f"{scaled:,.3f}".rstrip("0").rstrip(".") if scaled != 0 else "0"
        out.append(_with_unit(text, prefix, "") if scaled != 0 else "0")
    return out


# ---------------------------------------------------------------------- metrics
# metric -> (unit, what it is). Metrics not listed are shown by their own name, without a unit.
METRICS: dict[str, tuple[str, str]] = {
    "rows_per_s": ("rows/s", "throughput"),
    "mb_per_s": ("MB/s", "read bandwidth"),
    "avg_read_kb": ("kB", "average read size"),
    "elapsed_s": ("s", "elapsed time"),
    "iops": ("IOPS", "I/O operations per second"),
    "reads": ("", "read calls"),
    "read_bytes": ("B", "bytes read"),
    "read_time_ms": ("ms", "time in reads"),
    "server_cpu_s": ("s", "server CPU"),
    "rows": ("", "rows"),
    "relation_bytes": ("B", "table size"),
    "cold_ratio": ("", "physical bytes / table size"),
    "read_iops": ("IOPS", "read I/O requests per second"),
    "db_time_s": ("s", "DB time"),
}
# the metrics worth a column in a per-setting table, in this order, when present
HEADLINE_METRICS = ("rows_per_s", "mb_per_s", "iops", "avg_read_kb", "elapsed_s", "reads", "read_time_ms", "cold_ratio")
# short column headings for those tables
SHORT_NAMES = {
    "rows_per_s": "rows/s",
    "mb_per_s": "MB/s",
    "iops": "IOPS",
    "avg_read_kb": "avg read (kB)",
    "elapsed_s": "elapsed (s)",
    "reads": "reads",
    "read_time_ms": "time in reads (ms)",
    "cold_ratio": "bytes read / table size",
}
# a second-by-second series -> what its panel says it is
SERIES_TITLES = {
    "device_read_iops": "read IOPS (device)",
    "device_mb_per_s": "MB/s (device)",
    "device_write_iops": "write IOPS (device)",
    "cpu_busy_pct": "CPU busy %",
}


def unit_of(metric: str) -> str:
    """'rows/s' for rows_per_s; '' for a metric without a unit or not listed."""
    return METRICS.get(metric, ("", ""))[0]


def metric_title(metric: str) -> str:
    """'throughput' for rows_per_s; an unlisted metric by its own name, words spaced."""
    return METRICS.get(metric, ("", metric.replace("_", " ")))[1]


def first_upper(text: str) -> str:
    """'DB time' stays 'DB time', 'read IOPS' -> 'Read IOPS' (str.capitalize lowers the rest: 'Db time')."""
    return text[:1].upper() + text[1:]
