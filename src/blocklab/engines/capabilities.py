"""What an engine declares it can do, as data (DESIGN.md: "Optional capabilities
are data the engine declares", as fio's ioengines carry flags): its Capabilities
record, the DialectBase every dialect derives from, and the check that a dialect
implements the protocol a workload or feature names. The core asks these; it
never compares an engine's name nor guesses an engine from its metric keys."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar


@dataclass(frozen=True)
class Counter:
    """One of an engine's own counters, as a summary line names it."""

    key: str  # the metric key its io_window leaves in a result row
    caption: str  # how a person reads it: "free-page waits"
    share: bool = False  # a fraction, shown as a percentage


@dataclass(frozen=True)
class TimeProfile:
    """How an engine's session profiler attributes a session's time (captions)."""

    method: str  # a figure's caption: where the time by class comes from
    cpu: str  # a table's caption: what its CPU line means
    off: str = ""  # what a cell without a profile says (the instrument was off)


@dataclass(frozen=True)
class ServerKind:
    """A kind of server people have, as a column of the README's version table."""

    label: str  # "PostgreSQL 16, --dsn"
    version: tuple[int, ...]
    dsn: bool  # someone else's server (--dsn), or blocklab's own


@dataclass(frozen=True)
class Capabilities:
    """What an engine can measure and how to caption it, declared by the engine
    (as fio's ioengines carry flags). The core asks this record; it never
    compares the engine's name nor guesses the engine from its metric keys."""

    # the engine's own metric keys or key prefixes ("innodb.", "journal_"): code
    # outside the engine's package never names them (tests/test_engine_plugin.py)
    own_metrics: tuple[str, ...] = ()
    # its own I/O counter deltas a write workload keeps beside the common ones
    write_counters: tuple[str, ...] = ()
    # who wrote the pages under an update load, in the order a summary line names them
    page_writers: tuple[Counter, ...] = ()
    # where its read times come from (a latency axis names the clock); "" if it has none
    read_latency_source: str = ""
    time_profile: TimeProfile | None = None  # None: no session profiler
    # the kinds of server the README's version table shows for it
    servers: tuple[ServerKind, ...] = ()
    # workloads or features it has no dialect for, and why (a refusal says it)
    lacks: Mapping[str, str] = field(default_factory=dict)

    def page_writer_text(self, metrics: Mapping[str, float]) -> str:
        """'backend writes 12, of page writes 3%, bgwriter 40' from a row's metrics."""
        parts = []
        for c in self.page_writers:
            value = float(metrics.get(c.key, 0.0))
            parts.append(f"{c.caption} {value:.0%}" if c.share else f"{c.caption} {value:,.0f}")
        return ", ".join(parts)

    def why_not(self, feature: str) -> str:
        """Why the engine has no dialect for `feature` ('' when it does not say)."""
        return str(self.lacks.get(feature, ""))


class DialectBase:
    """What every dialect (an engine's implementation of a workload's or a
    feature's protocol) may declare; the defaults are "nothing special"."""

    bytes_per_row: ClassVar[float | None] = None  # on-disk bytes of a row here (None: the workload's guess)
    # workload options this dialect has no use for: name -> why (refused unless left at their default)
    refused_options: ClassVar[Mapping[str, str]] = {}
    # options it honours at one value only: name -> (that value, why)
    required_options: ClassVar[Mapping[str, tuple[object, str]]] = {}


def protocol_methods(protocol: type) -> list[str]:
    """The methods a dialect Protocol asks for (its own, public ones)."""
    return sorted(name for name, member in vars(protocol).items() if not name.startswith("_") and inspect.isfunction(member))


def protocol_attributes(protocol: type) -> list[str]:
    """The class attributes a dialect Protocol declares (rows_per_s: ClassVar[float])."""
    return sorted(name for name in inspect.get_annotations(protocol) if not name.startswith("_"))


def missing_methods(dialect_class: type, protocol: type) -> list[str]:
    """What `dialect_class` lacks of `protocol`, methods and declared class
    attributes (empty: it implements it). The registry's check of a plug-in,
    made before anything runs."""
    lacking = [m for m in protocol_methods(protocol) if not callable(getattr(dialect_class, m, None))]
    return lacking + [a for a in protocol_attributes(protocol) if not hasattr(dialect_class, a)]
