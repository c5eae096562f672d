"""Engines are plug-ins, as fio's ioengines are: one package per engine under
engines/ (postgres/, sqlite/, mariadb/, null/, ...), each exporting its class
as ENGINE. The registry below finds them; nothing else in blocklab lists
engine names. An engine from elsewhere (a test, another package) joins with
`register(cls)` or the entry point group `blocklab.engines`.

    engine = make_engine("postgres", cache_dir=...)   # not started yet
    engine_class("mariadb").dialects                     # what it can run
"""

from __future__ import annotations

import importlib
import pkgutil
from importlib import metadata
from pathlib import Path

from .base import Capabilities, Engine, EngineError, KnobError

DEFAULT_ENGINE = "postgres"
ENTRY_POINT_GROUP = "blocklab.engines"
_REQUIRED = (
    "name", "display", "native_prefix", "summary", "accepts_dsn", "dialects", "change_seconds", "install_bytes", "capabilities",
)

_registered: dict[str, type[Engine]] = {}
_discovered = False


def register(cls: type[Engine]) -> type[Engine]:
    """Add an engine class (usable as a decorator). Its static capabilities are
    checked now, so a broken plug-in fails at load, not in the middle of a run."""
    missing = [attr for attr in (*_REQUIRED, *_protocol_methods()) if not hasattr(cls, attr)]
    if missing:
        raise EngineError(f"engine class {cls.__qualname__} lacks {', '.join(missing)}: see engines/base.py Engine")
    if not cls.name or not cls.native_prefix.endswith("."):
        raise EngineError(f"engine class {cls.__qualname__}: name must be set and native_prefix end with '.'")
    _registered[cls.name] = cls
    return cls


def _protocol_methods() -> list[str]:
    """Every method the Engine protocol names: an engine without one would fail in a run."""
    return [name for name, value in vars(Engine).items()
            if (callable(value) or isinstance(value, classmethod)) and not name.startswith("_")]


def _discover() -> None:
    global _discovered
    if _discovered:
        return
    _discovered = True
    for module in pkgutil.iter_modules(__path__):
        if not module.ispkg:
            continue
        cls = getattr(importlib.import_module(f"{__name__}.{module.name}"), "ENGINE", None)
        if cls is not None:
            register(cls)
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        register(entry.load())


def available(*, listed_only: bool = True) -> list[str]:
    """Engine names; `listed_only` leaves out engines only tests use (the null engine)."""
    _discover()
    return sorted(n for n, cls in _registered.items() if not listed_only or getattr(cls, "listed", True))


def engine_class(kind: str) -> type[Engine]:
    _discover()
    cls = _registered.get(kind)
    if cls is None:
        raise KnobError(f"unknown engine {kind!r}; accepted: {', '.join(available())}")
    return cls


def capabilities_of(kind: str | None) -> Capabilities:
    """What the engine of this name declares it can measure; an empty record for a
    name no engine here has (a run imported from elsewhere)."""
    if not kind or kind not in available(listed_only=False):
        return Capabilities()
    capabilities: Capabilities = engine_class(kind).capabilities
    return capabilities


def make_engine(
    kind: str, *, dsn: str | None = None, allow_server_changes: bool = False, cache_dir: Path | None = None
) -> Engine:
    """A not-yet-started engine of this kind."""
    cls = engine_class(kind)
    if not cls.accepts_dsn:
        if dsn:
            raise KnobError(f"engine {kind} takes no --dsn: {cls.summary}")
        engine: Engine = cls(cache_dir=cache_dir)
        return engine
    engine = cls(dsn=dsn, cache_dir=cache_dir, allow_server_changes=allow_server_changes)
    return engine


__all__ = ["DEFAULT_ENGINE", "Capabilities", "Engine", "capabilities_of", "EngineError", "KnobError", "available", "engine_class", "make_engine", "register"]
