"""Servers blocklab did not start, for the tests of "someone else's server":
Debian's PostgreSQL 15 as a cluster of its own (initdb, its own port and socket
directory, not the machine's service), started and stopped by the test set-up.
scripts/install-system-packages.sh installs postgresql-15; without it the tests
fail saying so (never a silent skip)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from blocklab.engines.service_user import ensure_traversable, give_to_service_user, service_user

PG15_BIN = Path("/usr/lib/postgresql/15/bin")


@dataclass
class Pg15Server:
    data_dir: Path
    port: int

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} dbname=postgres user=postgres"

    def psql(self, sql: str) -> str:
        out = _as_server([str(PG15_BIN / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                          "-d", "postgres", "-At", "-c", sql])
        return out.strip()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_server(argv: list[str], timeout: float = 120) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, user=service_user(), cwd="/", check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed (exit {result.returncode}): {result.stderr or result.stdout}")
    return result.stdout


@contextlib.contextmanager
def pg15_cluster(base: Path) -> Iterator[Pg15Server]:
    """A PostgreSQL 15 cluster under `base` on a free port: 16 MB of shared buffers
    (so small tables are already 'large' to it), trust authentication on 127.0.0.1."""
    if not (PG15_BIN / "initdb").exists():
        raise RuntimeError(
            f"{PG15_BIN / 'initdb'} is missing: the tests of someone else's server need Debian's postgresql-15 "
            "(scripts/install-system-packages.sh installs it)"
        )
    data = base / "pg15"
    data.mkdir(parents=True)
    ensure_traversable(base)
    give_to_service_user(base)
    _as_server([str(PG15_BIN / "initdb"), "-D", str(data), "--auth=trust", "-U", "postgres", "--encoding=UTF8", "--locale=C"])
    server = Pg15Server(data, _free_port())
    with open(data / "postgresql.conf", "a") as conf:
        conf.write(f"\nport = {server.port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{data}'\n"
                   "shared_buffers = 16MB\nmax_connections = 40\nfsync = off\n")
    log = base / "pg15.log"
    log.touch()
    give_to_service_user(base)
    _as_server([str(PG15_BIN / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60", "start"])
    try:
        _wait_answers(server)
        yield server
    finally:
        with contextlib.suppress(Exception):
            _as_server([str(PG15_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "-t", "60", "stop"])


def _wait_answers(server: Pg15Server, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            if server.psql("SELECT 1") == "1":
                return
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.3)
