"""What RocksDB (through db_bench) can measure and how blocklab captions it (engines/base.py Capabilities)."""

from __future__ import annotations

from ..base import Capabilities, ServerKind

CAPABILITIES = Capabilities(
    own_metrics=("rocksdb.", "db_bench."),
    read_latency_source="RocksDB's rocksdb.sst.read.micros",
    servers=(ServerKind("RocksDB 7.8 (db_bench)", (7, 8), False),),
    lacks={
        "sysstats": "RocksDB (through db_bench) is a key-value store with no query optimizer: there are no costs to set",
    },
)
