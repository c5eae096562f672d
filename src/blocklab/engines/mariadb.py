"""MariaDB / InnoDB: a private mariadbd of blocklab's own, or someone's server by DSN.

Private instance (the default). blocklab owns it: one data directory per InnoDB
page size under the cache directory (``<cache>/mariadb-<page size>/data``),
created once with ``mariadb-install-db --no-defaults`` and reused, because the
page size is fixed when a data directory is created. ``mariadbd`` is started with
``--no-defaults`` (no my.cnf of the machine leaks in), listens only on a unix
socket, runs as the unprivileged user ``blocklab`` when we are root
(service_user.py), and gets every server-level knob on its command line at
every start, so a restart (a cold-cache eviction, a read-only knob) keeps the
setting. A file lock keeps two blocklab runs off one data directory. The server
is stopped by ``stop()``, at interpreter exit (atexit), on SIGTERM (a handler
turning it into SystemExit is installed when nobody else handles SIGTERM), and,
should this process be killed outright, by the kernel: the server is started
with a parent-death signal (SIGTERM) when it is started from the main thread.

DSN mode (``mysql://user@host:port/blocklab``, ``mysql:///blocklab?socket=PATH``
or a bare socket path). Someone's server: blocklab works only in its own
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
InnoDB's persistent statistics: run ``analyze(table)`` after loading. Passwords come from the DSN, ``MYSQL_PWD``, or ``~/.my.cnf``, and
are never reported.

Knobs (generic -> native, how a change is applied):

    block_size       innodb_page_size           reinit: a data directory per size, cached
    checksum         innodb_checksum_algorithm  reinit: dynamic on the server, but it only
                                                governs tablespaces created afterwards, so
                                                apply() sets `tables_must_be_rebuilt` and
                                                the workload must rebuild its tables
    direct_io        innodb_flush_method        restart (on -> O_DIRECT, off -> fsync)
    writers          innodb_write_io_threads    reload (dynamic in 10.11, checked here)
    io_slaves        innodb_read_io_threads     reload
    multiblock_read  innodb_read_ahead_threshold reload: sequential pages of an extent that
                                                trigger linear read-ahead (0..64)
    buffer_cache     innodb_buffer_pool_size    reload; sizes like 64M accepted

Any server variable is accepted as ``mariadb.NAME``; its type, range, enum
values and whether it is read-only (-> restart) come from
information_schema.SYSTEM_VARIABLES of the running server.

After apply() two attributes tell the workload what happened to its data:
``reinitialised`` is True when a fresh data directory was created (the data
set must be loaded), ``tables_must_be_rebuilt`` is True when the checksum
algorithm changed or the page size switched to another data directory (the
tables on disk may carry another checksum format). Both stay True until the
workload sets them back to False after (re)building; ``table_checksum(table)``
tells the format a table's tablespace really has.
"""

from __future__ import annotations

import contextlib
import ctypes
import getpass
import hashlib
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import pymysql

from .base import ApplyClass, EngineError, EngineInfo, KnobError, KnobInfo, fmt_bytes, parse_bool, parse_int
from .host import DirectoryLock, drop_os_cache, stop_at_exit, stopped
from .service_user import ensure_traversable, give_to_service_user, service_user

ENGINE = "mariadb"
DATABASE = "blocklab"
PAGE_SIZES = (4096, 8192, 16384, 32768, 65536)
DEFAULT_PAGE_SIZE = 16384

GENERIC_TO_NATIVE: dict[str, str] = {
    "block_size": "innodb_page_size",
    "checksum": "innodb_checksum_algorithm",
    "direct_io": "innodb_flush_method",
    "writers": "innodb_write_io_threads",
    "io_slaves": "innodb_read_io_threads",
    "multiblock_read": "innodb_read_ahead_threshold",
    "buffer_cache": "innodb_buffer_pool_size",
}
NOT_ON_MARIADB = {
    "block_checking": "InnoDB has no logical block checking setting (its page checksums are the "
    "'checksum' knob, innodb_checksum_algorithm; try engine sqlite: cell_size_check)",
}
# Checksum algorithms blocklab accepts for the generic knob: the ones the server
# offers (10.11: crc32, strict_crc32, full_crc32, strict_full_crc32). 'none',
# 'innodb' and their strict forms were removed from MariaDB and are refused.
CHECKSUM_FAMILIES = {"crc32": "crc32", "strict_crc32": "crc32", "full_crc32": "full_crc32", "strict_full_crc32": "full_crc32"}
_FSP_FLAGS_FULL_CRC32 = 1 << 4  # the marker bit of a full_crc32 tablespace in FSP flags

# Options a private instance always gets; the variables behind them are
# blocklab's to manage and refused as knobs there.
MANAGED = {
    "datadir": "the data directory is blocklab's (per page size, in the cache directory)",
    "socket": "the private instance listens on its own socket",
    "pid_file": "managed by blocklab",
    "log_error": "managed by blocklab",
    "skip_networking": "the private instance has no TCP port",
    "port": "the private instance has no TCP port",
    "bind_address": "the private instance has no TCP port",
    "performance_schema": "always ON: the file I/O counters come from it",
    "innodb_buffer_pool_dump_at_shutdown": "always OFF so a restart leaves a cold buffer pool",
    "innodb_buffer_pool_load_at_startup": "always OFF so a restart leaves a cold buffer pool",
}
INSTANCE_OPTIONS = (
    "--skip-networking",
    "--skip-name-resolve",
    "--performance-schema=ON",
    "--innodb-buffer-pool-dump-at-shutdown=OFF",
    "--innodb-buffer-pool-load-at-startup=OFF",
    "--character-set-server=utf8mb4",
    "--collation-server=utf8mb4_general_ci",
)

