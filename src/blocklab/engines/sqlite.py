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
import functools
import os
import re
import threading
import weakref
from pathlib import Path
from typing import Any, Iterable

import apsw

from .base import ApplyClass, EngineError, EngineInfo, KnobError, KnobInfo, parse_int
from .host import DirectoryLock, drop_os_cache

ENGINE = "sqlite"
DB_FILE = "blocklab.db"
SIDE_FILES = ("-wal", "-shm", "-journal")

STAT_VFS = "vfslog"  # registered by apsw's `vfsstat` extra
CKSUM_VFS = "cksmvfs"  # registered by apsw's `cksumvfs` extra
CKSUM_RESERVE = 8  # cksumvfs verifies pages only when the file reserves exactly 8 bytes a page

PAGE_SIZES = tuple(2**n for n in range(9, 17))  # 512 .. 65536
DEFAULT_PAGE_SIZE = 4096
JOURNAL_MODES = ("delete", "truncate", "persist", "memory", "wal", "off")
SYNCHRONOUS = ("off", "normal", "full", "extra")  # PRAGMA synchronous reads back 0..3
DEFAULT_JOURNAL_MODE = "delete"
BUSY_TIMEOUT_MS = 60_000
_SQLITE_HEADER = b"SQLite format 3\x00"

# native parameter -> what it is; generic names point at these
KNOBS: dict[str, KnobInfo] = {
    "page_size": KnobInfo(
        "page_size", "block_size", "size", ApplyClass.REINIT, minimum=512, maximum=65536, unit="bytes",
        default=DEFAULT_PAGE_SIZE,
        description="database page size, a power of two from 512 to 65536 bytes; a new database file",
    ),
    "cksumvfs": KnobInfo(
        "cksumvfs", "checksum", "bool", ApplyClass.REINIT, default=False,
        description="page checksums by the cksumvfs shim (8 reserve bytes a page); a new database file; "
        "read back with PRAGMA checksum_verification",
    ),
    "cell_size_check": KnobInfo(
        "cell_size_check", "block_checking", "bool", ApplyClass.SESSION, default=False,
        description="check cell sizes of every b-tree page as it is read (PRAGMA cell_size_check)",
    ),
    "cache_size": KnobInfo(
        "cache_size", "buffer_cache", "integer", ApplyClass.SESSION, minimum=0, maximum=2**31 - 1, unit="pages",
        default=-2000,
        description="page cache of each connection, in pages of the current page size (PRAGMA cache_size N); "
        "SQLite's negative KiB form is not accepted; unset, SQLite uses -2000 (2000 KiB)",
    ),
    "journal_mode": KnobInfo(
        "journal_mode", None, "enum", ApplyClass.RELOAD, choices=JOURNAL_MODES, default=DEFAULT_JOURNAL_MODE,
        description="rollback journal or WAL (PRAGMA journal_mode); WAL is a property of the file, the others "
        "of each connection; unset means delete",
    ),
    "synchronous": KnobInfo(
        "synchronous", None, "enum", ApplyClass.SESSION, choices=SYNCHRONOUS, default="full",
        description="how often SQLite waits for the disk (PRAGMA synchronous)",
    ),
    "mmap_size": KnobInfo(
        "mmap_size", None, "size", ApplyClass.SESSION, minimum=0, maximum=2**31 - 1, unit="bytes", default=0,
        description="bytes of the file read through a memory map (PRAGMA mmap_size); mapped reads bypass the "
        "VFS, so vfsstat does not count them",
    ),
}
GENERIC_TO_NATIVE = {info.generic: native for native, info in KNOBS.items() if info.generic}
NOT_ON_SQLITE = {
    "multiblock_read": "SQLite has no multiblock read: it reads one page per call and leaves read-ahead to the "
    "OS. Engines that have it: postgres (io_combine_limit), mariadb (innodb_read_ahead_threshold)",
    "writers": "SQLite has no writer processes: each connection writes its own pages. Engines that have it: "
    "postgres (io_workers), mariadb (innodb_write_io_threads)",
    "direct_io": "SQLite has no direct I/O: it always reads through the OS page cache (cold runs evict the file "
    "with posix_fadvise instead). Engines that have it: postgres (debug_io_direct), mariadb "
    "(innodb_flush_method=O_DIRECT)",
    "io_slaves": "SQLite has no I/O helper threads: the connection's own thread does every read. Engines that "
    "have them: mariadb (innodb_read_io_threads), postgres (io_workers, the 'writers' knob)",
}
# session pragmas, in the order connect() runs them (journal mode first: it may convert the file)
_SESSION_ORDER = ("journal_mode", "synchronous", "cache_size", "cell_size_check", "mmap_size")
# always in apply()'s answer, asked for or not
_ALWAYS_RECORDED = ("journal_mode", "synchronous")

