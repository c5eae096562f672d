"""A SQLite connection as engines/base.py's Session (its own module: the package's dialects narrow to it)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import apsw

from ..base import SessionBase

if TYPE_CHECKING:
    from . import SqliteEngine


class SqliteSession(SessionBase):
    """A SQLite connection as engines/base.py's Session (in this process: no server)."""

    def __init__(self, engine: SqliteEngine, conn: apsw.Connection):
        self.engine = engine
        self.conn = conn  # the apsw connection, for this package's own code
        self.backend_id = os.getpid()

    def execute(self, sql: str, params: Sequence[object] | None = None) -> list[tuple[Any, ...]]:
        return list(self.conn.execute(sql, tuple(params or ())).fetchall())

    def cancel(self) -> None:
        self.conn.interrupt()  # safe from another thread: the statement stops with SQLITE_INTERRUPT

    def close(self) -> None:
        self.engine._forget(self.conn)
