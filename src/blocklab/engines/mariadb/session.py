"""A MariaDB session as engines/base.py's Session: a PyMySQL connection to
blocklab's database (autocommit unless the caller says BEGIN), whose running
statement another connection can KILL."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pymysql

from ..base import SessionBase

if TYPE_CHECKING:
    from . import MariadbEngine


class MariadbSession(SessionBase):
    """A MariaDB connection as engines/base.py's Session (autocommit unless the caller says BEGIN)."""

    def __init__(self, engine: MariadbEngine, conn: pymysql.connections.Connection):
        self.engine = engine
        self.conn = conn  # the PyMySQL connection, for this package's own code
        self.backend_id = int(conn.thread_id())

    def execute(self, sql: str, params: Sequence[object] | None = None) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cur:
            cur.execute(sql, params)
            rows = list(cur.fetchall()) if cur.description else []
            while cur.nextset():  # a CALL's own status result
                pass
        return rows

    def cancel(self) -> None:
        """KILL QUERY from a connection of its own: this session's is busy."""
        with self.engine.sql_connect(session=False) as admin, admin.cursor() as cur:
            cur.execute("KILL QUERY %s", (self.backend_id,))

    def close(self) -> None:
        self.conn.close()
