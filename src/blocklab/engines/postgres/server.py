"""Someone's PostgreSQL, reached by DSN: what blocklab may do there and what it owes.

PostgresEngine mixes these methods in. They cover the server as printed
(`where`), waiting for a server that went away, the ALTER SYSTEM values
blocklab changed (recorded first, put back by `stop()` or `blocklab restore`),
the role's rights (`privileges`, superuser checks, whether a cold cache can be
made and proven), and the tables and procedures blocklab made there. The
embedded cluster's own lifecycle is in instance.py.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from ..base import EngineError, KnobError, wait_until_answers

if TYPE_CHECKING:
    from ..host import ReadAhead

DSN_WAIT_S = 60.0  # how long a run waits for someone's server that went away before it stops


def check_dsn_syntax(dsn: str) -> None:
    """A DSN libpq cannot parse is bad input, told before anything connects (a server
    that does not answer is found later, by start())."""
    if not dsn.strip() or "\x00" in dsn:  # libpq would read '' (or what precedes a NUL) as "the local default server"
        raise KnobError(f"--dsn {dsn!r}: empty or holds a NUL byte; expected 'host=HOST dbname=DB user=USER' or postgresql://USER@HOST/DB")
    try:
        conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as err:
        raise KnobError(f"--dsn: not a PostgreSQL connection string ({str(err).strip()}); expected "
                        "'host=HOST dbname=DB user=USER' or postgresql://USER@HOST/DB") from None



class DsnServerMixin:
    """The engine's methods for a server by DSN (PostgresEngine mixes them in)."""

    if TYPE_CHECKING:
        name: ClassVar[str]
        mode: str
        dsn: str | None
        allow_server_changes: bool
        home: Path
        read_ahead: ReadAhead
        _major: int
        _dsn_originals: dict[str, str | None]

        def query(self, sql_text: str, params: Sequence[object] | None = None) -> list[tuple[Any, ...]]: ...
        def pg_connect(self, *, session: bool = True, autocommit: bool = True) -> psycopg.Connection: ...
        def health(self) -> str | None: ...
        def data_dir(self) -> str | None: ...
        def direct_io_active(self) -> bool: ...

    def _wait_for_dsn_server(self) -> None:
        """Someone's server may be restarting: wait for it, bounded, then reload what blocklab set."""
        wait_until_answers(self.health, f"the PostgreSQL server at {self.where()}", DSN_WAIT_S)
        self._reapply_dsn_settings()

    def where(self) -> str:
        """The server as the user may see it printed (no password)."""
        if self.mode == "embedded":
            return f"the embedded PostgreSQL in {self.home}"
        try:
            info = psycopg.conninfo.conninfo_to_dict(self.dsn or "")
        except psycopg.Error:
            return "the server given by --dsn"
        return f"{info.get('user', '')}@{info.get('host', 'localhost')}:{info.get('port', 5432)}/{info.get('dbname', '')}"

    def _reapply_dsn_settings(self) -> None:
        """A restarted server by DSN keeps ALTER SYSTEM values (postgresql.auto.conf): reload them."""
        if self._dsn_originals:
            self.query("SELECT pg_reload_conf()")

    def _dsn_alter_system(self, native: str, conf: str) -> None:
        if native not in self._dsn_originals:
            rows = self.query(
                "SELECT setting FROM pg_file_settings WHERE name = %s AND sourcefile LIKE %s AND applied",
                (native, "%postgresql.auto.conf"),
            )
            self._dsn_originals[native] = rows[0][0] if rows else None
        with self.pg_connect(session=False) as conn:
            conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(native), sql.Literal(conf)))

    # what blocklab makes on a server: tables named blocklab_* or carrying a workload's
    # fingerprint comment, and the blocklab_* procedures, in the DSN's database
    _CREATED = (
        "SELECT 'table ' || c.relname FROM pg_class c WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace "
        "AND (c.relname LIKE 'blocklab\\_%%' OR obj_description(c.oid, 'pg_class') LIKE '{\"blocklab\\_dataset\"%%') "
        "UNION ALL SELECT 'procedure ' || p.proname FROM pg_proc p WHERE p.pronamespace = current_schema()::regnamespace "
        "AND p.proname LIKE 'blocklab\\_%%' "
        # the schemas of the sql workload: a writing script's copies (blocklab_sql), a data set's (blocklab_sql_<hash>)
        "UNION ALL SELECT 'schema ' || nspname FROM pg_namespace WHERE nspname LIKE 'blocklab\\_sql%%' ORDER BY 1"
    )

    def privileges(self) -> list[tuple[str, str]]:
        """The role's rights and the server's features that recipes lean on."""
        su = bool(self.query("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")[0][0])
        out = [("superuser", "yes" if su else "no: some session settings (track_io_timing) and ALTER SYSTEM need it")]
        if self._major >= 15 and not su:
            alter = bool(self.query("SELECT has_parameter_privilege(current_user, 'work_mem', 'ALTER SYSTEM')")[0][0])
            out.append(("ALTER SYSTEM", "granted" if alter else "no: server-wide knobs cannot be changed"))
        ext = self.query("SELECT installed_version IS NOT NULL, true FROM pg_available_extensions WHERE name = 'pg_buffercache'")
        out.append(("pg_buffercache", "installed" if ext and ext[0][0] else "available, not installed" if ext else
                    "no: a cold cache cannot be checked or made"))
        out.append(("pg_stat_io", "yes" if self._major >= 16 else f"no (PostgreSQL {self._major}): pg_statio_* and pg_stat_database instead"))
        # from the version, not by creating the extension: doctor changes nothing
        if not ext:
            out.append(("evict shared buffers", "no: without pg_buffercache"))
        else:
            out.append(("evict shared buffers", "per relation (pg_buffercache_evict_relation)" if self._major >= 18 else
                        "per buffer (pg_buffercache_evict)" if self._major == 17 else
                        f"by rewriting blocklab's table (PostgreSQL {self._major}, before 17: VACUUM FULL, a new file)"))
        out.append(("data directory on this host", self.data_dir() or "no: device figures, read_ahead and cold caches of the OS are out of reach"))
        out.append(("read_ahead", self.read_ahead.problem(self.mode == "dsn", self.allow_server_changes) or "may be set"))
        out.append(("server settings", "may be changed (restored at the end)" if self.mode == "embedded" or self.allow_server_changes
                    else "no: pass --allow-server-changes"))
        return out

    def _superuser(self) -> bool:
        return bool(self.query("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")[0][0])

    def _may_set(self, native: str) -> bool:
        """May this role set a superuser-context parameter? (GRANT SET exists from 15 on.)"""
        if self._superuser():
            return True
        if self._major >= 15:
            return bool(self.query("SELECT has_parameter_privilege(current_user, %s, 'SET')", (native,))[0][0])
        return False

    def created_objects(self) -> list[str]:
        if self.mode == "embedded":
            return []
        return [str(r[0]) for r in self.query(self._CREATED)]

    def drop_created(self) -> list[str]:
        done = []
        for entry in self.created_objects():
            kind, name = entry.split(" ", 1)
            statement = {"table": "DROP TABLE IF EXISTS {}", "schema": "DROP SCHEMA IF EXISTS {} CASCADE"}.get(
                kind, "DROP PROCEDURE IF EXISTS {}")
            with self.pg_connect(session=False) as conn:
                conn.execute(sql.SQL(statement).format(sql.Identifier(name)))
            done.append(entry)
        return done

    def owed_restore(self) -> dict[str, object]:
        host = self.read_ahead.owed()
        if not self._dsn_originals and not host:
            return {}
        owed: dict[str, object] = {"engine": self.name, "dsn": None, "server": self.where(), "settings": dict(self._dsn_originals)}
        if self.mode == "dsn":
            info = {k: v for k, v in psycopg.conninfo.conninfo_to_dict(self.dsn or "").items() if k != "password"}
            owed["dsn"] = psycopg.conninfo.make_conninfo("", **info)
        if host:
            owed["host"] = host  # the machine's, not the server's: put back by engines/host.py restore_host
        return owed

    def restore_owed(self, settings: dict[str, object]) -> list[str]:
        self._dsn_originals = {k: None if v is None else str(v) for k, v in settings.items()}  # restore.json: text or null
        done = [f"{k} = {v}" if v is not None else f"{k} reset to the server's default" for k, v in settings.items()]
        self._restore_dsn_settings()
        return done

    def _restore_dsn_settings(self) -> None:
        if not self._dsn_originals or self.mode != "dsn":
            return
        try:
            self._put_back_originals()
        except psycopg.Error as err:
            raise EngineError(f"could not restore {', '.join(self._dsn_originals)} on {self.where()}: {str(err).strip()}") from None

    def _put_back_originals(self) -> None:
        with self.pg_connect(session=False) as conn:
            for native, original in self._dsn_originals.items():
                if original is None:
                    conn.execute(sql.SQL("ALTER SYSTEM RESET {}").format(sql.Identifier(native)))
                else:
                    conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(native), sql.Literal(original)))
            conn.execute("SELECT pg_reload_conf()")
        self._dsn_originals.clear()

    def cold_cache_problem(self) -> str | None:
        if self.mode == "embedded":
            return None
        if not self._superuser():
            return ("a cold cache needs a superuser on this server (CHECKPOINT before the eviction, pg_buffercache and its "
                    "eviction functions); connect as one, or measure warm (measure.cache = 'warm')")
        data = self.data_dir()
        if data is not None and not os.access(data, os.R_OK | os.X_OK):
            return (f"blocklab cannot read the server's data directory {data} (it belongs to the server's OS user), so it "
                    "can neither drop nor measure the table's OS page cache; run blocklab as that user or as root")
        has_evict = self.query("SELECT count(*) FROM pg_proc WHERE proname = 'pg_buffercache_evict_relation'")[0][0]
        if not has_evict and not self.query("SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_buffercache'")[0][0]:
            return "this server has no pg_buffercache extension, so its shared buffers cannot be emptied of a table"
        if self.data_dir() is None and not self.direct_io_active():
            return ("the server is not on this host, so its OS page cache cannot be dropped, and it reads through "
                    "that cache (debug_io_direct is not 'data'); run blocklab on the database host")
        return None
