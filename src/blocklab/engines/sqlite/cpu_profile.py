"""SQLite's `cpu_profile` dialect: SQLite runs inside blocklab's own process (apsw),
so that process is the one sampled; its stacks hold the Python interpreter's
frames above SQLite's own (the loop driving the statement), which the report
shows as they are. apsw's extension carries the SQLite amalgamation with its
symbols: `--trace-function sqlite3BtreeInsert` probes it there."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import apsw

from ..base import ProfileTargets
from ..capabilities import DialectBase

if TYPE_CHECKING:
    from . import SqliteEngine


class ProfileProcesses(DialectBase):
    def __init__(self, engine: SqliteEngine):
        self.engine = engine

    def profile_targets(self) -> ProfileTargets:
        return ProfileTargets((os.getpid(),), "blocklab's own process, in which SQLite runs (apsw)", self.trace_binary())

    def trace_binary(self) -> str | None:
        return str(apsw.__file__)
