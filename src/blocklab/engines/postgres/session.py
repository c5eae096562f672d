"""A PostgreSQL session as engines/base.py's Session: a psycopg connection in
autocommit mode (each statement its own transaction unless the caller says
BEGIN), cancellable from another thread."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from ..base import SessionBase


class PgSession(SessionBase):
    read_only_guard = False  # the sql workload's sessions on a DSN: READ ONLY checked before each statement (sqlscript.py)

    def __init__(self, conn: psycopg.Connection):
        self.conn = conn  # the psycopg connection, for this package's own code
        self.backend_id = int(conn.info.backend_pid)
        self.prepared: dict[str, bytes] = {}  # statement text -> its prepared name (the sql workload's, sqlscript.py)

    def execute(self, sql: str, params: Sequence[object] | None = None) -> list[tuple[Any, ...]]:
        cur = self.conn.execute(sql, params)  # our SQL text, parameters bound by psycopg
        return list(cur.fetchall()) if cur.description else []

    def cancel(self) -> None:
        self.conn.cancel()  # psycopg 3: safe from another thread while a statement runs

    def close(self) -> None:
        self.conn.close()
