"""Engines: one file per engine behind the protocol in base.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .base import Engine, EngineError, KnobError


def make_engine(kind: str, *, dsn: str | None = None, allow_server_changes: bool = False, cache_dir: Path | None = None) -> Any:
    """A not-yet-started engine of this kind."""
    if kind == "postgres":
        from .postgres import PostgresEngine

        return PostgresEngine(dsn=dsn, cache_dir=cache_dir, allow_server_changes=allow_server_changes)
    if kind == "sqlite":
        if dsn:
            raise KnobError("engine sqlite takes no --dsn: it works on its own database file")
        from .sqlite import SqliteEngine

        return SqliteEngine(cache_dir=cache_dir)
    if kind == "mariadb":
        from .mariadb import MariadbEngine

        return MariadbEngine(dsn=dsn, cache_dir=cache_dir, allow_server_changes=allow_server_changes)
    if kind == "null":
        from .null import NullEngine

        return NullEngine()
    raise KnobError(f"unknown engine {kind!r}; accepted: postgres, sqlite, mariadb")


__all__ = ["Engine", "EngineError", "KnobError", "make_engine"]
