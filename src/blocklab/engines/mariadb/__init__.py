"""MariaDB / InnoDB: a private mariadbd of blocklab's own, or someone's server by DSN.

Private instance (the default, instance.py): blocklab owns it, one data
directory per InnoDB page size, stopped however blocklab ends.

DSN mode (dsn.py: ``mysql://user@host:port/blocklab``, ``mysql:///blocklab?socket=PATH``
or a bare socket path; server.py: what blocklab may do there). Someone's server: blocklab works only in its own
database ``blocklab``; session knobs are SET in the measuring session; global
(dynamic) knobs are changed with SET GLOBAL only with ``allow_server_changes``,
each original value being recorded first and restored by ``stop()`` (also at
exit); knobs that need a restart or a new data directory are refused in
validation (``checksum`` is a SET GLOBAL there, allowed like any global knob,
and the rebuild happens in blocklab's own database). A cold cache is refused
on such a server: InnoDB's buffer pool empties only with a restart.

Cold cache on the private instance: ``evict()`` restarts it (~0.3 s; the buffer
pool is never dumped at shutdown nor loaded at startup) and drops the tables'
files from the OS page cache while it is down; with direct_io on, InnoDB reads
bypass the page cache anyway. ``relation_bytes()`` reports the pages in use from
InnoDB's persistent statistics: the workloads' dialects run ``analyze(table)``
after loading.

Knobs (knobs.py; generic -> native, how a change is applied):

    block_size       innodb_page_size           reinit: a data directory per size, cached
    checksum         innodb_checksum_algorithm  reinit: dynamic on the server, but it only
                                                governs tablespaces created afterwards:
                                                needs_rebuild(table) says when a table's
                                                format is not the one new tables get now
    direct_io        innodb_flush_method        restart (on -> O_DIRECT, off -> fsync)
    writers          innodb_write_io_threads    reload (dynamic in 10.11, checked here)
    io_slaves        innodb_read_io_threads     reload
    multiblock_read  innodb_read_ahead_threshold reload: sequential pages of an extent that
                                                trigger linear read-ahead (0..64)
    buffer_cache     innodb_buffer_pool_size    reload; sizes like 64M accepted

Any server variable is accepted as ``mariadb.NAME``; its type, range, enum
values and whether it is read-only (-> restart) come from
information_schema.SYSTEM_VARIABLES of the running server.

The rest of the package: the session (session.py), I/O counters
(counters.py), the per-session time profile from performance_schema
(waits.py), and how each workload's tables are built and timed here (scan.py,
tables.py, slob.py, update.py).
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pymysql

from ..base import ApplyClass, Capabilities, CounterWindow, EngineBase, EngineError, EngineInfo, Session
from ..host import DirectoryLock, drop_os_cache_files, stop_at_exit, stopped
from .capabilities import CAPABILITIES
from .counters import innodb_window, read_counters
from .cpu_profile import ProfileProcesses
from .dsn import DATABASE, ConnectParams, parse_dsn
from .instance import InstanceMixin, tail_of_log
from .knobs import (
    ENGINE_NAME,
    GENERIC_TO_NATIVE,
    KnobsMixin,
    ServerVariable,
    parse_page_size,
    same_setting,
    server_value,
    sql_value,
    wait_buffer_pool_resize,
)
from .scan import ScanTables
from .server import DsnServerMixin
from .session import MariadbSession
from .slob import SlobTables
from .sqlscript import SqlScripts
from .tables import InsertLoop, ReloadTables
from .update import UpdateTables

_UNKNOWN_DATABASE = 1049  # ER_BAD_DB_ERROR
# The error replies after which the control connection is still in step with the server
# (anything else, an OperationalError included, may have cut it off mid-reply).
_SERVER_REPLIES = (pymysql.err.ProgrammingError, pymysql.err.IntegrityError, pymysql.err.DataError,
                   pymysql.err.NotSupportedError, pymysql.err.InternalError)
# query()'s kept connection: a server by DSN whose host vanished (no FIN, no RST) would
# otherwise hold a ping or statement until TCP gives up (~15 min); blocklab's own statements
# are catalog and counter reads of well under a second
CONTROL_READ_TIMEOUT_S, CONTROL_WRITE_TIMEOUT_S = 120.0, 30.0


class MariadbEngine(InstanceMixin, KnobsMixin, DsnServerMixin, EngineBase):
    name: ClassVar[str] = ENGINE_NAME
    display: ClassVar[str] = "MariaDB"  # as people write it
    native_prefix: ClassVar[str] = "mariadb."
    summary: ClassVar[str] = "MariaDB/InnoDB: a private mariadbd of blocklab's own, or your server by --dsn"
    accepts_dsn: ClassVar[bool] = True
    dialects: ClassVar[dict[str, type]] = {
        "full_scan": ScanTables,
        "row_insert": InsertLoop,
        "reload": ReloadTables,
        "slob": SlobTables,
        "update": UpdateTables,
        "sql": SqlScripts,
        "cpu_profile": ProfileProcesses,
    }
    # a restart ~3 s; a checksum change rebuilds small tables (~1 s over the checksum
    # recipe's quick sweep); another page size is another data directory (change_cost)
    install_bytes: ClassVar[float] = 250e6  # a data directory per page size: 125 MB at 16k, 214 MB at 64k here
    capabilities: ClassVar[Capabilities] = CAPABILITIES
    change_seconds: ClassVar[dict[ApplyClass, float]] = {ApplyClass.RESTART: 3.0, ApplyClass.REINIT: 1.0}

    def __init__(
        self,
        dsn: str | None = None,
        cache_dir: Path | None = None,
        allow_server_changes: bool = False,
        page_size: int | str | None = None,
        start_timeout: float = 60.0,
    ):
        self.dsn = dsn
        self.mode = "dsn" if dsn else "embedded"
        self.allow_server_changes = allow_server_changes
        self.start_timeout = start_timeout
        if cache_dir is None:
            from ...paths import cache_root

            cache_dir = cache_root()
        self.cache_dir = Path(cache_dir)
        self._dsn = parse_dsn(dsn) if dsn else None
        self._page_size: int | None = None
        if page_size is not None:
            self._page_size = parse_page_size(page_size)
        self.reinitialised = False  # a fresh data directory was made (its tables are new)
        self.timings: dict[str, float] = {}  # last install/start/stop seconds, for the report
        self._started = False
        self._control: pymysql.connections.Connection | None = None  # query()'s, kept open
        self._control_lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._lock: DirectoryLock | None = None
        self._catalog: dict[str, ServerVariable] = {}
        self._local_datadir: str | None = None  # a DSN server's data directory on this host ("" when elsewhere)
        self._version = ""
        self._server_settings: dict[str, str] = {}  # native -> value for the command line (embedded)
        self._session_settings: dict[str, str] = {}  # native -> SET SESSION value
        self._dsn_originals: dict[str, object] = {}  # native -> @@GLOBAL value before blocklab changed it

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        if self._started:
            return
        if self.mode == "embedded":
            self._start_instance()
        else:
            self._open_dsn()
        self._started = True
        stop_at_exit(self)
        self._load_catalog()

    def stop(self) -> None:
        if not self._started and self._proc is None:
            self._close_control()
            return
        try:
            self._close_control()  # before the server goes, so it logs no aborted connection
            if self.mode == "embedded":
                self._stop_instance()
            else:
                self._restore_dsn_settings()
        finally:
            self._close_control()  # the put-back above may have asked on a new one
            self._started = False
            stopped(self)

    def restart(self) -> None:
        """Stop and start the private instance with the current server settings."""
        if self.mode != "embedded":
            raise EngineError("blocklab never restarts a server given by --dsn")
        self._shutdown_server()
        self._launch_server()

    # ------------------------------------------------------------------ faults
    def health(self) -> str | None:
        if self.mode == "embedded":
            proc = self._proc
            if proc is None or proc.poll() is not None:
                code = proc.poll() if proc is not None else None
                return f"the private mariadbd{f' (pid {proc.pid})' if proc else ''} is gone" + (f", exit code {code}" if code is not None else "")
        try:
            pymysql.connect(**self._connect_params(), connect_timeout=5).close()
        except pymysql.err.MySQLError as err:
            return f"MariaDB does not accept connections: {err.args[-1] if err.args else err}"
        return None

    def recover(self) -> None:
        """The private instance: start it again (InnoDB's crash recovery runs at start).
        A server by DSN: wait for it, bounded; a restarted server lost the SET GLOBAL
        values blocklab made, so they are made again (originals stay recorded)."""
        if self.mode == "embedded":
            self._shutdown_server()  # reaps the dead process
            self._reap_stale_server()
            self._launch_server()
            return
        self._wait_for_dsn_server()

    def log_tail(self, lines: int = 15) -> str:
        if self.mode != "embedded":
            return ""
        log = self.home() / "error.log"
        return f"error log {log}:\n{tail_of_log(log, 0, lines)}"

    # ------------------------------------------------------------------ connections
    def _connect_params(self) -> ConnectParams:
        if self._dsn is not None:
            return self._dsn.params.copy()
        return {"unix_socket": str(self.socket_path), "user": "root", "password": ""}

    def _admin(self, database: str | None = None) -> pymysql.connections.Connection:
        return pymysql.connect(**self._connect_params(), database=database, autocommit=True, charset="utf8mb4")

    @classmethod
    def installed_version(cls) -> str | None:
        """mariadbd's version without starting it (`blocklab fleet status` lists what
        each host would run); None when MariaDB is not installed."""
        from .instance import mariadbd_path

        try:
            out = subprocess.run([mariadbd_path(), "--version"], capture_output=True, text=True, timeout=30, check=True).stdout
        except (EngineError, OSError, subprocess.SubprocessError):
            return None
        words = out.split()  # "/usr/sbin/mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu ..."
        return words[words.index("Ver") + 1] if "Ver" in words[:-1] else (out.strip() or None)

    @classmethod
    def native_name(cls, knob: str) -> str:
        if knob.startswith("mariadb."):
            return knob[len("mariadb."):]
        return GENERIC_TO_NATIVE.get(knob, knob)

    def change_cost(self, apply_class: ApplyClass, knobs: list[str]) -> float:
        cost = super().change_cost(apply_class, knobs)
        if "block_size" in knobs or "mariadb.innodb_page_size" in knobs:
            cost += 3.0  # another page size is another data directory: ~4 s, not a table rebuild's ~1 s
        return cost

    def connect(self, *, session: bool = True) -> MariadbSession:
        return MariadbSession(self, self.sql_connect(session=session))

    def sql_connect(self, *, session: bool = True, autocommit: bool = True, create: bool = True,
                    read_timeout: float | None = None, write_timeout: float | None = None) -> pymysql.connections.Connection:
        """A DB-API connection to the `blocklab` database with the session knobs applied
        (this package's own code). On a server given by DSN the database is made here,
        when first needed; with create=False (a question, not a build) a server that has
        none yet is asked without it."""
        self.start()
        try:
            conn = pymysql.connect(**self._connect_params(), database=DATABASE, autocommit=autocommit, charset="utf8mb4",
                                   read_timeout=read_timeout, write_timeout=write_timeout)
        except pymysql.err.OperationalError as err:
            if err.args[0] != _UNKNOWN_DATABASE or self.mode != "dsn":
                raise
            if create:
                with self._admin() as admin, admin.cursor() as cur:
                    cur.execute(f"CREATE DATABASE IF NOT EXISTS `{DATABASE}` CHARACTER SET utf8mb4")
            conn = pymysql.connect(**self._connect_params(), database=DATABASE if create else None,
                                   autocommit=autocommit, charset="utf8mb4",
                                   read_timeout=read_timeout, write_timeout=write_timeout)
        if session and self._session_settings:
            with conn.cursor() as cur:
                for native, value in self._session_settings.items():
                    cur.execute(f"SET SESSION {native} = %s", (sql_value(value),))
        return conn

    def query(self, sql: str, params: Sequence[object] | None = None) -> list[tuple[Any, ...]]:
        """One statement on the engine's control connection (no session knobs), kept
        open between calls: a new connection costs ~20 ms here, and a slob --quick
        run asked 365 of them (7 s of its 55). A connection the server dropped (a
        restart, another page size) is found by a ping before the statement and
        replaced, so no statement is ever sent twice."""
        self.start()  # outside the lock: starting asks its own questions here
        with self._control_lock:
            conn = self._control_connection()
            kept = conn is self._control
            try:
                with conn.cursor() as cur:
                    cur.execute(sql, params)
                    return list(cur.fetchall()) if cur.description else []
            except _SERVER_REPLIES:
                raise  # the server answered with an error: the connection is in step, keep it
            except BaseException:
                # cut off between statement and reply (Ctrl-C, a lost server): an answer may still
                # be on its way, and the next statement would read it as its own
                self._close_control()
                raise
            finally:
                if not kept:  # asked without the database: not kept (see below)
                    with contextlib.suppress(pymysql.err.Error, OSError):
                        conn.close()

    def _control_connection(self) -> pymysql.connections.Connection:
        if self._control is not None:
            try:
                self._control.ping(reconnect=False)
                return self._control
            except pymysql.err.Error:
                self._close_control()
        conn = self.sql_connect(session=False, create=False, read_timeout=CONTROL_READ_TIMEOUT_S,
                                write_timeout=CONTROL_WRITE_TIMEOUT_S)
        # a server by DSN before blocklab made its database answers on a connection without
        # one; keeping it would leave later statements with no database once it exists
        if conn.db is not None:
            self._control = conn
        return conn

    def _close_control(self) -> None:
        control, self._control = self._control, None
        if control is not None:
            with contextlib.suppress(pymysql.err.Error, OSError):
                control.close()

    # ------------------------------------------------------------------ applying settings
    def apply(self, settings: dict[str, Any]) -> dict[str, str]:
        """Make `settings` current and return what the server reports for each knob."""
        self.start()
        canonical = self.check_settings(settings)
        current = self._global_values()
        page_size: int | None = None
        session: dict[str, str] = {}
        server = dict(self._server_settings)
        restart = False
        dynamic: dict[str, str] = {}
        for name, value in canonical.items():
            info = self.knob(name)
            native = info.native
            if native == "innodb_page_size":
                page_size = int(value)
                continue
            conf = server_value(value)
            if info.apply == ApplyClass.SESSION:
                session[native] = conf
                continue
            changed = not same_setting(current.get(native), conf)
            server[native] = conf
            if self._catalog[native].read_only:
                restart = restart or changed
            elif changed:
                dynamic[native] = conf
        self._session_settings = session
        if self.mode == "embedded":
            previous = (dict(self._server_settings), self.page_size)
            self._server_settings = server
            try:
                if page_size is not None and page_size != self.page_size:
                    self._switch_page_size(page_size)
                elif restart:
                    self.restart()
                else:
                    self._set_global(dynamic)
            except BaseException:
                if self._proc is None or self._proc.poll() is not None:
                    self._recover(*previous)
                raise
        else:
            self._set_global(dynamic, record_originals=True)
            self._server_settings = server
        return self.read_back(settings)

    def _recover(self, server_settings: dict[str, str], page_size: int) -> None:
        """A start with new settings failed: bring the instance back as it was, so the
        next cell finds a server (or, failing that, a cleanly stopped engine)."""
        self._server_settings = server_settings
        with contextlib.suppress(Exception):
            self._stop_instance()
        self._started = False
        self._page_size = page_size
        with contextlib.suppress(Exception):
            self.start()

    def _switch_page_size(self, page_size: int) -> None:
        self._stop_instance()
        self._started = False
        self._page_size = page_size
        self._start_instance()
        self._started = True

    def _set_global(self, values: dict[str, str], record_originals: bool = False) -> None:
        if not values:
            return
        with self._admin() as conn, conn.cursor() as cur:
            for native, conf in values.items():
                if record_originals and native not in self._dsn_originals:
                    cur.execute(f"SELECT @@GLOBAL.{native}")
                    self._dsn_originals[native] = cur.fetchall()[0][0]
                cur.execute(f"SET GLOBAL {native} = %s", (sql_value(conf),))
                cur.execute("SHOW WARNINGS")
                warnings = [w[2] for w in cur.fetchall()]
                if warnings:
                    raise EngineError(f"SET GLOBAL {native} = {conf}: the server warned: {'; '.join(warnings)}")
                if native == "innodb_buffer_pool_size":
                    wait_buffer_pool_resize(cur)

    def _global_values(self) -> dict[str, str]:
        rows = self.query("SELECT LOWER(VARIABLE_NAME), GLOBAL_VALUE FROM information_schema.SYSTEM_VARIABLES")
        return {r[0]: r[1] for r in rows}

    def read_back(self, settings: Iterable[str]) -> dict[str, str]:
        """@@var for each knob after the change: @@SESSION in a measuring session for
        session knobs, @@GLOBAL otherwise; booleans as ON/OFF."""
        out: dict[str, str] = {}
        with self.sql_connect() as conn, conn.cursor() as cur:
            for name in settings:
                native = self._native(name)
                var = self._catalog[native]
                cur.execute(f"SELECT @@{'SESSION' if var.session else 'GLOBAL'}.{native}")
                value = cur.fetchall()[0][0]
                if var.type == "BOOLEAN":
                    value = "ON" if int(value) else "OFF"
                out[name] = value.decode() if isinstance(value, bytes) else str(value)
        return out

    def check_applied(self, settings: dict[str, object]) -> list[str]:
        """@@var read back in a new measuring session against the canonical values."""
        canonical = self.check_settings(settings)
        got = self.read_back(canonical)
        problems = []
        for name, value in canonical.items():
            want = server_value(value)
            if not same_setting(got.get(name), want) and not (isinstance(value, bool) and got.get(name) == want):
                problems.append(f"{name} asked {want}, MariaDB reports {got.get(name)!r}")
        return problems

    def relation_files(self, relation: str) -> list[Path]:
        return self._relation_files(relation) if self._is_local() else []

    def cached_bytes(self, relations: Iterable[str]) -> float | None:
        """Buffer pool pages of these tables (information_schema.INNODB_BUFFER_PAGE:
        cheap on blocklab's small pools; never asked of a DSN server, whose pool
        blocklab does not empty)."""
        names = [f"`{DATABASE}`.`{r}`" for r in relations]
        if not names:
            return 0.0
        marks = ", ".join(["%s"] * len(names))
        rows = self.query(
            f"SELECT COUNT(*) * @@innodb_page_size FROM information_schema.INNODB_BUFFER_PAGE WHERE TABLE_NAME IN ({marks})",
            names,
        )
        return float(rows[0][0]) if rows else 0.0

    # ------------------------------------------------------------------ information
    def info(self) -> EngineInfo:
        self.start()
        settings = {str(k): "" if v is None else str(v) for k, v in self.query("SHOW GLOBAL VARIABLES")}
        return EngineInfo(
            engine=ENGINE_NAME,
            version=self._version,
            mode=self.mode,
            data_dir=self.data_dir(),
            settings=settings,
            extra={
                "version_comment": settings.get("version_comment"),
                "innodb_page_size": settings.get("innodb_page_size"),
                "innodb_checksum_algorithm": settings.get("innodb_checksum_algorithm"),
                "innodb_flush_method": settings.get("innodb_flush_method"),
                "database": DATABASE,
                "server": "private instance" if self.mode == "embedded" else self._where(),
                **({"timings": dict(self.timings)} if self.timings else {}),
            },
        )

    def data_dir(self) -> str | None:
        """The data directory on this host; None for a server given by DSN that is
        not reached through a local socket or address (its files are elsewhere)."""
        if self.mode == "embedded":
            return str(self.datadir)
        if not self._is_local():
            return None
        self.start()
        if self._local_datadir is None:
            self._local_datadir = self._find_local_datadir()
        return self._local_datadir or None

    @property
    def version(self) -> str:
        return self._version

    def version_tuple(self) -> tuple[int, ...]:
        import re

        self.start()
        return tuple(int(p) for p in re.findall(r"\d+", self._version.split("-")[0])[:3])

    def block_size(self) -> int:
        self.start()
        return int(self.query("SELECT @@innodb_page_size")[0][0])

    def direct_io_active(self) -> bool:
        return str(self.query("SELECT @@innodb_flush_method")[0][0]).upper().startswith("O_DIRECT")

    def relation_bytes(self, table: str) -> int:
        """Bytes of the table's data and indexes as InnoDB's persistent statistics count
        them (pages in use; the .ibd file is larger, extents are preallocated). The
        statistics are exact after ANALYZE TABLE: call analyze() once the data set is
        loaded. This reads no table page, so it is safe to call after evict()."""
        rows = self.query(
            "SELECT COALESCE(DATA_LENGTH, 0) + COALESCE(INDEX_LENGTH, 0) FROM information_schema.TABLES "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (DATABASE, table),
        )
        return int(rows[0][0]) if rows else 0

    def file_bytes(self, table: str) -> int:
        """Size of the table's tablespace file(s) on disk."""
        rows = self.query(
            "SELECT COALESCE(SUM(FILE_SIZE), 0) FROM information_schema.INNODB_SYS_TABLESPACES WHERE NAME = %s OR NAME LIKE %s",
            (f"{DATABASE}/{table}", f"{DATABASE}/{table}#P#%"),
        )
        return int(rows[0][0]) if rows else 0

    def analyze(self, table: str) -> None:
        """ANALYZE TABLE: exact page counts for relation_bytes() (it reads a few pages:
        run it before evict(), not after)."""
        with self.sql_connect(session=False) as conn, conn.cursor() as cur:
            cur.execute(f"ANALYZE TABLE `{table}`")
            cur.fetchall()

    # ------------------------------------------------------------------ cache control
    def evict(self, relations: Iterable[str]) -> dict[str, object]:
        """Cold cache: restart the private instance (its buffer pool is neither dumped
        at shutdown nor loaded at startup) and drop the tables' files from the OS
        page cache while it is down."""
        if self.mode != "embedded":
            raise EngineError(
                "a cold cache on a server given by --dsn is not possible: InnoDB's buffer pool empties only "
                "with a restart, which blocklab never does to someone's server. Use a warm cache, or the "
                "private instance (no --dsn)"
            )
        self.start()
        files = [f for rel in relations for f in self._relation_files(rel)]
        t0 = time.perf_counter()
        self._shutdown_server()
        dropped, possible = drop_os_cache_files(files)
        self._launch_server()
        return {
            "engine_restarted": True,
            # InnoDB reads the first 256 KiB of each tablespace through the page cache as it opens
            # it (mincore after a restart here: pages 0-63 of a 4 KiB-page file, at every InnoDB
            # page size): the file's header, not the table's data
            "reread_head_bytes": 256 * 1024,
            "restart_s": round(time.perf_counter() - t0, 3),
            "os_dropped_files": dropped,
            "os_drop_possible": possible,
            "direct_io": self.direct_io_active(),
        }

    def _relation_files(self, table: str) -> list[Path]:
        """The table's tablespace files (relative names are under the data directory)."""
        rows = self.query(
            "SELECT FILENAME FROM information_schema.INNODB_SYS_TABLESPACES WHERE NAME = %s OR NAME LIKE %s",
            (f"{DATABASE}/{table}", f"{DATABASE}/{table}#P#%"),
        )
        base = Path(self.data_dir() or self.datadir)
        return [base / r[0] if not str(r[0]).startswith("/") else Path(r[0]) for r in rows]

    # ------------------------------------------------------------------ tables and counters
    def table_fingerprint(self, table: str) -> str | None:
        """The table's COMMENT, where the workloads store their fingerprint (None: no table)."""
        rows = self.query(
            "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (DATABASE, table),
        )
        return str(rows[0][0]) if rows else None

    def needs_rebuild(self, table: str) -> bool:
        """A table's tablespace in another checksum format than new tables get now
        (innodb_checksum_algorithm governs only tablespaces created afterwards)."""
        return self.table_checksum(table) not in (None, self.checksum_family())

    def io_counters(self, session: Session | None = None) -> dict[str, float]:
        """Cumulative counters (counters.py): IO_KEYS, the Innodb_* status counters, file.*."""
        if session is not None:
            assert isinstance(session, MariadbSession), session  # the measuring session is one of ours
            with session.conn.cursor() as cur:
                return read_counters(cur)
        with self.sql_connect(session=False) as conn, conn.cursor() as cur:
            return read_counters(cur)

    def io_window(self, session: Session | None = None, *, settle: bool = False, sessions: Sequence[Session] = ()) -> CounterWindow:
        return innodb_window(self, session)  # status counters are global and current: nothing to settle


ENGINE = MariadbEngine
__all__ = ["ENGINE", "MariadbEngine"]
