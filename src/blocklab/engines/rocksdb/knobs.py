"""RocksDB's knobs: the generic vocabulary mapped onto db_bench flags, every
other db_bench flag as a native knob (`rocksdb.NAME`), how a change applies,
and the rules db_bench would otherwise enforce late or silently.

Apply classes. Each cell runs a fresh db_bench process, so a flag that acts
only while a process runs (a cache size, direct reads, readahead, background
jobs) is `session`: the next process simply gets it. A flag that shapes the
files of the data set (block size, checksum type, compression, key and value
sizes, bloom filter, format version, level sizes ...) is `reinit`: the data
set is built again under it (a database per combination, kept and reused).
The runtime list below is curated; every other flag counts as a build flag,
which is safe: a flag wrongly held to be one costs a rebuild, never a
measurement of files made under other settings.

Checksums. db_bench takes `--checksum_type` as an int, RocksDB's ChecksumType:
0 kNoChecksum, 1 kCRC32c, 2 kxxHash, 3 kxxHash64, 4 kXXH3 (the default).
The generic knob takes either spelling (`kCRC32c` or `crc32c`, or the number)
and records the short name, so `none` is the "checksum off" the overhead
analysis compares against.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..vocabulary import ApplyClass, KnobError, KnobInfo, parse_bool, parse_int
from .flags import INT_RANGES, Flag, FlagTable, flag_text

PREFIX = "rocksdb."
MIN_BLOCK, MAX_BLOCK = 512, 1 << 20
INT32_MAX = 2**31 - 1

# canonical name -> (RocksDB's ChecksumType, db_bench --checksum_type)
CHECKSUMS: dict[str, tuple[str, int]] = {
    "none": ("kNoChecksum", 0),
    "crc32c": ("kCRC32c", 1),
    "xxhash": ("kxxHash", 2),
    "xxhash64": ("kxxHash64", 3),
    "xxh3": ("kXXH3", 4),
}
CHECKSUM_BY_NUMBER = {number: name for name, (_, number) in CHECKSUMS.items()}
CHECKSUM_ACCEPTED = ", ".join(f"{k} ({name}, checksum_type={n})" for name, (k, n) in CHECKSUMS.items())

# db_bench --compression_type names -> RocksDB's CompressionType (as the LOG and OPTIONS name them)
COMPRESSIONS = {
    "none": "kNoCompression", "snappy": "kSnappyCompression", "zlib": "kZlibCompression",
    "bzip2": "kBZip2Compression", "lz4": "kLZ4Compression", "lz4hc": "kLZ4HCCompression",
    "xpress": "kXpressCompression", "zstd": "kZSTD",
}

GENERIC: dict[str, KnobInfo] = {
    "block_size": KnobInfo(
        "block_size", "block_size", "size", ApplyClass.REINIT, minimum=MIN_BLOCK, maximum=MAX_BLOCK, unit="bytes",
        default=4096,
        description="--block_size: target size of an SST data block (a block closes at the first key past it); "
        "the data set is built again",
    ),
    "checksum": KnobInfo(
        "checksum_type", "checksum", "enum", ApplyClass.REINIT, choices=tuple(CHECKSUMS), default="xxh3",
        description="--checksum_type, an int in db_bench: " + CHECKSUM_ACCEPTED + "; written into every SST "
        "block, so the data set is built again",
    ),
    "block_checking": KnobInfo(
        "verify_checksum", "block_checking", "bool", ApplyClass.SESSION, default=True,
        description="--verify_checksum (every block read is checked against its checksum) and --paranoid_checks",
    ),
    "multiblock_read": KnobInfo(
        "readahead_size", "multiblock_read", "integer", ApplyClass.SESSION, minimum=0, maximum=4096, unit="blocks",
        default=0,
        description="--readahead_size and --compaction_readahead_size, in blocks of block_size; 0 is RocksDB's "
        "automatic readahead (iterators: 8 kB doubling to 256 kB after two sequential reads; compactions: none, "
        "or 2 MB under direct reads)",
        readings=(("0", "automatic readahead"),), reading="readahead of {value} blocks",
    ),
    "writers": KnobInfo(
        "max_background_jobs", "writers", "integer", ApplyClass.SESSION, minimum=1, maximum=64, default=2,
        description="--max_background_jobs: flush and compaction threads (db_bench splits them: flushes = jobs/4, "
        "at least 1)",
    ),
    "direct_io": KnobInfo(
        "use_direct_reads", "direct_io", "bool", ApplyClass.SESSION, default=False,
        description="--use_direct_reads and --use_direct_io_for_flush_and_compaction (O_DIRECT)",
    ),
    "buffer_cache": KnobInfo(
        "cache_size", "buffer_cache", "size", ApplyClass.SESSION, minimum=0, maximum=2**40, unit="bytes",
        default=8 << 20,
        description="--cache_size: the block cache of each db_bench process (0: no block cache)",
    ),
}
# db_bench flags each generic knob sets
GENERIC_FLAGS: dict[str, tuple[str, ...]] = {
    "block_size": ("block_size",),
    "checksum": ("checksum_type",),
    "block_checking": ("verify_checksum", "paranoid_checks"),
    "multiblock_read": ("readahead_size", "compaction_readahead_size"),
    "writers": ("max_background_jobs",),
    "direct_io": ("use_direct_reads", "use_direct_io_for_flush_and_compaction"),
    "buffer_cache": ("cache_size",),
}
NOT_ON_ROCKSDB = {
    "io_slaves": "RocksDB has no read helper threads: each db_bench thread does its own reads "
    "(the workload's sessions are its --threads). Engines that have them: mariadb (innodb_read_io_threads)",
}

# Flags blocklab sets itself, per cell or per data set: a native knob for one of
# them would fight the workload or the read-back. flag -> what sets it instead.
MANAGED: dict[str, str] = {
    "db": "blocklab keeps one database directory per data set and build settings",
    "benchmarks": "the workload picks the benchmark (one per process: the statistics are cumulative)",
    "use_existing_db": "blocklab builds the data set once and opens it with --use_existing_db=1 after",
    "num": "set from dataset.rows",
    "reads": "set by the workload (its run length)",
    "writes": "set by the workload (its run length)",
    "threads": "set from the workload's sessions",
    "duration": "set from the workload's run_time_s",
    "statistics": "always on: the metrics come from it",
    "histogram": "always on: latency percentiles come from it",
    "report_interval_seconds": "always 1: the per-second series",
    "report_file": "blocklab's own file per cell",
    "progress_reports": "always off (it floods stderr)",
    "seed": "blocklab sets one per cell, recorded in the cell's command",
    "readonly": "blocklab opens read-write so RocksDB writes the OPTIONS file it reads the settings back from",
    "options_file": "every option is given as a flag, so each is validated and read back",
    "use_stderr_info_logger": "the LOG file is where blocklab reads the settings back",
    "statistics_string": "blocklab needs db_bench's default statistics object to read its counters",
    "wal_dir": "a data set is one directory (copied for write workloads)",
    "num_multi_db": "a data set is one database",
    "use_secondary_db": "blocklab opens the data set itself",
    "secondary_path": "blocklab opens the data set itself",
    "env_uri": "blocklab proves cache state and direct I/O on the local file system",
    "fs_uri": "blocklab proves cache state and direct I/O on the local file system",
    "backup_dir": "backup/restore are not blocklab workloads",
    "restore_dir": "backup/restore are not blocklab workloads",
    "trace_file": "tracing is not a blocklab workload",
    "block_cache_trace_file": "tracing is not a blocklab workload",
    "truth_db": "verification runs are not blocklab workloads",
}

def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Flags that act only while a db_bench process runs (session class); every other flag
# shapes the files (reinit). Grouped as db_bench's help groups them.
RUNTIME: frozenset[str] = _names("""
use_direct_reads use_direct_io_for_flush_and_compaction readahead_size compaction_readahead_size
initial_auto_readahead_size max_auto_readahead_size num_file_reads_for_auto_readahead adaptive_readahead async_io
optimize_multiget_for_io log_readahead_size io_uring_enabled
cache_size cache_numshardbits cache_type cache_high_pri_pool_ratio cache_low_pri_pool_ratio cache_index_and_filter_blocks
pin_l0_filter_and_index_blocks_in_cache pin_top_level_index_and_filter compressed_cache_size row_cache_size simcache_size
prepopulate_block_cache use_cache_jemalloc_no_dump_allocator use_cache_memkind_kmem_allocator charge_table_reader
charge_filter_construction charge_compression_dictionary_building_buffer charge_file_metadata charge_blob_cache
use_compressed_secondary_cache compressed_secondary_cache_size compressed_secondary_cache_numshardbits
compressed_secondary_cache_high_pri_pool_ratio compressed_secondary_cache_low_pri_pool_ratio
compressed_secondary_cache_compression_type compressed_secondary_cache_compress_format_version secondary_cache_uri
table_cache_numshardbits read_cache_size read_cache_direct_read read_cache_direct_write
verify_checksum paranoid_checks force_consistency_checks check_flush_compaction_key_order
max_background_jobs max_background_flushes max_background_compactions subcompactions num_bottom_pri_threads
num_high_pri_threads num_low_pri_threads num_deletion_threads
advise_random_on_open open_files file_opening_threads mmap_read mmap_write random_access_max_buffer_size
writable_file_max_buffer_size compaction_fadvice
rate_limiter_bytes_per_sec rate_limiter_refill_period_us rate_limiter_auto_tuned rate_limit_bg_reads rate_limit_user_ops
rate_limit_auto_wal_flush benchmark_write_rate_limit benchmark_read_rate_limit
bytes_per_sync wal_bytes_per_sync sync disable_wal use_fsync manual_wal_flush wal_compression max_total_wal_size
wal_ttl_seconds wal_size_limit_MB
write_buffer_size db_write_buffer_size max_write_buffer_number min_write_buffer_number_to_merge
max_write_buffer_number_to_maintain max_write_buffer_size_to_maintain arena_block_size memtablerep
memtable_bloom_size_ratio memtable_whole_key_filtering memtable_use_huge_page memtable_insert_with_hint_prefix_size
skip_list_lookahead inplace_update_support inplace_update_num_locks cost_write_buffer_to_cache
level0_file_num_compaction_trigger level0_slowdown_writes_trigger level0_stop_writes_trigger
soft_pending_compaction_bytes_limit hard_pending_compaction_bytes_limit delayed_write_rate disable_auto_compactions
max_compaction_bytes
enable_pipelined_write allow_concurrent_memtable_write enable_write_thread_adaptive_yield write_thread_max_yield_usec
write_thread_slow_yield_usec unordered_write use_adaptive_mutex
stats_level perf_level stats_interval stats_interval_seconds stats_per_interval stats_dump_period_sec
stats_persist_period_sec stats_history_buffer_size persist_stats_to_disk thread_status_per_interval report_bg_io_stats
report_file_operations report_open_timing dump_malloc_stats print_malloc_stats enable_cpu_prio enable_io_prio
enable_numa slow_usecs show_table_properties
readwritepercent deletepercent mergereadpercent seek_nexts use_existing_keys total_order_seek prefix_same_as_start
reverse_iterator use_tailing_iterator iter_k iter_sigma iter_theta ops_between_duration_checks
confidence_interval_only read_random_exp_range multiread_batched multiread_stride overwrite_probability
overwrite_window_size finish_after_writes max_scan_distance seek_missing_prefix auto_prefix_mode
read_with_latest_user_timestamp batch_size
delete_obsolete_files_period_micros avoid_flush_during_recovery track_and_verify_wals_in_manifest
allow_data_in_errors experimental_mempurge_threshold memtable_protection_bytes_per_key
write_batch_protection_bytes_per_key simulate_hdd simulate_hybrid_fs_file simulate_hybrid_hdd_multipliers
""")

# stats_level below 3 (kExceptDetailedTimers, the default) drops the timers the metrics read
MIN_STATS_LEVEL = 3


def native_info(flag: Flag, supported_compressions: tuple[str, ...]) -> KnobInfo:
    """A db_bench flag as a native knob."""
    apply = ApplyClass.SESSION if flag.name in RUNTIME else ApplyClass.REINIT
    kind = {"bool": "bool", "double": "float", "string": "string"}.get(flag.type, "integer")
    low, high = INT_RANGES.get(flag.type, (None, None))
    info = KnobInfo(flag.name, None, kind, apply, minimum=low, maximum=high, default=flag.default,
                    description=flag.meaning)
    if flag.name == "block_size":
        return dataclasses.replace(GENERIC["block_size"], generic=None)
    if flag.name == "checksum_type":
        return dataclasses.replace(info, minimum=0, maximum=4, description=f"{flag.meaning}: {CHECKSUM_ACCEPTED}")
    if flag.name == "compression_type":
        return dataclasses.replace(info, kind="enum", choices=supported_compressions)
    return info


def resolve(name: str, flags: FlagTable, supported_compressions: tuple[str, ...]) -> KnobInfo:
    """A generic or native knob name -> its KnobInfo, or KnobError saying what is accepted."""
    if name.startswith(PREFIX):
        native = name[len(PREFIX):]
        if native in MANAGED:
            raise KnobError(f"knob {name!r}: db_bench's --{native} is set by blocklab ({MANAGED[native]}); accepted: leave it out")
        return native_info(flags.get(native, f"knob {name!r}"), supported_compressions)
    if name in NOT_ON_ROCKSDB:
        raise KnobError(f"knob {name!r} is not available on engine rocksdb: {NOT_ON_ROCKSDB[name]}")
    if name not in GENERIC:
        raise KnobError(
            f"unknown knob {name!r} on engine rocksdb; accepted: generic knobs {', '.join(sorted(GENERIC))}, "
            f"or a db_bench flag as rocksdb.NAME (one of {len(flags.own())}, `db_bench --help`)"
        )
    return GENERIC[name]


def canonical(name: str, info: KnobInfo, value: Any, flags: FlagTable) -> Any:
    """One value in canonical form, or KnobError naming the knob and what it accepts."""
    where = f"knob {name!r} (rocksdb {info.native})"
    if info.generic == "checksum" or (info.generic is None and info.native == "checksum_type"):
        return _checksum(value, where) if info.generic else CHECKSUMS[_checksum(value, where)][1]
    if info.generic is not None:
        if info.kind == "bool":
            return parse_bool(value, where)
        number = parse_int(value, where, info)
        if info.minimum is not None and number < info.minimum or info.maximum is not None and number > info.maximum:
            raise KnobError(f"{where}: {value!r} is out of range; accepted: {info.accepted()}")
        return number
    flag = flags.get(info.native, where)
    parsed = flag.parse(value, where)
    if info.native == "block_size":
        return canonical("block_size", GENERIC["block_size"], parsed, flags)
    if info.kind == "enum" and str(parsed).lower() not in info.choices:
        raise KnobError(f"{where}: {value!r} is not accepted (db_bench would fail at run time); accepted: {info.accepted()} "
                        "(the compressions this RocksDB build supports)")
    if info.kind == "enum":
        return str(parsed).lower()
    if info.native == "stats_level" and parsed < MIN_STATS_LEVEL:
        raise KnobError(f"{where}: {value!r} drops the timers blocklab's metrics read (SST read times); "
                        f"accepted: {MIN_STATS_LEVEL} to 5")
    if info.native == "cache_size" and parsed < 0:
        raise KnobError(f"{where}: {value!r} is read by db_bench as 0 (no block cache); accepted: 0 or more bytes")
    return parsed


def _checksum(value: object, where: str) -> str:
    if value is False:
        return "none"
    text = str(value).strip()
    if text.lstrip("-").isdigit() and int(text) in CHECKSUM_BY_NUMBER:
        return CHECKSUM_BY_NUMBER[int(text)]
    lowered = text.lower()
    for name, (rocks, _) in CHECKSUMS.items():
        if lowered in (name, rocks.lower()) or (name == "none" and lowered == "off"):
            return name
    raise KnobError(f"{where}: {value!r} is not a checksum db_bench has; accepted: {CHECKSUM_ACCEPTED}, or off")


def flags_of(name: str, info: KnobInfo) -> tuple[str, ...]:
    return GENERIC_FLAGS[info.generic] if info.generic else (info.native,)


def to_flags(settings: Mapping[str, Any], infos: Mapping[str, KnobInfo], defaults: Mapping[str, str]) -> dict[str, str]:
    """Canonical settings -> db_bench flags (name -> command-line text)."""
    out: dict[str, str] = {}
    block = block_size_of(settings, infos, defaults)
    for name, value in settings.items():
        info = infos[name]
        generic = info.generic
        if generic == "checksum":
            out["checksum_type"] = str(CHECKSUMS[value][1])
        elif generic == "multiblock_read":
            out["readahead_size"] = str(value * block)
            if value:  # 0 leaves compaction readahead to RocksDB (none, or 2 MB under direct reads)
                out["compaction_readahead_size"] = str(value * block)
        elif generic is not None:
            for flag in GENERIC_FLAGS[generic]:
                out[flag] = flag_text(value)
        else:
            out[info.native] = flag_text(value)
    return out


def block_size_of(settings: Mapping[str, Any], infos: Mapping[str, KnobInfo], defaults: Mapping[str, str]) -> int:
    for name, value in settings.items():
        if infos[name].native == "block_size":
            return int(value)
    return int(defaults.get("block_size", "4096"))


def check_rules(flags: Mapping[str, str], defaults: Mapping[str, str], names: Mapping[str, str]) -> None:
    """Combinations RocksDB refuses at open, or changes silently. `names`: flag -> the knob that set it."""
    def get(flag: str) -> str:
        return flags.get(flag, defaults.get(flag, ""))

    def knob(flag: str) -> str:
        return names.get(flag, f"rocksdb.{flag}")

    if get("use_direct_reads") == "true" and get("mmap_read") == "true":
        raise KnobError(f"knobs {knob('mmap_read')!r} and {knob('use_direct_reads')!r}: RocksDB refuses memory-mapped "
                        "reads with direct reads (open error); accepted: one of them")
    if get("use_direct_io_for_flush_and_compaction") == "true" and get("mmap_write") == "true":
        raise KnobError(f"knobs {knob('mmap_write')!r} and {knob('use_direct_io_for_flush_and_compaction')!r}: RocksDB "
                        "refuses memory-mapped writes with direct writes (open error); accepted: one of them")
    if (get("use_direct_reads") == "true" and "compaction_readahead_size" in flags
            and flags["compaction_readahead_size"] == "0"):
        raise KnobError(f"knob {knob('compaction_readahead_size')!r} = 0 with direct reads: RocksDB silently uses "
                        "2097152 (2 MB) instead; accepted: a size above 0, or leave it out")
    for flag in ("readahead_size", "compaction_readahead_size"):
        if flag in flags and int(flags[flag]) > INT32_MAX:
            raise KnobError(f"knob {knob(flag)!r}: {int(flags[flag]):,} bytes is more than db_bench's int32 --{flag} "
                            f"holds; accepted: at most {INT32_MAX:,} bytes (fewer blocks, or smaller blocks)")
