"""Someone's MariaDB, reached by DSN: what blocklab may do there and what it owes.

MariadbEngine mixes these methods in. They cover opening the server, waiting
for one that went away, the server as printed (`_where`), the SET GLOBAL
values blocklab changed (recorded first, put back by `stop()` or `blocklab
restore`), the account's rights (`privileges`), why a cold cache is refused
there, whether the server's files are on this host, and the database
blocklab made. The DSN's syntax is dsn.py's; the private instance is
instance.py's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pymysql

from ..base import EngineError, wait_until_answers
from .dsn import DATABASE, Dsn
from .knobs import ServerVariable

DSN_WAIT_S = 60.0  # how long a run waits for someone's server that went away before it stops
_VARIABLE = re.compile(r"^[a-z_][a-z0-9_]{0,63}$")  # a server variable's name, as SYSTEM_VARIABLES lists it


class DsnServerMixin:
    """The engine's methods for a server by DSN (MariadbEngine mixes them in)."""

    if TYPE_CHECKING:
        name: ClassVar[str]
        mode: str
        allow_server_changes: bool
        _dsn: Dsn | None
        _started: bool
        _catalog: dict[str, ServerVariable]
        _server_settings: dict[str, str]
        _dsn_originals: dict[str, object]

        @property
        def socket_path(self) -> Path: ...

        def query(self, sql: str, params: Sequence[object] | None = None) -> list[tuple[Any, ...]]: ...
        def health(self) -> str | None: ...
        def data_dir(self) -> str | None: ...
        def _admin(self, database: str | None = None) -> pymysql.connections.Connection: ...
        def _close_control(self) -> None: ...
        def _set_global(self, values: dict[str, str], record_originals: bool = False) -> None: ...

    def _wait_for_dsn_server(self) -> None:
        """Wait for someone's server that went away, bounded; a restarted server lost the
        SET GLOBAL values blocklab made, so they are made again (originals stay recorded)."""
        wait_until_answers(self.health, f"the MariaDB server at {self._where()}", DSN_WAIT_S)
        changed = {native: conf for native, conf in self._server_settings.items() if native in self._dsn_originals}
        self._set_global(changed)

    def _open_dsn(self) -> None:
        assert self._dsn is not None
        try:  # blocklab's database is made when a session first needs it (doctor and clean make nothing)
            with self._admin() as conn, conn.cursor() as cur:
                cur.execute("SELECT 1")
        except pymysql.err.MySQLError as err:
            raise EngineError(f"cannot use MariaDB at {self._dsn.where}: {err}") from None

    def privileges(self) -> list[tuple[str, str]]:
        if self.mode == "embedded":
            return [("everything", "yes: blocklab's own private instance")]
        grants = {str(r[0]).upper() for r in self.query(
            "SELECT PRIVILEGE_TYPE FROM information_schema.USER_PRIVILEGES WHERE GRANTEE = CONCAT(\"'\", "
            "SUBSTRING_INDEX(CURRENT_USER(), '@', 1), \"'@'\", SUBSTRING_INDEX(CURRENT_USER(), '@', -1), \"'\")")}
        admin = bool(grants & {"SUPER", "SYSTEM VARIABLES ADMIN"})
        pfs = int(self.query("SELECT @@performance_schema")[0][0])
        return [
            ("SET GLOBAL", "yes" if admin else "no: server-wide knobs and the wait for purge need SUPER or SYSTEM VARIABLES ADMIN"),
            ("performance_schema", "on" if pfs else "off: no time profile and no data-file timings"),
            ("data directory on this host", self.data_dir() or "no: device figures are out of reach"),
            ("cold cache", "no: InnoDB's buffer pool empties only with a restart"),
            ("server settings", "may be changed (restored at the end)" if self.allow_server_changes else "no: pass --allow-server-changes"),
        ]

    def created_objects(self) -> list[str]:
        """On a server given by DSN blocklab works in its own database only: that is what it made."""
        if self.mode == "embedded":
            return []
        rows = self.query("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s", (DATABASE,))
        exists = self.query("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (DATABASE,))[0][0]
        return [f"database {DATABASE} ({rows[0][0]} tables)"] if exists else []

    def drop_created(self) -> list[str]:
        done = self.created_objects()
        if done:
            with self._admin() as conn, conn.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS `{DATABASE}`")
        self._close_control()  # it was opened in the dropped database
        self._started = False  # the next start makes the database again
        return done

    def owed_restore(self) -> dict[str, object]:
        if not self._dsn_originals or self._dsn is None:
            return {}
        params = self._dsn.params
        if "unix_socket" in params:
            dsn = f"mysql://{params['user']}@localhost/{DATABASE}?socket={params['unix_socket']}"
        else:
            dsn = f"mysql://{params['user']}@{params['host']}:{params['port']}/{DATABASE}"
        return {"engine": self.name, "dsn": dsn, "server": self._where(), "settings": dict(self._dsn_originals)}

    def restore_owed(self, settings: dict[str, object]) -> list[str]:
        self._dsn_originals = dict(settings)
        done = [f"{k} = {v}" for k, v in settings.items()]
        self._restore_dsn_settings()
        return done

    def _restore_dsn_settings(self) -> None:
        if not self._dsn_originals:
            return
        failures = []
        for native in self._dsn_originals:  # names may come from restore.json: only server variables blocklab knows
            if not _VARIABLE.match(native) or (self._catalog and native not in self._catalog):
                raise EngineError(f"{native!r} is not a server variable of {self._where()}: not restored")
        try:
            conn = self._admin()
        except pymysql.err.MySQLError as err:
            raise EngineError(f"could not reach {self._where()} to restore {', '.join(self._dsn_originals)}: {err}") from None
        with conn, conn.cursor() as cur:
            for native, original in list(self._dsn_originals.items()):
                try:
                    cur.execute(f"SET GLOBAL {native} = %s", (original,))  # a name checked above, the value bound
                    del self._dsn_originals[native]
                except pymysql.err.MySQLError as err:
                    failures.append(f"{native} = {original!r}: {err}")
        if failures:
            raise EngineError("could not restore server variables on " + self._where() + ": " + "; ".join(failures))

    def _where(self) -> str:
        return self._dsn.where if self._dsn else str(self.socket_path)

    def cold_cache_problem(self) -> str | None:
        if self.mode == "embedded":
            return None
        return ("InnoDB's buffer pool empties only with a restart, which blocklab never does to a server given by "
                "--dsn; use cache = 'warm' there, or the private instance (no --dsn) for a cold cache")

    def _find_local_datadir(self) -> str:
        """The server's @@datadir when the server runs on this host ('' when not): an
        address of this host may be a tunnel or a container's published port, whose
        server keeps its files elsewhere. Its pid file must name a live mariadbd here."""
        datadir, pid_file = self.query("SELECT @@datadir, @@pid_file")[0]
        datadir = str(datadir).rstrip("/")
        try:
            pid = int(Path(str(pid_file)).read_text().split()[0])
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except (OSError, ValueError, IndexError):
            return ""
        return datadir if comm in ("mariadbd", "mysqld") and Path(datadir).is_dir() else ""

    def _is_local(self) -> bool:
        if self.mode == "embedded":
            return True
        params = self._dsn.params if self._dsn else {}
        return "unix_socket" in params or params.get("host") in ("localhost", "127.0.0.1", "::1")
