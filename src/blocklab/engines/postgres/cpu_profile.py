"""PostgreSQL's `cpu_profile` dialect: which processes a CPU profile samples and
which binary `--trace-function` probes (engines/base.py CpuProfileDialect).

The server processes are the postmaster's children that pg_stat_activity lists
(client backends, the checkpointer, the background writer, the WAL writer, I/O
workers) and the postmaster itself, so that a process it forks during the
window (a parallel worker) is followed by perf too. The embedded server's
binary is not stripped: its functions have names (about 10,400 text symbols).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base import EngineError, ProfileTargets
from ..capabilities import DialectBase
from .instance import pg_bin

if TYPE_CHECKING:
    from . import PostgresEngine


class ProfileProcesses(DialectBase):
    def __init__(self, engine: PostgresEngine):
        self.engine = engine

    def profile_targets(self) -> ProfileTargets:
        if self.engine.mode != "embedded":
            raise EngineError("a CPU profile needs blocklab's own PostgreSQL (a server given by --dsn is not ours to sample)")
        pids = list(self.engine.server_pids())
        postmaster = self.engine.cluster.postmaster_pid()
        if postmaster is not None and postmaster not in pids:
            pids.append(postmaster)
        return ProfileTargets(tuple(pids), "PostgreSQL's server processes (the postmaster and its children: backends, "
                              "checkpointer, background writer, WAL writer, I/O workers)", self.trace_binary())

    def trace_binary(self) -> str | None:
        return str(pg_bin() / "postgres")
