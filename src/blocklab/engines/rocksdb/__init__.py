"""RocksDB through db_bench, the standard RocksDB benchmark (Debian's rocksdb-tools).

There is no server: every measurement is one db_bench process (bench.py), run
against a database directory blocklab built and owns. The engine's state is
the set of db_bench flags the current cell runs with:

* apply() turns the knobs into flags (knobs.py). Build flags (block size,
  checksum type, compression, key and value sizes ...) choose the directory
  of data sets built under them, `data/<build key>/<table>`: a change is a
  reinit, and a data set built once under a combination is kept and reused.
* A data set is built once per fingerprint (`fillseq,compact`: every key
  once, then a full compaction, so every setting reads the same shape) and
  checked against the flags asked (files.py: footers and sst_dump); its
  record beside it holds the fingerprint and the SST manifest a read must
  leave unchanged (a crash that replays the WAL adds an L0 file: rebuilt).
* Cold cache: each cell is a new process (an empty block cache) and the
  data set's files are dropped from the OS page cache; with direct reads the
  page cache stays out for the whole run. The proof is per cell: mincore of
  the SST files after the eviction (claims.py) and, from db_bench's own
  statistics, the process's storage reads (/proc/<pid>/io) against the bytes
  RocksDB read from SST files (`cold_ratio`).
* check_applied() reads every knob back from a second source in RocksDB's
  own units: how db_bench parsed the flags (--helpxml), the OPTIONS and LOG a
  dry open of a scratch database writes under exactly these flags (RocksDB's
  sanitised options), and the SST files of the data set (checksum type in
  each footer, block size, compression, key and value sizes from their
  properties).

This Debian build computes crc32c in software ("Fast CRC32 supported: Not
supported on x86", about 1 GB/s here) and has assertions compiled in; both
are recorded with every run (environment.json, engine_extra).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from ..base import (
    IO_KEYS,
    ApplyClass,
    Capabilities,
    EngineBase,
    EngineError,
    EngineInfo,
    KnobError,
    KnobInfo,
    Session,
    SessionBase,
)
from ..host import DirectoryLock
from . import files, knobs
from .bench import BenchProcess, Outcome, command_line, run_tool
from .capabilities import CAPABILITIES
from .counters import USER_READS, BenchWindow, session_counters
from .dialects import DIALECTS
from .flags import FlagTable, binary_path, flag_text, gflags_readback, load_flags
from .output import Result, sst_reads
from .readback import Readback, probe_binary

ENGINE_NAME = "rocksdb"
BUILD_BENCHMARKS = "fillseq,compact"
WITNESS_MIN_READS = 1000  # fewer block reads say nothing against the metadata blocks read at open


class RocksDbSession(SessionBase):
    """A db_bench process held at its gate (bench.py): one benchmark, `threads` threads."""

    def __init__(self, engine: RocksDbEngine, threads: int):
        self.engine = engine
        self.threads = threads
        self.process = BenchProcess(engine.binary, engine.root / "runs", f"cell-{os.getpid()}-{id(self):x}")
        self.backend_id = self.process.pid

    @property
    def result(self) -> Result | None:
        outcome = self.process.outcome
        return outcome.result if outcome is not None else None

    def execute(self, sql: str, params: Sequence[object] | None = None) -> list[tuple[Any, ...]]:
        raise EngineError("RocksDB has no SQL: its workloads run db_bench benchmarks (engines/rocksdb/dialects.py)")

    def cancel(self) -> None:
        self.process.cancel()

    def close(self) -> None:
        self.process.close()
        self.engine._forget(self)


def _own(session: Session) -> RocksDbSession:
    """A session given to io_window: always one this engine opened."""
    assert isinstance(session, RocksDbSession), session
    return session


class RocksDbEngine(EngineBase):
    name: ClassVar[str] = ENGINE_NAME
    display: ClassVar[str] = "RocksDB"
    native_prefix: ClassVar[str] = knobs.PREFIX
    summary: ClassVar[str] = "RocksDB driven by db_bench (rocksdb-tools): a process per measurement, data sets of blocklab's own"
    accepts_dsn: ClassVar[bool] = False
    install_bytes: ClassVar[float] = 10e6  # a scratch database per dry open, OPTIONS and LOG files
    capabilities: ClassVar[Capabilities] = CAPABILITIES
    dialects: ClassVar[dict[str, type]] = DIALECTS
    # a reinit builds the data set again: ~5 s for 500,000 keys of 400 bytes here
    change_seconds: ClassVar[dict[ApplyClass, float]] = {ApplyClass.REINIT: 5.0}

    def __init__(self, cache_dir: Path | str | None = None, fixed: dict[str, object] | None = None, **_: object):
        if cache_dir is None:
            from ...paths import cache_root

            cache_dir = cache_root()
        self.mode = "db_bench"
        self.root = Path(cache_dir) / "rocksdb"
        self.fixed = dict(fixed or {})
        self._binary: str | None = None
        self._table: FlagTable | None = None
        self._facts: dict[str, Any] = {}
        self._lock: DirectoryLock | None = None
        self._settings: dict[str, object] = {}
        self._infos: dict[str, KnobInfo] = {}
        self.flags: dict[str, str] = {}  # the current cell's db_bench flags (name -> text)
        self.build_flags: dict[str, str] = {}
        self._sessions: list[RocksDbSession] = []
        self._sessions_lock = threading.Lock()
        self._seed = 0
        self._notes: dict[str, Any] = {}
        self.relation_dirs: dict[str, Path] = {}  # relation -> its directory this cell, when not the built one

    # ------------------------------------------------------------------ lifecycle
    @property
    def binary(self) -> str:
        self.start()
        assert self._binary is not None
        return self._binary

    @property
    def flag_table(self) -> FlagTable:
        self.start()
        assert self._table is not None
        return self._table

    def start(self) -> None:
        if self._table is not None:
            return
        binary = binary_path()
        if binary is None:
            raise EngineError(
                "db_bench is not on PATH: install Debian's rocksdb-tools (scripts/install-system-packages.sh), "
                "or point BLOCKLAB_DB_BENCH at a db_bench binary"
            )
        self.root.mkdir(parents=True, exist_ok=True)
        lock = DirectoryLock(self.root / "engine.lock", f"the RocksDB data sets in {self.root}")
        lock.acquire()
        try:
            table = load_flags(binary)
            self._facts = probe_binary(binary, self.root / "scratch")
        except BaseException:
            lock.release()
            raise
        self._binary, self._table, self._lock = binary, table, lock

    def stop(self) -> None:
        for session in list(self._sessions):
            session.close()
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        self._table = None

    # ------------------------------------------------------------------ knobs
    def knob(self, name: str) -> KnobInfo:
        return knobs.resolve(name, self.flag_table, self.supported_compressions())

    def supported_compressions(self) -> tuple[str, ...]:
        self.start()
        supported = self._facts.get("compressions", {})
        return tuple(name for name, rocks in knobs.COMPRESSIONS.items() if name == "none" or supported.get(rocks))

    def check_settings(self, settings: dict[str, object], *, partial: bool = False) -> dict[str, object]:
        out: dict[str, object] = {}
        setter: dict[str, tuple[str, Any]] = {}  # db_bench flag -> (knob, canonical value)
        infos: dict[str, KnobInfo] = {}
        for name, value in settings.items():
            info = infos[name] = self.knob(name)
            out[name] = knobs.canonical(name, info, value, self.flag_table)
            for flag in knobs.flags_of(name, info):
                if flag in setter and setter[flag][0] != name:
                    other = setter[flag][0]
                    raise KnobError(f"knobs {other!r} and {name!r} both set db_bench --{flag}; give one")
                setter[flag] = (name, out[name])
        if not partial:
            flags = knobs.to_flags(out, infos, self.defaults())
            knobs.check_rules(flags, self.defaults(), {f: k for f, (k, _) in setter.items()})
        return out

    def defaults(self) -> dict[str, str]:
        return {n: f.default for n, f in self.flag_table.own().items()}

    @classmethod
    def native_name(cls, knob: str) -> str:
        if knob.startswith(knobs.PREFIX):
            return knob[len(knobs.PREFIX):]
        return "+".join(knobs.GENERIC_FLAGS.get(knob, (knob,)))

    # ------------------------------------------------------------------ settings
    def apply(self, settings: dict[str, object]) -> dict[str, str]:
        """The cell's flags; what db_bench parses them as (gflags' own read-back) for each knob.
        Nothing is opened yet: the build flags pick the data sets' directory."""
        self._notes = {}  # first: a cell whose apply fails must not carry the previous cell's commands
        self.start()
        canonical = self.check_settings({**self.fixed, **settings})
        infos = {name: self.knob(name) for name in canonical}
        self._settings = canonical
        self._infos = infos
        self.flags = knobs.to_flags(canonical, infos, self.defaults())
        self.build_flags = {k: v for k, v in self.flags.items() if k not in knobs.RUNTIME}
        self.relation_dirs = {}
        parsed = gflags_readback(self.binary, self.flag_args(self.flags))
        return {name: self._describe(name, infos[name], parsed) for name in canonical}

    def _describe(self, name: str, info: KnobInfo, parsed: dict[str, str]) -> str:
        """A knob's value as db_bench parsed its flags, in a person's units."""
        generic = info.generic
        if generic == "checksum":
            number = int(parsed["checksum_type"])
            return f"{knobs.CHECKSUM_BY_NUMBER.get(number, '?')} (checksum_type={number})"
        if generic == "multiblock_read":
            readahead = int(parsed["readahead_size"])
            return f"{readahead // 1024}kB" if readahead else "0 (automatic readahead)"
        if generic == "buffer_cache":
            size = int(parsed["cache_size"])
            return f"{size // 1024}kB" if size else "0 (no block cache)"
        flags = knobs.flags_of(name, info)
        values = {parsed[f] for f in flags}
        if info.kind == "bool" and len(values) == 1:
            return "on" if values == {"true"} else "off"
        return ", ".join(f"{f}={parsed[f]}" for f in flags) if len(flags) > 1 else parsed[flags[0]]

    def flag_args(self, flags: dict[str, str]) -> list[str]:
        return [f"--{name}={value}" for name, value in sorted(flags.items())]

    @property
    def build_key(self) -> str:
        """The directory of the data sets built under the current build flags."""
        digest = hashlib.sha256(json.dumps([self._facts.get("version", ""), sorted(self.build_flags.items())]).encode())
        block = self.build_flags.get("block_size", self.defaults().get("block_size", "4096"))
        checksum = knobs.CHECKSUM_BY_NUMBER.get(int(self.build_flags.get("checksum_type", "4")), "x")
        compression = self.build_flags.get("compression_type", self.defaults().get("compression_type", "snappy"))
        return f"bs{block}-{checksum}-{compression}-{digest.hexdigest()[:10]}"

    def check_applied(self, settings: dict[str, object]) -> list[str]:
        wanted = self.check_settings({**self.fixed, **settings})
        infos = {name: self.knob(name) for name in wanted}
        flags = knobs.to_flags(wanted, infos, self.defaults())
        readback = Readback(self, flags, infos, wanted)
        return readback.problems([self.table_dir(t) for t in self.built_tables()])

    def health(self) -> str | None:
        """Always answers: there is no server between cells, only a db_bench process
        per measurement, whose death is that cell's failure (with its stderr)."""
        return None

    def recover(self) -> None:
        """Nothing to bring back: the next cell starts its own db_bench."""

    def version_tuple(self) -> tuple[int, ...]:
        """RocksDB's own version, from the LOG of a dry open: (7, 8, 3)."""
        self.start()
        found = re.match(r"\d+(?:\.\d+)*", str(self._facts.get("rocksdb_version") or ""))
        if found is None:
            raise EngineError(f"RocksDB's version is unknown (db_bench at {self.binary} reported {self._facts.get('rocksdb_version')!r})")
        return tuple(int(p) for p in found.group(0).split("."))

    def info(self) -> EngineInfo:
        self.start()
        settings = {**self.defaults(), **self.flags}
        extra = {
            **self._facts,
            "db_bench": self.binary,
            "block_size": int(self.flags.get("block_size", settings.get("block_size", "4096"))),
            "data_sets": str(self.root / "data" / self.build_key),
            "flags": dict(self.flags),
        }
        extra["db_bench_version"] = extra.pop("version", "?")  # `db_bench --version`; RocksDB's own from the LOG
        return EngineInfo(engine=ENGINE_NAME, version=str(self._facts.get("rocksdb_version", "?")), mode=self.mode,
                          data_dir=str(self.root), settings=settings, extra=extra)

    # ------------------------------------------------------------------ data sets
    def table_dir(self, table: str) -> Path:
        return self.relation_dirs.get(table) or self.root / "data" / self.build_key / table

    def record_path(self, table: str) -> Path:
        return self.root / "data" / self.build_key / f"{table}.blocklab.json"

    def built_tables(self) -> list[str]:
        folder = self.root / "data" / self.build_key
        return sorted(p.name[: -len(".blocklab.json")] for p in folder.glob("*.blocklab.json")) if folder.is_dir() else []

    def record(self, table: str) -> dict[str, Any] | None:
        try:
            return dict(json.loads(self.record_path(table).read_text()))
        except (OSError, ValueError):
            return None

    def build(self, table: str, rows: int, fingerprint: str) -> dict[str, object]:
        """The data set `table`: `rows` keys written once in order, then fully compacted,
        checked against the build flags; its record (fingerprint, manifest) written last."""
        db = self.root / "data" / self.build_key / table
        self.record_path(table).unlink(missing_ok=True)
        files.remove_db(db)
        db.parent.mkdir(parents=True, exist_ok=True)
        args = [*self.flag_args(self.build_flags), f"--db={db}", f"--benchmarks={BUILD_BENCHMARKS}", f"--num={rows}",
                "--use_existing_db=0", "--seed=1", "--progress_reports=0"]
        done = run_tool([self.binary, *args], f"building the data set {table} (db_bench {BUILD_BENCHMARKS})",
                        timeout_s=600 + rows / 2000)
        ssts = files.sst_files(db)
        entries = sum(files.sst_properties(p).entries for p in ssts)
        if entries != rows:
            raise EngineError(f"the data set {table} holds {entries:,} keys after its build, not {rows:,}; "
                              f"command: {command_line(self.binary, args)}")
        problems = Readback(self, self.flags, self._infos, self._settings).sst_problems(db, self.build_flags)
        if problems:
            raise EngineError(f"the data set {table} was not built as asked: {'; '.join(problems)}")
        files.prune_logs(db)
        record = {"fingerprint": fingerprint, "rows": rows, "flags": self.build_flags,
                  "manifest": files.manifest(db), "command": command_line(self.binary, args),
                  "build_output": done.stdout[-2000:]}
        self.record_path(table).write_text(json.dumps(record, indent=1))
        return record

    def record_copy(self, table: str, source: str, fingerprint: str) -> None:
        """`table` is made before each cell as a working copy of the data set `source`."""
        self.record_path(table).write_text(json.dumps({"fingerprint": fingerprint, "copy_of": source}))

    def table_fingerprint(self, table: str) -> str | None:
        record = self.record(table)
        if record is None:
            return None
        if "copy_of" in record:  # there while its source is
            return str(record["fingerprint"]) if self.table_fingerprint(record["copy_of"]) is not None else None
        if not (self.root / "data" / self.build_key / table).is_dir():
            return None
        return str(record.get("fingerprint"))

    def needs_rebuild(self, table: str) -> bool:
        """The SST files are not the ones the build made (a crash replayed the WAL into a new L0 file)."""
        record = self.record(table)
        if record is not None and "copy_of" in record:
            return self.needs_rebuild(str(record["copy_of"]))
        db = self.root / "data" / self.build_key / table
        return record is not None and files.manifest(db) != record.get("manifest")

    def relation_files(self, relation: str) -> list[Path]:
        return files.sst_files(self.table_dir(relation))

    def relation_bytes(self, relation: str) -> int:
        return sum(p.stat().st_size for p in self.relation_files(relation))

    def block_size(self) -> int:
        return int(self.flags.get("block_size", self.defaults().get("block_size", "4096")))

    def data_dir(self) -> str | None:
        return str(self.root)

    # ------------------------------------------------------------------ processes
    def session(self, threads: int = 1) -> RocksDbSession:
        """A db_bench process held at its gate, for one benchmark of `threads` threads."""
        session = RocksDbSession(self, threads)
        with self._sessions_lock:
            self._sessions.append(session)
        return session

    def connect(self, *, session: bool = True) -> RocksDbSession:
        return self.session()

    def query(self, sql: str, params: Sequence[object] | None = None) -> list[tuple[Any, ...]]:
        raise EngineError("RocksDB has no SQL: its workloads run db_bench benchmarks (engines/rocksdb/dialects.py)")

    def _forget(self, session: RocksDbSession) -> None:
        with self._sessions_lock:
            if session in self._sessions:
                self._sessions.remove(session)

    def server_pids(self) -> list[int]:
        """The db_bench processes of this cell, from their start to their reaping (held,
        running, or exited but unreaped: their /proc counters are what the probes read)."""
        with self._sessions_lock:
            return [s.process.pid for s in self._sessions if s.process.alive]

    def run(self, session: RocksDbSession, table: str, benchmark: str, rows: int, **extra: object) -> Result:
        """One benchmark on the data set `table` (its directory this cell) in `session`'s
        process, with the cell's flags; the command and its per-second series go to the cell's notes."""
        db = self.table_dir(table)
        self._seed += 1
        args = [*self.flag_args(self.flags), f"--db={db}", f"--benchmarks={benchmark}", "--use_existing_db=1",
                f"--num={rows}", f"--threads={session.threads}", "--statistics=1", "--histogram=1",
                "--progress_reports=0", f"--seed={self._seed}", "--report_interval_seconds=1",
                f"--report_file={session.process.report_path}", *(f"--{k}={flag_text(v)}" for k, v in extra.items())]
        try:
            outcome = session.process.run(args, benchmark)
        finally:
            self._note(session.process.command, session.process.outcome)
            files.prune_logs(db)
        assert outcome.result is not None
        if benchmark in USER_READS:
            self._witness_read_options(outcome.result)
        return outcome.result

    def _witness_read_options(self, result: Result) -> None:
        """--verify_checksum is a ReadOptions flag: RocksDB writes it nowhere (OPTIONS, LOG), so
        its effect in the run's own statistics is the second source. Verified, every data block
        read from a file has its checksum computed (a readahead read holds several); not
        verified, only the few metadata blocks of opening the files are."""
        reads, _ = sst_reads(result.counters)
        computed = result.counters.get("rocksdb.block.checksum.compute.count", 0)
        if reads < WITNESS_MIN_READS:
            return
        verify = self.flags.get("verify_checksum", self.defaults().get("verify_checksum")) == "true"
        checksummed = self.flags.get("checksum_type", self.defaults().get("checksum_type")) != "0"
        if verify and checksummed and computed < 0.5 * reads:
            raise EngineError(f"--verify_checksum=true, but RocksDB computed {computed:,} checksums for {reads:,} "
                              "block reads (rocksdb.block.checksum.compute.count): the reads were not verified")
        if not verify and computed > 0.01 * reads + 100:
            raise EngineError(f"--verify_checksum=false, but RocksDB computed {computed:,} checksums for {reads:,} "
                              "block reads (rocksdb.block.checksum.compute.count): the reads were verified")

    def _note(self, command: str, outcome: Outcome | None) -> None:
        notes = self._notes.setdefault("db_bench", {"commands": []})
        notes["commands"].append(command)
        if outcome is not None and outcome.result is not None:
            notes["per_second_ops"] = [q for _, q in outcome.result.series]
            notes["rocksdb_version"] = outcome.result.version
            notes["assertions_enabled"] = outcome.result.assertions
        self._notes["latency_source"] = "rocksdb.sst.read.micros"

    def config_lines(self, settings: dict[str, object]) -> list[str]:
        """db_bench flags, one a line (--name=value), as blocklab passes them."""
        infos = {name: self.knob(name) for name in settings}
        return [f"--{flag}={text}" for flag, text in knobs.to_flags(settings, infos, self.defaults()).items()]

    def cell_notes(self) -> dict[str, object]:
        return dict(self._notes)

    # ------------------------------------------------------------------ cache
    def cold_cache_problem(self) -> str | None:
        return None  # a new process per cell, the files dropped from the page cache (or direct reads)

    def direct_io_active(self) -> bool:
        return self.flags.get("use_direct_reads") == "true"

    def cached_bytes(self, relations: Iterable[str]) -> float | None:
        """The block cache lives in the db_bench process: none running, none cached."""
        return 0.0 if not self.server_pids() else None

    def evict(self, relations: Iterable[str]) -> dict[str, object]:
        dropped, possible = 0, True
        names = list(relations)
        for relation in names:
            count, ok = files.drop_db_cache(self.table_dir(relation))
            dropped += count
            possible = possible and ok
        return {"relations": names, "os_dropped_files": dropped, "os_drop_possible": possible,
                "engine_cache": "none: the block cache belongs to the db_bench process, new in every cell"}

    # ------------------------------------------------------------------ I/O
    def io_counters(self, session: Session | None = None) -> dict[str, float]:
        return self._counters([_own(session)] if session is not None else [])

    def io_window(self, session: Session | None = None, *, settle: bool = False, sessions: Sequence[Session] = ()) -> BenchWindow:
        watched = list(dict.fromkeys(_own(s) for s in [session, *sessions] if s is not None))
        return BenchWindow(lambda: self._counters(watched), watched)

    def _counters(self, sessions: list[RocksDbSession]) -> dict[str, float]:
        out = dict.fromkeys(IO_KEYS, 0.0)
        for session in dict.fromkeys(sessions):
            for key, value in session_counters(session).items():
                out[key] = out.get(key, 0.0) + value
        return out


ENGINE = RocksDbEngine
__all__ = ["ENGINE", "RocksDbEngine", "RocksDbSession"]
