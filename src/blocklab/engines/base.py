"""The narrow protocol every engine implements, and the generic knob vocabulary.

An engine is a plug-in (like fio's ioengine_ops): the runner only ever talks to
it through `Engine`. Capabilities are data (`KnobInfo`), read from the engine
itself where the engine can tell (PostgreSQL's pg_settings), so validation can
refuse a knob or value before anything runs.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Iterable, Protocol, runtime_checkable


class ApplyClass(enum.IntEnum):
    """How a knob change takes effect, cheapest first (the plan orders by it)."""

    SESSION = 0  # SET in the measuring session
    RELOAD = 1  # server-wide, no restart
    RESTART = 2  # server restart
    REINIT = 3  # new data directory or file, data set reloaded

    @property
    def label(self) -> str:
        return self.name.lower()


# The generic vocabulary of DESIGN.md: name -> what it means.
GENERIC_KNOBS: dict[str, str] = {
    "block_size": "database block (page) size in bytes",
    "multiblock_read": "blocks per multiblock read of a full scan",
    "checksum": "data block checksums",
    "block_checking": "logical block checking",
    "writers": "background writer / I/O worker processes",
    "io_slaves": "read I/O helper threads",
    "direct_io": "bypass the OS page cache for data files",
    "buffer_cache": "engine buffer cache size",
}


class KnobError(ValueError):
    """A knob name or value the engine does not accept. The message says what it does."""


class EngineError(RuntimeError):
    """The engine failed to start, stop or run something."""


@dataclass(frozen=True)
class KnobInfo:
    """What one engine accepts for one knob.

    `kind` is one of: integer, enum, bool, size (an integer in `unit` steps).
    `display` turns a value into the human form shown next to it (e.g. "128 kB").
    """

    native: str  # the engine's own parameter name
    generic: str | None  # the generic name it implements, if any
    kind: str
    apply: ApplyClass
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    unit: str = ""
    unit_bytes: int | None = None  # bytes per unit, for sizes counted in blocks
    default: Any = None
    description: str = ""

    def accepted(self) -> str:
        """A short phrase saying what values this knob takes."""
        if self.kind == "bool":
            return "on or off"
        if self.choices:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.minimum is not None and self.maximum is not None:
            unit = f" ({self.unit})" if self.unit else ""
            return f"an integer from {fmt_number(self.minimum)} to {fmt_number(self.maximum)}{unit}"
        return f"a {self.kind}"

    def normalise(self, value: Any, engine: str) -> Any:
        """Check one asked value; return it in canonical form or raise KnobError."""
        label = self.generic or self.native
        where = f"knob {label!r} ({engine} {self.native})"
        if self.kind == "bool":
            return parse_bool(value, where)
        if self.kind == "enum":
            text = str(value)
            for choice in self.choices:
                if text.lower() == choice.lower():
                    return choice
            raise KnobError(f"{where}: {value!r} is not accepted; accepted: {self.accepted()}")
        if self.kind in ("integer", "size"):
            number = parse_int(value, where, self)
            if self.minimum is not None and number < self.minimum or (
                self.maximum is not None and number > self.maximum
            ):
                raise KnobError(f"{where}: {value!r} is out of range; accepted: {self.accepted()}")
            return number
        return value

    def describe_value(self, value: Any) -> str:
        """Value as a person reads it: 16 -> '16 (128 kB)' for a block-counted size."""
        if isinstance(value, bool):
            return "on" if value else "off"
        if self.unit_bytes and isinstance(value, int):
            return f"{value} ({fmt_bytes(value * self.unit_bytes)})"
        return str(value)


def parse_bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("on", "true", "yes", "1"):
        return True
    if text in ("off", "false", "no", "0"):
        return False
    raise KnobError(f"{where}: {value!r} is not accepted; accepted: on or off")


_SIZE_SUFFIX = {"k": 1024, "kb": 1024, "m": 1024**2, "mb": 1024**2, "g": 1024**3, "gb": 1024**3}


def parse_int(value: Any, where: str, info: KnobInfo | None = None) -> int:
    """An integer, or for byte-sized knobs a size like '64k' or '128kB'."""
    if isinstance(value, bool):
        raise KnobError(f"{where}: {value!r} is not accepted; accepted: {info.accepted() if info else 'an integer'}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    text = str(value).strip().lower().replace(" ", "")
    if text.isdigit():
        return int(text)
    for suffix, factor in sorted(_SIZE_SUFFIX.items(), key=lambda kv: -len(kv[0])):
        if text.endswith(suffix) and text[: -len(suffix)].isdigit():
            size = int(text[: -len(suffix)]) * factor
            if info and info.unit_bytes:
                if size % info.unit_bytes:
                    break
                return size // info.unit_bytes
            if info and info.unit == "bytes":
                return size
            break
    accepted = info.accepted() if info else "an integer"
    raise KnobError(f"{where}: {value!r} is not accepted; accepted: {accepted}")


def fmt_bytes(n: float) -> str:
    for unit, size in (("GB", 1024**3), ("MB", 1024**2), ("kB", 1024)):
        if n >= size:
            v = n / size
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{n:.0f} B"


def fmt_number(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:,}"


@dataclass
class Relation:
    """A table (or index) a workload reads, for cache control and size checks."""

    name: str
    bytes: int = 0


@dataclass
class EngineInfo:
    """Who the engine is, recorded in environment.json."""

    engine: str
    version: str
    mode: str  # embedded | dsn | file
    data_dir: str | None
    settings: dict[str, str] = field(default_factory=dict)  # full parameter set
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Engine(Protocol):
    """What the runner needs from an engine. One file per engine implements it."""

    name: str  # "postgres", "sqlite", "mariadb", "null"

    # lifecycle ------------------------------------------------------------
    def start(self) -> None:
        """Provision (if embedded) and start; idempotent."""

    def stop(self) -> None:
        """Stop and restore anything changed on a server that is not ours; idempotent."""

    # capabilities ---------------------------------------------------------
    def knob(self, name: str) -> KnobInfo:
        """Resolve a generic or native knob name, or raise KnobError saying what exists."""

    def check_settings(self, settings: dict[str, Any], *, partial: bool = False) -> dict[str, Any]:
        """Validate a whole setting (knob -> value) before anything runs; canonical values.
        `partial`: other swept knobs are not in `settings` yet (one value checked
        on its own), so rules that join several knobs wait for the whole setting."""

    # settings -------------------------------------------------------------
    def apply(self, settings: dict[str, Any]) -> dict[str, str]:
        """Make `settings` current (restarting or reinitialising as needed) and return
        what the engine reports for each knob afterwards (SHOW, PRAGMA, @@var)."""

    def info(self) -> EngineInfo:
        """Version, mode, data directory and the full parameter set."""

    # data and cache -------------------------------------------------------
    def data_dir(self) -> str | None:
        """Where the data files live (for device statistics), if known."""

    def evict(self, relations: Iterable[str]) -> dict[str, Any]:
        """Empty the engine cache and the OS page cache for these relations.
        Returns what was done, e.g. {"engine_evicted": n, "os_dropped": True}."""

    def io_counters(self) -> dict[str, float]:
        """Cumulative physical I/O counters of the engine (monotonic)."""