STATUS_COUNTERS = (
    "Innodb_buffer_pool_reads",
    "Innodb_buffer_pool_read_requests",
    "Innodb_buffer_pool_read_ahead",
    "Innodb_buffer_pool_read_ahead_evicted",
    "Innodb_buffer_pool_write_requests",
    "Innodb_pages_read",
    "Innodb_pages_written",
    "Innodb_data_reads",
    "Innodb_data_read",
    "Innodb_data_writes",
    "Innodb_data_written",
    "Innodb_data_fsyncs",
)
DATA_FILE_EVENT = "wait/io/file/innodb/innodb_data_file"

_SIZE_NAME = re.compile(r"(_size|_size_max)$")
# integer variables named *_size that count things, not bytes
_COUNT_NAMES = {"thread_pool_size", "host_cache_size", "histogram_size", "innodb_purge_batch_size", "innodb_sync_array_size"}
_IDENT = re.compile(r"^[a-z_][a-z0-9_]*$")


def _bin(name: str, fallback: str) -> str:
    found = shutil.which(name) or (fallback if Path(fallback).exists() else None)
    if found is None:
        raise EngineError(
            f"{name} is not installed; the MariaDB engine needs Debian's MariaDB server: apt-get install mariadb-server"
        )
    return found


def mariadbd_path() -> str:
    return _bin("mariadbd", "/usr/sbin/mariadbd")


def install_db_path() -> str:
    return _bin("mariadb-install-db", "/usr/bin/mariadb-install-db")


# ---------------------------------------------------------------------- exit safety
_LIBC: Any = None


def _parent_death_signal() -> None:
    """In the forked child, after the switch to the server user: SIGTERM the server
    when the thread that started it dies (so a SIGKILLed blocklab leaves none)."""
    if _LIBC is not None:
        _LIBC.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG


def server_processes(data_dir: Path | str) -> list[int]:
    """PIDs of mariadbd processes serving this data directory (from /proc)."""
    want = f"--datadir={Path(data_dir)}"
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"mariadbd") and want.encode() in argv:
            pids.append(int(entry.name))
    return pids


# ---------------------------------------------------------------------- catalog rows
@dataclass(frozen=True)
class ServerVariable:
    """One row of information_schema.SYSTEM_VARIABLES."""

    name: str  # lower case
    scope: str  # GLOBAL | SESSION | SESSION ONLY
    type: str  # BOOLEAN, ENUM, SET, FLAGSET, INT, INT UNSIGNED, BIGINT, BIGINT UNSIGNED, DOUBLE, VARCHAR
    minimum: int | float | None
    maximum: int | float | None
    block: int | None
    enum: tuple[str, ...]
    read_only: bool
    global_value: str | None
    default: str | None
    comment: str

    @property
    def dynamic(self) -> bool:
        return not self.read_only

    @property
    def session(self) -> bool:
        return self.scope in ("SESSION", "SESSION ONLY")


def _number(text: Any) -> int | float | None:
    if text is None or text == "":
        return None
    try:
        return int(text)
    except (TypeError, ValueError):
        return float(text)


@dataclass(frozen=True)
class _Dsn:
    params: dict[str, Any]  # pymysql.connect keyword arguments (password included, never shown)
    where: str  # printable: user@host:port or user@socket


def parse_dsn(dsn: str) -> _Dsn:
    """mysql://user[:password]@host[:port][/blocklab][?socket=PATH], mariadb://..., or a socket path."""
    params: dict[str, Any] = {}
    if dsn.startswith("/"):
        params["unix_socket"] = dsn
        params["user"] = getpass.getuser()
        database = ""
    else:
        url = urllib.parse.urlsplit(dsn)
        if url.scheme not in ("mysql", "mariadb"):
            raise EngineError(f"a MariaDB DSN starts with mysql:// or mariadb:// (or is a socket path), not {dsn.split(':')[0]!r}")
        query = urllib.parse.parse_qs(url.query)
        if url.username:
            params["user"] = urllib.parse.unquote(url.username)
        if url.password:
            params["password"] = urllib.parse.unquote(url.password)
        sock = (query.get("socket") or query.get("unix_socket") or [None])[0]
        if sock:
            params["unix_socket"] = sock
        elif url.hostname:
            params["host"] = url.hostname
            params["port"] = url.port or 3306
        else:
            params["host"] = "localhost"
            params["port"] = url.port or 3306
        database = url.path.lstrip("/")
    if database and database != DATABASE:
        raise EngineError(
            f"blocklab works only in its own database {DATABASE!r} on a server given by DSN, "
            f"not {database!r}: leave the database out of the DSN or name {DATABASE!r}"
        )
    if "password" not in params and os.environ.get("MYSQL_PWD"):
        params["password"] = os.environ["MYSQL_PWD"]
    mycnf = Path.home() / ".my.cnf"
    if mycnf.is_file():
        params["read_default_file"] = str(mycnf)  # fills only what the DSN left out
    params.setdefault("user", getpass.getuser())
    where = f"{params['user']}@" + (params["unix_socket"] if "unix_socket" in params else f"{params['host']}:{params['port']}")
    return _Dsn(params, where)


