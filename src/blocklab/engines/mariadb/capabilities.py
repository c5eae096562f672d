"""What MariaDB can measure and how blocklab captions it (engines/base.py Capabilities)."""

from __future__ import annotations

from ..base import Capabilities, Counter, ServerKind, TimeProfile

CAPABILITIES = Capabilities(
    own_metrics=("innodb.", "data_file.", "buffer_pool_"),
    page_writers=(
        Counter("innodb.buffer_pool_wait_free", "free-page waits"),  # a session waited for a clean page
        Counter("innodb.pages_written", "pages written"),
        Counter("innodb.buffer_pool_pages_lru_flushed", "LRU-flushed pages"),
    ),
    read_latency_source="performance_schema",
    time_profile=TimeProfile(
        method="from performance_schema's wait timers of each session's server thread (measured, not sampled); "
        "CPU is the elapsed time the waits leave, at most the thread's on-CPU + run-queue time, "
        "and UNACCOUNTED the rest (uninstrumented waits)",
        cpu="waits timed by performance_schema; CPU = elapsed less the waits, at most on-CPU + run queue",
        off="no time profile: performance_schema is off",
    ),
    servers=(
        ServerKind("MariaDB 10.11, private", (10, 11), False),
        ServerKind("MariaDB 10.11, --dsn", (10, 11), True),
    ),
    lacks={
        "sysstats": "MariaDB 10.11's optimizer has no disk read costs to set (SHOW VARIABLES LIKE 'optimizer%' lists "
        "search depth, pruning and switches only); optimizer_disk_read_cost and its kin came in MariaDB 11.0",
    },
)
