"""What PostgreSQL can measure and how blocklab captions it (engines/base.py Capabilities)."""

from __future__ import annotations

from ..base import Capabilities, Counter, ServerKind, TimeProfile

CAPABILITIES = Capabilities(
    own_metrics=("backend_", "bgwriter_", "checkpointer_", "io_worker_", "relation_writes", "relation_reads", "wal_"),
    write_counters=("evictions", "wal_writes", "wal_write_bytes"),
    page_writers=(
        Counter("backend_writes", "backend writes"),  # pages a session wrote itself to get a free buffer
        Counter("backend_write_share", "backend share of page writes", share=True),
        Counter("bgwriter_writes", "bgwriter writes"),
    ),
    read_latency_source="pg_stat_io",
    time_profile=TimeProfile(
        method="from wait-event sampling of blocklab's sessions every 10 ms; UNACCOUNTED is elapsed minus sampled time",
        cpu="CPU = sampled active without a wait event (on a CPU or queued for one)",
    ),
    servers=(
        ServerKind("PostgreSQL 18, embedded", (18, 0), False),
        ServerKind("PostgreSQL 18, --dsn", (18, 0), True),
        ServerKind("PostgreSQL 17, --dsn", (17, 0), True),
        ServerKind("PostgreSQL 16, --dsn", (16, 0), True),
        ServerKind("PostgreSQL 15, --dsn", (15, 0), True),
    ),
)
