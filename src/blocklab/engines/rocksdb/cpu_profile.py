"""RocksDB's `cpu_profile` dialect: the cell's db_bench processes. Each is spawned
held at a gate before the probes open (bench.py) and execs db_bench keeping its
pid, so perf attached to it samples db_bench from its first instruction. Debian's
db_bench is stripped: the profile counts the samples it cannot name."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base import ProfileTargets
from ..capabilities import DialectBase
from .flags import binary_path

if TYPE_CHECKING:
    from . import RocksDbEngine


class ProfileProcesses(DialectBase):
    def __init__(self, engine: RocksDbEngine):
        self.engine = engine

    def profile_targets(self) -> ProfileTargets:
        return ProfileTargets(tuple(self.engine.server_pids()), "the cell's db_bench processes (all their threads)",
                              self.trace_binary())

    def trace_binary(self) -> str | None:
        return binary_path()