# ---------------------------------------------------------------------- the engine
class MariadbEngine:
    name = ENGINE

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
            from ..paths import cache_root

            cache_dir = cache_root()
        self.cache_dir = Path(cache_dir)
        self._dsn = parse_dsn(dsn) if dsn else None
        self._page_size: int | None = None
        if page_size is not None:
            self._page_size = _parse_page_size(page_size)
        # outcome flags for the workload (see the module docstring)
        self.reinitialised = False
        self.tables_must_be_rebuilt = False
        self.timings: dict[str, float] = {}  # last install/start/stop seconds, for the report
        self._started = False
        self._proc: subprocess.Popen | None = None
        self._lock: DirectoryLock | None = None
        self._catalog: dict[str, ServerVariable] = {}
        self._version = ""
        self._server_settings: dict[str, str] = {}  # native -> value for the command line (embedded)
        self._session_settings: dict[str, str] = {}  # native -> SET SESSION value
        self._dsn_originals: dict[str, Any] = {}  # native -> @@GLOBAL value before blocklab changed it

    # ------------------------------------------------------------------ paths
    def home(self, page_size: int | None = None) -> Path:
        return self.cache_dir / f"mariadb-{page_size or self.page_size}"

    @property
    def page_size(self) -> int:
        if self._page_size is None:
            self._page_size = self._initial_page_size()
        return self._page_size

    def _initial_page_size(self) -> int:
        """The default page size, unless only another size is cached already (its
        catalog serves validation just as well and costs no install-db)."""
        if (self.home(DEFAULT_PAGE_SIZE) / "data" / "mysql").is_dir():
            return DEFAULT_PAGE_SIZE
        for size in PAGE_SIZES:
            if (self.home(size) / "data" / "mysql").is_dir():
                return size
        return DEFAULT_PAGE_SIZE

    @property
    def datadir(self) -> Path:
        return self.home() / "data"

    @property
    def socket_path(self) -> Path:
        path = self.home() / "mariadbd.sock"
        if len(str(path)) < 100:  # sun_path holds 108 bytes
            return path
        digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
        return Path("/tmp") / f".blocklab-mariadb-{digest}.sock"

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
            return
        try:
            if self.mode == "embedded":
                self._stop_instance()
            else:
                self._restore_dsn_settings()
        finally:
            self._started = False
            stopped(self)

    def restart(self) -> None:
        """Stop and start the private instance with the current server settings."""
        if self.mode != "embedded":
            raise EngineError("blocklab never restarts a server given by --dsn")
        self._shutdown_server()
        self._launch_server()

    # ------------------------------------------------------------------ private instance
    def _start_instance(self) -> None:
        self._lock_instance()
        try:
            self._reap_stale_server()
            self._ensure_datadir()
            self._launch_server()
        except BaseException:
            self._shutdown_server()
            self._unlock_instance()
            raise

    def _stop_instance(self) -> None:
        try:
            self._shutdown_server()
        finally:
            self._unlock_instance()

    def _lock_instance(self) -> None:
        home = self.home()
        home.mkdir(parents=True, exist_ok=True)
        ensure_traversable(home)
        self._lock = DirectoryLock(home / "instance.lock", f"the private MariaDB in {home}")
        self._lock.acquire()

    def _unlock_instance(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _reap_stale_server(self) -> None:
        """A server left behind by a blocklab that was killed (we hold the lock, so
        nobody else owns it): shut it down before starting ours."""
        for pid in server_processes(self.datadir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 60
            while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def _ensure_datadir(self) -> None:
        """install-db once per page size, into a temporary directory renamed when
        complete, so an interrupted install never passes for a data directory."""
        home, data = self.home(), self.datadir
        if (data / "mysql").is_dir():
            return
        mariadbd_path()
        t0 = time.perf_counter()
        building = home / "data.new"
        for stale in (building, data):
            if stale.exists():
                shutil.rmtree(stale)
        building.mkdir(mode=0o700)
        give_to_service_user(home)
        argv = [
            install_db_path(),
            "--no-defaults",
            f"--datadir={building}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--skip-name-resolve",
            f"--innodb-page-size={self.page_size}",
        ]
        result = subprocess.run(
            argv, capture_output=True, text=True, timeout=600, user=service_user(), cwd="/", start_new_session=True
        )
        if result.returncode != 0:
            shutil.rmtree(building, ignore_errors=True)
            output = (result.stderr.strip() or result.stdout.strip()).splitlines()[-12:]
            raise EngineError(f"mariadb-install-db failed (exit {result.returncode}):\n" + "\n".join(output))
        building.rename(data)
        self.timings["install_s"] = round(time.perf_counter() - t0, 3)
        self.reinitialised = True
        self.tables_must_be_rebuilt = True

    def server_argv(self) -> list[str]:
        home = self.home()
        argv = [
            mariadbd_path(),
            "--no-defaults",  # must come first
            f"--datadir={self.datadir}",
            f"--socket={self.socket_path}",
            f"--pid-file={home / 'mariadbd.pid'}",
            f"--log-error={home / 'error.log'}",
            f"--innodb-page-size={self.page_size}",
            *INSTANCE_OPTIONS,
        ]
        for native, value in self._server_settings.items():
            argv.append(f"--{native.replace('_', '-')}={value}")
        return argv

    def _launch_server(self) -> None:
        global _LIBC
        home = self.home()
        log = home / "error.log"
        if not log.exists():
            log.touch()
        give_to_service_user(log)
        user = service_user()
        if user is not None:
            import pwd

            entry = pwd.getpwnam(user)
            os.chown(home, entry.pw_uid, entry.pw_gid)
        log_offset = log.stat().st_size
        main_thread = threading.current_thread() is threading.main_thread()
        if main_thread and _LIBC is None:
            with contextlib.suppress(OSError):
                _LIBC = ctypes.CDLL(None, use_errno=True)
        t0 = time.perf_counter()
        with open(log, "ab") as stderr:
            self._proc = subprocess.Popen(
                self.server_argv(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                user=user,
                cwd="/",
                start_new_session=True,  # a Ctrl-C at the terminal reaches us, not the server: we stop it cleanly
                preexec_fn=_parent_death_signal if main_thread and _LIBC is not None else None,
            )
        stop_at_exit(self)
        self._wait_ready(log, log_offset)
        self.timings["start_s"] = round(time.perf_counter() - t0, 3)
        with self._admin() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{DATABASE}` CHARACTER SET utf8mb4")

    def _wait_ready(self, log: Path, log_offset: int) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.start_timeout
        last_error: Exception | None = None
        while True:
            code = self._proc.poll()
            if code is not None:
                self._proc = None
                raise EngineError(
                    f"mariadbd exited with code {code} while starting ({self.datadir}); error log {log}:\n"
                    + _log_tail(log, log_offset)
                )
            if self.socket_path.exists():
                try:
                    pymysql.connect(unix_socket=str(self.socket_path), user="root", password="", connect_timeout=2).close()
                    return
                except pymysql.err.MySQLError as err:
                    last_error = err
            if time.monotonic() > deadline:
                self._shutdown_server()
                raise EngineError(
                    f"mariadbd did not accept connections on {self.socket_path} within {self.start_timeout:.0f} s"
                    + (f" (last error: {last_error})" if last_error else "")
                    + f"; error log {log}:\n"
                    + _log_tail(log, log_offset)
                )
            time.sleep(0.02)

    def _shutdown_server(self) -> None:
        """SIGTERM (a clean InnoDB shutdown, ~0.05 s), then SIGKILL if it hangs."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        t0 = time.perf_counter()
        previous = None
        if threading.current_thread() is threading.main_thread():
            with contextlib.suppress(ValueError):
                previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not leave it running
        try:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=30)
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        self.timings["stop_s"] = round(time.perf_counter() - t0, 3)

    def server_pids(self) -> list[int]:
        """Server processes whose /proc we may read (the private instance only)."""
        if self.mode == "embedded" and self._proc is not None and self._proc.poll() is None:
            return [self._proc.pid]
        return []

    # ------------------------------------------------------------------ DSN
    def _open_dsn(self) -> None:
        assert self._dsn is not None
        try:
            with self._admin() as conn, conn.cursor() as cur:
                cur.execute(f"CREATE DATABASE IF NOT EXISTS `{DATABASE}` CHARACTER SET utf8mb4")
        except pymysql.err.MySQLError as err:
            raise EngineError(f"cannot use MariaDB at {self._dsn.where}: {err}") from None

    def _restore_dsn_settings(self) -> None:
        if not self._dsn_originals:
            return
        failures = []
        with self._admin() as conn, conn.cursor() as cur:
            for native, original in list(self._dsn_originals.items()):
                try:
                    cur.execute(f"SET GLOBAL {native} = %s", (original,))
                    del self._dsn_originals[native]
                except pymysql.err.MySQLError as err:
                    failures.append(f"{native} = {original!r}: {err}")
        if failures:
            raise EngineError("could not restore server variables on " + self._where() + ": " + "; ".join(failures))

    def _where(self) -> str:
        return self._dsn.where if self._dsn else str(self.socket_path)

    # ------------------------------------------------------------------ connections
    def _connect_params(self) -> dict[str, Any]:
        if self._dsn is not None:
            return dict(self._dsn.params)
        return {"unix_socket": str(self.socket_path), "user": "root", "password": ""}

    def _admin(self, database: str | None = None) -> pymysql.connections.Connection:
        return pymysql.connect(**self._connect_params(), database=database, autocommit=True, charset="utf8mb4")

    def connect(self, *, session: bool = True, autocommit: bool = True) -> pymysql.connections.Connection:
        """A DB-API connection to the `blocklab` database with the session knobs applied."""
        self.start()
        conn = pymysql.connect(**self._connect_params(), database=DATABASE, autocommit=autocommit, charset="utf8mb4")
        if session and self._session_settings:
            with conn.cursor() as cur:
                for native, value in self._session_settings.items():
                    cur.execute(f"SET SESSION {native} = %s", (_sql_value(value),))
        return conn

    def query(self, sql: str, params: Any = None) -> list[tuple]:
        with self.connect(session=False) as conn, conn.cursor() as cur:
            cur.execute(sql, params)
            return list(cur.fetchall()) if cur.description else []

    # ------------------------------------------------------------------ capabilities
    def _load_catalog(self) -> None:
        rows = self.query(
            "SELECT VARIABLE_NAME, VARIABLE_SCOPE, VARIABLE_TYPE, NUMERIC_MIN_VALUE, NUMERIC_MAX_VALUE, "
            "NUMERIC_BLOCK_SIZE, ENUM_VALUE_LIST, READ_ONLY, GLOBAL_VALUE, DEFAULT_VALUE, VARIABLE_COMMENT "
            "FROM information_schema.SYSTEM_VARIABLES"
        )
        catalog = {}
        for name, scope, vtype, lo, hi, block, enum, ro, glob, default, comment in rows:
            catalog[name.lower()] = ServerVariable(
                name=name.lower(), scope=scope, type=vtype, minimum=_number(lo), maximum=_number(hi),
                block=_number(block) or None, enum=tuple(enum.split(",")) if enum else (),
                read_only=ro == "YES", global_value=glob, default=default, comment=comment or "",
            )
        self._catalog = catalog
        self._version = self.query("SELECT @@version")[0][0]

    def _ensure_catalog(self) -> None:
        if not self._catalog:
            self.start()

    def _resolve(self, name: str) -> tuple[str, str | None]:
        """(native name, generic name or None) for a knob name, or KnobError."""
        if name.startswith("mariadb."):
            native = name[len("mariadb."):].strip().lower().replace("-", "_")
            if not _IDENT.match(native):
                raise KnobError(f"knob {name!r}: not a MariaDB variable name (letters, digits and _ after 'mariadb.')")
            generic = next((g for g, n in GENERIC_TO_NATIVE.items() if n == native), None)
            return native, generic
        if name in NOT_ON_MARIADB:
            raise KnobError(f"knob {name!r} is not available on engine mariadb: {NOT_ON_MARIADB[name]}")
        if name not in GENERIC_TO_NATIVE:
            raise KnobError(
                f"unknown knob {name!r} on engine mariadb; generic knobs on mariadb: "
                f"{', '.join(sorted(GENERIC_TO_NATIVE))}, or any server variable as mariadb.NAME "
                "(e.g. mariadb.innodb_flush_neighbors)"
            )
        return GENERIC_TO_NATIVE[name], name

    def knob(self, name: str) -> KnobInfo:
        native, generic = self._resolve(name)
        self._ensure_catalog()
        if self.mode == "embedded" and native in MANAGED:
            raise KnobError(f"knob {name!r} cannot be set on engine mariadb's private instance: {MANAGED[native]}")
        var = self._catalog.get(native)
        if var is None:
            if generic:
                raise KnobError(
                    f"knob {generic!r} needs MariaDB's {native}, which this server (MariaDB {self._version}) does not have"
                )
            close = [n for n in sorted(self._catalog) if native.split("_")[0] in n and n != native][:6]
            hint = f"; similar: {', '.join('mariadb.' + c for c in close)}" if close else ""
            raise KnobError(
                f"unknown knob 'mariadb.{native}' on engine mariadb: this server (MariaDB {self._version}) "
                f"has no such variable in information_schema.SYSTEM_VARIABLES{hint}"
            )
        return self._knob_info(var, generic)

    def _knob_info(self, var: ServerVariable, generic: str | None) -> KnobInfo:
        native, desc = var.name, var.comment
        if native == "innodb_page_size":
            sizes = PAGE_SIZES if self.mode == "embedded" else (int(var.global_value or 0),)
            return KnobInfo(
                native, generic, "size", ApplyClass.REINIT, minimum=min(sizes), maximum=max(sizes),
                choices=tuple(str(s) for s in sizes), unit="bytes", default=int(var.global_value or DEFAULT_PAGE_SIZE),
                description="InnoDB page size, fixed when a data directory is created: one cached data directory per size",
            )
        if native == "innodb_checksum_algorithm":
            return KnobInfo(
                native, generic, "enum", ApplyClass.REINIT, choices=var.enum, default=var.global_value,
                description="page checksum algorithm; it governs tablespaces created afterwards, "
                "so the workload rebuilds its tables after a change",
            )
        if native == "innodb_flush_method" and generic:
            return KnobInfo(
                native, generic, "enum", ApplyClass.RESTART, choices=("on", "off", *var.enum), default=var.global_value,
                description="on = O_DIRECT (data files bypass the OS page cache), off = fsync; native values accepted",
            )
        if native == "innodb_read_ahead_threshold" and generic:
            desc = (
                "pages of an extent accessed in order before InnoDB reads the next 64 pages ahead "
                "(linear read-ahead); InnoDB's nearest analog of a multiblock read count"
            )
        apply = ApplyClass.RESTART if var.read_only else ApplyClass.SESSION if var.session else ApplyClass.RELOAD
        if var.type == "BOOLEAN":
            kind = "bool"
        elif var.type == "ENUM":
            kind = "enum"
        elif "INT" in var.type:
            kind = "size" if _SIZE_NAME.search(native) and native not in _COUNT_NAMES else "integer"
        elif var.type == "DOUBLE":
            kind = "real"
        else:
            kind = "string"  # SET, FLAGSET, VARCHAR: the server checks them (session ones in validation)
        return KnobInfo(
            native, generic, kind, apply,
            minimum=float(var.minimum) if var.minimum is not None else None,
            maximum=float(var.maximum) if var.maximum is not None else None,
            choices=var.enum if kind == "enum" else (),
            unit="bytes" if kind == "size" else "",
            default=var.global_value, description=desc,
        )

    def check_settings(self, settings: dict[str, Any], *, partial: bool = False) -> dict[str, Any]:
        """Canonical values for one setting; KnobError (naming the knob and what is
        accepted) for anything the server would refuse or silently round."""
        out: dict[str, Any] = {}
        for name, value in settings.items():
            info = self.knob(name)
            canonical = self._normalise(name, info, value)
            if self.mode == "dsn":
                self._check_dsn_allowed(name, info, canonical)
            out[name] = canonical
        if not partial:  # the page size may be swept beside the pool: judge whole settings only
            self._check_pool_holds_pages(out)
        self._check_session_values(out)
        return out

    def _check_pool_holds_pages(self, settings: dict[str, Any]) -> None:
        """InnoDB refuses to start when the buffer pool is too small for its page
        size (measured on 10.11: 2, 3, 6, 11 and 21 MiB for 4k..64k pages); say so
        now, not as a failed start in the middle of a sweep."""
        by_native = {self.knob(n).native: (n, v) for n, v in settings.items()}
        if "innodb_buffer_pool_size" not in by_native:
            return
        name, pool = by_native["innodb_buffer_pool_size"]
        current = self.block_size() if self.mode == "dsn" else self.page_size  # a DSN server's own size
        page = int(by_native.get("innodb_page_size", (None, current))[1])
        need = min_buffer_pool_bytes(page)
        if int(pool) < need:
            raise KnobError(
                f"knob {name!r} (mariadb innodb_buffer_pool_size): {_amount(int(pool), self.knob(name))} is too small for "
                f"{page // 1024} kB pages: InnoDB needs at least {need // MIB} MiB at that page size; accepted: "
                f"{', '.join(f'{size // 1024}k: >= {min_buffer_pool_bytes(size) // MIB} MiB' for size in PAGE_SIZES)}"
            )

    def _normalise(self, name: str, info: KnobInfo, value: Any) -> Any:
        native = info.native
        where = f"knob {name!r} (mariadb {native})"
        var = self._catalog[native]
        if native == "innodb_page_size":
            try:
                size = parse_int(value, where, info)
            except KnobError:
                size = None
            if size not in [int(c) for c in info.choices]:
                raise KnobError(f"{where}: {value!r} is not accepted; accepted: {_page_sizes_text(info.choices)}")
            return size
        if info.kind == "enum" and info.generic == "direct_io":
            text = str(value).strip()
            if text.lower() in ("on", "true", "yes", "1") or value is True:
                return "O_DIRECT"
            if text.lower() in ("off", "false", "no", "0") or value is False:
                return "fsync"
        if info.kind in ("integer", "size"):
            number = parse_int(value, where, info)
            if (var.minimum is not None and number < var.minimum) or (var.maximum is not None and number > var.maximum):
                raise KnobError(f"{where}: {value!r} is out of range; accepted: {_range_text(info, var)}")
            if var.block and var.block > 1 and number % var.block:
                raise KnobError(
                    f"{where}: {value!r} is not a multiple of {_amount(var.block, info)}, and MariaDB would "
                    f"silently round it down to {_amount(number - number % var.block, info)}; accepted: {_range_text(info, var)}"
                )
            return number
        if info.kind == "real":
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise KnobError(f"{where}: {value!r} is not accepted; accepted: {_range_text(info, var)}") from None
            if (var.minimum is not None and number < var.minimum) or (var.maximum is not None and number > var.maximum):
                raise KnobError(f"{where}: {value!r} is out of range; accepted: {_range_text(info, var)}")
            return number
        if info.kind == "bool":
            return parse_bool(value, where)
        if info.kind == "enum":
            if native == "innodb_checksum_algorithm" and str(value).strip().lower() in ("none", "off", "innodb", "strict_none", "strict_innodb"):
                raise KnobError(
                    f"{where}: {value!r} is not accepted: MariaDB {self._version} always checksums pages; "
                    f"accepted: {info.accepted()}"
                )
            return info.normalise(value, ENGINE)
        return str(value)

    def _check_session_values(self, settings: dict[str, Any]) -> None:
        """Session-scope values are tried on a throwaway session: the server's own
        verdict, including the warnings it gives when it would round a value."""
        session = {n: v for n, v in settings.items() if self.knob(n).apply == ApplyClass.SESSION}
        if not session:
            return
        with self._admin() as conn, conn.cursor() as cur:
            for name, value in session.items():
                native = self.knob(name).native
                try:
                    cur.execute(f"SET SESSION {native} = %s", (_sql_value(_server_value(value)),))
                except pymysql.err.MySQLError as err:
                    raise KnobError(f"knob {name!r} (mariadb {native}): the server refuses {value!r}: {err.args[-1]}") from None
                cur.execute("SHOW WARNINGS")
                warnings = [w[2] for w in cur.fetchall()]
                if warnings:
                    raise KnobError(f"knob {name!r} (mariadb {native}): the server would not take {value!r} as is: {'; '.join(warnings)}")

    def _check_dsn_allowed(self, name: str, info: KnobInfo, value: Any) -> None:
        var = self._catalog[info.native]
        if info.native == "innodb_page_size":
            return  # only the server's own size is among the choices
        if var.read_only:
            raise KnobError(
                f"knob {name!r} (mariadb {info.native}) is read-only on a running server and needs a restart; "
                "blocklab never restarts a server given by --dsn. Run it on the private instance (no --dsn)"
            )
        if info.apply != ApplyClass.SESSION and not self.allow_server_changes:
            raise KnobError(
                f"knob {name!r} (mariadb {info.native}) changes the whole server (SET GLOBAL); pass "
                "--allow-server-changes to let blocklab change it (the original value is restored at the end)"
            )

    def _native(self, name: str) -> str:
        return self._resolve(name)[0]

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
            conf = _server_value(value)
            if info.apply == ApplyClass.SESSION:
                session[native] = conf
                continue
            changed = not _same(current.get(native), conf)
            if native == "innodb_checksum_algorithm" and changed:
                self.tables_must_be_rebuilt = True
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
        self.tables_must_be_rebuilt = True  # another directory: its tables may carry another checksum format

    def _set_global(self, values: dict[str, str], record_originals: bool = False) -> None:
        if not values:
            return
        with self._admin() as conn, conn.cursor() as cur:
            for native, conf in values.items():
                if record_originals and native not in self._dsn_originals:
                    cur.execute(f"SELECT @@GLOBAL.{native}")
                    self._dsn_originals[native] = cur.fetchone()[0]
                cur.execute(f"SET GLOBAL {native} = %s", (_sql_value(conf),))
                cur.execute("SHOW WARNINGS")
                warnings = [w[2] for w in cur.fetchall()]
                if warnings:
                    raise EngineError(f"SET GLOBAL {native} = {conf}: the server warned: {'; '.join(warnings)}")
                if native == "innodb_buffer_pool_size":
                    _wait_buffer_pool_resize(cur)

    def _global_values(self) -> dict[str, str]:
        rows = self.query("SELECT LOWER(VARIABLE_NAME), GLOBAL_VALUE FROM information_schema.SYSTEM_VARIABLES")
        return {r[0]: r[1] for r in rows}

    def read_back(self, settings: Iterable[str]) -> dict[str, str]:
        """@@var for each knob after the change: @@SESSION in a measuring session for
        session knobs, @@GLOBAL otherwise; booleans as ON/OFF."""
        out: dict[str, str] = {}
        with self.connect() as conn, conn.cursor() as cur:
            for name in settings:
                native = self._native(name)
                var = self._catalog[native]
                cur.execute(f"SELECT @@{'SESSION' if var.session else 'GLOBAL'}.{native}")
                value = cur.fetchone()[0]
                if var.type == "BOOLEAN":
                    value = "ON" if int(value) else "OFF"
                out[name] = value.decode() if isinstance(value, bytes) else str(value)
        return out

    # ------------------------------------------------------------------ information
    def info(self) -> EngineInfo:
        self.start()
        settings = {str(k): "" if v is None else str(v) for k, v in self.query("SHOW GLOBAL VARIABLES")}
        return EngineInfo(
            engine=ENGINE,
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
        if self.mode == "embedded":
            return str(self.datadir)
        self.start()
        return str(self.query("SELECT @@datadir")[0][0]).rstrip("/") or None

    @property
    def version(self) -> str:
        return self._version

    def block_size(self) -> int:
        self.start()
        return int(self.query("SELECT @@innodb_page_size")[0][0])

    def direct_io_active(self) -> bool:
        return str(self.query("SELECT @@innodb_flush_method")[0][0]).upper().startswith("O_DIRECT")

    def checksum_family(self) -> str:
        """The tablespace format new tables get now: 'full_crc32' or 'crc32'."""
        return CHECKSUM_FAMILIES.get(str(self.query("SELECT @@innodb_checksum_algorithm")[0][0]), "crc32")

    def table_checksum(self, table: str) -> str | None:
        """The checksum format of a table's tablespace: 'full_crc32', 'crc32', or None if it has none."""
        rows = self.query("SELECT FLAG FROM information_schema.INNODB_SYS_TABLESPACES WHERE NAME = %s", (f"{DATABASE}/{table}",))
        if not rows:
            return None
        return "full_crc32" if int(rows[0][0]) & _FSP_FLAGS_FULL_CRC32 else "crc32"

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
        with self.connect(session=False) as conn, conn.cursor() as cur:
            cur.execute(f"ANALYZE TABLE `{table}`")
            cur.fetchall()

    # ------------------------------------------------------------------ cache control
    def evict(self, relations: Iterable[str]) -> dict[str, Any]:
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
        dropped, possible = 0, True
        for path in files:
            if drop_os_cache(path):
                dropped += 1
            else:
                possible = False
        self._launch_server()
        return {
            "engine_restarted": True,
            "restart_s": round(time.perf_counter() - t0, 3),
            "os_dropped_files": dropped,
            "os_drop_possible": possible,
            "direct_io": self.direct_io_active(),
        }

    def _relation_files(self, table: str) -> list[Path]:
        rows = self.query(
            "SELECT FILENAME FROM information_schema.INNODB_SYS_TABLESPACES WHERE NAME = %s OR NAME LIKE %s",
            (f"{DATABASE}/{table}", f"{DATABASE}/{table}#P#%"),
        )
        base = self.datadir
        return [base / r[0] if not str(r[0]).startswith("/") else Path(r[0]) for r in rows]

    def io_counters(self, conn: Any = None) -> dict[str, float]:
        """Cumulative counters: SHOW GLOBAL STATUS (Innodb_*) and performance_schema's
        file I/O on InnoDB data files (times in ms). Generic keys as the other
        engines: reads, read_bytes, read_time_ms, writes, write_bytes, write_time_ms,
        hits (page requests answered from the buffer pool), fsyncs."""
        if conn is None:
            with self.connect(session=False) as own:
                return self.io_counters(own)
        with conn.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS WHERE Variable_name IN (" + ", ".join(["%s"] * len(STATUS_COUNTERS)) + ")", STATUS_COUNTERS)
            status = {str(k).lower(): float(v) for k, v in cur.fetchall()}
            out = {name: status.get(name.lower(), 0.0) for name in STATUS_COUNTERS}
            pfs = None
            with contextlib.suppress(pymysql.err.MySQLError):
                cur.execute(
                    "SELECT COUNT_READ, SUM_TIMER_READ, SUM_NUMBER_OF_BYTES_READ, COUNT_WRITE, SUM_TIMER_WRITE, "
                    "SUM_NUMBER_OF_BYTES_WRITE, COUNT_MISC, SUM_TIMER_MISC "
                    "FROM performance_schema.file_summary_by_event_name WHERE EVENT_NAME = %s",
                    (DATA_FILE_EVENT,),
                )
                pfs = cur.fetchone()
        if pfs is not None:
            reads, read_ps, read_bytes, writes, write_ps, write_bytes, misc, misc_ps = (float(x or 0) for x in pfs)
            out.update(
                pfs_data_reads=reads, pfs_data_read_ms=read_ps / 1e9, pfs_data_read_bytes=read_bytes,
                pfs_data_writes=writes, pfs_data_write_ms=write_ps / 1e9, pfs_data_write_bytes=write_bytes,
                pfs_data_misc=misc, pfs_data_misc_ms=misc_ps / 1e9,
                reads=reads, read_bytes=read_bytes, read_time_ms=read_ps / 1e9,
                writes=writes, write_bytes=write_bytes, write_time_ms=write_ps / 1e9,
            )
        else:  # performance_schema off (a server by DSN): InnoDB's own counters, no times
            out.update(
                reads=out["Innodb_data_reads"], read_bytes=out["Innodb_data_read"],
                writes=out["Innodb_data_writes"], write_bytes=out["Innodb_data_written"],
            )
        # Innodb_buffer_pool_reads counts read-ahead pages too: requests answered from
        # the pool are the requests less the synchronous (non read-ahead) reads
        sync_reads = out["Innodb_buffer_pool_reads"] - out["Innodb_buffer_pool_read_ahead"]
        out["hits"] = out["Innodb_buffer_pool_read_requests"] - max(sync_reads, 0.0)
        out["fsyncs"] = out["Innodb_data_fsyncs"]
        return out


# ---------------------------------------------------------------------- helpers
MIB = 1024 * 1024


def min_buffer_pool_bytes(page_size: int) -> int:
    """The smallest buffer pool InnoDB starts with: 320 pages, rounded down to
    whole MiB, plus 1 MiB (MariaDB 10.11's refusal message, checked for every
    page size: 4k 2 MiB, 8k 3, 16k 6, 32k 11, 64k 21)."""
    return (320 * page_size // MIB + 1) * MIB


def _parse_page_size(value: Any) -> int:
    info = KnobInfo("innodb_page_size", "block_size", "size", ApplyClass.REINIT, unit="bytes", choices=tuple(map(str, PAGE_SIZES)))
    where = "knob 'block_size' (mariadb innodb_page_size)"
    try:
        size = parse_int(value, where, info)
    except KnobError:
        size = None
    if size not in PAGE_SIZES:
        raise KnobError(f"{where}: {value!r} is not accepted; accepted: {_page_sizes_text(info.choices)}")
    return size


def _page_sizes_text(choices: Iterable[str]) -> str:
    sizes = [int(c) for c in choices]
    return "one of " + ", ".join(f"{s // 1024}k" for s in sizes) + " (" + ", ".join(str(s) for s in sizes) + " bytes)"


def _amount(n: int | float, info: KnobInfo) -> str:
    return f"{int(n)} ({fmt_bytes(n)})" if info.unit == "bytes" else f"{int(n)}"


def _range_text(info: KnobInfo, var: ServerVariable) -> str:
    lo, hi = var.minimum, var.maximum
    if lo is None or hi is None:
        return info.accepted()
    kind = "a number" if info.kind == "real" else "an integer"
    text = f"{kind} from {_amount(lo, info)} to {_amount(hi, info)}"
    if var.block and var.block > 1:
        text += f", a multiple of {_amount(var.block, info)}"
    if info.unit == "bytes":
        text += "; sizes like 64M or 1G are accepted"
    return text


def _server_value(value: Any) -> str:
    """A canonical value as the server's command line and SET take it."""
    if isinstance(value, bool):
        return "ON" if value else "OFF"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _sql_value(conf: str) -> Any:
    """Numbers go to SET unquoted (a quoted number is refused for integer variables)."""
    if re.fullmatch(r"-?\d+", conf):
        return int(conf)
    if re.fullmatch(r"-?\d+\.\d*", conf):
        return float(conf)
    return conf


def _same(server_value: str | None, conf: str) -> bool:
    if server_value is None:
        return False
    a, b = str(server_value).strip().lower(), conf.strip().lower()
    if a == b:
        return True
    with contextlib.suppress(ValueError):
        return float(a) == float(b)
    return False


def _wait_buffer_pool_resize(cur: Any, timeout: float = 120.0) -> None:
    """Older 10.11 releases resize the buffer pool in the background; wait for it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_resize_status'")
        row = cur.fetchone()
        status = (row[1] if row else "") or ""
        if not status or "complete" in status.lower() or "resized" in status.lower():
            return
        time.sleep(0.05)


def _log_tail(log: Path, offset: int = 0, lines: int = 15) -> str:
    try:
        with open(log, "rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError as err:
        return f"(cannot read it: {err})"
    tail = [line for line in text.splitlines() if line.strip()][-lines:]
    return "\n".join(tail) if tail else "(empty)"


