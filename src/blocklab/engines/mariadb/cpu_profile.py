"""MariaDB's `cpu_profile` dialect: blocklab's private mariadbd (every thread of
it). Debian's mariadbd is stripped: most samples fall in code perf cannot name
(the profile counts them and the report says their share) unless the debug
symbols (mariadb-server-core-dbgsym) are installed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base import EngineError, ProfileTargets
from ..capabilities import DialectBase
from .instance import mariadbd_path

if TYPE_CHECKING:
    from . import MariadbEngine


class ProfileProcesses(DialectBase):
    def __init__(self, engine: MariadbEngine):
        self.engine = engine

    def profile_targets(self) -> ProfileTargets:
        if self.engine.mode != "embedded":
            raise EngineError("a CPU profile needs blocklab's own mariadbd (a server given by --dsn is not ours to sample)")
        return ProfileTargets(tuple(self.engine.server_pids()), "blocklab's mariadbd (all its threads)", self.trace_binary())

    def trace_binary(self) -> str | None:
        return mariadbd_path()