# vfsstat rows -> io_counters keys
_VFSSTAT_FILES = {
    "database": "db",
    "journal": "journal",
    "wal": "wal",
    "master-journal": "super_journal",
    "sub-journal": "subjournal",
    "temp-database": "temp_db",
    "temp-journal": "temp_journal",
    "transient-db": "transient_db",
}
_VFSSTAT_STATS = {
    "read": "reads",
    "bytes-in": "read_bytes",
    "write": "writes",
    "bytes-out": "write_bytes",
    "sync": "syncs",
    "open": "opens",
}
_CACHE_STATUS = {
    "hits": apsw.SQLITE_DBSTATUS_CACHE_HIT,
    "misses": apsw.SQLITE_DBSTATUS_CACHE_MISS,
    "cache_writes": apsw.SQLITE_DBSTATUS_CACHE_WRITE,
    "cache_spills": apsw.SQLITE_DBSTATUS_CACHE_SPILL,
}

CHECKSUM_HINT = (
    "checksum mismatch: cksumvfs read a database page whose stored checksum does not match its content "
    "(SQLITE_IOERR_DATA, extended code 8202); the database file is corrupt"
)

_shims_lock = threading.Lock()


class SqliteEngine:
    """blocklab's SQLite database: `directory`/blocklab.db, opened through apsw.

    `fixed` settings are merged under every apply() (the cell's own win).
    After apply(), `reinitialised` is True when a new, empty database file was
    made: the workload must then load its data set again."""

    name = ENGINE

    def __init__(
        self,
        path: Path | str | None = None,
        fixed: dict[str, Any] | None = None,
        *,
        cache_dir: Path | str | None = None,
    ):
        if path is None:
            if cache_dir is None:
                from ..paths import cache_root

                cache_dir = cache_root()
            path = Path(cache_dir) / "sqlite"
        self.directory = Path(path)
        self.db_path = self.directory / DB_FILE
        self.fixed = dict(fixed or {})
        self.reinitialised = False
        self._started = False
        self._dir_lock: DirectoryLock | None = None
        self._stat_conn: apsw.Connection | None = None
        self._conns: weakref.WeakSet[apsw.Connection] = weakref.WeakSet()
        self._checksum = False  # layout of the current file
        self._session: dict[str, Any] = {}  # native -> canonical value, applied by connect()

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
        if getattr(self, "_dir_lock", None) is not None:
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
            return _with_limits(dataclasses.replace(KNOBS[native], generic=None))
        if name in NOT_ON_SQLITE:
            raise KnobError(f"knob {name!r} is not available on engine sqlite: {NOT_ON_SQLITE[name]}")
        if name not in GENERIC_TO_NATIVE:
            raise KnobError(
                f"unknown knob {name!r} on engine sqlite; accepted: generic knobs "
                f"{', '.join(sorted(GENERIC_TO_NATIVE))}, or a native parameter "
                f"{', '.join('sqlite.' + n for n in KNOBS)}"
            )
        return _with_limits(KNOBS[GENERIC_TO_NATIVE[name]])

    def check_settings(self, settings: dict[str, Any], *, partial: bool = False) -> dict[str, Any]:
        """Canonical values (ints, bools, lower-case names); KnobError on anything SQLite
        would refuse or silently ignore."""
        out: dict[str, Any] = {}
        seen: dict[str, tuple[str, Any]] = {}  # native -> (name given, value)
        for name, value in settings.items():
            info = self.knob(name)
            if info.native == "page_size":
                canonical = _page_size(value, info)
            else:
                canonical = info.normalise(value, ENGINE)
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
        session = {k: native[k] for k in _SESSION_ORDER if k in native}
        session.setdefault("journal_mode", DEFAULT_JOURNAL_MODE)
        self._session = session
        conn = self.connect()  # runs the session pragmas; converts the journal mode if needed
        try:
            got = read_pragmas(conn)
        finally:
            self._forget(conn)
        expected = {**{k: _pragma_text(k, v) for k, v in session.items()}, "page_size": str(page_size),
                    "cksumvfs": _pragma_text("cksumvfs", checksum)}
        for key, value in expected.items():
            if got.get(key) != value:
                raise EngineError(
                    f"SQLite did not take {key} = {value}: PRAGMA reports {got.get(key)!r} on {self.db_path}"
                )
        out = {name: got[self.knob(name).native] for name in wanted}
        covered = {self.knob(name).native for name in wanted}
        for key in _ALWAYS_RECORDED:
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
        header = _read_header(self.db_path)
        if header is None:
            return None
        page_size, reserve = header
        return page_size, reserve == CKSUM_RESERVE

    # ------------------------------------------------------------------ connections
    def connect(self) -> apsw.Connection:
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
                conn.execute(f"PRAGMA {key} = {_pragma_literal(key, value)}").fetchall()
        except BaseException:
            conn.close()
            raise
        self._conns.add(conn)
        return conn

    @property
    def vfs_name(self) -> str:
        return CKSUM_VFS if self._checksum else STAT_VFS

    def query(self, sql: str, bindings: Any = ()) -> list[tuple]:
        """Run one statement on a short-lived session connection; all rows."""
        conn = self.connect()
        try:
            return conn.execute(sql, bindings).fetchall()
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
        conn = self.connect()
        try:
            settings = read_pragmas(conn, full=True)
            compile_options = [row[0] for row in conn.execute("PRAGMA compile_options")]
        finally:
            self._forget(conn)
        return EngineInfo(
            engine=ENGINE,
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

    def relation_bytes(self, name: str) -> int:
        """Bytes of the pages of one table or index (the dbstat virtual table)."""
        rows = self.query("SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = ?", (name,))
        return int(rows[0][0])

    def direct_io_active(self) -> bool:
        return False  # SQLite always reads through the OS page cache

    # ------------------------------------------------------------------ cache control
    def evict(self, relations: Iterable[str]) -> dict[str, Any]:
        """Cold cache. SQLite's page cache belongs to each connection, so the engine's
        connections are closed (the next connect() starts empty); then the database
        file is flushed and dropped from the OS page cache. All tables live in the one
        file, so `relations` only goes into the record."""
        self.start()
        done: dict[str, Any] = {
            "relations": list(relations),
            "engine_closed_connections": self._close_connections(),
            "os_dropped_files": 0,
            "os_drop_possible": True,
        }
        for path in [self.db_path, *(Path(f"{self.db_path}{s}") for s in ("-wal", "-journal"))]:
            if not path.exists():
                continue
            if drop_os_cache(path):
                done["os_dropped_files"] += 1
            else:
                done["os_drop_possible"] = False
        return done

    def io_counters(self, conn: apsw.Connection | None = None) -> dict[str, float]:
        """Cumulative VFS calls and bytes (process-wide vfsstat) per file type, as
        `<file>_<stat>` (db_reads, wal_write_bytes, journal_syncs ...), plus the main
        database file's as reads, read_bytes, writes, write_bytes, fsyncs.
        With the measuring connection: its page cache hits, misses, writes and spills."""
        self.start()
        assert self._stat_conn is not None
        out: dict[str, float] = {}
        for file, stat, count in self._stat_conn.execute("SELECT file, stat, count FROM vfsstat"):
            if file in _VFSSTAT_FILES and stat in _VFSSTAT_STATS:
                out[f"{_VFSSTAT_FILES[file]}_{_VFSSTAT_STATS[stat]}"] = float(count)
        for key, source in (("reads", "db_reads"), ("read_bytes", "db_read_bytes"), ("writes", "db_writes"),
                            ("write_bytes", "db_write_bytes"), ("fsyncs", "db_syncs")):
            out[key] = out.get(source, 0.0)
        if conn is not None:
            for key, op in _CACHE_STATUS.items():
                out[key] = float(conn.status(op)[0])
        return out

    # ------------------------------------------------------------------ testing aids
    def corrupt_page(self, page_number: int, offset: int | None = None) -> int:
        """Flip every bit of one byte of page `page_number` (1-based) in the database
        file, by default the last byte before the reserved area (row data of a full
        leaf page). Connections are closed first so no cached copy hides it.
        Returns the file offset changed."""
        self.start()
        self._close_connections()
        header = _read_header(self.db_path)
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


# ---------------------------------------------------------------------- module helpers
def load_shims() -> None:
    """Register vfslog (vfsstat) and then cksmvfs on top of it, once per process,
    and put the default VFS back. Loading either twice would stack it on itself."""
    import apsw.sqlite_extra

    with _shims_lock:
        names = apsw.vfs_names()
        if STAT_VFS in names and CKSUM_VFS in names:
            _install_checksum_message()
            return
        default = names[0]
        scratch = apsw.Connection(":memory:")
        try:
            if STAT_VFS not in names:
                apsw.sqlite_extra.load(scratch, "vfsstat")
            if CKSUM_VFS not in apsw.vfs_names():
                apsw.sqlite_extra.load(scratch, "cksumvfs")  # wraps the default, vfslog: counted too
        except (apsw.sqlite_extra.NotAvailable, LookupError, apsw.Error) as err:
            raise EngineError(f"apsw's vfsstat/cksumvfs extras cannot be loaded ({err}); reinstall apsw from PyPI") from err
        finally:
            scratch.close()
        apsw.set_default_vfs(default)
        _install_checksum_message()


def _install_checksum_message() -> None:
    """apsw reports SQLITE_IOERR_DATA as "disk I/O error"; say it was a checksum."""
    cls = apsw.IOError
    if getattr(cls.__str__, "_blocklab_checksum", False):
        return
    base = cls.__str__

    def __str__(self: BaseException) -> str:
        text = base(self)
        if getattr(self, "extendedresult", None) == apsw.SQLITE_IOERR_DATA and "checksum" not in text:
            return f"{text}: {CHECKSUM_HINT}"
        return text

    __str__._blocklab_checksum = True  # type: ignore[attr-defined]
    cls.__str__ = __str__  # type: ignore[method-assign]


def is_checksum_error(err: BaseException) -> bool:
    return isinstance(err, apsw.IOError) and getattr(err, "extendedresult", None) == apsw.SQLITE_IOERR_DATA


def read_pragmas(conn: apsw.Connection, full: bool = False) -> dict[str, str]:
    """The knobs' values as this connection reports them (native names, text);
    with `full`, every storage-relevant pragma as well."""
    def one(pragma: str) -> Any:
        row = conn.execute(f"PRAGMA {pragma}").fetchone()
        return row[0] if row else None

    # cksumvfs answers with the text '1'; other VFSes do not know the pragma (no row)
    checksum_on = str(one("checksum_verification")) == "1" and conn.reserve_bytes() == CKSUM_RESERVE
    out = {
        "page_size": str(one("page_size")),
        "cksumvfs": "on" if checksum_on else "off",
        "cell_size_check": "on" if str(one("cell_size_check")) == "1" else "off",
        "cache_size": str(one("cache_size")),
        "journal_mode": str(one("journal_mode")).lower(),
        "synchronous": SYNCHRONOUS[int(one("synchronous"))],
        "mmap_size": str(one("mmap_size") or 0),
    }
    if full:
        for pragma in ("page_count", "freelist_count", "auto_vacuum", "cache_spill", "locking_mode", "temp_store",
                       "wal_autocheckpoint", "journal_size_limit", "secure_delete", "busy_timeout", "threads",
                       "encoding", "user_version", "foreign_keys", "automatic_index"):
            value = one(pragma)
            out[pragma] = "" if value is None else str(value)
        out["reserve_bytes"] = str(conn.reserve_bytes())
        out["checksum_verification"] = "1" if checksum_on else "0"
        out["vfs"] = conn.open_vfs
    return out


def _page_size(value: Any, info: KnobInfo) -> int:
    where = f"knob {info.generic or 'sqlite.' + info.native!r} (sqlite page_size)"
    accepted = "a power of two from 512 to 65536 bytes: " + ", ".join(map(str, PAGE_SIZES))
    try:
        number = parse_int(value, where, info)
    except KnobError:
        raise KnobError(f"{where}: {value!r} is not accepted; accepted: {accepted}") from None
    if number not in PAGE_SIZES:
        raise KnobError(f"{where}: {value!r} is not accepted (SQLite would silently ignore it); accepted: {accepted}")
    return number


def _pragma_literal(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "ON" if value else "OFF"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if not re.fullmatch(r"[A-Za-z]+", text):  # canonical enum values only; never a quote to escape
        raise KnobError(f"sqlite.{key}: {value!r} is not a pragma value blocklab sends")
    return text.upper()


def _pragma_text(key: str, value: Any) -> str:
    """A canonical value as read_pragmas() reports it."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value).lower()


def _read_header(path: Path) -> tuple[int, int] | None:
    """(page size, reserve bytes) from a database file's 100-byte header."""
    try:
        with open(path, "rb") as f:
            header = f.read(100)
    except FileNotFoundError:
        return None
    if len(header) < 100 or not header.startswith(_SQLITE_HEADER):
        return None
    page_size = int.from_bytes(header[16:18], "big")
    return (65536 if page_size == 1 else page_size), header[20]


def _with_limits(info: KnobInfo) -> KnobInfo:
    """Limits this SQLite build was compiled with."""
    if info.native == "mmap_size":
        return dataclasses.replace(info, maximum=_max_mmap_size())
    return info


@functools.cache
def _max_mmap_size() -> int:
    """SQLITE_MAX_MMAP_SIZE: a larger PRAGMA mmap_size is silently capped to it."""
    conn = apsw.Connection(":memory:")
    try:
        for (option,) in conn.execute("PRAGMA compile_options"):
            if option.startswith("MAX_MMAP_SIZE="):
                with contextlib.suppress(ValueError):
                    return int(option.split("=", 1)[1].rstrip("LlUu"), 0)
    finally:
        conn.close()
    return 2**31 - 1


