"""Asked = applied, from second sources in RocksDB's own units (Engine.check_applied).

Each knob is read back where RocksDB (or its files) states it, never from
blocklab's own record of what it asked:

* gflags: `db_bench <flags> --helpxml` reports how db_bench parsed every flag
  (`<current>`), before anything opens a database. The only witness of the
  ReadOptions flags (--verify_checksum, --readahead_size): RocksDB writes
  them nowhere. Their effect shows in each cell's statistics instead
  (`rocksdb.block.checksum.compute.count` near zero with verify off, the
  average SST read size with readahead), kept as metrics.
* RocksDB's sanitised options: a dry open (no benchmark) of a scratch
  database under exactly the cell's flags writes OPTIONS-NNNNNN and LOG as
  RocksDB will run them: use_direct_reads, compaction_readahead_size (raised
  to 2 MB under direct reads when 0), max_background_jobs, paranoid_checks,
  the block cache's capacity (LOG), and every other flag whose name is an
  option of the same name and meaning (102 of them in 7.8.3). A scratch
  database, so the measured data set is neither opened nor cached by it.
* The data set's SST files (files.py): checksum type and format version
  from each footer, block size, compression, key and value sizes from the
  table properties. These are properties of the files; OPTIONS would report
  the flags of the current open whatever the files were made with.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..base import EngineError, KnobInfo
from . import files, knobs
from .bench import run_tool
from .flags import gflags_readback

if TYPE_CHECKING:
    from . import RocksDbEngine

# Options whose OPTIONS-file value is not the db_bench flag's form: enums written
# as numbers by db_bench, or 0 meaning "RocksDB's default" (checked here: a dry open
# with db_bench's defaults differs from the flag default on exactly these).
NOT_COMPARABLE = frozenset({
    "arena_block_size", "blob_compression_type", "compaction_pri", "compaction_style",
    "delete_obsolete_files_period_micros", "max_bytes_for_level_multiplier_additional", "max_compaction_bytes",
    "merge_operator", "periodic_compaction_seconds", "prepopulate_blob_cache", "prepopulate_block_cache",
    "wal_compression", "checksum_type", "compression_type", "cache_size",
})
# sst_dump's name of each --compression_type
SST_COMPRESSION = {"none": "NoCompression", "snappy": "Snappy", "zlib": "Zlib", "bzip2": "BZip2", "lz4": "LZ4",
                   "lz4hc": "LZ4HC", "xpress": "Xpress", "zstd": "ZSTD"}
DIRECT_COMPACTION_READAHEAD = 2 * 1024 * 1024  # what RocksDB 7.8 makes of compaction_readahead_size 0 under direct reads


def _same(flag_type: str, a: str, b: str) -> bool:
    a, b = a.strip(), b.strip()
    if flag_type == "bool":
        truth = {"true": "1", "1": "1", "false": "0", "0": "0"}
        return truth.get(a.lower(), a) == truth.get(b.lower(), b)
    if flag_type == "double":
        try:
            return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(b)))
        except ValueError:
            return a == b
    if flag_type in ("int32", "uint32", "int64", "uint64"):
        try:
            return int(a) == int(b)
        except ValueError:
            return a == b
    return a == b


class Readback:
    """The second sources for one cell's flags. `infos`: knob -> KnobInfo, to name the
    knob behind each flag in a problem; `wanted`: knob -> canonical value."""

    def __init__(self, engine: RocksDbEngine, flags: Mapping[str, str], infos: Mapping[str, KnobInfo],
                 wanted: Mapping[str, object]):
        self.engine = engine
        self.flags = dict(flags)
        self.names = {flag: knob for knob, info in infos.items() for flag in knobs.flags_of(knob, info)}
        self.table = engine.flag_table
        self.defaults = engine.defaults()

    def name(self, flag: str) -> str:
        knob = self.names.get(flag)
        return f"{knob} (--{flag})" if knob and not knob.startswith(knobs.PREFIX) else f"rocksdb.{flag}"

    def problems(self, data_sets: list[Path]) -> list[str]:
        out = self.gflags_problems() + self.options_problems()
        build = {k: v for k, v in self.flags.items() if k not in knobs.RUNTIME}
        for db in data_sets:
            out += self.sst_problems(db, build)
        return out

    # ------------------------------------------------------------------ gflags
    def gflags_problems(self) -> list[str]:
        parsed = gflags_readback(self.engine.binary, self.engine.flag_args(self.flags))
        out = []
        for flag, text in self.flags.items():
            if not _same(self.table.flags[flag].type, parsed.get(flag, ""), text):
                out.append(f"{self.name(flag)} asked {text}, db_bench parses it as {parsed.get(flag)!r}")
        return out

    # ------------------------------------------------------------------ OPTIONS and LOG
    def options_problems(self) -> list[str]:
        scratch = self.engine.root / "scratch" / f"readback-{os.getpid()}"
        args = [self.engine.binary, *self.engine.flag_args(self.flags), f"--db={scratch}", "--benchmarks=",
                "--use_existing_db=0", "--progress_reports=0"]
        run_tool(args, "db_bench (a dry open of a scratch database, to read the options back)", timeout_s=120)
        options_file = files.newest_options(scratch)
        if options_file is None:
            raise EngineError(f"a dry open of {scratch} wrote no OPTIONS file")
        options = files.read_options(options_file)
        log = files.read_log(scratch)
        out = []
        for flag, text in self.flags.items():
            if flag == "checksum_type":
                want = knobs.CHECKSUMS[knobs.CHECKSUM_BY_NUMBER[int(text)]][0]
                if options.get("checksum") != want:
                    out.append(f"{self.name(flag)} asked {want}, RocksDB's OPTIONS say checksum={options.get('checksum')}")
            elif flag == "compression_type":
                want = knobs.COMPRESSIONS.get(text, text)
                if options.get("compression") != want:
                    out.append(f"{self.name(flag)} asked {want}, RocksDB's OPTIONS say compression={options.get('compression')}")
            elif flag == "cache_size":
                out += self._cache_problem(int(text), log)
            elif (flag in options and flag not in NOT_COMPARABLE
                  and not _same(self.table.flags[flag].type, options[flag], text)):
                out.append(f"{self.name(flag)} asked {text}, RocksDB runs with {flag}={options[flag]} (OPTIONS)")
        if "compaction_readahead_size" not in self.flags:  # multiblock_read = 0: RocksDB's own choice, said so
            direct = self.flags.get("use_direct_reads") == "true"
            allowed = {"0", str(DIRECT_COMPACTION_READAHEAD)} if direct else {"0"}
            if options.get("compaction_readahead_size") not in allowed:
                out.append(f"compaction readahead left to RocksDB, but OPTIONS say "
                           f"compaction_readahead_size={options.get('compaction_readahead_size')}")
        files.remove_db(scratch)
        return out

    def _cache_problem(self, size: int, log: dict[str, object]) -> list[str]:
        if size == 0:
            return [] if log.get("no_block_cache") else [f"{self.name('cache_size')} asked 0 (no block cache), the LOG "
                                                         f"shows a block cache of {log.get('block_cache_capacity')} bytes"]
        if log.get("no_block_cache") or log.get("block_cache_capacity") != size:
            return [f"{self.name('cache_size')} asked {size}, the LOG shows block cache capacity "
                    f"{log.get('block_cache_capacity')} (no_block_cache {log.get('no_block_cache')})"]
        return []

    # ------------------------------------------------------------------ SST files
    def sst_problems(self, db: Path, build: Mapping[str, str]) -> list[str]:
        """The data set's files against the build flags (db_bench's defaults for those not given)."""
        def want(flag: str) -> str:
            return build.get(flag, self.defaults.get(flag, ""))

        out: list[str] = []
        checksum = int(want("checksum_type"))
        block = int(want("block_size"))
        compression = SST_COMPRESSION.get(want("compression_type"), want("compression_type"))
        version = int(want("format_version"))
        fixed_values = want("value_size_distribution_type") in ("fixed", "")
        for path in files.sst_files(db):
            props = files.sst_properties(path)
            where = f"{db.name}/{path.name}"
            if props.checksum_type != checksum:
                got = knobs.CHECKSUM_BY_NUMBER.get(props.checksum_type, str(props.checksum_type))
                out.append(f"{self.name('checksum_type')} asked {knobs.CHECKSUM_BY_NUMBER.get(checksum)}, "
                           f"{where}'s footer says {got} (checksum_type={props.checksum_type})")
            if not props.block_size_fits(block):
                out.append(f"{self.name('block_size')} asked {block}, {where} has {props.data_blocks:,} data blocks of "
                           f"{props.avg_block:,.0f} bytes on average (sst_dump)")
            if props.compression != compression:
                out.append(f"{self.name('compression_type')} asked {compression}, {where} is {props.compression} (sst_dump)")
            if props.format_version != version:
                out.append(f"{self.name('format_version')} asked {version}, {where}'s footer says {props.format_version}")
            if props.entries and round(props.avg_key) - 8 != int(want("key_size")):  # 8 bytes of sequence and type
                out.append(f"{self.name('key_size')} asked {want('key_size')}, {where} holds keys of "
                           f"{props.avg_key - 8:.0f} bytes (sst_dump)")
            if props.entries and fixed_values and round(props.avg_value) != int(want("value_size")):
                out.append(f"{self.name('value_size')} asked {want('value_size')}, {where} holds values of "
                           f"{props.avg_value:.0f} bytes (sst_dump)")
        return out


@functools.lru_cache(maxsize=4)
def _probe(binary: str, mtime_ns: int, scratch: str) -> dict[str, object]:
    version = run_tool([binary, "--version"], "db_bench --version", timeout_s=30).stdout.split()
    db = Path(scratch) / f"probe-{os.getpid()}"
    done = run_tool([binary, f"--db={db}", "--benchmarks=", "--use_existing_db=0", "--progress_reports=0"],
                    "db_bench (a dry open to read the build's facts)", timeout_s=120)
    log = files.read_log(db)
    files.remove_db(db)
    facts: dict[str, object] = {
        "version": version[-1] if version else "?",
        "rocksdb_version": log.get("rocksdb_version", "?"),
        "compile_date": log.get("compile_date", "?"),
        "fast_crc32": log.get("fast_crc32", "?"),
        "assertions": "Assertions are enabled" in done.stdout,
        "compressions": log.get("compressions", {}),
    }
    notes = []
    if str(facts["fast_crc32"]).startswith("Not supported"):
        notes.append("crc32c is computed in software by this build (LOG: Fast CRC32 supported: "
                     f"{facts['fast_crc32']}): checksum=crc32c costs far more than on a build with SSE4.2 CRC")
    if facts["assertions"]:
        notes.append("db_bench was built with assertions (WARNING: Assertions are enabled): CPU-bound figures are "
                     "pessimistic against a release build")
    facts["build_notes"] = notes
    return facts


def probe_binary(binary: str, scratch: Path) -> dict[str, object]:
    """Facts of this db_bench build: versions, compile date, fast CRC32, assertions, compressions."""
    scratch.mkdir(parents=True, exist_ok=True)
    return _probe(binary, os.stat(binary).st_mtime_ns, str(scratch))
