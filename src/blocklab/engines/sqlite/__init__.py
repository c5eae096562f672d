"""SQLite through apsw: one database file in a directory blocklab owns.

The engine is the file. `apply()` makes the file match the file-level knobs
(page size, checksums: a new empty file when they differ, `reinitialised` then
says the workload must reload its data set) and remembers the connection-level
knobs, which `connect()` applies to every new connection. Nothing is a server:
SQLite runs in this process, so "restart" never happens and every knob is
either reinit (a new file), reload (file-wide, no rebuild) or session.

Two VFS shims from apsw's compiled extras sit between SQLite and the disk,
loaded once per process and stacked so that every byte is counted:

    cksmvfs (checksum on) -> vfslog (the vfsstat shim: counts calls and bytes) -> unix

Connections name their VFS explicitly (`vfslog` or `cksmvfs`); the process
default VFS is put back to what it was, so other apsw users are not affected.

Checksums (cksumvfs) need exactly 8 reserve bytes at the end of every page;
reserve bytes only grow and a page size change needs a VACUUM (a no-op in WAL
mode), so blocklab never converts a file: any change of page size or checksum
builds a new one. A page whose checksum does not match its content makes the
read fail with SQLITE_IOERR_DATA (extended code 8202), which apsw reports as
"disk I/O error". So that a failed cell says why, this module extends the text
of apsw.IOError for that one extended code (and only that one: SQLite reserves
it for VFS shims that verify checksums) to mention the checksum. This is done
on the class, not by wrapping connections, because a Python layer around
execute() would cost every measured statement time.

The vfsstat counters are process-wide: `io_counters()` gives them cumulative
(take deltas around a measurement). Pages read through a memory map
(`sqlite.mmap_size` > 0) bypass the VFS and are not counted; cksumvfs never
maps the file, which is why mmap_size with checksum on is refused.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import weakref
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import apsw

from ..base import ApplyClass, Capabilities, CounterWindow, EngineBase, EngineError, EngineInfo, KnobError, KnobInfo, Session
from ..host import DirectoryLock, drop_os_cache_files
from .capabilities import CAPABILITIES
from .cpu_profile import ProfileProcesses
from .files import (
    BUSY_TIMEOUT_MS,
    CACHE_STATUS,
    CKSUM_RESERVE,
    CKSUM_VFS,
    DB_FILE,
    DEFAULT_JOURNAL_MODE,
    DEFAULT_PAGE_SIZE,
    SIDE_FILES,
    STAT_VFS,
    VFSSTAT_FILES,
    VFSSTAT_STATS,
    is_checksum_error,
    load_shims,
    pragma_literal,
    pragma_text,
    read_header,
    read_pragmas,
)
from .knobs import ALWAYS_RECORDED, GENERIC_TO_NATIVE, KNOBS, NOT_ON_SQLITE, SESSION_ORDER, checked_page_size, with_limits
from .session import SqliteSession
from .sqlscript import SqlScripts
from .tables import InsertLoop, ReloadTables

ENGINE_NAME = "sqlite"
META_TABLE = "blocklab_meta"  # table -> fingerprint: SQLite has no table comments


class SqliteEngine(EngineBase):
    """blocklab's SQLite database: `directory`/blocklab.db, opened through apsw.

    `fixed` settings are merged under every apply() (the cell's own win).
    After apply(), `reinitialised` is True when a new, empty database file was
    made (the workloads' tables are gone with the old one)."""

    name: ClassVar[str] = ENGINE_NAME
    display: ClassVar[str] = "SQLite"  # as people write it
    native_prefix: ClassVar[str] = "sqlite."
    summary: ClassVar[str] = "SQLite through apsw: a database file of blocklab's own, in this process"
    accepts_dsn: ClassVar[bool] = False
    dialects: ClassVar[dict[str, type]] = {"row_insert": InsertLoop, "reload": ReloadTables, "sql": SqlScripts,
                                           "cpu_profile": ProfileProcesses}
    # a "restart" is a new connection, a reinit a new file: milliseconds
    install_bytes: ClassVar[float] = 0.0  # the one database file is all
    capabilities: ClassVar[Capabilities] = CAPABILITIES
    change_seconds: ClassVar[dict[ApplyClass, float]] = {ApplyClass.RESTART: 0.05, ApplyClass.REINIT: 0.2}

    def __init__(
        self,
        path: Path | str | None = None,
        fixed: dict[str, object] | None = None,
        *,
        cache_dir: Path | str | None = None,
    ):
        if path is None:
            if cache_dir is None:
                from ...paths import cache_root

                cache_dir = cache_root()
            path = Path(cache_dir) / "sqlite"
        self.mode = "file"
        self.directory = Path(path)
        self.db_path = self.directory / DB_FILE
        self.fixed = dict(fixed or {})
        self.reinitialised = False
        self._started = False
        self._dir_lock: DirectoryLock | None = None
        self._stat_conn: apsw.Connection | None = None
        self._conns: weakref.WeakSet[apsw.Connection] = weakref.WeakSet()
        self._checksum = False  # layout of the current file
        self._session: dict[str, object] = {}  # native -> canonical value, applied by connect()
        self._sizes: dict[str, tuple[tuple[tuple[int, int], ...], int]] = {}  # relation_bytes() by the file's state

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        if self._started:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock()
        try:
            load_shims()
            self._stat_conn = apsw.Connection(":memory:")
            layout = self._file_layout()
            self._checksum = bool(layout and layout[1])
        except BaseException:
            self._unlock()
            raise
        self._started = True

    def stop(self) -> None:
        if not self._started:
            return
        try:
            self._close_connections()
            if self._stat_conn is not None:
                self._stat_conn.close()
                self._stat_conn = None
        finally:
            self._started = False
            self._unlock()

    def _lock(self) -> None:
        self._dir_lock = DirectoryLock(self.directory / "engine.lock", f"the SQLite database in {self.directory}")
        self._dir_lock.acquire()

    def _unlock(self) -> None:
        if self._dir_lock is not None:
            self._dir_lock.release()
            self._dir_lock = None

    # ------------------------------------------------------------------ capabilities
    def knob(self, name: str) -> KnobInfo:
        if name.startswith("sqlite."):
            native = name[len("sqlite."):]
            if native not in KNOBS:
                raise KnobError(
                    f"unknown SQLite parameter {name!r} on engine sqlite; accepted: "
                    + ", ".join("sqlite." + n for n in KNOBS)
                )
            return with_limits(dataclasses.replace(KNOBS[native], generic=None))
        if name in NOT_ON_SQLITE:
            raise KnobError(f"knob {name!r} is not available on engine sqlite: {NOT_ON_SQLITE[name]}")
        if name not in GENERIC_TO_NATIVE:
            raise KnobError(
                f"unknown knob {name!r} on engine sqlite; accepted: generic knobs "
                f"{', '.join(sorted(GENERIC_TO_NATIVE))}, or a native parameter "
                f"{', '.join('sqlite.' + n for n in KNOBS)}"
            )
        return with_limits(KNOBS[GENERIC_TO_NATIVE[name]])

    def config_lines(self, settings: dict[str, object]) -> list[str]:
        """PRAGMA lines (the page size takes only at a new file or a VACUUM; the
        checksum VFS is a load-time extension, not a PRAGMA)."""
        lines = []
        for name, value in settings.items():
            native = self.knob(name).native
            if native == "cksumvfs":
                lines.append(f"-- checksums: {'load the cksumvfs extension before opening the file' if value else 'open without cksumvfs'}")
            else:
                text = "ON" if value is True else "OFF" if value is False else str(value)
                lines.append(f"PRAGMA {native} = {text};" + ("  -- then VACUUM to rewrite the file" if native == "page_size" else ""))
        return lines

    def check_settings(self, settings: dict[str, object], *, partial: bool = False) -> dict[str, Any]:
        """Canonical values (ints, bools, lower-case names); KnobError on anything SQLite
        would refuse or silently ignore."""
        out: dict[str, object] = {}
        seen: dict[str, tuple[str, Any]] = {}  # native -> (name given, value)
        for name, value in settings.items():
            info = self.knob(name)
            if info.native == "page_size":
                canonical = checked_page_size(value, info)
            else:
                canonical = info.normalise(value, ENGINE_NAME, name)
            if info.native in seen and seen[info.native][1] != canonical:
                other, other_value = seen[info.native]
                raise KnobError(
                    f"knobs {other!r} = {other_value!r} and {name!r} = {canonical!r} both set sqlite "
                    f"{info.native}; give one"
                )
            seen[info.native] = (name, canonical)
            out[name] = canonical
        if seen.get("cksumvfs", (None, False))[1] and seen.get("mmap_size", (None, 0))[1]:
            raise KnobError(
                f"knob {seen['mmap_size'][0]!r} = {seen['mmap_size'][1]} has no effect with checksums on: "
                "cksumvfs reads every page through the VFS to verify it and never maps the file; "
                "accepted with checksum on: sqlite.mmap_size = 0"
            )
        return out

    # ------------------------------------------------------------------ applying settings
    def apply(self, settings: dict[str, Any]) -> dict[str, str]:
        """Make the file and the session settings match; return what PRAGMAs report
        (every knob asked, plus sqlite.journal_mode and sqlite.synchronous).

        Knobs not given take SQLite's defaults (page size 4096, no checksum, journal
        delete; connection pragmas untouched), so no cell inherits another's file."""
        self.start()
        wanted = self.check_settings({**self.fixed, **settings})
        native = {self.knob(name).native: value for name, value in wanted.items()}
        page_size = native.get("page_size", DEFAULT_PAGE_SIZE)
        checksum = native.get("cksumvfs", False)
        self._close_connections()
        self.reinitialised = False
        if self._file_layout() != (page_size, checksum):
            self._create_database(page_size, checksum)
            self.reinitialised = True
        self._checksum = checksum
        session = {k: native[k] for k in SESSION_ORDER if k in native}
        session.setdefault("journal_mode", DEFAULT_JOURNAL_MODE)
        self._session = session
        conn = self.sqlite_connect()  # runs the session pragmas; converts the journal mode if needed
        try:
            got = read_pragmas(conn)
        finally:
            self._forget(conn)
        expected = {**{k: pragma_text(k, v) for k, v in session.items()}, "page_size": str(page_size),
                    "cksumvfs": pragma_text("cksumvfs", checksum)}
        for key, value in expected.items():
            if got.get(key) != value:
                raise EngineError(
                    f"SQLite did not take {key} = {value}: PRAGMA reports {got.get(key)!r} on {self.db_path}"
                )
        out = {name: got[self.knob(name).native] for name in wanted}
        covered = {self.knob(name).native for name in wanted}
        for key in ALWAYS_RECORDED:
            if key not in covered:
                out[f"sqlite.{key}"] = got[key]
        return out

    def _create_database(self, page_size: int, checksum: bool) -> None:
        """A new, empty database file with this page size (and 8 reserve bytes for cksumvfs)."""
        self._remove_files()
        conn = apsw.Connection(str(self.db_path), vfs=CKSUM_VFS if checksum else STAT_VFS)
        try:
            conn.execute(f"PRAGMA page_size = {int(page_size)}")
            if checksum:
                conn.reserve_bytes(reserve=CKSUM_RESERVE)  # SQLITE_FCNTL_RESERVE_BYTES
            conn.execute("VACUUM")  # writes page 1: the header fixes page size and reserve bytes
        finally:
            conn.close()
        layout = self._file_layout()
        if layout != (page_size, checksum):
            raise EngineError(
                f"SQLite made {self.db_path} with (page size, checksum) = {layout}, not "
                f"({page_size}, {checksum}): the value was silently ignored"
            )

    def _remove_files(self) -> None:
        for path in [self.db_path, *(Path(f"{self.db_path}{s}") for s in SIDE_FILES)]:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def _file_layout(self) -> tuple[int, bool] | None:
        """(page size, checksummed) from the file header, or None if there is no database yet."""
        header = read_header(self.db_path)
        if header is None:
            return None
        page_size, reserve = header
        return page_size, reserve == CKSUM_RESERVE

    @classmethod
    def installed_version(cls) -> str | None:
        """The SQLite library apsw runs (`blocklab fleet status` lists each host's)."""
        return f"{apsw.sqlite_lib_version()} (apsw {apsw.apswversion()})"

    @classmethod
    def native_name(cls, knob: str) -> str:
        if knob.startswith("sqlite."):
            return knob[len("sqlite."):]
        return GENERIC_TO_NATIVE.get(knob, knob)

    # ------------------------------------------------------------------ connections
    def connect(self, *, session: bool = True) -> SqliteSession:
        """A session: a new connection with the session pragmas (always: SQLite's
        connection-level knobs are what makes a connection this cell's)."""
        return SqliteSession(self, self.sqlite_connect())

    def sqlite_connect(self) -> apsw.Connection:
        """A new connection through the right VFS with the session pragmas applied.

        apsw's `with conn:` is a transaction, not a close: call conn.close() when done.
        Connections still open are closed by apply(), evict() and stop()."""
        self.start()
        conn = apsw.Connection(
            str(self.db_path),
            flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE,
            vfs=self.vfs_name,
        )
        try:
            conn.set_busy_timeout(BUSY_TIMEOUT_MS)
            for key, value in self._session.items():
                # one statement per execute: apsw runs later statements only while iterating
                conn.execute(f"PRAGMA {key} = {pragma_literal(key, value)}").fetchall()
        except BaseException:
            conn.close()
            raise
        self._conns.add(conn)
        return conn

    @property
    def vfs_name(self) -> str:
        return CKSUM_VFS if self._checksum else STAT_VFS

    def query(self, sql: str, params: Sequence[object] | None = None) -> list[tuple[Any, ...]]:
        """Run one statement on a short-lived session connection; all rows."""
        conn = self.sqlite_connect()
        try:
            return list(conn.execute(sql, tuple(params or ())).fetchall())
        finally:
            self._forget(conn)

    def _forget(self, conn: apsw.Connection) -> None:
        self._conns.discard(conn)
        conn.close()

    def _close_connections(self) -> int:
        closed = 0
        for conn in list(self._conns):
            try:
                conn.close()
            except apsw.Error:
                conn.close(True)  # force: cursors of an interrupted statement
            closed += 1
        self._conns.clear()
        return closed

    # ------------------------------------------------------------------ information
    def info(self) -> EngineInfo:
        self.start()
        conn = self.sqlite_connect()
        try:
            settings = read_pragmas(conn, full=True)
            compile_options = [row[0] for row in conn.execute("PRAGMA compile_options")]
        finally:
            self._forget(conn)
        return EngineInfo(
            engine=ENGINE_NAME,
            version=f"SQLite {apsw.sqlite_lib_version()}, apsw {apsw.apswversion()}",
            mode="file",
            data_dir=str(self.directory),
            settings=settings,
            extra={
                "sqlite_version": apsw.sqlite_lib_version(),
                "apsw_version": apsw.apswversion(),
                "database": str(self.db_path),
                "vfs": self.vfs_name,
                "vfs_stack": f"{CKSUM_VFS} -> {STAT_VFS} -> unix" if self._checksum else f"{STAT_VFS} -> unix",
                "compile_options": compile_options,
            },
        )

    def data_dir(self) -> str | None:
        return str(self.directory)

    def server_pids(self) -> list[int]:
        return [os.getpid()]  # SQLite runs in this process: its CPU is ours

    def block_size(self) -> int:
        return int(self.query("PRAGMA page_size")[0][0])

    def table_fingerprint(self, table: str) -> str | None:
        """The fingerprint a workload stored with its table (in the file's
        blocklab_meta table: SQLite has no table comments). A new file has none."""
        exists = self.query("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))[0][0]
        if not exists or not self.query("SELECT count(*) FROM sqlite_master WHERE name = ?", (META_TABLE,))[0][0]:
            return None
        rows = self.query(f'SELECT fingerprint FROM "{META_TABLE}" WHERE name = ?', (table,))
        return str(rows[0][0]) if rows else None

    def set_table_fingerprint(self, conn: apsw.Connection, table: str, fingerprint: str) -> None:
        """Store a table's fingerprint (in the caller's transaction)."""
        conn.execute(f'CREATE TABLE IF NOT EXISTS "{META_TABLE}" (name TEXT PRIMARY KEY, fingerprint TEXT)')
        conn.execute(f'INSERT OR REPLACE INTO "{META_TABLE}" VALUES (?, ?)', (table, fingerprint))

    def privileges(self) -> list[tuple[str, str]]:
        return [("database file", f"{self.db_path}: blocklab's own")]

    def version_tuple(self) -> tuple[int, ...]:
        return tuple(int(p) for p in apsw.sqlite_lib_version().split("."))

    def relation_files(self, relation: str) -> list[Path]:
        return [p for p in (self.db_path, Path(f"{self.db_path}-wal")) if p.exists()]  # every table is in the one file

    def cached_bytes(self, relations: Iterable[str]) -> float | None:
        """SQLite's cache belongs to each connection: none open, nothing cached."""
        return 0.0 if not list(self._conns) else None

    def check_applied(self, settings: dict[str, object]) -> list[str]:
        """The pragmas read back on a new connection against what was asked."""
        wanted = self.check_settings({**self.fixed, **settings})
        conn = self.sqlite_connect()
        try:
            got = read_pragmas(conn)
        finally:
            self._forget(conn)
        problems = []
        for name, value in wanted.items():
            native = self.knob(name).native
            want = pragma_text(native, value)
            if got.get(native) != want:
                problems.append(f"{name} asked {want}, PRAGMA {native} reports {got.get(native)!r}")
        return problems

    def cold_cache_problem(self) -> str | None:
        return None

    def health(self) -> str | None:
        """SQLite is this process: it is "down" when its file cannot be opened and read."""
        if self._file_layout() is None and self.db_path.exists():
            return f"{self.db_path} is not a SQLite database any more (its header is gone)"
        try:
            conn = apsw.Connection(str(self.db_path), flags=apsw.SQLITE_OPEN_READONLY, vfs=self.vfs_name)
            try:
                conn.execute("PRAGMA schema_version").fetchall()
            finally:
                conn.close()
        except apsw.Error as err:
            return f"{self.db_path} cannot be read: {err}"
        return None

    def recover(self) -> None:
        """Close every connection; the next apply() makes the file again if it is unusable."""
        self._close_connections()
        if self.health() is not None:
            self._remove_files()

    def needs_rebuild(self, table: str) -> bool:
        return False  # page size and checksums are the file's: a change makes a new file

    def relation_bytes(self, name: str) -> int:
        """Bytes of the pages of one table or index (the dbstat virtual table). dbstat
        reads every page of the table, which would fill the OS page cache a cold cell
        has just emptied: the answer is kept until the database file changes."""
        version = tuple(_stamp(p) for p in (self.db_path, Path(f"{self.db_path}-wal")))  # WAL mode writes the -wal file
        kept = self._sizes.get(name)
        if kept is not None and kept[0] == version:
            return kept[1]
        rows = self.query("SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = ?", (name,))
        size = int(rows[0][0])
        self._sizes[name] = (version, size)
        return size

    def direct_io_active(self) -> bool:
        return False  # SQLite always reads through the OS page cache

    # ------------------------------------------------------------------ cache control
    def evict(self, relations: Iterable[str]) -> dict[str, object]:
        """Cold cache. SQLite's page cache belongs to each connection, so the engine's
        connections are closed (the next connect() starts empty); then the database
        file is flushed and dropped from the OS page cache. All tables live in the one
        file, so `relations` only goes into the record."""
        self.start()
        done: dict[str, object] = {
            "relations": list(relations),
            "engine_closed_connections": self._close_connections(),
            "os_dropped_files": 0,
            "os_drop_possible": True,
        }
        files = [p for p in [self.db_path, *(Path(f"{self.db_path}{s}") for s in ("-wal", "-journal"))] if p.exists()]
        done["os_dropped_files"], done["os_drop_possible"] = drop_os_cache_files(files)
        return done

    def io_counters(self, session: Session | None = None) -> dict[str, float]:
        """Cumulative VFS calls and bytes (process-wide vfsstat) per file type, as
        `<file>_<stat>` (db_reads, wal_write_bytes, journal_syncs ...), plus the main
        database file's as reads, read_bytes, writes, write_bytes, fsyncs.
        With the measuring connection: its page cache hits, misses, writes and spills."""
        self.start()
        assert self._stat_conn is not None
        out: dict[str, float] = {"read_time_ms": 0.0, "write_time_ms": 0.0, "hits": 0.0}  # SQLite times no I/O
        for file, stat, count in self._stat_conn.execute("SELECT file, stat, count FROM vfsstat"):
            if file in VFSSTAT_FILES and stat in VFSSTAT_STATS:
                out[f"{VFSSTAT_FILES[file]}_{VFSSTAT_STATS[stat]}"] = float(count)
        for key, source in (("reads", "db_reads"), ("read_bytes", "db_read_bytes"), ("writes", "db_writes"),
                            ("write_bytes", "db_write_bytes"), ("fsyncs", "db_syncs")):
            out[key] = out.get(source, 0.0)
        if session is not None:
            assert isinstance(session, SqliteSession), session  # the measuring session is one of ours
            for key, op in CACHE_STATUS.items():
                out[key] = float(session.conn.status(op)[0])
        return out

    def io_window(self, session: Session | None = None, *, settle: bool = False, sessions: Sequence[Session] = ()) -> CounterWindow:
        return CounterWindow(lambda: self.io_counters(session))

    # ------------------------------------------------------------------ testing aids
    def corrupt_page(self, page_number: int, offset: int | None = None) -> int:
        """Flip every bit of one byte of page `page_number` (1-based) in the database
        file, by default the last byte before the reserved area (row data of a full
        leaf page). Connections are closed first so no cached copy hides it.
        Returns the file offset changed."""
        self.start()
        self._close_connections()
        header = read_header(self.db_path)
        if header is None:
            raise EngineError(f"{self.db_path} holds no database to corrupt")
        page_size, reserve = header
        pages = self.db_path.stat().st_size // page_size
        if not 1 <= page_number <= pages:
            raise ValueError(f"page {page_number} is not in {self.db_path} (pages 1 to {pages})")
        if offset is None:
            offset = page_size - reserve - 1
        if not 0 <= offset < page_size:
            raise ValueError(f"offset {offset} is not inside a {page_size}-byte page")
        position = (page_number - 1) * page_size + offset
        fd = os.open(self.db_path, os.O_RDWR)
        try:
            byte = os.pread(fd, 1, position)
            os.pwrite(fd, bytes([byte[0] ^ 0xFF]), position)
            os.fsync(fd)
        finally:
            os.close(fd)
        return position



ENGINE = SqliteEngine
__all__ = ["ENGINE", "SqliteEngine", "is_checksum_error"]


def _stamp(path: Path) -> tuple[int, int]:
    """(modification time in ns, size) of a file; (0, 0) when there is none."""
    try:
        stat = os.stat(path)
    except OSError:
        return 0, 0
    return stat.st_mtime_ns, stat.st_size
