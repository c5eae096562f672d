"""What SQLite can measure and how blocklab captions it (engines/base.py Capabilities)."""

from __future__ import annotations

from ..base import Capabilities, ServerKind

CAPABILITIES = Capabilities(
    # vfsstat per file type (db_reads, journal_writes, wal_write_bytes ...) and the page cache's own
    own_metrics=("db_reads", "db_read_bytes", "db_writes", "db_write_bytes", "db_syncs", "db_opens", "journal_", "wal_", "super_journal_", "subjournal_", "temp_db_", "temp_journal_", "transient_db_",
                 "cache_writes", "cache_spills"),
    write_counters=("journal_writes", "journal_write_bytes", "wal_writes", "wal_write_bytes", "cache_writes", "cache_spills"),
    servers=(ServerKind("SQLite", (3, 54), False),),
    lacks={
        "sysstats": "SQLite's query planner has no cost settings: its costs are fixed in the library, and ANALYZE "
        "statistics are about rows, not read times",
    },
)
