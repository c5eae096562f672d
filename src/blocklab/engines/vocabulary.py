"""The generic knob vocabulary: what a knob is on an engine (`KnobInfo`), how a
change of it takes effect (`ApplyClass`), how an asked value is checked and put
in canonical form (sizes in blocklab's one grammar, units.py), and the words of
DESIGN.md that every engine maps onto its own parameters (`GENERIC_KNOBS`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from ..units import describe_size, fmt_number, parse_count, size_bytes


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
    "read_ahead": "the OS read-ahead window of the data's disk, in kB (the multiblock read of an engine that has none)",
}


class KnobError(ValueError):
    """A knob name or value the engine does not accept. The message says what it does."""


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
    default: object = None
    description: str = ""
    # How a value reads for the native parameter, declared by the engine package:
    # exact values ("64" -> "read-ahead off" for InnoDB's innodb_read_ahead_threshold)
    # and a template with {value} for the others ("read-ahead after {value} of 64 pages").
    readings: tuple[tuple[str, str], ...] = ()
    reading: str = ""

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

    def normalise(self, value: object, engine: str, name: str | None = None) -> Any:
        """Check one asked value; return it in canonical form or raise KnobError
        naming the knob as it was given (`name`)."""
        label = name or self.generic or self.native
        where = f"knob {label!r} ({engine} {self.native})"
        if self.kind == "bool":
            return parse_bool(value, where)
        if self.kind == "enum":
            size = size_bytes(value) if self.unit == "bytes" else None  # a page size given as '8k'
            text = str(value) if size is None else str(size)
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

    def size_bytes(self, value: object) -> int | None:
        """The bytes a value stands for when this knob is a size (16384 for a
        page size of 16384, 131072 for 16 blocks of 8 kB); None otherwise."""
        if isinstance(value, bool):
            return None
        number = value if isinstance(value, int) else int(str(value)) if str(value).isdigit() else None
        if number is None or number < 0:  # -1 is a setting's "auto", not a size
            return None
        if self.unit_bytes:
            return number * self.unit_bytes
        return number if self.unit == "bytes" else None

    def describe_value(self, value: object) -> str:
        """Value as a person writes it: a page size of 16384 -> '16 kB';
        16 blocks of 8 kB -> '16 (128 kB)'; True -> 'on'."""
        if isinstance(value, bool):
            return "on" if value else "off"
        text = describe_size(value, self.size_bytes(value))
        meaning = self.meaning(value)
        if not meaning:
            return text
        return f"{text[:-1]}; {meaning})" if text.endswith(")") else f"{text} ({meaning})"

    def meaning(self, value: object) -> str:
        """What `value` does to the native parameter, when the engine says ('' otherwise)."""
        exact = dict(self.readings).get(str(value))
        if exact:
            return exact
        return self.reading.format(value=value) if self.reading else ""


def parse_bool(value: object, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("on", "true", "yes", "1"):
        return True
    if text in ("off", "false", "no", "0"):
        return False
    raise KnobError(f"{where}: {value!r} is not accepted; accepted: on or off")


def parse_int(value: object, where: str, info: KnobInfo | None = None) -> int:
    """An integer in the knob's own unit (16 blocks, 16384 bytes), or for a knob
    counted in bytes or blocks a size in blocklab's one size grammar ('128k',
    '128kB', '128KiB'; units.py), converted into that unit."""
    number = parse_count(value)
    if number is not None:
        return number
    size = None if isinstance(value, (bool, int, float)) else size_bytes(value)
    if size is not None and info is not None:
        if info.unit_bytes and size % info.unit_bytes == 0:
            return size // info.unit_bytes
        if info.unit == "bytes":
            return size
    accepted = info.accepted() if info else "an integer"
    raise KnobError(f"{where}: {value!r} is not accepted; accepted: {accepted}")
