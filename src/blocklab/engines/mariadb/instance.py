"""The private MariaDB instance: blocklab's own mariadbd, one data directory per
InnoDB page size under the cache directory (``<cache>/mariadb-<page size>/data``),
created once with ``mariadb-install-db --no-defaults`` and reused, because the
page size is fixed when a data directory is created. ``mariadbd`` is started with
``--no-defaults`` (no my.cnf of the machine leaks in), listens only on a unix
socket, runs as the unprivileged user ``blocklab`` when we are root
(service_user.py), and gets every server-level knob on its command line at
every start, so a restart (a cold-cache eviction, a read-only knob) keeps the
setting. A file lock keeps two blocklab runs off one data directory. The server
is stopped at interpreter exit and on SIGTERM (host.py), and, should this
process be killed outright, by the kernel: it is started with a parent-death
signal when it is started from the main thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pymysql

from ..base import EngineError
from ..host import DirectoryLock, parent_death_preexec, stop_at_exit
from ..service_user import ensure_traversable, give_to_service_user, service_user
from .dsn import DATABASE
from .knobs import DEFAULT_PAGE_SIZE, PAGE_SIZES

INSTANCE_OPTIONS = (
    "--skip-networking",
    "--skip-name-resolve",
    "--performance-schema=ON",
    "--innodb-buffer-pool-dump-at-shutdown=OFF",
    "--innodb-buffer-pool-load-at-startup=OFF",
    "--character-set-server=utf8mb4",
    "--collation-server=utf8mb4_general_ci",
)


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


def tail_of_log(log: Path, offset: int = 0, lines: int = 15) -> str:
    try:
        with open(log, "rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError as err:
        return f"(cannot read it: {err})"
    tail = [line for line in text.splitlines() if line.strip()][-lines:]
    return "\n".join(tail) if tail else "(empty)"


class InstanceMixin:
    """The engine's private-instance methods (MariadbEngine mixes them in)."""

    if TYPE_CHECKING:
        mode: str
        cache_dir: Path
        start_timeout: float
        timings: dict[str, float]
        _page_size: int | None
        _proc: subprocess.Popen[bytes] | None
        _lock: DirectoryLock | None
        _server_settings: dict[str, str]
        reinitialised: bool

        def _admin(self, database: str | None = None) -> pymysql.connections.Connection: ...
        def stop(self) -> None: ...

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
            # its own temporary tables beside its data, not in /tmp: other servers and cleaners share /tmp
            # (a private instance's '#sql-temptable' file vanished there while another ran: Errcode 2 on delete)
            f"--tmpdir={home / 'tmp'}",
            f"--innodb-page-size={self.page_size}",
            *INSTANCE_OPTIONS,
        ]
        for native, value in self._server_settings.items():
            argv.append(f"--{native.replace('_', '-')}={value}")
        return argv

    def _launch_server(self) -> None:
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
        (home / "tmp").mkdir(mode=0o700, exist_ok=True)
        give_to_service_user(home / "tmp")
        log_offset = log.stat().st_size
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
                preexec_fn=parent_death_preexec(),
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
                    + tail_of_log(log, log_offset)
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
                    + tail_of_log(log, log_offset)
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
